/* After the start: task exit records and the step's tally of them. */
#include "config.h"

#include <signal.h>
#include <string.h>

#include "unit.h"
#include "../../common/exit_record.h"
#include "../../common/exit_tally.h"

static const uint8_t key[DT_SECRET_LEN] = { 1, 2, 3, 4, 5, 6, 7, 8 };

/* A wait status as the kernel makes it. */
#define EXITED(code) ((code) << 8)
#define SIGNALED(sig) (sig)

static struct dt_task_exit task(uint32_t rank, uint32_t node_rank,
				int status)
{
	struct dt_task_exit e;

	memset(&e, 0, sizeof(e));
	e.rank = rank;
	e.local_rank = rank % 2;
	e.node_rank = node_rank;
	snprintf(e.node, sizeof(e.node), "n%u", node_rank + 1);
	e.status = status;
	e.after_ms = 2000 + rank;
	e.at_ms = 1795686171266ull + rank;
	return e;
}

static void test_record_round_trip(void)
{
	struct dt_task_exit e = task(5, 2, EXITED(3)), got;
	char buf[DT_EXIT_RECORD_MAX];
	int n = dt_exit_record_format(key, "17.0", &e, buf, sizeof(buf));

	CU_ASSERT_FATAL(n > 0);
	CU_ASSERT_EQUAL(buf[n - 1], '\n');
	CU_ASSERT_EQUAL_FATAL(dt_exit_record_parse(key, "17.0", buf,
						   (size_t)n, &got), 0);
	CU_ASSERT_EQUAL(got.rank, 5);
	CU_ASSERT_EQUAL(got.local_rank, 1);
	CU_ASSERT_EQUAL(got.node_rank, 2);
	CU_ASSERT_STRING_EQUAL(got.node, "n3");
	CU_ASSERT_EQUAL(got.status, EXITED(3));
	CU_ASSERT_FALSE(got.oom);
	CU_ASSERT_EQUAL(got.after_ms, 2005);
	CU_ASSERT_EQUAL(got.at_ms, 1795686171271ull);
}

/* Nothing but the step's own, untouched records is believed. */
static void test_record_refused(void)
{
	struct dt_task_exit e = task(5, 2, EXITED(3)), got;
	uint8_t other[DT_SECRET_LEN] = { 9 };
	char buf[DT_EXIT_RECORD_MAX], copy[DT_EXIT_RECORD_MAX];
	int n = dt_exit_record_format(key, "17.0", &e, buf, sizeof(buf));

	CU_ASSERT_FATAL(n > 0);
	/* another step's, another secret's */
	CU_ASSERT_EQUAL(dt_exit_record_parse(key, "17.1", buf, (size_t)n,
					     &got), -1);
	CU_ASSERT_EQUAL(dt_exit_record_parse(other, "17.0", buf, (size_t)n,
					     &got), -1);
	/* any byte changed */
	for (int i = 0; i < n - 1; i++) {
		memcpy(copy, buf, (size_t)n);
		copy[i] ^= 1;
		CU_ASSERT_EQUAL(dt_exit_record_parse(key, "17.0", copy,
						     (size_t)n, &got), -1);
	}
	/* cut short, empty, too long */
	CU_ASSERT_EQUAL(dt_exit_record_parse(key, "17.0", buf, (size_t)n / 2,
					     &got), -1);
	CU_ASSERT_EQUAL(dt_exit_record_parse(key, "17.0", "", 0, &got), -1);
	char *huge = unit_huge_text(64 * 1024);

	CU_ASSERT_FATAL(huge != NULL);
	CU_ASSERT_EQUAL(dt_exit_record_parse(key, "17.0", huge, strlen(huge),
					     &got), -1);
	free(huge);
	/* a node name that is no word is never written */
	snprintf(e.node, sizeof(e.node), "n 1");
	CU_ASSERT_EQUAL(dt_exit_record_format(key, "17.0", &e, buf,
					      sizeof(buf)), -1);
}

static void test_first_failure_stops(void)
{
	struct dt_exit_tally t;
	struct dt_task_exit ok = task(0, 0, EXITED(0));
	struct dt_task_exit bad = task(5, 1, EXITED(3));
	struct dt_task_exit victim = task(6, 2, SIGNALED(SIGKILL));
	char line[512];

	CU_ASSERT_FATAL(dt_exit_tally_init(&t, 8, 4, 0, true, false) == 0);
	CU_ASSERT_EQUAL(dt_exit_cause(&t, line, sizeof(line)), -1);
	CU_ASSERT_EQUAL(dt_exit_tally_add(&t, &ok), 0);
	CU_ASSERT_EQUAL(dt_exit_tally_add(&t, &bad), 1);
	/* heard again: ignored; victims: counted, not causes */
	CU_ASSERT_EQUAL(dt_exit_tally_add(&t, &bad), -1);
	CU_ASSERT_EQUAL(dt_exit_tally_add(&t, &victim), 0);
	CU_ASSERT_EQUAL(t.first.rank, 5);
	CU_ASSERT_EQUAL(t.running_at_stop, 6);
	CU_ASSERT_FATAL(dt_exit_cause(&t, line, sizeof(line)) > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "rank 5 failed first, on n2 "
				      "(local rank 1): exit code 3, 2.0 s "
				      "after the start; stopping the 6 "
				      "other ranks"));
	/* not in the step */
	struct dt_task_exit stranger = task(8, 0, EXITED(1));

	CU_ASSERT_EQUAL(dt_exit_tally_add(&t, &stranger), -1);
	dt_exit_tally_free(&t);
}

static void test_last_one_running(void)
{
	struct dt_exit_tally t;
	struct dt_task_exit bad = task(0, 0, SIGNALED(SIGABRT));
	char line[512];

	CU_ASSERT_FATAL(dt_exit_tally_init(&t, 1, 1, 0, true, false) == 0);
	CU_ASSERT_EQUAL(dt_exit_tally_add(&t, &bad), 1);
	CU_ASSERT_FATAL(dt_exit_cause(&t, line, sizeof(line)) > 0);
	CU_ASSERT_STRING_EQUAL(line, "rank 0 failed first, on n1 (local rank "
			       "0): signal 6 (SIGABRT), 2.0 s after the "
			       "start; no other task was still running");
	dt_exit_tally_free(&t);
}

/* A first failure whose collective timed out: it only waited, and the
 * cause says so; a name that is no collective's is not taken. */
static void test_first_timed_out(void)
{
	struct dt_exit_tally t;
	struct dt_task_exit bad = task(2, 1, EXITED(1));
	char line[512];

	CU_ASSERT_FATAL(dt_exit_tally_init(&t, 4, 2, 0, true, false) == 0);
	CU_ASSERT_EQUAL(dt_exit_tally_add(&t, &bad), 1);
	dt_exit_tally_first_timed_out(&t, "all reduce");
	CU_ASSERT_STRING_EQUAL(t.first_timed_out, "");
	dt_exit_tally_first_timed_out(&t, "all_reduce");
	CU_ASSERT_FATAL(dt_exit_cause(&t, line, sizeof(line)) > 0);
	CU_ASSERT_STRING_EQUAL(line, "rank 2 failed first, on n2 (local rank "
			       "0): exit code 1, 2.0 s after the start when "
			       "its all_reduce timed out: it only waited for "
			       "others, and no rank's saved stacks show which "
			       "were behind; stopping the 3 other ranks still "
			       "running (--dist-train=fail-fast=no lets them "
			       "run on)");
	/* The ranks it waited for, named; what would break the record's
	 * JSON is not carried. */
	dt_exit_tally_behind(&t, "rank 0, which was behind: at /a\"b\\c.py:9 "
			     "in step\n, not in the collective");
	CU_ASSERT_FATAL(dt_exit_cause(&t, line, sizeof(line)) > 0);
	CU_ASSERT_STRING_EQUAL(line, "rank 2 failed first, on n2 (local rank "
			       "0): exit code 1, 2.0 s after the start when "
			       "its all_reduce timed out, waiting for rank 0, "
			       "which was behind: at /a?b?c.py:9 in step?, not "
			       "in the collective; stopping the 3 other ranks "
			       "still running (--dist-train=fail-fast=no lets "
			       "them run on)");
	dt_exit_tally_free(&t);
}

static void test_fail_fast_off(void)
{
	struct dt_exit_tally t;
	struct dt_task_exit bad = task(1, 0, SIGNALED(SIGSEGV));
	char line[512];

	CU_ASSERT_FATAL(dt_exit_tally_init(&t, 2, 1, 0, false, false) == 0);
	CU_ASSERT_EQUAL(dt_exit_tally_add(&t, &bad), 0);
	CU_ASSERT_FALSE(t.stopping);
	CU_ASSERT_FATAL(dt_exit_cause(&t, line, sizeof(line)) > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "signal 11 (SIGSEGV)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "1 task failed in all"));
	dt_exit_tally_free(&t);
}

/* Elastic torchrun: a lost node is no reason to stop, until fewer than
 * MIN nodes are left. */
static void test_elastic_minimum(void)
{
	struct dt_exit_tally t;
	struct dt_task_exit a = task(1, 1, EXITED(1));
	struct dt_task_exit b = task(2, 2, EXITED(1));
	char line[512];

	CU_ASSERT_FATAL(dt_exit_tally_init(&t, 4, 4, 3, true, true) == 0);
	CU_ASSERT_EQUAL(dt_exit_tally_add(&t, &a), 0);
	CU_ASSERT_EQUAL(dt_exit_tally_add(&t, &b), 1);
	CU_ASSERT_FATAL(dt_exit_cause(&t, line, sizeof(line)) > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "the torchrun agent of node 1 "
				      "failed first"));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "2 of 4 nodes failed, fewer "
				      "than elastic's minimum of 3"));
	dt_exit_tally_free(&t);
}

/* Slurm stops the step (time limit, preemption, scancel): no task is the
 * cause. */
static void test_stopped_by_slurm(void)
{
	struct dt_exit_tally t;
	struct dt_task_exit a = task(3, 1, SIGNALED(SIGTERM));
	struct dt_task_exit b = task(0, 0, SIGNALED(SIGTERM));
	char line[512], *json;

	CU_ASSERT_FATAL(dt_exit_tally_init(&t, 4, 2, 0, true, false) == 0);
	CU_ASSERT_EQUAL(dt_exit_tally_add(&t, &a), 1);
	dt_exit_tally_stopped_by(&t, "its time limit", "timeout");
	CU_ASSERT_EQUAL(dt_exit_tally_add(&t, &b), 0);
	CU_ASSERT_FATAL(dt_exit_cause(&t, line, sizeof(line)) > 0);
	CU_ASSERT_STRING_EQUAL(line, "the step was stopped by its time "
			       "limit, not by a task: 2 of its 4 tasks ended "
			       "(the first, rank 3 on n2, by signal 15 "
			       "(SIGTERM))");
	json = dt_exit_tally_json(&t, "9.0");
	CU_ASSERT_FATAL(json != NULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"ended\": \"timeout\""));
	CU_ASSERT_PTR_NULL(strstr(json, "\"saved\""));
	free(json);
	/* The ranks' stacks beside the record are listed in it. */
	{
		struct dt_saved_file saved[] = {
			{ DT_SAVED_STACKS, 0, "dist-train-9.0.stacks-rank-0" },
			{ DT_SAVED_STACKS, 3, "dist-train-9.0.stacks-rank-3" },
		};

		t.saved = saved;
		t.n_saved = 2;
		json = dt_exit_tally_json(&t, "9.0");
		CU_ASSERT_FATAL(json != NULL);
		CU_ASSERT_PTR_NOT_NULL(strstr(json, "  \"saved\": "
			"[\"dist-train-9.0.stacks-rank-0\", "
			"\"dist-train-9.0.stacks-rank-3\"],\n"));
		free(json);
		t.saved = NULL;
		t.n_saved = 0;
	}
	dt_exit_tally_free(&t);
}

/* Slurm's node failure: the node it marked down is named, and the tasks
 * that never reported an end are the ones lost with it. */
static void test_node_lost(void)
{
	struct dt_exit_tally t;
	char line[512], *json, many[400];

	CU_ASSERT_FATAL(dt_exit_tally_init(&t, 8, 4, 0, true, false) == 0);
	for (uint32_t r = 0; r < 8; r++) {
		struct dt_task_exit e = task(r, r / 2, SIGNALED(SIGTERM));

		if (r == 6)
			continue;
		CU_ASSERT_EQUAL(dt_exit_tally_add(&t, &e), r ? 0 : 1);
		if (!r)
			dt_exit_tally_stopped_by(&t, "a node failure",
						 "node_fail");
	}
	dt_exit_tally_lost_nodes(&t, "n4");
	CU_ASSERT_FATAL(dt_exit_cause(&t, line, sizeof(line)) > 0);
	CU_ASSERT_STRING_EQUAL(line, "the step was stopped by a node "
			       "failure, not by a task: n4 stopped "
			       "answering, and rank 6 on it never reported "
			       "an end; 7 other tasks ended (the first, rank "
			       "0 on n1, by signal 15 (SIGTERM))");
	json = dt_exit_tally_json(&t, "9.0");
	CU_ASSERT_FATAL(json != NULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"ended\": \"node_fail\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"lost_nodes\": \"n4\",\n  "
				      "\"never_heard\": \"6\""));
	free(json);
	/* A long list is cut, never overrun. */
	memset(many, 'n', sizeof(many) - 1);
	many[sizeof(many) - 1] = '\0';
	dt_exit_tally_lost_nodes(&t, many);
	CU_ASSERT_EQUAL(strlen(t.lost_nodes), sizeof(t.lost_nodes) - 1);
	CU_ASSERT_STRING_EQUAL(t.lost_nodes + sizeof(t.lost_nodes) - 4, "...");
	dt_exit_tally_free(&t);
}

static void test_describe(void)
{
	struct dt_task_exit e = task(0, 0, SIGNALED(SIGKILL));
	char how[96];

	dt_exit_describe(&e, how, sizeof(how));
	CU_ASSERT_STRING_EQUAL(how, "signal 9 (SIGKILL)");
	e.oom = true;
	dt_exit_describe(&e, how, sizeof(how));
	CU_ASSERT_STRING_EQUAL(how, "the out-of-memory killer (signal 9, "
			       "SIGKILL)");
	e = task(0, 0, SIGNALED(SIGRTMIN + 3));
	dt_exit_describe(&e, how, sizeof(how));
	CU_ASSERT_PTR_NOT_NULL(strstr(how, "signal "));
	CU_ASSERT_TRUE(dt_exit_failed(EXITED(1)));
	CU_ASSERT_TRUE(dt_exit_failed(SIGNALED(SIGTERM)));
	CU_ASSERT_FALSE(dt_exit_failed(EXITED(0)));
}

static void test_record_json(void)
{
	struct dt_exit_tally t;
	struct dt_task_exit bad = task(5, 1, EXITED(3));
	struct dt_task_exit victim = task(0, 0, SIGNALED(SIGKILL));
	char *json;

	CU_ASSERT_FATAL(dt_exit_tally_init(&t, 8, 4, 0, true, false) == 0);
	dt_exit_tally_add(&t, &bad);
	dt_exit_tally_add(&t, &victim);
	json = dt_exit_tally_json(&t, "17.0");
	CU_ASSERT_FATAL(json != NULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"step\": \"17.0\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"first_failure\": {\"rank\": 5"));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"stopped\": 7"));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"ended\": \"failed\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"exit_code\": null, "
				      "\"signal\": 9"));
	free(json);
	dt_exit_tally_free(&t);
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_record_round_trip),
	UNIT_TEST(test_record_refused),
	UNIT_TEST(test_first_failure_stops),
	UNIT_TEST(test_last_one_running),
	UNIT_TEST(test_first_timed_out),
	UNIT_TEST(test_fail_fast_off),
	UNIT_TEST(test_elastic_minimum),
	UNIT_TEST(test_stopped_by_slurm),
	UNIT_TEST(test_node_lost),
	UNIT_TEST(test_describe),
	UNIT_TEST(test_record_json),
};

UNIT_MAIN("exit", tests)
