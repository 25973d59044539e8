/*
 * Where a step's tasks run: the node-level facts every task of a node
 * shares (node rank, sizes, the host of rank 0, the nodes in rank order).
 *
 * This is the "rank source" seam: dt_layout_from_slurm builds it from what
 * Slurm reports; a PMIx-based source fills the same structure.
 */
#ifndef DIST_TRAIN_LAYOUT_H
#define DIST_TRAIN_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "envp.h"

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
	bool rank0_elsewhere_ok;	/* PMIx will say where rank 0 is */
};

/* One task's place, as Slurm numbers it. */
struct dt_task_ids {
	uint32_t rank;			/* SLURM_PROCID */
	uint32_t local_rank;		/* SLURM_LOCALID */
};

/*
 * What slurmstepd reads is bounded before it is parsed: a text of the
 * step's layout may hold BASE bytes plus so many per node, at most MAX.
 */
#define DT_STEP_TEXT_BASE 4096
#define DT_STEP_TEXT_MAX (16u << 20)
#define DT_NODELIST_PER_NODE 80		/* a name in full, and a comma */
#define DT_TASKS_PER_NODE_PER_NODE 24	/* "65535(x65535)," */
#define DT_DISTRIBUTION_MAX 256		/* "plane=4096,NoPack" and such */

/*
 * Returns 0, or -1 with one sentence in ERR when the values contradict
 * each other or rank 0's host cannot be known without PMIx. With
 * rank0_elsewhere_ok, an arbitrary layout leaves master_addr NULL.
 */
int dt_layout_from_slurm(const struct dt_slurm_step *step,
			 struct dt_layout *out, char *err, size_t errlen);

/*
 * Read a task's step and ids from its environment (SLURM_PROCID,
 * SLURM_STEP_NODELIST, ...), for programs that run inside a task. Returns
 * 0; 1 when this is not a Slurm task (no SLURM_STEP_NODELIST); -1 with
 * ERR when a value is malformed. STEP points into the environment.
 */
int dt_slurm_step_from_env(dt_getenv_fn getenv, void *arg,
			   struct dt_slurm_step *step, struct dt_task_ids *ids,
			   char *err, size_t errlen);

/*
 * The host of RANK where STEP (as dt_slurm_step_from_env read it) lays its
 * tasks out in blocks, for naming a missing rank: 0 with NAME, or -1
 * (another distribution, or a list that does not parse or hold it).
 */
int dt_slurm_rank_host(const struct dt_slurm_step *step, uint32_t rank,
		       char *name, size_t len);

/* What PMIx says about a task and its job. */
struct dt_pmix_view {
	uint32_t rank;			/* the process's rank */
	uint32_t local_rank;		/* PMIX_LOCAL_RANK */
	uint32_t world_size;		/* PMIX_JOB_SIZE */
	uint32_t local_size;		/* PMIX_LOCAL_SIZE */
	uint32_t node_id;		/* PMIX_NODEID */
	uint32_t num_nodes;		/* PMIX_NUM_NODES */
	const char *rank0_host;		/* PMIX_HOSTNAME of rank 0 */
};

/*
 * The layout with PMIx as the rank source. SLURM and SLURM_IDS (NULL
 * outside Slurm) are cross-checked: any disagreement is an error naming
 * both values. Node names in order still come from Slurm.
 */
int dt_layout_from_pmix(const struct dt_pmix_view *pmix,
			const struct dt_layout *slurm,
			const struct dt_task_ids *slurm_ids,
			struct dt_layout *out, char *err, size_t errlen);

void dt_layout_free(struct dt_layout *layout);

/*
 * An arbitrary layout's rank 0 host as srun read it from SLURM_HOSTFILE
 * (HOST, NULL when srun had none), checked before it is believed: it is
 * one of the step's nodes, and it is this node (SELF) exactly when this
 * node runs task 0. Sets L's master_addr; returns 0, or -1 with ERR.
 */
int dt_layout_rank0_from_hostfile(struct dt_layout *l, const char *host,
				  const char *self, bool runs_rank0,
				  char *err, size_t errlen);

/* Why rank 0's host is unknown without PMIx, as an error sentence. */
void dt_layout_rank0_error(const char *distribution, char *err,
			   size_t errlen);

const char *dt_rank_source_name(enum dt_rank_source source);

/*
 * Expand NODELIST into "a,b,c" in order; NULL (and *TOO_LONG set) past
 * DT_NODES_ENV_MAX bytes, NULL on a malformed list or no memory.
 */
char *dt_nodes_csv(const char *nodelist, int *too_long);

#endif
