/* Slurm's compressed tasks-per-node lists. */
#include "config.h"

#include <string.h>

#include "unit.h"
#include "../../common/tasks_per_node.h"

static void test_runs(void)
{
	struct dt_tasks_per_node t;

	CU_ASSERT_FATAL(dt_tpn_parse("4(x2),2", &t, NULL, 0) == 0);
	CU_ASSERT_EQUAL(t.nodes, 3);
	CU_ASSERT_EQUAL(t.tasks, 10);
	CU_ASSERT_EQUAL(t.max_count, 4);
	CU_ASSERT_EQUAL(dt_tpn_at(&t, 0), 4);
	CU_ASSERT_EQUAL(dt_tpn_at(&t, 1), 4);
	CU_ASSERT_EQUAL(dt_tpn_at(&t, 2), 2);
	CU_ASSERT_EQUAL(dt_tpn_at(&t, 3), 0);
	CU_ASSERT_EQUAL(dt_tpn_tasks_before(&t, 0), 0);
	CU_ASSERT_EQUAL(dt_tpn_tasks_before(&t, 2), 8);
	CU_ASSERT_EQUAL(dt_tpn_tasks_before(&t, 3), 10);
	dt_tpn_free(&t);
}

/* srun -N4 -n8 on idle nodes. */
static void test_uneven(void)
{
	struct dt_tasks_per_node t;

	CU_ASSERT_FATAL(dt_tpn_parse("5,1(x3)", &t, NULL, 0) == 0);
	CU_ASSERT_EQUAL(t.nodes, 4);
	CU_ASSERT_EQUAL(t.tasks, 8);
	CU_ASSERT_EQUAL(dt_tpn_at(&t, 0), 5);
	CU_ASSERT_EQUAL(dt_tpn_at(&t, 3), 1);
	dt_tpn_free(&t);
}

static void test_single(void)
{
	struct dt_tasks_per_node t;

	CU_ASSERT_FATAL(dt_tpn_parse("1", &t, NULL, 0) == 0);
	CU_ASSERT_EQUAL(t.nodes, 1);
	CU_ASSERT_EQUAL(t.tasks, 1);
	dt_tpn_free(&t);
	CU_ASSERT_FATAL(dt_tpn_parse("8(x100000)", &t, NULL, 0) == 0);
	CU_ASSERT_EQUAL(t.nodes, 100000);
	CU_ASSERT_EQUAL(t.tasks, 800000);
	CU_ASSERT_EQUAL(dt_tpn_at(&t, 99999), 8);
	dt_tpn_free(&t);
}

static void test_malformed(void)
{
	static const char *const bad[] = {
		"", "0", "x", "4(x)", "4(x0)", "4(2)", "4(x2", "4,", ",4",
		"4,,2", "-1", "4 ", " 4", "4(x2)3", "99999999999", "4;2",
	};
	struct dt_tasks_per_node t;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CU_ASSERT_EQUAL(dt_tpn_parse(bad[i], &t, err, sizeof(err)), -1);
		CU_ASSERT(strlen(err) > 0);
		CU_ASSERT_PTR_NULL(t.runs);
	}
	dt_tpn_parse("4,x", &t, err, sizeof(err));
	CU_ASSERT_STRING_EQUAL(err, "bad item 'x' in tasks-per-node list "
			       "'4,x': expected COUNT or COUNT(xREPEAT) with "
			       "positive numbers");
}

static void test_overflow(void)
{
	struct dt_tasks_per_node t;
	char err[256];

	CU_ASSERT_EQUAL(dt_tpn_parse("1(x4294967295),1", &t, err,
				     sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "tasks-per-node list '1(x4294967295),1' "
			       "names too many nodes");
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_runs),
	UNIT_TEST(test_uneven),
	UNIT_TEST(test_single),
	UNIT_TEST(test_malformed),
	UNIT_TEST(test_overflow),
};

UNIT_MAIN("tasks_per_node", tests)
