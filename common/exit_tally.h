/*
 * The step's task exits as srun hears of them (plugin/watch.c): which
 * task failed first, when the step should be stopped, how many tasks that
 * stopped, and the step's record for the user. Pure: no sockets, no
 * Slurm calls.
 *
 * A task fails when it exits non-zero or by a signal. The step is stopped
 * at the first failure, except in elastic torchrun mode, where losing a
 * node is what elastic training is for: there, once fewer nodes than its
 * minimum still have a running agent.
 */
#ifndef DIST_TRAIN_EXIT_TALLY_H
#define DIST_TRAIN_EXIT_TALLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exit_record.h"
#include "saved_files.h"
#include "stack_report.h"

/* Longest list of lost nodes kept; longer ones end in "...". */
#define DT_LOST_NODES_MAX 256
/* The words on the ranks that were behind, in the cause. */
#define DT_BEHIND_MAX 512

struct dt_exit_tally {
	uint32_t tasks;		/* the step's tasks */
	uint32_t nodes;		/* its nodes */
	uint32_t min_nodes;	/* elastic: stop below it; 0: at a failure */
	bool stop_on_failure;	/* fail-fast: stop the step at all */
	bool torchrun;		/* tasks are torchrun agents, one per node */

	uint8_t *exited;	/* by task: its exit was heard */
	uint8_t *node_lost;	/* by node: a task of it failed */
	uint32_t n_exited;
	uint32_t n_failed;
	uint32_t n_nodes_lost;
	struct dt_task_exit *exits; /* each task's, as heard */

	bool have_first;	/* the first failure, the cause */
	struct dt_task_exit first;
	bool stopping;		/* the step is being stopped */
	uint32_t running_at_stop; /* tasks still running then: stopped */
	/* Slurm stopped the step, not a task: "its time limit", ... */
	const char *stopped_by;
	const char *ended;	/* the record's word for how it ended */
	/* After a node failure: the nodes Slurm marked down ("n3,n5"),
	 * whose tasks never reported an end. */
	char lost_nodes[DT_LOST_NODES_MAX];
	/* The files the step left beside its record, its user's to read
	 * (not owned: whoever set them frees them). */
	const struct dt_saved_file *saved;
	size_t n_saved;
	/* The collective the first failed rank's own timeout ended it in
	 * ("all_reduce"), or "": that rank waited for others, and was not
	 * the cause. */
	char first_timed_out[DT_COLLECTIVE_NAME_MAX];
	/* ... and the ranks it waited for, that were behind, or "". */
	char behind[DT_BEHIND_MAX];
};

/* 0, or -1 without memory. */
int dt_exit_tally_init(struct dt_exit_tally *t, uint32_t tasks,
		       uint32_t nodes, uint32_t min_nodes,
		       bool stop_on_failure, bool torchrun);
void dt_exit_tally_free(struct dt_exit_tally *t);

/* Whether a wait status is a failure: non-zero, or a signal. */
bool dt_exit_failed(int status);

/*
 * E's exit. Returns 1 when the step is to be stopped now (once), 0
 * otherwise, -1 for a task not in the step or heard of before (ignored).
 */
int dt_exit_tally_add(struct dt_exit_tally *t, const struct dt_task_exit *e);

/*
 * Slurm itself is stopping the step (BY: "its time limit", "preemption",
 * "scancel"; ENDED, the record's word: "timeout", "preempted",
 * "cancelled"): its tasks' ends are no failure of theirs, and no task is
 * named as the cause.
 */
void dt_exit_tally_stopped_by(struct dt_exit_tally *t, const char *by,
			      const char *ended);

/*
 * After a node failure (dt_exit_tally_stopped_by), the nodes Slurm marked
 * down, as "n3,n5": the cause names them, and the tasks that never
 * reported an end as lost with them.
 */
void dt_exit_tally_lost_nodes(struct dt_exit_tally *t, const char *nodes);

/*
 * The first failed rank ended when its COLLECTIVE ("all_reduce", a name
 * of letters, digits and '_') timed out, as its stacks of its end say
 * (dt_stack_timed_out): the cause says so. Another name is ignored.
 */
void dt_exit_tally_first_timed_out(struct dt_exit_tally *t,
				   const char *collective);

/*
 * The ranks the first failed rank waited for when its collective timed
 * out (dt_exit_tally_first_timed_out), as words from their saved stacks
 * or NCCL dumps ("rank 0, which was behind: at train.py:9 in step, not in
 * the collective"): the cause names them. A quote, a backslash or a
 * control character becomes '?', for the record's JSON.
 */
void dt_exit_tally_behind(struct dt_exit_tally *t, const char *words);

/* How E ended, as words: "exit code 3", "signal 9 (SIGKILL)", "the
 * out-of-memory killer (signal 9, SIGKILL)". */
void dt_exit_describe(const struct dt_task_exit *e, char *buf, size_t len);

/*
 * The one line that names the cause, once there is one: which task failed
 * first, where, how, when, and what became of the others. Its length, as
 * snprintf, or -1 where nothing failed.
 */
int dt_exit_cause(const struct dt_exit_tally *t, char *buf, size_t len);

/*
 * The step's record, as JSON (a malloc'd string, or NULL without memory):
 * STEP_ID ("JOB.STEP"), how the step ended ("failed", "completed", or
 * what Slurm stopped it for), the first failure, how many tasks it
 * stopped, every exit heard, and the files saved beside it.
 */
char *dt_exit_tally_json(const struct dt_exit_tally *t, const char *step_id);

#endif
