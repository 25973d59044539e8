/*
 * The part of each task's environment that every task of a node shares,
 * set once by slurmstepd before it forks the tasks instead of by each
 * task: Slurm's spank_setenv takes a 256 KiB buffer on every call, about
 * 15 us, and a node's tasks pay it before their programs can start.
 *
 * Pure: the plugin sets what dt_node_env_from picks, and each task then
 * reads its environment through dt_node_env_getenv, which gives a name
 * the node set its value from before, so that a value the node set is
 * never taken for the user's own.
 */
#ifndef DIST_TRAIN_NODE_ENV_H
#define DIST_TRAIN_NODE_ENV_H

#include <stdbool.h>

#include "envp.h"
#include "train_env.h"

struct dt_node_env {
	struct dt_env set;	/* what the node set, for all its tasks */
	/* By the same index: each name's value before (DT_ENV_SET), or
	 * that it was absent (DT_ENV_UNSET). */
	struct dt_env was;
	/* What the tasks get alike holds more than SET: a name taken out
	 * (TORCHELASTIC_USE_AGENT_STORE), which each task takes out. */
	bool partial;
};

/*
 * From TASK, the environment dt_train_env gave one task of the node, the
 * entries every task of the node gets alike (set, not kept, and not one
 * of dt_train_env_per_task's), with what GETENV/ARG, the environment
 * before, held for each. 0, or -1: no memory (OUT is then empty).
 */
int dt_node_env_from(const struct dt_env *task, dt_getenv_fn getenv,
		     void *arg, struct dt_node_env *out);

/* Forget entry I of N (the plugin could not set it). */
void dt_node_env_drop(struct dt_node_env *n, size_t i);

/* A task's environment, read as it was before the node's part was set. */
struct dt_node_env_view {
	const struct dt_node_env *node;
	dt_getenv_fn getenv;	/* the task's environment as it is */
	void *arg;
};

/* dt_getenv_fn over a struct dt_node_env_view: a name that still holds
 * the node's value gives its value before; any other, its value now. */
const char *dt_node_env_getenv(const char *name, void *view);

/*
 * What puts N back in a task's environment (GETENV/ARG), as if it had
 * never been set: each name that still holds the node's value, set to its
 * value before or unset. 0, or -1: no memory.
 */
int dt_node_env_undo(const struct dt_node_env *n, dt_getenv_fn getenv,
		     void *arg, struct dt_env *out);

/*
 * Into ENV, a task's whole environment as it is to be applied, what puts
 * back each name N set that ENV does not set itself (a task whose binding
 * came out other than the node's), where GETENV/ARG still holds the
 * node's value. 0, or -1: no memory.
 */
int dt_node_env_complete(const struct dt_node_env *n, dt_getenv_fn getenv,
			 void *arg, struct dt_env *env);

/* Whether every name N set still holds the node's value in GETENV/ARG. */
bool dt_node_env_intact(const struct dt_node_env *n, dt_getenv_fn getenv,
			void *arg);

/*
 * The inputs the node's part was made from: each name read through
 * dt_env_reads_getenv and what it held then (DT_ENV_UNSET: absent), so
 * that a task can tell that its own environment would give the same.
 */
struct dt_env_reads {
	dt_getenv_fn getenv;	/* the environment read */
	void *arg;
	struct dt_env seen;
	bool failed;		/* out of memory: nothing can be told */
};

/* dt_getenv_fn over a struct dt_env_reads: the value, recorded. */
const char *dt_env_reads_getenv(const char *name, void *reads);

/* Whether GETENV/ARG holds what R saw, name by name. */
bool dt_env_reads_same(const struct dt_env_reads *r, dt_getenv_fn getenv,
		       void *arg);

/* Whether E changes the environment GETENV/ARG reads: a SET of another
 * value, an UNSET of a name that is there; a KEPT never does. */
bool dt_env_entry_changes(const struct dt_env_entry *e, dt_getenv_fn getenv,
			  void *arg);

void dt_node_env_free(struct dt_node_env *n);

#endif
