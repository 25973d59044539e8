/*
 * The environment torchrun would give a worker, computed from a layout.
 *
 * Pure: the caller passes a getenv function for the task's current
 * environment and applies the result (spank_setenv in the plugin, an
 * exec'd environment or shell code in the helper).
 */
#ifndef DIST_TRAIN_TRAIN_ENV_H
#define DIST_TRAIN_TRAIN_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "envp.h"
#include "layout.h"
#include "port.h"

enum dt_env_action {
	DT_ENV_SET,		/* set or overwrite */
	DT_ENV_KEPT,		/* the user's value stays */
	DT_ENV_UNSET,		/* remove from the environment */
};

struct dt_env_entry {
	char *name;
	char *value;		/* the value set or kept; NULL for UNSET */
	enum dt_env_action action;
};

struct dt_env {
	struct dt_env_entry *entries;
	size_t count;
	size_t cap;
};

struct dt_env_request {
	const struct dt_layout *layout;
	uint32_t rank;			/* RANK */
	uint32_t local_rank;		/* LOCAL_RANK */
	const struct dt_step_ports *ports;
	uint32_t cpus_per_task;		/* 0 when unknown */
	const char *step_id;		/* "JOBID.STEPID" */
	dt_getenv_fn getenv;		/* the task's environment */
	void *getenv_arg;
	/* Set by the helper's bootstrap; NULL/false otherwise. */
	const char *nccl_comm_id;	/* "ADDRESS:PORT" of rank 0 */
	const char *socket_ifname;	/* the interface towards rank 0 */
	bool pmix_bootstrap;		/* the ranks met through PMIx */
};

/*
 * Fill OUT (initialised to zero by the caller). Returns 0, or -1 with one
 * sentence in ERR (a MASTER_PORT in the user's environment that is no
 * port, no memory).
 */
int dt_train_env(const struct dt_env_request *req, struct dt_env *out,
		 char *err, size_t errlen);

void dt_env_free(struct dt_env *env);

/* Whether dt_train_env gives NAME a value of each task's own (RANK, ...)
 * rather than one that all the tasks of a node share. */
bool dt_train_env_per_task(const char *name);

/* Into OUT, those of dt_train_env's entries that are each task's own:
 * RANK, LOCAL_RANK, ROLE_RANK. 0, or -1: no memory. */
int dt_train_env_task(uint32_t rank, uint32_t local_rank, struct dt_env *out);

/* A torchrun agent, one per node, configured through torchrun's PET_*. */
struct dt_torchrun_request {
	const struct dt_layout *layout;
	const struct dt_step_ports *ports;
	unsigned nproc;			/* workers per node */
	unsigned min_nodes;		/* elastic; max_nodes 0: fixed size */
	unsigned max_nodes;
	unsigned restarts;		/* PET_MAX_RESTARTS */
	unsigned timeout;		/* rendezvous join timeout, seconds */
	const char *step_id;		/* "JOBID.STEPID": the rendezvous id */
	const char *socket_ifname;	/* towards the first node, or NULL */
	dt_getenv_fn getenv;		/* the task's environment */
	void *getenv_arg;
};

/*
 * PET_NNODES, PET_NPROC_PER_NODE, PET_RDZV_BACKEND (c10d),
 * PET_RDZV_ENDPOINT (the first node), PET_RDZV_ID, PET_MAX_RESTARTS,
 * PET_RDZV_CONF (join_timeout), NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME
 * (as dt_train_env), each unless the user set it, and the DIST_TRAIN_*
 * facts. RANK, WORLD_SIZE, MASTER_* are torchrun's to set
 * for its workers. Returns 0, or -1 with ERR.
 */
int dt_torchrun_env(const struct dt_torchrun_request *req, struct dt_env *out,
		    char *err, size_t errlen);

/*
 * The user's own value of NAME in a task's environment, or NULL: a value
 * left by an earlier dist-train step (DIST_TRAIN_STEP other than STEP_ID,
 * the parent of a nested srun) is not the user's.
 */
const char *dt_user_env(dt_getenv_fn getenv, void *arg, const char *step_id,
			const char *name);

/* Value of NAME in ENV, NULL if absent or unset. */
const char *dt_env_get(const struct dt_env *env, const char *name);

/*
 * "NAME=VALUE NAME=VALUE(kept) -NAME" on one line, for verbose mode.
 * Returns the length it needed, like snprintf.
 */
size_t dt_env_describe(const struct dt_env *env, char *buf, size_t len);

/* Append one entry (NAME and VALUE are copied). 0, or -1: no memory. */
int dt_env_add(struct dt_env *env, const char *name, const char *value,
	       enum dt_env_action action);

/* Replace the entry for NAME, or append one. 0, or -1: no memory. */
int dt_env_put(struct dt_env *env, const char *name, const char *value,
	       enum dt_env_action action);

/* Take entry I out of ENV, where there is one. */
void dt_env_remove(struct dt_env *env, size_t i);

/*
 * Set NAME to ITEM, followed by ":" and REST where REST is not empty (a
 * search path: PYTHONPATH, LD_PRELOAD). 0, or -1: no memory.
 */
int dt_env_prepend(struct dt_env *env, const char *name, const char *item,
		   const char *rest);

/* The entry for NAME, or NULL. */
const struct dt_env_entry *dt_env_find(const struct dt_env *env,
				       const char *name);

/*
 * ENV as records for another process, each ending in '\0': "S NAME=VALUE"
 * (set), "K NAME=VALUE" (kept), "U NAME" (unset). Returns the length
 * needed, like snprintf (without a final terminator).
 */
size_t dt_env_serialize(const struct dt_env *env, char *buf, size_t len);

/*
 * Parse LEN bytes of records into OUT (zeroed by the caller). Names must
 * look like environment variable names. Returns 0, or -1 with ERR.
 */
int dt_env_deserialize(const char *buf, size_t len, struct dt_env *out,
		       char *err, size_t errlen);

#endif
