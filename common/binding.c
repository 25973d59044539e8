#include "config.h"

#include "binding.h"
#include "error.h"
#include "gpu_vendor.h"
#include "train_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *dt_bind_mode_name(enum dt_bind_mode mode)
{
	switch (mode) {
	case DT_BIND_GPU:
		return "gpu";
	case DT_BIND_NUMA:
		return "numa";
	default:
		return "off";
	}
}

void dt_plan_free(struct dt_plan *plan)
{
	if (!plan)
		return;
	for (unsigned i = 0; plan->tasks && i < plan->ntasks; i++)
		free(plan->tasks[i].cpus);
	free(plan->tasks);
	memset(plan, 0, sizeof(*plan));
}

static bool has_allowed_core(const struct dt_machine *m, int numa)
{
	for (unsigned i = 0; i < m->nnumas; i++)
		if (m->numas[i] == numa)
			return true;
	return false;
}

/* Give task T the cores CORES[0..N) of M. */
static int give_cores(const struct dt_machine *m, struct dt_task_plan *t,
		      const unsigned *cores, unsigned n)
{
	unsigned npus = 0, k = 0;

	for (unsigned i = 0; i < n; i++)
		npus += m->cores[cores[i]].npus;
	t->cpus = malloc((npus ? npus : 1) * sizeof(*t->cpus));
	if (!t->cpus)
		return -1;
	for (unsigned i = 0; i < n; i++) {
		const struct dt_core *c = &m->cores[cores[i]];

		for (unsigned p = 0; p < c->npus; p++)
			t->cpus[k++] = m->pus[c->first_pu + p];
	}
	t->ncpus = npus;
	t->ncores = n;
	return 0;
}

/*
 * Split the cores of NUMA node NUMA (all cores for -1) between the tasks
 * bound to it: contiguous runs of whole cores, as even as can be; with
 * fewer cores than tasks, round robin, and they overlap.
 */
static int split_cores(const struct dt_machine *m, struct dt_plan *plan,
		       int numa, unsigned *cores, unsigned *members)
{
	unsigned nc = 0, nt = 0, next = 0;

	for (unsigned c = 0; c < m->ncores; c++)
		if (numa < 0 || m->cores[c].numa == numa)
			cores[nc++] = c;
	for (unsigned r = 0; r < plan->ntasks; r++)
		if (plan->tasks[r].numa == numa)
			members[nt++] = r;
	for (unsigned j = 0; j < nt; j++) {
		struct dt_task_plan *t = &plan->tasks[members[j]];
		unsigned take;

		if (nc >= nt) {
			take = nc / nt + (j < nc % nt ? 1 : 0);
			if (give_cores(m, t, cores + next, take) < 0)
				return -1;
			next += take;
		} else {
			if (give_cores(m, t, cores + j % nc, 1) < 0)
				return -1;
			t->shares_cores = true;
		}
	}
	return 0;
}

/*
 * The NIC for GPU G (or, with G < 0, for NUMA node NUMA): fewest PCI hops
 * (or the same NUMA node), RDMA before Ethernet, then the least used.
 */
static int pick_nic(const struct dt_machine *m, int g, int numa,
		    const unsigned *used)
{
	int best = -1;
	unsigned best_dist = 0;

	for (unsigned n = 0; n < m->nnics; n++) {
		unsigned dist;

		if (g >= 0)
			dist = m->gpu_nic_hops[(unsigned)g * m->nnics + n];
		else
			dist = (numa >= 0 && m->nics[n].numa == numa) ? 0 : 1;
		dist = dist * 2 + (m->nics[n].kind == DT_NIC_RDMA ? 0 : 1);
		if (best < 0 || dist < best_dist ||
		    (dist == best_dist && used[n] < used[best])) {
			best = (int)n;
			best_dist = dist;
		}
	}
	return best;
}

static void choose_nics(const struct dt_machine *m, struct dt_plan *plan,
			unsigned *used)
{
	memset(used, 0, (m->nnics ? m->nnics : 1) * sizeof(*used));
	for (unsigned r = 0; r < plan->ntasks; r++) {
		struct dt_task_plan *t = &plan->tasks[r];
		unsigned prev;

		/* Tasks sharing a GPU or NUMA node share its NIC. */
		for (prev = 0; prev < r; prev++) {
			const struct dt_task_plan *p = &plan->tasks[prev];

			if (t->gpu >= 0 ? p->gpu == t->gpu :
			    p->gpu < 0 && p->numa == t->numa)
				break;
		}
		if (prev < r) {
			t->nic = plan->tasks[prev].nic;
			continue;
		}
		t->nic = pick_nic(m, t->gpu, t->numa, used);
		if (t->nic >= 0)
			used[t->nic]++;
	}
}

int dt_plan_compute(const struct dt_plan_request *req, struct dt_plan *out,
		    char *err, size_t errlen)
{
	const struct dt_machine *m = req->machine;
	unsigned *cores = NULL, *members = NULL, *used = NULL;
	bool unplaced = false;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	out->ntasks = req->ntasks;
	out->mode = req->mode;
	if (req->mode == DT_BIND_GPU && req->ngpus == 0)
		out->mode = DT_BIND_NUMA;	/* a node without GPUs */
	out->tasks = calloc(req->ntasks ? req->ntasks : 1,
			    sizeof(*out->tasks));
	if (!out->tasks) {
		dt_errf(err, errlen, "out of memory");
		return -1;
	}
	for (unsigned r = 0; r < req->ntasks; r++) {
		out->tasks[r].gpu = out->tasks[r].gpu_ordinal = -1;
		out->tasks[r].numa = out->tasks[r].nic = -1;
	}
	if (out->mode == DT_BIND_OFF || req->ntasks == 0)
		return 0;
	if (m->ncores == 0) {
		dt_errf(err, errlen, "no core of this node is allowed to the "
			"step: ask for cores with --cpus-per-task, or use "
			"--dist-train=bind=off");
		goto out;
	}
	if (out->mode == DT_BIND_GPU && req->ntasks > req->ngpus &&
	    !req->share_gpus) {
		dt_errf(err, errlen, "%u tasks on this node but %u GPU%s for "
			"the step: run at most %u task%s per node "
			"(--ntasks-per-node=%u), or let tasks share GPUs with "
			"--dist-train=share-gpus", req->ntasks, req->ngpus,
			req->ngpus == 1 ? "" : "s", req->ngpus,
			req->ngpus == 1 ? "" : "s", req->ngpus);
		goto out;
	}

	/* Each task's NUMA node. */
	for (unsigned r = 0; r < req->ntasks; r++) {
		struct dt_task_plan *t = &out->tasks[r];

		if (out->mode == DT_BIND_GPU) {
			t->gpu_ordinal = (int)(r % req->ngpus);
			t->gpu = (int)req->gpus[t->gpu_ordinal];
			t->numa = m->gpus[t->gpu].numa;
		} else if (m->nnumas) {
			t->numa = m->numas[(unsigned long)r * m->nnumas /
					   req->ntasks];
		}
		if (t->numa < 0 || !has_allowed_core(m, t->numa))
			unplaced = true;
	}
	/* A GPU without NUMA locality: the node is one domain for all. */
	if (unplaced)
		for (unsigned r = 0; r < req->ntasks; r++)
			out->tasks[r].numa = -1;

	cores = malloc(m->ncores * sizeof(*cores));
	members = malloc(req->ntasks * sizeof(*members));
	used = malloc((m->nnics ? m->nnics : 1) * sizeof(*used));
	if (!cores || !members || !used) {
		dt_errf(err, errlen, "out of memory");
		goto out;
	}
	if (unplaced) {
		if (split_cores(m, out, -1, cores, members) < 0)
			goto nomem;
	} else {
		for (unsigned i = 0; i < m->nnumas; i++)
			if (split_cores(m, out, m->numas[i], cores, members) < 0)
				goto nomem;
	}
	choose_nics(m, out, used);
	rc = 0;
	goto out;
nomem:
	dt_errf(err, errlen, "out of memory");
out:
	free(cores);
	free(members);
	free(used);
	if (rc < 0)
		dt_plan_free(out);
	return rc;
}

static int put_u(struct dt_env *env, const char *name, unsigned v)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%u", v);
	return dt_env_put(env, name, buf, DT_ENV_SET);
}

/* What the vendor's variable (CUDA_VISIBLE_DEVICES) must say so that
 * only GPU T->gpu is seen. */
static int own_gpu_entry(const struct dt_bind_env_request *req,
			 const struct dt_task_plan *t, char *buf, size_t len)
{
	const char *visible = req->getenv(dt_gpu_visible_name(req->machine),
					  req->getenv_arg), *end;
	unsigned *list = NULL;
	int n;

	if (!visible || !*visible) {
		/* All of the node's GPUs, numbered in the machine's order. */
		snprintf(buf, len, "%d", t->gpu);
		return 0;
	}
	/* Slurm's list, in the order of the step's GPUs: its entry. */
	n = dt_intlist_parse(visible, 1u << 20, &list);
	if (n >= 0) {
		int rc = n > t->gpu_ordinal ? 0 : -1;

		if (!rc)
			snprintf(buf, len, "%u", list[t->gpu_ordinal]);
		free(list);
		return rc;
	}
	/* UUIDs and MIG devices, copied. */
	for (int i = 0; i < t->gpu_ordinal && visible; i++)
		if ((visible = strchr(visible, ',')))
			visible++;
	if (!visible || !*visible || *visible == ',')
		return -1;
	end = strchr(visible, ',');
	snprintf(buf, len, "%.*s",
		 (int)(end ? (size_t)(end - visible) : strlen(visible)),
		 visible);
	return 0;
}

int dt_binding_env(const struct dt_bind_env_request *req, struct dt_env *env,
		   char *err, size_t errlen)
{
	const struct dt_machine *m = req->machine;
	const struct dt_task_plan *t;
	char buf[4096];
	int rc = 0;

	if (req->local_rank >= req->plan->ntasks) {
		dt_errf(err, errlen, "local rank %u is not in the node's plan "
			"of %u tasks: use --dist-train=bind=off, and report it "
			"to your administrator", req->local_rank,
			req->plan->ntasks);
		return -1;
	}
	t = &req->plan->tasks[req->local_rank];
	rc |= dt_env_put(env, "DIST_TRAIN_BIND",
			 dt_bind_mode_name(req->plan->mode), DT_ENV_SET);
	if (req->plan->mode == DT_BIND_OFF)
		return rc ? -1 : 0;

	if (t->gpu >= 0) {
		const struct dt_gpu_vendor *v = dt_machine_gpu_vendor(m);

		if (!v)		/* no vendor in range: NVIDIA, as before vendors */
			v = &dt_gpu_vendors[DT_GPU_NVIDIA];

		/* The runtime's ordinals then follow the plan's order. */
		if (v->order_name)
			rc |= dt_env_put(env, v->order_name, v->order_value,
					 DT_ENV_SET);
		rc |= dt_env_put(env, "DIST_TRAIN_GPU", m->gpus[t->gpu].busid,
				 DT_ENV_SET);
		if (req->own_gpu_only) {
			if (own_gpu_entry(req, t, buf, sizeof(buf)) < 0) {
				dt_errf(err, errlen, "%s does not list the "
					"step's GPU %d: unset it, or use "
					"--dist-train=visible-gpus=all",
					v->visible, t->gpu_ordinal);
				return -1;
			}
			rc |= dt_env_put(env, v->visible, buf, DT_ENV_SET);
			/* What the runtime would narrow again (HIP's own
			 * variables on AMD) goes: the task sees its GPU. */
			for (unsigned i = 0; i < 3 && v->refilter[i]; i++)
				rc |= dt_env_put(env, v->refilter[i], NULL,
						 DT_ENV_UNSET);
			rc |= put_u(env, "DIST_TRAIN_GPU_ORDINAL", 0);
		} else {
			rc |= put_u(env, "DIST_TRAIN_GPU_ORDINAL",
				    (unsigned)t->gpu_ordinal);
		}
	}
	if (t->numa >= 0)
		rc |= put_u(env, "DIST_TRAIN_NUMA", (unsigned)t->numa);
	if (req->cpus_bound && t->ncpus) {
		const struct dt_env_entry *omp = dt_env_find(env,
							     "OMP_NUM_THREADS");
		const char *user_omp = req->getenv("OMP_NUM_THREADS",
						   req->getenv_arg);

		dt_cpulist_format(t->cpus, t->ncpus, buf, sizeof(buf));
		rc |= dt_env_put(env, "DIST_TRAIN_CPUS", buf, DT_ENV_SET);
		/* One thread per core of its own, unless the user chose. */
		if (!(omp && omp->action == DT_ENV_KEPT) && !(user_omp &&
							      *user_omp))
			rc |= put_u(env, "OMP_NUM_THREADS", t->ncores);
	}
	if (t->nic >= 0) {
		const struct dt_nic *nic = &m->nics[t->nic];
		const char *ucx = req->getenv("UCX_NET_DEVICES",
					      req->getenv_arg);

		rc |= dt_env_put(env, "DIST_TRAIN_NIC", nic->name, DT_ENV_SET);
		if (nic->netdev[0])
			rc |= dt_env_put(env, "DIST_TRAIN_NIC_NETDEV",
					 nic->netdev, DT_ENV_SET);
		/* UCX has no GPU-aware choice of its own; NCCL does. */
		if (nic->kind == DT_NIC_RDMA && !(ucx && *ucx)) {
			snprintf(buf, sizeof(buf), "%s:%d", nic->name,
				 nic->port);
			rc |= dt_env_put(env, "UCX_NET_DEVICES", buf,
					 DT_ENV_SET);
		}
	}
	if (rc) {
		dt_errf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

char *dt_worker_plan(const struct dt_bind_env_request *req, char *err,
		     size_t errlen)
{
	struct dt_bind_env_request one = *req;
	size_t len = 0, cap = 1024;
	char *out = malloc(cap);

	if (!out) {
		dt_errf(err, errlen, "out of memory");
		return NULL;
	}
	out[0] = '\0';
	for (unsigned r = 0; r < req->plan->ntasks; r++) {
		struct dt_env env = { 0 };

		one.local_rank = r;
		if (dt_binding_env(&one, &env, err, errlen) < 0)
			goto fail;
		for (size_t i = 0; i < env.count; i++) {
			const struct dt_env_entry *e = &env.entries[i];
			size_t need = strlen(e->name) + strlen(e->value) + 3;

			/* Blanks and ';' separate: no value may hold one. */
			if (e->action != DT_ENV_SET || strpbrk(e->value, " ;"))
				continue;
			if (len + need >= cap) {
				char *bigger;

				cap = (len + need) * 2;
				bigger = realloc(out, cap);
				if (!bigger) {
					dt_env_free(&env);
					dt_errf(err, errlen, "out of memory");
					goto fail;
				}
				out = bigger;
			}
			len += (size_t)sprintf(out + len, "%s%s=%s",
					       i ? " " : (r ? ";" : ""),
					       e->name, e->value);
		}
		dt_env_free(&env);
	}
	return out;
fail:
	free(out);
	return NULL;
}

char *dt_worker_entry(const char *plan, unsigned rank)
{
	const char *start = plan, *end;

	for (unsigned r = 0; r < rank; r++) {
		start = strchr(start, ';');
		if (!start)
			return NULL;
		start++;
	}
	end = strchr(start, ';');
	return end ? strndup(start, (size_t)(end - start)) : strdup(start);
}
