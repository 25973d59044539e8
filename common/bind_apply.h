/*
 * The thin layer that applies a task's binding to the calling process:
 * CPU affinity and memory policy, both kept across execve, so the program
 * the task becomes runs bound.
 */
#ifndef DIST_TRAIN_BIND_APPLY_H
#define DIST_TRAIN_BIND_APPLY_H

#include <stdbool.h>
#include <stddef.h>

#include "envp.h"
#include "train_env.h"

struct dt_config;
struct dt_env;
struct dt_machine;
struct dt_plan;

/* Run only on CPUS (OS indexes). Returns 0, or -1 with ERR. */
int dt_bind_cpus(const unsigned *cpus, unsigned ncpus, char *err,
		 size_t errlen);

/* Allocate memory only on NUMA node NUMA. Returns 0, or -1 with ERR. */
int dt_bind_memory(int numa, char *err, size_t errlen);

/* Append "; WHAT" (or "WHAT") to the NUL-terminated NOTES of size LEN. */
void dt_note(char *notes, size_t len, const char *what);

/* The CPUs this process may run on, as "0-3,8". */
int dt_current_cpus(char *buf, size_t len);

/*
 * The node's plan for CFG and its NTASKS tasks, made once before they
 * start (slurmstepd), from the step's environment GETENV/ARG: 0 with
 * PLAN, or 1 where each task makes its own (binding off, no MACHINE, a
 * node with GPUs, whose tasks each have their own, or a plan that fails:
 * each task says why).
 */
int dt_bind_node_plan(const struct dt_machine *machine,
		      const struct dt_config *cfg, dt_getenv_fn getenv,
		      void *arg, unsigned ntasks, struct dt_plan *plan);

/*
 * What binding gives the tasks of a node, foreseen from its plan where
 * each binding succeeds: COMMON, what every task gets alike (the node
 * sets it once for all: common/node_env.h), and EACH, by local rank, what
 * else that task gets; whether the tasks bind their CPUs and memory (no
 * --cpu-bind or --mem-bind of the user's).
 */
struct dt_node_binding {
	struct dt_env common;
	struct dt_env *each;	/* NULL: no plan, each task binds itself */
	unsigned ntasks;
	bool bind_cpus;
	bool bind_memory;
};

/*
 * OUT for PLAN (NULL where there is none: then only what binding off
 * gives, in COMMON) and the step's environment GETENV/ARG. 0, or -1: no
 * memory (OUT is then empty).
 */
int dt_bind_node_env(const struct dt_machine *machine,
		     const struct dt_config *cfg, const struct dt_plan *plan,
		     dt_getenv_fn getenv, void *arg, struct dt_node_binding *out);
void dt_node_binding_free(struct dt_node_binding *nb);

/*
 * Bind the calling task, local rank LOCAL_RANK, as NB foresaw it from
 * PLAN, and add to ENV what it gets beyond NB's common part: what
 * dt_bind_task would do, without remaking the plan or its environment.
 * 0, or -1 where that does not hold (its CPUs could not be bound, no
 * memory): dt_bind_task then binds it, and says why.
 */
int dt_bind_foreseen(const struct dt_plan *plan,
		     const struct dt_node_binding *nb, unsigned local_rank,
		     struct dt_env *env);

/*
 * Bind the calling task, the one whose environment ENV holds (LOCAL_RANK,
 * LOCAL_WORLD_SIZE), by the node's plan for CFG, and add what was decided
 * to ENV. NODE_PLAN, where not NULL, is dt_bind_node_plan's for the same
 * CFG and environment, used where it covers this task's node. GETENV
 * reads the task's original environment: an explicit --cpu-bind,
 * --mem-bind or --gpu-bind given to Slurm wins over the plan. Without
 * MACHINE, nothing is bound and NO_MACHINE says why in NOTES, where
 * verbose remarks go. Returns 0, or -1 with ERR (more tasks than GPUs, a
 * GPU list naming GPUs the node lacks).
 */
int dt_bind_task(const struct dt_machine *machine, const char *no_machine,
		 const struct dt_config *cfg, const struct dt_plan *node_plan,
		 dt_getenv_fn getenv, void *arg, struct dt_env *env,
		 char *notes, size_t notes_len, char *err, size_t errlen);

#endif
