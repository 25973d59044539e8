/*
 * dist_train_worker.so, preloaded (LD_PRELOAD) by the plugin where a
 * process must bind itself, before the program's own code runs:
 *  - the workers of a --dist-train=torchrun step: torchrun starts them
 *    itself, so each takes its part of the node's plan, in a process that
 *    torchrun started as a worker (TORCHELASTIC_RUN_ID and LOCAL_RANK
 *    set) and that is not bound yet;
 *  - the program of a task in a container (srun --container): runc 1.2.7
 *    and later start it with the CPU affinity it inherited reset to every
 *    CPU, so it binds itself again to what the plugin chose for the task
 *    (DIST_TRAIN_REBIND set by plugin/task.c).
 * Everywhere else it does nothing. In rank 0's program it also guards
 * the store (helper/store_guard.c).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/bind_apply.h"
#include "../common/binding.h"
#include "../common/topology.h"

static void warn(const char *who, const char *what, const char *why)
{
	const char *node = getenv("SLURMD_NODENAME");

	/* srun 26.05 does not say which node a task's line comes from. */
	dprintf(STDERR_FILENO, "dist-train: warning: on %s: %s (local rank "
		"%s) %s: %s\n", node ? node : "?", who, getenv("LOCAL_RANK"),
		what, why);
}

/* DIST_TRAIN_CPUS and DIST_TRAIN_NUMA, as the plugin binds a task. */
static void bind_from_env(const char *who)
{
	const char *cpus = getenv("DIST_TRAIN_CPUS");
	const char *numa = getenv("DIST_TRAIN_NUMA");
	unsigned *list = NULL;
	char why[256];
	int n;

	if (cpus && (n = dt_intlist_parse(cpus, 1u << 20, &list)) > 0 &&
	    dt_bind_cpus(list, (unsigned)n, why, sizeof(why)) < 0)
		warn(who, "is not bound to its CPUs", why);
	free(list);
	if (numa && !getenv("SLURM_MEM_BIND_TYPE") &&
	    dt_bind_memory(atoi(numa), why, sizeof(why)) < 0)
		warn(who, "has its memory unbound", why);
}

static void apply_words(char *entry)
{
	char *save = NULL;

	for (char *w = strtok_r(entry, " ", &save); w;
	     w = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(w, '=');

		if (eq && eq != w) {
			*eq = '\0';
			setenv(w, eq + 1, 1);
		}
	}
}

__attribute__((constructor)) static void bind_worker(void)
{
	const char *plan = getenv("DIST_TRAIN_WORKER_PLAN");
	const char *rank = getenv("LOCAL_RANK");
	char *entry;

	/* Once: what the program starts keeps what it inherits. */
	if (getenv("DIST_TRAIN_REBIND")) {
		unsetenv("DIST_TRAIN_REBIND");
		bind_from_env("task in a container");
		return;
	}
	/* DIST_TRAIN_BIND is set once a worker is bound: its children
	 * (a program it execs) keep the binding they inherit. */
	if (!plan || !rank || !getenv("TORCHELASTIC_RUN_ID") ||
	    getenv("DIST_TRAIN_BIND") || rank[0] < '0' || rank[0] > '9')
		return;
	entry = dt_worker_entry(plan, (unsigned)strtoul(rank, NULL, 10));
	if (!entry) {
		warn("torchrun worker", "is not in the node's plan",
		     "more workers than planned: start no more than "
		     "--dist-train=nproc= workers per node");
		return;
	}
	apply_words(entry);
	free(entry);
	bind_from_env("torchrun worker");
}
