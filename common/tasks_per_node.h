/*
 * Slurm's compressed tasks-per-node lists, as in SLURM_STEP_TASKS_PER_NODE
 * and SLURM_TASKS_PER_NODE: comma-separated runs "COUNT" or "COUNT(xREPS)",
 * so "4(x2),2" is 4,4,2.
 */
#ifndef DIST_TRAIN_TASKS_PER_NODE_H
#define DIST_TRAIN_TASKS_PER_NODE_H

#include <stddef.h>
#include <stdint.h>

struct dt_tpn_run {
	uint32_t count;		/* tasks on each node of the run */
	uint32_t reps;		/* nodes in the run */
};

struct dt_tasks_per_node {
	struct dt_tpn_run *runs;
	size_t nruns;
	uint32_t nodes;		/* sum of reps */
	uint64_t tasks;		/* sum of count * reps */
	uint32_t max_count;	/* most tasks on one node */
};

/* Returns 0, or -1 with one sentence in ERR. Free with dt_tpn_free. */
int dt_tpn_parse(const char *text, struct dt_tasks_per_node *out,
		 char *err, size_t errlen);
void dt_tpn_free(struct dt_tasks_per_node *tpn);

/* Tasks on node NODE (0-based), or 0 when NODE is out of range. */
uint32_t dt_tpn_at(const struct dt_tasks_per_node *tpn, uint32_t node);

/* Tasks on nodes before NODE: the first rank of NODE in block layout. */
uint64_t dt_tpn_tasks_before(const struct dt_tasks_per_node *tpn,
			     uint32_t node);

#endif
