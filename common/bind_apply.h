/*
 * The thin layer that applies a task's binding to the calling process:
 * CPU affinity and memory policy, both kept across execve, so the program
 * the task becomes runs bound.
 */
#ifndef DIST_TRAIN_BIND_APPLY_H
#define DIST_TRAIN_BIND_APPLY_H

#include <stddef.h>

#include "envp.h"

struct dt_config;
struct dt_env;
struct dt_machine;

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
 * Bind the calling task, the one whose environment ENV holds (LOCAL_RANK,
 * LOCAL_WORLD_SIZE), by the node's plan for CFG, and add what was decided
 * to ENV. GETENV reads the task's original environment: an explicit
 * --cpu-bind, --mem-bind or --gpu-bind given to Slurm wins over the plan.
 * Without MACHINE, nothing is bound and NO_MACHINE says why in NOTES,
 * where verbose remarks go. Returns 0, or -1 with ERR (more tasks than
 * GPUs, a GPU list naming GPUs the node lacks).
 */
int dt_bind_task(const struct dt_machine *machine, const char *no_machine,
		 const struct dt_config *cfg, dt_getenv_fn getenv, void *arg,
		 struct dt_env *env, char *notes, size_t notes_len, char *err,
		 size_t errlen);

#endif
