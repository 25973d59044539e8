/*
 * dist_train_worker.so, preloaded (LD_PRELOAD) into the processes of a
 * --dist-train=torchrun step by the plugin. torchrun starts its workers
 * itself, so this is where each worker gets its part of the node's plan:
 * in a process that torchrun started as a worker (TORCHELASTIC_RUN_ID and
 * LOCAL_RANK are set) and that is not bound yet, it sets the worker's
 * variables and binds it before the program's own code runs. Everywhere
 * else it does nothing. It exports no symbol.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/bind_apply.h"
#include "../common/binding.h"
#include "../common/topology.h"

static void warn(const char *what, const char *why)
{
	dprintf(STDERR_FILENO, "dist-train: warning: torchrun worker %s %s: "
		"%s\n", getenv("LOCAL_RANK"), what, why);
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
	const char *cpus, *numa;
	unsigned *list = NULL;
	char *entry, why[256];
	int n;

	/* DIST_TRAIN_BIND is set once a worker is bound: its children
	 * (a program it execs) keep the binding they inherit. */
	if (!plan || !rank || !getenv("TORCHELASTIC_RUN_ID") ||
	    getenv("DIST_TRAIN_BIND") || rank[0] < '0' || rank[0] > '9')
		return;
	entry = dt_worker_entry(plan, (unsigned)strtoul(rank, NULL, 10));
	if (!entry) {
		warn("is not in the node's plan", "more workers than planned");
		return;
	}
	apply_words(entry);
	free(entry);

	cpus = getenv("DIST_TRAIN_CPUS");
	if (cpus && (n = dt_intlist_parse(cpus, 1u << 20, &list)) > 0 &&
	    dt_bind_cpus(list, (unsigned)n, why, sizeof(why)) < 0)
		warn("is not bound to its CPUs", why);
	free(list);
	numa = getenv("DIST_TRAIN_NUMA");
	if (numa && !getenv("SLURM_MEM_BIND_TYPE") &&
	    dt_bind_memory(atoi(numa), why, sizeof(why)) < 0)
		warn("has its memory unbound", why);
}
