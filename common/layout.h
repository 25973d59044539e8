/*
 * Where a step's tasks run: the node-level facts every task of a node
 * shares (node rank, sizes, the host of rank 0, the nodes in rank order).
 *
 * This is the "rank source" seam: dt_layout_from_slurm builds it from what
 * Slurm reports; a PMIx-based source fills the same structure.
 */
#ifndef DIST_TRAIN_LAYOUT_H
#define DIST_TRAIN_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* DIST_TRAIN_NODES is left out beyond this (execve allows 128 KiB). */
#define DT_NODES_ENV_MAX 65536

enum dt_rank_source {
	DT_RANKS_FROM_SLURM,
	DT_RANKS_FROM_PMIX,
};

struct dt_layout {
	enum dt_rank_source source;
	uint32_t node_rank;	/* GROUP_RANK */
	uint32_t num_nodes;	/* GROUP_WORLD_SIZE */
	uint32_t world_size;	/* WORLD_SIZE */
	uint32_t local_size;	/* LOCAL_WORLD_SIZE on this node */
	uint32_t max_local_size; /* most tasks on any node of the step */
	char *master_addr;	/* host running rank 0 */
	char *nodes;		/* "n1,n2,...": NULL when too long */
};

/* What Slurm tells slurmstepd about a step (items and environment). */
struct dt_slurm_step {
	const char *nodelist;		/* SLURM_STEP_NODELIST */
	const char *tasks_per_node;	/* SLURM_STEP_TASKS_PER_NODE */
	const char *distribution;	/* SLURM_DISTRIBUTION, or NULL */
	uint32_t num_nodes;		/* S_JOB_NNODES */
	uint32_t node_id;		/* S_JOB_NODEID */
	uint32_t num_tasks;		/* S_JOB_TOTAL_TASK_COUNT */
	uint32_t local_tasks;		/* S_JOB_LOCAL_TASK_COUNT */
	uint32_t first_global_id;	/* global id of local task 0 */
};

/*
 * Returns 0, or -1 with one sentence in ERR when the values contradict
 * each other or rank 0's host cannot be known without PMIx.
 */
int dt_layout_from_slurm(const struct dt_slurm_step *step,
			 struct dt_layout *out, char *err, size_t errlen);

void dt_layout_free(struct dt_layout *layout);

const char *dt_rank_source_name(enum dt_rank_source source);

/*
 * Expand NODELIST into "a,b,c" in order; NULL (and *TOO_LONG set) past
 * DT_NODES_ENV_MAX bytes, NULL on a malformed list or no memory.
 */
char *dt_nodes_csv(const char *nodelist, int *too_long);

#endif
