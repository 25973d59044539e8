/*
 * Which GPU holds a MIG device, from NVIDIA's management library (NVML).
 * The driver's files say which GPUs hold MIG instances, not which
 * instance is on which (common/topology.c); only NVML does. It is opened
 * in a task, as the job's user, just before its program, and only for a
 * step whose instances lie on several GPUs: never in slurmstepd, which
 * runs as root. The library is opened at run time: a node without it
 * binds such a step by NUMA node, as before, and says why.
 */
#ifndef DIST_TRAIN_NVML_MIG_H
#define DIST_TRAIN_NVML_MIG_H

#include <stdbool.h>
#include <stddef.h>

#define DT_NVML_LIBRARY "libnvidia-ml.so.1"

struct dt_nvml {
	const char *library;	/* NULL: DT_NVML_LIBRARY */
	/* Filled on first use. */
	void *lib;
	bool tried;
	char why[128];		/* why it cannot be used, once tried */
	int (*shutdown)(void);
	int (*by_uuid)(const char *uuid, void **device);
	int (*parent)(void *mig, void **device);
	int (*minor)(void *device, unsigned *minor);
	const char *(*describe)(int rc);
};

/*
 * A dt_mig_parent_fn (common/topology.h) over ARG, a struct dt_nvml that
 * is zeroed but for its library: the parent GPU's device minor of UUID.
 */
int dt_nvml_mig_parent(void *arg, const char *uuid, int *minor, char *why,
		       size_t whylen);

/* NVML shut down and let go, if it was opened. */
void dt_nvml_close(struct dt_nvml *nvml);

struct dt_machine;

/*
 * dt_step_gpus_placing_mig (common/topology.h) with NVML as the resolver,
 * opened only where it is asked and closed before this returns: for the
 * task's own process, as its user, never slurmstepd.
 */
int dt_task_step_gpus(const struct dt_machine *m, const char *step_gpus,
		      const char *job_gpus, const char *visible,
		      unsigned **out, char *err, size_t errlen);

#endif
