/* The rendezvous port rule. */
#include "config.h"

#include <string.h>

#include "unit.h"
#include "../../common/port.h"

static void test_reserved_ports_first(void)
{
	struct dt_step_ports p;

	CU_ASSERT_FATAL(dt_step_ports("12000-12005", 7, 0, 0, 20000, 28999, &p,
				      NULL, 0) == 0);
	CU_ASSERT_EQUAL(p.source, DT_PORT_RESERVED);
	CU_ASSERT_EQUAL(p.count, 4);
	CU_ASSERT_EQUAL(p.port[0], 12000);
	CU_ASSERT_EQUAL(p.port[3], 12003);

	CU_ASSERT_FATAL(dt_step_ports("12000,12007", 7, 0, 0, 20000, 28999, &p,
				      NULL, 0) == 0);
	CU_ASSERT_EQUAL(p.count, 2);
	CU_ASSERT_EQUAL(p.port[1], 12007);
	CU_ASSERT_STRING_EQUAL(dt_port_source_name(p.source), "reserved");
}

static void test_bad_reserved_ports(void)
{
	static const char *const bad[] = {
		"12000", "abc", "12000-", "70000-70001", "0-1", "[1-2]",
	};
	struct dt_step_ports p;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CU_ASSERT_EQUAL(dt_step_ports(bad[i], 1, 0, 0, 20000, 28999, &p,
					      err, sizeof(err)), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "SLURM_STEP_RESV_PORTS"));
	}
}

/* Read in slurmstepd: a 20 MB list is refused unread, not parsed. */
static void test_huge_reserved_ports(void)
{
	char *huge = unit_huge_text(20u << 20), err[256];
	struct dt_step_ports p;
	long before = peak_memory_kb();

	CU_ASSERT_PTR_NOT_NULL_FATAL(huge);
	CU_ASSERT_EQUAL(dt_step_ports(huge, 1, 0, 0, 20000, 28999, &p, err,
				      sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "SLURM_STEP_RESV_PORTS is longer than "
			       "393216 bytes, more than every port written "
			       "out, so it is refused unread: ask your "
			       "administrator to check MpiParams=ports= in "
			       "slurm.conf");
	CU_ASSERT(peak_memory_kb() - before < 10 * 1024);
	/* The longest true one, every port one by one, still parses. */
	for (size_t n = 0, port = 1; port <= 65535; port++)
		n += (size_t)sprintf(huge + n, port < 65535 ? "%zu," : "%zu",
				     port);
	CU_ASSERT(strlen(huge) < DT_RESV_PORTS_TEXT_MAX);
	CU_ASSERT_EQUAL(dt_step_ports(huge, 1, 0, 0, 20000, 28999, &p, err,
				      sizeof(err)), 0);
	CU_ASSERT_EQUAL(p.count, 4);
	CU_ASSERT_EQUAL(p.port[3], 4);
	CU_ASSERT(peak_memory_kb() - before < 10 * 1024);
	free(huge);
}

static void test_derived_rule(void)
{
	struct dt_step_ports p;

	/* 9000 ports, 2250 slots; job 1 step 0: slot 64. */
	CU_ASSERT_FATAL(dt_step_ports(NULL, 1, 0, 0, 20000, 28999, &p, NULL, 0)
			== 0);
	CU_ASSERT_EQUAL(p.source, DT_PORT_DERIVED);
	CU_ASSERT_EQUAL(p.count, 4);
	CU_ASSERT_EQUAL(p.port[0], 20000 + 64 * 4);
	CU_ASSERT_EQUAL(p.port[3], 20000 + 64 * 4 + 3);
	/* Empty SLURM_STEP_RESV_PORTS counts as unset. */
	CU_ASSERT_FATAL(dt_step_ports("", 1, 1, 0, 20000, 28999, &p, NULL, 0)
			== 0);
	CU_ASSERT_EQUAL(p.port[0], 20000 + 65 * 4);
}

/* Ports of concurrent steps never overlap within the promised limits. */
static void test_no_collisions(void)
{
	static uint16_t owner_job[65536];
	struct dt_step_ports p;
	int collisions = 0;

	memset(owner_job, 0, sizeof(owner_job));
	/* Jobs 1000..1034 (35 of them, slots/64 = 35), steps 0..63. */
	for (uint32_t job = 1000; job < 1035; job++) {
		for (uint32_t step = 0; step < 64; step++) {
			dt_step_ports(NULL, job, step, 0, 20000, 28999, &p, NULL,
				      0);
			for (unsigned i = 0; i < p.count; i++) {
				CU_ASSERT(p.port[i] >= 20000 &&
					  p.port[i] <= 28999);
				if (owner_job[p.port[i]])
					collisions++;
				owner_job[p.port[i]] = (uint16_t)job;
			}
		}
	}
	CU_ASSERT_EQUAL(collisions, 0);
}

/* A requeued job (same id) moves every step off its first run's slot,
 * to one that depends on the restart count, within the range. */
static void test_requeued(void)
{
	struct dt_step_ports first, again, third, same;
	unsigned moved_alike = 0;

	for (uint32_t job = 1; job < 2000; job += 7) {
		for (uint32_t step = 0; step < 4; step++) {
			dt_step_ports(NULL, job, step, 0, 20000, 28999, &first,
				      NULL, 0);
			dt_step_ports(NULL, job, step, 1, 20000, 28999, &again,
				      NULL, 0);
			dt_step_ports(NULL, job, step, 2, 20000, 28999, &third,
				      NULL, 0);
			dt_step_ports(NULL, job, step, 1, 20000, 28999, &same,
				      NULL, 0);
			CU_ASSERT_NOT_EQUAL(first.port[0], again.port[0]);
			CU_ASSERT_NOT_EQUAL(first.port[0], third.port[0]);
			CU_ASSERT_EQUAL(again.port[0], same.port[0]);
			CU_ASSERT(again.port[0] >= 20000 &&
				  again.port[DT_PORTS_PER_STEP - 1] <= 28999);
			CU_ASSERT_EQUAL((again.port[0] - 20000) %
					DT_PORTS_PER_STEP, 0);
			moved_alike += again.port[0] == third.port[0];
		}
	}
	/* Hashed: the second and third runs meet about 1 in 2,249 times. */
	CU_ASSERT(moved_alike < 5);
	/* Reserved ports are Slurm's, whatever the count. */
	CU_ASSERT_FATAL(dt_step_ports("12000-12003", 7, 0, 3, 20000, 28999,
				      &again, NULL, 0) == 0);
	CU_ASSERT_EQUAL(again.port[0], 12000);
	CU_ASSERT_EQUAL(dt_restart_count("2"), 2);
	CU_ASSERT_EQUAL(dt_restart_count("123456789"), 123456789);
	CU_ASSERT_EQUAL(dt_restart_count(NULL), 0);
	CU_ASSERT_EQUAL(dt_restart_count(""), 0);
	CU_ASSERT_EQUAL(dt_restart_count("1x"), 0);
	CU_ASSERT_EQUAL(dt_restart_count("-1"), 0);
	CU_ASSERT_EQUAL(dt_restart_count("1234567890"), 0);
	/* One slot only: nowhere else to go. */
	CU_ASSERT_FATAL(dt_step_ports(NULL, 7, 0, 1, 20000, 20003, &again,
				      NULL, 0) == 0);
	CU_ASSERT_EQUAL(again.port[0], 20000);
}

static void test_small_range(void)
{
	struct dt_step_ports p;
	char err[256];

	CU_ASSERT_EQUAL(dt_step_ports(NULL, 1, 0, 0, 20000, 20002, &p, err,
				      sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "port range 20000-20002 holds fewer than "
			       "4 ports: ask your administrator to widen "
			       "port-range= in plugstack.conf");
	CU_ASSERT_FATAL(dt_step_ports(NULL, 99, 7, 0, 20000, 20003, &p, NULL, 0)
			== 0);
	CU_ASSERT_EQUAL(p.port[0], 20000);
}

static void test_is_port(void)
{
	CU_ASSERT_TRUE(dt_is_port("1"));
	CU_ASSERT_TRUE(dt_is_port("29500"));
	CU_ASSERT_TRUE(dt_is_port("65535"));
	CU_ASSERT_FALSE(dt_is_port("0"));
	CU_ASSERT_FALSE(dt_is_port("65536"));
	CU_ASSERT_FALSE(dt_is_port(""));
	CU_ASSERT_FALSE(dt_is_port("abc"));
	CU_ASSERT_FALSE(dt_is_port("-1"));
	CU_ASSERT_FALSE(dt_is_port(" 80"));
	CU_ASSERT_FALSE(dt_is_port("80x"));
	CU_ASSERT_FALSE(dt_is_port(NULL));
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_reserved_ports_first),
	UNIT_TEST(test_bad_reserved_ports),
	UNIT_TEST(test_huge_reserved_ports),
	UNIT_TEST(test_derived_rule),
	UNIT_TEST(test_no_collisions),
	UNIT_TEST(test_requeued),
	UNIT_TEST(test_small_range),
	UNIT_TEST(test_is_port),
};

UNIT_MAIN("port", tests)
