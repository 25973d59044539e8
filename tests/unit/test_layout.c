/* The Slurm rank source: a step's layout from what slurmstepd reports. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "../../common/envp.h"
#include "../../common/error.h"
#include "../../common/hostlist.h"
#include "../../common/layout.h"

/* The fixes the layout's messages end with. */
#define SLURM_ODD \
	"ask your administrator to check that srun and this node's slurmd " \
	"run the same Slurm release"
#define SLURM_BAD "unset it if you set it yourself, else " SLURM_ODD
#define PMIX_ODD \
	"use --dist-train=pmix=no to take the ranks from Slurm alone, and " \
	"ask your administrator to check Slurm's mpi/pmix plugin"

static struct dt_slurm_step step(const char *nodelist, const char *tpn,
				 uint32_t nodes, uint32_t node_id,
				 uint32_t tasks, uint32_t local)
{
	struct dt_slurm_step s;

	memset(&s, 0, sizeof(s));
	s.nodelist = nodelist;
	s.tasks_per_node = tpn;
	s.num_nodes = nodes;
	s.node_id = node_id;
	s.num_tasks = tasks;
	s.local_tasks = local;
	s.first_global_id = node_id == 0 ? 0 : 5;
	return s;
}

/* srun -N4 -n8: 5,1,1,1 */
static void test_uneven_layout(void)
{
	struct dt_slurm_step s = step("n[1-4]", "5,1(x3)", 4, 2, 8, 1);
	struct dt_layout l;

	CU_ASSERT_FATAL(dt_layout_from_slurm(&s, &l, NULL, 0) == 0);
	CU_ASSERT_EQUAL(l.source, DT_RANKS_FROM_SLURM);
	CU_ASSERT_EQUAL(l.node_rank, 2);
	CU_ASSERT_EQUAL(l.num_nodes, 4);
	CU_ASSERT_EQUAL(l.world_size, 8);
	CU_ASSERT_EQUAL(l.local_size, 1);
	CU_ASSERT_EQUAL(l.max_local_size, 5);
	CU_ASSERT_STRING_EQUAL(l.master_addr, "n1");
	CU_ASSERT_STRING_EQUAL(l.nodes, "n1,n2,n3,n4");
	dt_layout_free(&l);
}

static void test_single_node_single_task(void)
{
	struct dt_slurm_step s = step("gpu007", "1", 1, 0, 1, 1);
	struct dt_layout l;

	CU_ASSERT_FATAL(dt_layout_from_slurm(&s, &l, NULL, 0) == 0);
	CU_ASSERT_EQUAL(l.world_size, 1);
	CU_ASSERT_EQUAL(l.local_size, 1);
	CU_ASSERT_STRING_EQUAL(l.master_addr, "gpu007");
	CU_ASSERT_STRING_EQUAL(l.nodes, "gpu007");
	dt_layout_free(&l);
}

static void test_many_nodes(void)
{
	/* 20000 nodes x 8 tasks: the node list exceeds DT_NODES_ENV_MAX. */
	struct dt_slurm_step s = step("rack[00-19]-n[0000-0999]", "8(x20000)",
				      20000, 19999, 160000, 8);
	struct dt_layout l;

	CU_ASSERT_FATAL(dt_layout_from_slurm(&s, &l, NULL, 0) == 0);
	CU_ASSERT_STRING_EQUAL(l.master_addr, "rack00-n0000");
	CU_ASSERT_PTR_NULL(l.nodes);
	CU_ASSERT_EQUAL(l.world_size, 160000);
	CU_ASSERT_EQUAL(l.node_rank, 19999);
	dt_layout_free(&l);
}

static const char *layout_error(struct dt_slurm_step s)
{
	static char err[512];
	struct dt_layout l;

	err[0] = '\0';
	if (dt_layout_from_slurm(&s, &l, err, sizeof(err)) == 0) {
		dt_layout_free(&l);
		return "accepted";
	}
	CU_ASSERT_PTR_NULL(l.master_addr);
	return err;
}

static void test_inconsistent_values(void)
{
	struct dt_slurm_step s;

	s = step(NULL, "1", 1, 0, 1, 1);
	CU_ASSERT_STRING_EQUAL(layout_error(s), "SLURM_STEP_NODELIST is not "
			       "set in the step's environment: " SLURM_ODD);
	s = step("n[1-", "1", 1, 0, 1, 1);
	CU_ASSERT_STRING_EQUAL(layout_error(s), "SLURM_STEP_NODELIST='n[1-' "
			       "is malformed ('[' without a matching ']' in "
			       "'n[1-': close the bracket): " SLURM_BAD);
	s = step("n[1-3]", "2(x4)", 4, 0, 8, 2);
	CU_ASSERT_STRING_EQUAL(layout_error(s), "SLURM_STEP_NODELIST='n[1-3]' "
			       "names 3 nodes but the step has 4: " SLURM_BAD);
	s = step("n[1-3]", "2,1(x2)", 1, 0, 2, 2);	/* a het step's part */
	CU_ASSERT_STRING_EQUAL(layout_error(s), "SLURM_STEP_NODELIST='n[1-3]' "
			       "names more than the 1 node of this part of the "
			       "step: a heterogeneous step (srun A : B) cannot be "
			       "one --dist-train world: run it as one srun, or "
			       "its parts as separate sruns");
	s = step("n[1-4]", NULL, 4, 0, 8, 2);
	CU_ASSERT_STRING_EQUAL(layout_error(s), "SLURM_STEP_TASKS_PER_NODE is "
			       "not set in the step's environment: " SLURM_ODD);
	s = step("n[1-4]", "2(x4", 4, 0, 8, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(layout_error(s),
				      "SLURM_STEP_TASKS_PER_NODE is malformed"));
	s = step("n[1-4]", "2(x4)", 4, 0, 9, 2);
	CU_ASSERT_STRING_EQUAL(layout_error(s), "SLURM_STEP_TASKS_PER_NODE="
			       "'2(x4)' does not match the step (9 tasks on 4 "
			       "nodes, 2 on node 0): " SLURM_BAD);
	s = step("n[1-4]", "2(x4)", 4, 3, 8, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(layout_error(s), "does not match"));
}

/* A long node list is quoted in part, so that the fix still fits. */
static void test_long_value_keeps_the_fix(void)
{
	static char list[2400];
	struct dt_slurm_step s;
	const char *err;
	size_t len = 0;

	for (int i = 0; len + 8 < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%sx%d",
					i ? "," : "", i);
	s = step(list, "1", 1, 0, 1, 1);
	err = layout_error(s);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "run it as one srun, or its parts "
				      "as separate sruns"));
	CU_ASSERT_TRUE(strlen(err) < 512 - 1);
}

/* -m arbitrary: srun's word for rank 0's host, checked by each node. */
static void test_rank0_from_hostfile(void)
{
	struct dt_slurm_step s = step("n[1-3]", "2,1,1", 3, 1, 4, 1);
	struct dt_layout l;
	char err[512];

	s.distribution = "arbitrary";
	s.rank0_elsewhere_ok = true;
	CU_ASSERT_FATAL(dt_layout_from_slurm(&s, &l, err, sizeof(err)) == 0);
	CU_ASSERT_PTR_NULL(l.master_addr);
	/* This node (n2) does not run task 0, n3 does. */
	CU_ASSERT_EQUAL(dt_layout_rank0_from_hostfile(&l, "n3", "n2", false,
						      err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(l.master_addr, "n3");
	/* It does, and says so. */
	CU_ASSERT_EQUAL(dt_layout_rank0_from_hostfile(&l, "n2", "n2", true,
						      err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(l.master_addr, "n2");
	/* srun's word and Slurm's placement disagree: never believed. */
	CU_ASSERT_EQUAL(dt_layout_rank0_from_hostfile(&l, "n3", "n2", true,
						      err, sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "the first host of SLURM_HOSTFILE is n3, "
			       "but Slurm started task 0 on n2: add "
			       "--mpi=pmix");
	CU_ASSERT_EQUAL(dt_layout_rank0_from_hostfile(&l, "n2", "n2", false,
						      err, sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "the first host of SLURM_HOSTFILE is n2, "
			       "but Slurm started task 0 on another node: add "
			       "--mpi=pmix");
	CU_ASSERT_EQUAL(dt_layout_rank0_from_hostfile(&l, "n9", "n2", false,
						      err, sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "the first host of SLURM_HOSTFILE, n9, is "
			       "not one of the step's nodes: fix the file, or "
			       "add --mpi=pmix");
	CU_ASSERT_EQUAL(dt_layout_rank0_from_hostfile(&l, "n", "n2", false,
						      err, sizeof(err)), -1);
	CU_ASSERT_EQUAL(dt_layout_rank0_from_hostfile(&l, NULL, "n2", false,
						      err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "SLURM_HOSTFILE"));
	CU_ASSERT_STRING_EQUAL(l.master_addr, "n2");	/* untouched */
	dt_layout_free(&l);
}

static void test_rank0_placement(void)
{
	struct dt_slurm_step s = step("n[1-2]", "2,1", 2, 1, 3, 1);

	s.distribution = "arbitrary";
	CU_ASSERT_STRING_EQUAL(layout_error(s), "with --distribution="
			       "arbitrary, srun reads rank 0's host from the "
			       "first line of SLURM_HOSTFILE; without that "
			       "file (as with an ordered --nodelist) only PMIx "
			       "knows it: add --mpi=pmix");
	s.distribution = "cyclic";
	CU_ASSERT_STRING_EQUAL(layout_error(s), "accepted");
	s = step("n[1-2]", "2,1", 2, 0, 3, 2);
	s.first_global_id = 1;
	s.distribution = "block";
	CU_ASSERT_STRING_EQUAL(layout_error(s), "rank 0 does not run on the "
			       "step's first node (SLURM_DISTRIBUTION=block): "
			       "add --mpi=pmix");
}

static void test_nodes_csv(void)
{
	int too_long;
	char *csv = dt_nodes_csv("a[1-2],b", &too_long);

	CU_ASSERT_STRING_EQUAL(csv, "a1,a2,b");
	CU_ASSERT_FALSE(too_long);
	free(csv);
	CU_ASSERT_PTR_NULL(dt_nodes_csv("a[", &too_long));
	CU_ASSERT_FALSE(too_long);
	CU_ASSERT_PTR_NULL(dt_nodes_csv("n[00000-65535]", &too_long));
	CU_ASSERT_TRUE(too_long);
}

static void test_rank0_from_pmix_later(void)
{
	struct dt_slurm_step s = step("n[1-2]", "2,1", 2, 1, 3, 1);
	struct dt_layout l;

	s.distribution = "arbitrary";
	s.rank0_elsewhere_ok = true;
	CU_ASSERT_FATAL(dt_layout_from_slurm(&s, &l, NULL, 0) == 0);
	CU_ASSERT_PTR_NULL(l.master_addr);
	CU_ASSERT_STRING_EQUAL(l.nodes, "n1,n2");
	dt_layout_free(&l);
}

static const char *env_of(const char *name, void *arg)
{
	return dt_envp_get(arg, name);
}

static void test_step_from_env(void)
{
	char *envp[] = {
		"SLURM_STEP_NODELIST=n[1-4]", "SLURM_STEP_TASKS_PER_NODE=5,1(x3)",
		"SLURM_STEP_NUM_NODES=4", "SLURM_STEP_NUM_TASKS=8",
		"SLURM_NODEID=2", "SLURM_PROCID=6", "SLURM_LOCALID=0",
		"SLURM_GTIDS=6", "SLURM_DISTRIBUTION=block", NULL,
	};
	char *bad[] = { "SLURM_STEP_NODELIST=n1", "SLURM_STEP_NUM_NODES=x",
			NULL };
	char *none[] = { "HOME=/", NULL };
	struct dt_slurm_step s;
	struct dt_task_ids ids;
	struct dt_layout l;
	char err[256];

	CU_ASSERT_EQUAL(dt_slurm_step_from_env(env_of, envp, &s, &ids, err,
					       sizeof(err)), 0);
	CU_ASSERT_EQUAL(ids.rank, 6);
	CU_ASSERT_EQUAL(ids.local_rank, 0);
	CU_ASSERT_EQUAL(s.local_tasks, 1);
	CU_ASSERT_EQUAL(s.first_global_id, 6);
	CU_ASSERT_FATAL(dt_layout_from_slurm(&s, &l, NULL, 0) == 0);
	CU_ASSERT_STRING_EQUAL(l.master_addr, "n1");
	dt_layout_free(&l);

	CU_ASSERT_EQUAL(dt_slurm_step_from_env(env_of, none, &s, &ids, err,
					       sizeof(err)), 1);
	CU_ASSERT_EQUAL(dt_slurm_step_from_env(env_of, bad, &s, &ids, err,
					       sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "SLURM_STEP_NUM_NODES='x' is not a number: "
			       "unset it if you set it, and run the command as "
			       "a task of srun");
}

/* A raw value quoted into a message that reaches slurmd's log: its line
 * breaks and escape sequences are written out, not passed on. */
static void test_quoted_values_escaped(void)
{
	char *forged[] = { "SLURM_STEP_NODELIST=n1", "SLURM_STEP_NUM_NODES="
			   "1\nslurmd: forged\x1b[2J", NULL };
	struct dt_slurm_step s;
	struct dt_task_ids ids;
	char err[256], small[8];

	CU_ASSERT_EQUAL(dt_slurm_step_from_env(env_of, forged, &s, &ids, err,
					       sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "SLURM_STEP_NUM_NODES='1\\x0aslurmd: "
			       "forged\\x1b[2J' is not a number: unset it if "
			       "you set it, and run the command as a task of "
			       "srun");
	/* Cut where it no longer fits, never inside an escape. */
	CU_ASSERT_EQUAL(dt_escape("abcd\ne", small, sizeof(small)), 4);
	CU_ASSERT_STRING_EQUAL(small, "abcd");
	CU_ASSERT_EQUAL(dt_escape("abcdefgh", small, sizeof(small)), 7);
	CU_ASSERT_STRING_EQUAL(small, "abcdefg");
}

/* The host named for a missing rank: Slurm's block layout only. */
static void test_rank_host(void)
{
	struct dt_slurm_step step = { .nodelist = "n[1-4]", .num_nodes = 4,
				      .tasks_per_node = "5,1(x3)" };
	char name[8];

	CU_ASSERT_EQUAL(dt_slurm_rank_host(&step, 0, name, sizeof(name)), 0);
	CU_ASSERT_STRING_EQUAL(name, "n1");
	CU_ASSERT_EQUAL(dt_slurm_rank_host(&step, 4, name, sizeof(name)), 0);
	CU_ASSERT_STRING_EQUAL(name, "n1");
	CU_ASSERT_EQUAL(dt_slurm_rank_host(&step, 6, name, sizeof(name)), 0);
	CU_ASSERT_STRING_EQUAL(name, "n3");
	CU_ASSERT_EQUAL(dt_slurm_rank_host(&step, 7, name, sizeof(name)), 0);
	CU_ASSERT_STRING_EQUAL(name, "n4");
	CU_ASSERT_EQUAL(dt_slurm_rank_host(&step, 8, name, sizeof(name)), -1);
	step.distribution = "block:cyclic";
	CU_ASSERT_EQUAL(dt_slurm_rank_host(&step, 6, name, sizeof(name)), 0);
	step.distribution = "cyclic";
	CU_ASSERT_EQUAL(dt_slurm_rank_host(&step, 6, name, sizeof(name)), -1);
	step.distribution = NULL;
	step.nodelist = "n[1-";
	CU_ASSERT_EQUAL(dt_slurm_rank_host(&step, 6, name, sizeof(name)), -1);
	step.nodelist = "a-very-long-host-name";
	CU_ASSERT_EQUAL(dt_slurm_rank_host(&step, 0, name, sizeof(name)), -1);
}

static void test_pmix_cross_check(void)
{
	struct dt_slurm_step s = step("n[1-4]", "5,1(x3)", 4, 1, 8, 1);
	struct dt_task_ids ids = { 5, 0 };
	struct dt_pmix_view v = { 5, 0, 8, 1, 1, 4, "n1" };
	struct dt_layout slurm, l;
	char err[256];

	CU_ASSERT_FATAL(dt_layout_from_slurm(&s, &slurm, NULL, 0) == 0);
	CU_ASSERT_EQUAL(dt_layout_from_pmix(&v, &slurm, &ids, &l, err,
					    sizeof(err)), 0);
	CU_ASSERT_EQUAL(l.source, DT_RANKS_FROM_PMIX);
	CU_ASSERT_STRING_EQUAL(l.master_addr, "n1");
	CU_ASSERT_STRING_EQUAL(l.nodes, "n1,n2,n3,n4");
	CU_ASSERT_EQUAL(l.max_local_size, 5);
	dt_layout_free(&l);

	v.local_rank = 1;
	CU_ASSERT_EQUAL(dt_layout_from_pmix(&v, &slurm, &ids, &l, err,
					    sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "PMIx and Slurm disagree on the local rank "
			       "(SLURM_LOCALID): PMIx says 1, Slurm 0; "
			       PMIX_ODD);
	v.local_rank = 0;
	v.rank0_host = "n9";
	CU_ASSERT_EQUAL(dt_layout_from_pmix(&v, &slurm, &ids, &l, err,
					    sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "PMIx and Slurm disagree on the host of "
			       "rank 0: PMIx says n9, Slurm n1; " PMIX_ODD);
	/* Outside Slurm, PMIx alone. */
	CU_ASSERT_EQUAL(dt_layout_from_pmix(&v, NULL, NULL, &l, err,
					    sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(l.master_addr, "n9");
	CU_ASSERT_PTR_NULL(l.nodes);
	dt_layout_free(&l);
	v.rank0_host = NULL;
	CU_ASSERT_EQUAL(dt_layout_from_pmix(&v, NULL, NULL, &l, err,
					    sizeof(err)), -1);
	dt_layout_free(&slurm);
}

/*
 * A node list within its bound is parsed no further than the step's node
 * count: a 4,000-node step may be given 324 kB of "a,a,...", 162,048
 * names, and the parser stops at the 4,001st.
 */
static void test_in_bound_list_capped(void)
{
	size_t len = DT_STEP_TEXT_BASE + DT_NODELIST_PER_NODE * 4000;
	char *list = unit_huge_text(len), err[512];
	struct dt_hostlist *whole = NULL;
	struct dt_slurm_step s;
	struct dt_layout l;
	long before, capped, uncapped;

	CU_ASSERT_PTR_NOT_NULL_FATAL(list);
	reset_peak_memory();
	before = peak_memory_kb();
	s = step(list, "1(x4000)", 4000, 0, 4000, 1);
	CU_ASSERT_EQUAL(dt_layout_from_slurm(&s, &l, err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "names more than the 4000 nodes "
				      "of this part of the step"));
	capped = peak_memory_kb() - before;
	/* What reading it whole would take, for comparison. */
	reset_peak_memory();
	before = peak_memory_kb();
	CU_ASSERT_EQUAL(dt_hostlist_parse(list, &whole, NULL, 0), 0);
	uncapped = peak_memory_kb() - before;
	dt_hostlist_free(whole);
	fprintf(stderr, "(%zu bytes of node list for 4000 nodes: the "
		"parser's peak grew by %ld kB capped, %ld kB read whole) ",
		len, capped, uncapped);
	CU_ASSERT(capped < 2048);
	free(list);
}

/* What slurmstepd reads is bounded before it is parsed: a 20 MB node
 * list is refused with one message, unread, not grown into memory. */
static void test_huge_texts_refused(void)
{
	char *huge = unit_huge_text(20u << 20), err[256];
	struct dt_slurm_step s;
	struct dt_layout l;
	long before;

	CU_ASSERT_PTR_NOT_NULL_FATAL(huge);
	before = peak_memory_kb();
	s = step(huge, "2(x4)", 4, 0, 8, 2);
	CU_ASSERT_EQUAL(dt_layout_from_slurm(&s, &l, err, sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "SLURM_STEP_NODELIST is longer than 4416 "
			       "bytes, more than a step of 4 nodes can have, "
			       "so it is refused unread: " SLURM_BAD);
	CU_ASSERT(peak_memory_kb() - before < 10 * 1024);
	s = step(huge, "1", 1, 0, 1, 1);
	CU_ASSERT_EQUAL(dt_layout_from_slurm(&s, &l, err, sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "SLURM_STEP_NODELIST is longer than 4176 "
			       "bytes, more than a step of 1 node can have, so "
			       "it is refused unread: " SLURM_BAD);
	s = step("n[1-4]", huge, 4, 0, 8, 2);
	CU_ASSERT_EQUAL(dt_layout_from_slurm(&s, &l, err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "SLURM_STEP_TASKS_PER_NODE is "
				      "longer than 4192 bytes"));
	CU_ASSERT(peak_memory_kb() - before < 10 * 1024);
	s = step("n[1-4]", "2(x4)", 4, 0, 8, 2);
	s.distribution = huge;
	CU_ASSERT_EQUAL(dt_layout_from_slurm(&s, &l, err, sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "SLURM_DISTRIBUTION is longer than 256 "
			       "bytes, more than any layout Slurm names, so it "
			       "is refused unread: give srun a --distribution "
			       "it knows");
	CU_ASSERT(peak_memory_kb() - before < 10 * 1024);
	free(huge);
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_in_bound_list_capped),
	UNIT_TEST(test_huge_texts_refused),
	UNIT_TEST(test_uneven_layout),
	UNIT_TEST(test_single_node_single_task),
	UNIT_TEST(test_many_nodes),
	UNIT_TEST(test_inconsistent_values),
	UNIT_TEST(test_long_value_keeps_the_fix),
	UNIT_TEST(test_rank0_placement),
	UNIT_TEST(test_nodes_csv),
	UNIT_TEST(test_rank0_from_pmix_later),
	UNIT_TEST(test_rank0_from_hostfile),
	UNIT_TEST(test_step_from_env),
	UNIT_TEST(test_quoted_values_escaped),
	UNIT_TEST(test_rank_host),
	UNIT_TEST(test_pmix_cross_check),
};

UNIT_MAIN("layout", tests)
