#include "config.h"

#include "bind_apply.h"
#include "nvml_mig.h"
#include "binding.h"
#include "error.h"
#include "settings.h"
#include "topology.h"
#include "train_env.h"

#include <errno.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int dt_bind_cpus(const unsigned *cpus, unsigned ncpus, char *err,
		 size_t errlen)
{
	unsigned max = 0;
	cpu_set_t *set;
	size_t size;
	int rc;

	for (unsigned i = 0; i < ncpus; i++)
		if (cpus[i] > max)
			max = cpus[i];
	set = CPU_ALLOC(max + 1);
	if (!set) {
		dt_errf(err, errlen, "out of memory");
		return -1;
	}
	size = CPU_ALLOC_SIZE(max + 1);
	CPU_ZERO_S(size, set);
	for (unsigned i = 0; i < ncpus; i++)
		CPU_SET_S(cpus[i], size, set);
	rc = sched_setaffinity(0, size, set);
	if (rc < 0)
		dt_errf(err, errlen, "cannot bind to CPUs (%s): bind with "
			"Slurm's --cpu-bind, or use --dist-train=bind=off",
			strerror(errno));
	CPU_FREE(set);
	return rc;
}

int dt_bind_memory(int numa, char *err, size_t errlen)
{
	unsigned long mask[16];	/* NUMA nodes 0-1023 */
	const unsigned bits = sizeof(mask) * 8;

	if (numa < 0 || (unsigned)numa >= bits) {
		dt_errf(err, errlen, "NUMA node %d is past the 1024 that can "
			"be bound: bind with Slurm's --mem-bind, or use "
			"--dist-train=bind=off", numa);
		return -1;
	}
	memset(mask, 0, sizeof(mask));
	mask[numa / (8 * sizeof(long))] |= 1UL << (numa % (8 * sizeof(long)));
	/* The kernel reads maxnode - 1 bits. */
	if (syscall(SYS_set_mempolicy, MPOL_BIND, mask, bits + 1) < 0) {
		dt_errf(err, errlen, "cannot bind memory to NUMA node %d (%s): "
			"bind with Slurm's --mem-bind, or use "
			"--dist-train=bind=off", numa, strerror(errno));
		return -1;
	}
	return 0;
}

int dt_current_cpus(char *buf, size_t len)
{
	unsigned n = 0, *cpus;
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return -1;
	cpus = malloc(CPU_SETSIZE * sizeof(*cpus));
	if (!cpus)
		return -1;
	for (unsigned c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	dt_cpulist_format(cpus, n, buf, len);
	free(cpus);
	return 0;
}

void dt_note(char *notes, size_t len, const char *what)
{
	size_t used = strlen(notes);

	snprintf(notes + used, len - used, "%s%s", used ? "; " : "", what);
}

/* The plan's request for CFG's mode: Slurm's --gpu-bind chose the GPUs
 * where TRES_BIND names them, and the plan binds by NUMA node alone. */
static enum dt_bind_mode plan_mode(const struct dt_config *cfg,
				   const char *tres_bind)
{
	if (tres_bind && strstr(tres_bind, "gpu") && cfg->bind == DT_BIND_GPU)
		return DT_BIND_NUMA;
	return (enum dt_bind_mode)cfg->bind;
}

int dt_bind_node_plan(const struct dt_machine *machine,
		      const struct dt_config *cfg, dt_getenv_fn getenv,
		      void *arg, unsigned ntasks, struct dt_plan *plan)
{
	struct dt_plan_request req;
	char err[256];

	memset(&req, 0, sizeof(req));
	req.machine = machine;
	req.mode = plan_mode(cfg, getenv("SLURMD_TRES_BIND", arg));
	req.share_gpus = cfg->share_gpus;
	req.ntasks = ntasks;
	/* A GPU node's plan needs each task's own GPUs (and, for MIG, NVML
	 * as the user): every task makes its own. */
	if (!machine || cfg->bind == DT_BIND_OFF || ntasks == 0 ||
	    (req.mode == DT_BIND_GPU && machine->ngpus))
		return 1;
	/* A failure is each task's to say, as without this plan. */
	return dt_plan_compute(&req, plan, err, sizeof(err)) < 0 ? 1 : 0;
}

/* Whether the task bound its CPUs: a --cpu-bind of the user's wins. */
static bool binds_cpus(const char *cpu_bind)
{
	return !(cpu_bind && *cpu_bind);
}

/* What a task bound by nothing, by its settings, gets. */
static int put_bind_off(struct dt_env *env)
{
	return dt_env_put(env, "DIST_TRAIN_BIND",
			  dt_bind_mode_name(DT_BIND_OFF), DT_ENV_SET);
}

/* Whether A and B are the same entry. */
static bool same_entry(const struct dt_env_entry *a,
		       const struct dt_env_entry *b)
{
	return a->action == b->action && !strcmp(a->name, b->name) &&
	       (!a->value ? !b->value : b->value && !strcmp(a->value, b->value));
}

int dt_bind_node_env(const struct dt_machine *machine,
		     const struct dt_config *cfg, const struct dt_plan *plan,
		     dt_getenv_fn getenv, void *arg, struct dt_node_binding *out)
{
	const char *cpu_bind = getenv("SLURM_CPU_BIND_TYPE", arg);
	const char *mem_bind = getenv("SLURM_MEM_BIND_TYPE", arg);
	struct dt_bind_env_request ereq;
	char err[256];

	memset(out, 0, sizeof(*out));
	out->bind_cpus = binds_cpus(cpu_bind);
	out->bind_memory = !(mem_bind && *mem_bind);
	if (cfg->bind == DT_BIND_OFF)
		return put_bind_off(&out->common);
	if (!plan)
		return 0;
	out->each = calloc(plan->ntasks ? plan->ntasks : 1,
			   sizeof(*out->each));
	if (!out->each)
		return -1;
	out->ntasks = plan->ntasks;
	memset(&ereq, 0, sizeof(ereq));
	ereq.machine = machine;
	ereq.plan = plan;
	ereq.own_gpu_only = cfg->own_gpu_only;
	ereq.getenv = getenv;
	ereq.getenv_arg = arg;
	for (unsigned i = 0; i < plan->ntasks; i++) {
		ereq.local_rank = i;
		ereq.cpus_bound = out->bind_cpus && plan->tasks[i].ncpus > 0;
		if (dt_binding_env(&ereq, &out->each[i], err,
				   sizeof(err)) < 0)
			goto fail;
	}
	/* What every task gets alike is the node's; the rest each task's. */
	for (size_t k = 0; k < out->each[0].count; k++) {
		const struct dt_env_entry *c = &out->each[0].entries[k];
		bool alike = true;

		for (unsigned i = 1; i < plan->ntasks && alike; i++) {
			const struct dt_env_entry *t =
				dt_env_find(&out->each[i], c->name);

			alike = t && same_entry(t, c);
		}
		if (alike && dt_env_add(&out->common, c->name, c->value,
					c->action) < 0)
			goto fail;
	}
	for (unsigned i = 0; i < plan->ntasks; i++)
		for (size_t k = 0; k < out->each[i].count;) {
			const struct dt_env_entry *c =
				dt_env_find(&out->common,
					    out->each[i].entries[k].name);

			if (c && same_entry(c, &out->each[i].entries[k]))
				dt_env_remove(&out->each[i], k);
			else
				k++;
		}
	return 0;
fail:
	dt_node_binding_free(out);
	return -1;
}

void dt_node_binding_free(struct dt_node_binding *nb)
{
	for (unsigned i = 0; nb->each && i < nb->ntasks; i++)
		dt_env_free(&nb->each[i]);
	free(nb->each);
	dt_env_free(&nb->common);
	memset(nb, 0, sizeof(*nb));
}

int dt_bind_foreseen(const struct dt_plan *plan,
		     const struct dt_node_binding *nb, unsigned local_rank,
		     struct dt_env *env)
{
	const struct dt_task_plan *t;
	char why[256];

	if (!nb->each)
		return 0;
	if (local_rank >= nb->ntasks || local_rank >= plan->ntasks)
		return -1;
	t = &plan->tasks[local_rank];
	if (nb->bind_cpus && t->ncpus &&
	    dt_bind_cpus(t->cpus, t->ncpus, why, sizeof(why)) < 0)
		return -1;
	/* As dt_bind_task: a memory policy that fails is a note only. */
	if (nb->bind_memory && t->numa >= 0)
		(void)dt_bind_memory(t->numa, why, sizeof(why));
	for (size_t k = 0; k < nb->each[local_rank].count; k++) {
		const struct dt_env_entry *e = &nb->each[local_rank].entries[k];

		if (dt_env_put(env, e->name, e->value, e->action) < 0)
			return -1;
	}
	return 0;
}

int dt_bind_task(const struct dt_machine *machine, const char *no_machine,
		 const struct dt_config *cfg, const struct dt_plan *node_plan,
		 dt_getenv_fn getenv, void *arg, struct dt_env *env,
		 char *notes, size_t notes_len, char *err, size_t errlen)
{
	const char *cpu_bind = getenv("SLURM_CPU_BIND_TYPE", arg);
	const char *mem_bind = getenv("SLURM_MEM_BIND_TYPE", arg);
	const char *tres_bind = getenv("SLURMD_TRES_BIND", arg);
	const char *lrank = dt_env_get(env, "LOCAL_RANK");
	const char *lsize = dt_env_get(env, "LOCAL_WORLD_SIZE");
	struct dt_plan_request req;
	struct dt_bind_env_request ereq;
	struct dt_plan plan = { 0 };
	const struct dt_plan *use = &plan;
	const struct dt_task_plan *t;
	unsigned *gpus = NULL;
	char why[256], text[300];
	int n, rc = -1;

	if (cfg->bind == DT_BIND_OFF)
		return put_bind_off(env);
	if (!machine) {
		dt_note(notes, notes_len, no_machine);
		return 0;
	}
	memset(&req, 0, sizeof(req));
	req.machine = machine;
	req.mode = plan_mode(cfg, tres_bind);
	req.share_gpus = cfg->share_gpus;
	req.ntasks = lsize ? (unsigned)strtoul(lsize, NULL, 10) : 0;
	if ((int)req.mode != cfg->bind)
		dt_note(notes, notes_len, "GPUs: yours (--gpu-bind)");
	if (req.mode == DT_BIND_GPU) {
		/* In the task, as its user: NVML may be asked which GPU
		 * each MIG instance is on. */
		n = dt_task_step_gpus(machine, getenv("SLURM_STEP_GPUS", arg),
				      getenv("SLURM_JOB_GPUS", arg),
				      getenv(dt_gpu_visible_name(machine), arg),
				      &gpus, err, errlen);
		if (n < 0)
			goto out;
		/* No GPU to place: the step's cannot be told (MIG, UUIDs:
		 * ERR says why), or Slurm's are none this node shows. */
		if (n == 0 && err[0]) {
			dt_note(notes, notes_len, err);
			err[0] = '\0';
		} else if (n == 0 && getenv("SLURM_STEP_GPUS", arg)) {
			dt_note(notes, notes_len, "GPUs: Slurm's are no NVIDIA "
				"or AMD GPUs here, bound by NUMA node");
		}
		req.gpus = gpus;
		req.ngpus = (unsigned)n;
	}
	/* The node's, made once for all its tasks, where it is theirs. */
	if (node_plan && node_plan->ntasks == req.ntasks &&
	    !(req.mode == DT_BIND_GPU && machine->ngpus))
		use = node_plan;
	else if (dt_plan_compute(&req, &plan, err, errlen) < 0)
		goto out;

	memset(&ereq, 0, sizeof(ereq));
	ereq.machine = machine;
	ereq.plan = use;
	ereq.local_rank = lrank ? (unsigned)strtoul(lrank, NULL, 10) : 0;
	ereq.own_gpu_only = cfg->own_gpu_only;
	ereq.getenv = getenv;
	ereq.getenv_arg = arg;
	if (ereq.local_rank >= use->ntasks) {
		snprintf(err, errlen, "local rank %u is past the %u tasks of "
			 "this node's binding plan: use --dist-train=bind=off, "
			 "and report it to your administrator",
			 ereq.local_rank, use->ntasks);
		goto out;
	}
	t = &use->tasks[ereq.local_rank];
	if (!binds_cpus(cpu_bind)) {
		snprintf(text, sizeof(text), "CPUs: yours (--cpu-bind=%s)",
			 cpu_bind);
		dt_note(notes, notes_len, text);
	} else if (t->ncpus) {
		ereq.cpus_bound = dt_bind_cpus(t->cpus, t->ncpus, why,
					       sizeof(why)) == 0;
		if (!ereq.cpus_bound)
			dt_note(notes, notes_len, why);
		else if (t->shares_cores)
			dt_note(notes, notes_len, "more tasks than cores: CPUs "
			     "shared");
	}
	if (mem_bind && *mem_bind) {
		snprintf(text, sizeof(text), "memory: yours (--mem-bind=%s)",
			 mem_bind);
		dt_note(notes, notes_len, text);
	} else if (t->numa >= 0 &&
		   dt_bind_memory(t->numa, why, sizeof(why)) < 0) {
		dt_note(notes, notes_len, why);
	}
	if (dt_binding_env(&ereq, env, err, errlen) < 0)
		goto out;
	/* Which vendor's GPU, and the variable that narrows it. */
	if (t->gpu >= 0) {
		snprintf(text, sizeof(text), "GPU: %s %s (%s)",
			 dt_gpu_vendor_name(machine),
			 machine->gpus[t->gpu].busid,
			 dt_gpu_visible_name(machine));
		dt_note(notes, notes_len, text);
	}
	rc = 0;
out:
	free(gpus);
	dt_plan_free(&plan);
	return rc;
}
