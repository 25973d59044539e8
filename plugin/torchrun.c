/*
 * --dist-train=torchrun: each task is a torchrun agent, one per node,
 * configured through torchrun's PET_* variables; torchrun gives its
 * workers their ranks. The agent stays unbound: its workers are bound by
 * dist_train_worker.so, preloaded into them, from the node's plan for
 * PET_NPROC_PER_NODE workers carried in DIST_TRAIN_WORKER_PLAN.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin.h"
#include "../common/bind_apply.h"
#include "../common/nvml_mig.h"
#include "../common/binding.h"
#include "../common/envp.h"
#include "../common/train_env.h"

/*
 * Workers per node: nproc=, else one per GPU, else --cpus-per-task. The
 * step's GPUs (dt_step_gpus) go to *GPUS, the caller's to free.
 */
static int workers_per_node(const struct plugin_state *st, char **envp,
			    unsigned **gpus, unsigned *ngpus, char *err,
			    size_t errlen)
{
	int n = 0;

	*gpus = NULL;
	*ngpus = 0;
	if (st->have_machine) {
		/* In the agent's task, as its user: NVML may say which GPU
		 * each MIG instance is on (common/nvml_mig.h). */
		n = dt_task_step_gpus(&st->machine,
			dt_envp_get(envp, "SLURM_STEP_GPUS"),
			dt_envp_get(envp, "SLURM_JOB_GPUS"),
			dt_envp_get(envp, dt_gpu_visible_name(&st->machine)),
			gpus, err, errlen);
		if (n < 0)
			return -1;
		*ngpus = (unsigned)n;
	}
	if (st->step.nproc)
		return (int)st->step.nproc;
	if (n > 0)
		return n;
	return st->cpus_per_task > 1 ? (int)st->cpus_per_task : 1;
}

/* DIST_TRAIN_WORKER_PLAN and LD_PRELOAD for the workers' binding. */
static int plan_workers(const struct plugin_state *st, char **envp,
			unsigned nproc, const unsigned *gpus, unsigned ngpus,
			struct dt_env *env, char *notes, size_t notes_len,
			char *err, size_t errlen)
{
	const char *cpu_bind = dt_envp_get(envp, "SLURM_CPU_BIND_TYPE");
	const char *preload = dt_envp_get(envp, "LD_PRELOAD");
	struct dt_plan_request req;
	struct dt_bind_env_request ereq;
	struct dt_plan plan = { 0 };
	char *words = NULL;
	int rc = -1;

	if (st->step.bind == DT_BIND_OFF)
		return 0;
	if (!st->have_machine) {
		dt_note(notes, notes_len, st->machine_error);
		return 0;
	}
	if (access(st->step.worker_lib, R_OK) < 0) {
		dt_note(notes, notes_len, "workers not bound: cannot read "
		     "the worker library (worker-lib= in plugstack.conf)");
		return 0;
	}
	memset(&req, 0, sizeof(req));
	req.machine = &st->machine;
	req.ntasks = nproc;
	req.mode = st->step.bind;
	req.share_gpus = st->step.share_gpus;
	req.gpus = gpus;
	req.ngpus = ngpus;
	if (dt_plan_compute(&req, &plan, err, errlen) < 0)
		goto out;
	memset(&ereq, 0, sizeof(ereq));
	ereq.machine = &st->machine;
	ereq.plan = &plan;
	ereq.cpus_bound = !(cpu_bind && *cpu_bind);
	ereq.own_gpu_only = st->step.own_gpu_only;
	ereq.getenv = dt_envp_getenv;
	ereq.getenv_arg = envp;
	words = dt_worker_plan(&ereq, err, errlen);
	if (!words)
		goto out;
	if (dt_env_put(env, "DIST_TRAIN_WORKER_PLAN", words, DT_ENV_SET) < 0 ||
	    dt_env_prepend(env, "LD_PRELOAD", st->step.worker_lib,
			   preload) < 0) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = 0;
out:
	free(words);
	dt_plan_free(&plan);
	return rc;
}

int torchrun_task_env(const struct plugin_state *st, char **envp,
		      const char *step_id, struct dt_env *env, char *notes,
		      size_t notes_len, char *err, size_t errlen)
{
	struct dt_torchrun_request req;
	unsigned *gpus = NULL, ngpus = 0;
	int nproc, rc = -1;

	if (!st->layout.master_addr) {
		dt_layout_rank0_error(st->distribution, err, errlen);
		return -1;
	}
	nproc = workers_per_node(st, envp, &gpus, &ngpus, err, errlen);
	if (nproc < 0)
		goto out;
	memset(&req, 0, sizeof(req));
	req.layout = &st->layout;
	req.ports = &st->ports;
	req.nproc = (unsigned)nproc;
	req.min_nodes = st->step.min_nodes;
	req.max_nodes = st->step.max_nodes;
	req.restarts = st->step.restarts;
	req.timeout = st->step.timeout;
	req.step_id = step_id;
	req.socket_ifname = st->socket_ifname[0] ? st->socket_ifname : NULL;
	req.getenv = dt_envp_getenv;
	req.getenv_arg = envp;
	if (dt_torchrun_env(&req, env, err, errlen) < 0 ||
	    plan_workers(st, envp, (unsigned)nproc, gpus, ngpus, env, notes,
			 notes_len, err, errlen) < 0)
		goto out;
	rc = 0;
out:
	free(gpus);
	return rc;
}
