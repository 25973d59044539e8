/*
 * Each task, in its own process as the user, just before execve: set the
 * task's environment. A failure here ends this task before its program
 * runs, with a message on its stderr, which srun shows.
 */
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin.h"
#include "../common/bind_apply.h"
#include "../common/envp.h"
#include "../common/python_hook.h"
#include "../common/store_guard.h"
#include "../common/train_env.h"

/* One line on the task's stderr, which srun shows: PREFIX, then FMT. */
static void task_vline(const char *prefix, const char *fmt, va_list ap)
{
	char line[4096];

	if (vsnprintf(line, sizeof(line), fmt, ap) < 0)
		return;
	dprintf(STDERR_FILENO, DT_NAME ": %s%s\n", prefix, line);
}

static void task_message(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void task_message(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	task_vline("", fmt, ap);
	va_end(ap);
}

/* This node's name, for task_error: srun 26.05 does not say it. */
static char task_node[256];

/* One error on the task's stderr: "dist-train: error: on NODE: ...". */
static void task_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void task_error(const char *fmt, ...)
{
	char prefix[sizeof(task_node) + 16];
	va_list ap;

	snprintf(prefix, sizeof(prefix), "error: on %s: ",
		 task_node[0] ? task_node : "?");
	va_start(ap, fmt);
	task_vline(prefix, fmt, ap);
	va_end(ap);
}

/*
 * Each spank_setenv takes a zeroed 256 KiB buffer (Slurm's setenvf), past
 * glibc's mmap threshold: a fresh mapping and 64 page faults each time,
 * most of what the task's setup costs. This process becomes the program
 * at exec, whose malloc starts afresh: until then, such buffers come from
 * the heap, and the next call uses the last one's pages again.
 */
static void reuse_large_buffers(void)
{
#ifdef __GLIBC__
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	mallopt(M_TRIM_THRESHOLD, 4 << 20);
#endif
}

static int apply(spank_t sp, const struct dt_env *env)
{
	for (size_t i = 0; i < env->count; i++) {
		const struct dt_env_entry *e = &env->entries[i];
		spank_err_t rc = ESPANK_SUCCESS;
		char **envp = NULL;

		/* What the node set for all its tasks (slurmstepd.c) is there
		 * already: each spank_setenv costs, so only changes are made.
		 * Asked each time: a spank_setenv may move the array. */
		if (spank_get_item(sp, S_JOB_ENV, &envp) == ESPANK_SUCCESS &&
		    !dt_env_entry_changes(e, dt_envp_getenv, envp))
			continue;
		if (e->action == DT_ENV_SET)
			rc = spank_setenv(sp, e->name, e->value, 1);
		else if (e->action == DT_ENV_UNSET)
			rc = spank_unsetenv(sp, e->name);
		if (rc != ESPANK_SUCCESS) {
			task_error("cannot set %s (%s): rerun the step, and "
				   "report it to your administrator if it "
				   "recurs", e->name, spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}

/*
 * Before the start barrier, whose environment the helper or PMIx make
 * from the task's: what the node set for all its tasks goes back to what
 * it was, as if it had never been set. 0, or -1 (told).
 */
static int undo_node_env(spank_t sp, struct plugin_state *st)
{
	struct dt_env undo = { 0 };
	char **envp = NULL;
	int rc;

	if (spank_get_item(sp, S_JOB_ENV, &envp) != ESPANK_SUCCESS)
		envp = NULL;
	if (dt_node_env_undo(&st->node_env, dt_envp_getenv, envp, &undo) < 0) {
		task_error("out of memory");
		rc = -1;
	} else {
		rc = apply(sp, &undo);
	}
	dt_env_free(&undo);
	/* This task's copy: nothing the node set is left to read past. */
	dt_node_env_free(&st->node_env);
	return rc;
}

/*
 * Whether the ranks meet at the start barrier before the program: in a
 * lean PMIx step the tasks run it themselves (member.c, leader.c), else
 * the helper does, which also handles PMIx (it cannot be used inside
 * slurmstepd).
 */
static bool needs_barrier(const struct dt_config *cfg, char **envp)
{
	return cfg->check || cfg->nccl ||
	       (cfg->use_pmix && dt_envp_get(envp, "PMIX_NAMESPACE"));
}

/*
 * A task in a container (srun --container, Slurm 23.02 and later): runc
 * 1.2.7 and later reset the CPU affinity the program inherits, so the
 * worker library, preloaded, binds it again (helper/worker_lib.c). Its
 * folder must then be mounted in the container, as the Python hook's.
 */
static int rebind_in_container(const struct plugin_state *st, char **envp,
			       struct dt_env *env)
{
	const char *bundle = dt_envp_get(envp, "SLURM_CONTAINER");

	if (!bundle || !*bundle || (!dt_env_get(env, "DIST_TRAIN_CPUS") &&
				    !dt_env_get(env, "DIST_TRAIN_NUMA")) ||
	    access(st->step.worker_lib, R_OK) < 0)
		return 0;
	if (dt_env_put(env, "DIST_TRAIN_REBIND", "1", DT_ENV_SET) < 0 ||
	    dt_env_prepend(env, "LD_PRELOAD", st->step.worker_lib,
			   dt_envp_get(envp, "LD_PRELOAD")) < 0)
		return -1;
	return 0;
}

/*
 * Whether a plugin that runs its task setup before this one (listed
 * before it in plugstack.conf) moved the task into a container's root, as
 * pyxis does: the helper, the Python hook and the worker library are then
 * out of reach at the node's paths. Slurm's own job_container/tmpfs keeps
 * the root; pyxis (enroot's pivot_root) changes it.
 */
static bool in_foreign_root(const struct plugin_state *st)
{
	struct stat root;

	return st->have_node_root && stat("/", &root) == 0 &&
	       (root.st_dev != st->node_root_dev ||
		root.st_ino != st->node_root_ino);
}

/* Without PMIx, where rank 0 runs when Slurm does not say (srun.c). */
static int rank0_host(struct plugin_state *st, char **envp,
		      const char *hostfile_host, char *err, size_t errlen)
{
	if (!st->distribution || strncmp(st->distribution, "arbitrary", 9)) {
		dt_layout_rank0_error(st->distribution, err, errlen);
		return -1;
	}
	return dt_layout_rank0_from_hostfile(&st->layout,
					     hostfile_host[0] ? hostfile_host :
					     NULL,
					     dt_envp_get(envp, "SLURMD_NODENAME"),
					     st->runs_rank0, err, errlen);
}

/*
 * The start barrier, before the program: every rank reaches rank 0, which
 * proves to each that its port is the step's. 0 with ENV set (and, in
 * rank 0, *STORE_FD its listening socket), or -1 with ERR ("" where the
 * task's leader or rank 0 says it).
 */
static int meet_at_barrier(spank_t sp, struct plugin_state *st, char **envp,
			   uint32_t rank, int local_rank, const char *secret,
			   const char *step_id, const char *hostfile_host,
			   struct dt_env *env, int *store_fd, char *notes,
			   size_t notes_len, double *helper_ms, char *err,
			   size_t errlen)
{
	char took[96], **argv = NULL;
	int argc = 0;

	if (lean_without_helper(st, envp, secret)) {
		bool quiet = false, use_helper = false;
		double waited = plugin_clock_ms();
		int got = local_rank ?
			member_task_env(st, envp, rank, local_rank, secret,
					step_id, env, &quiet, err, errlen) :
			leader_task_env(st, envp, rank, secret, step_id, env,
					store_fd, &use_helper, &quiet, err,
					errlen);

		if (got == 0) {
			/* tests/bench/launch.sh reads the figure. */
			snprintf(took, sizeof(took), "no helper: %s in %.1f ms",
				 local_rank ? "rank 0's answer through local "
				 "rank 0" : rank ? "this node's ranks led to "
				 "rank 0" : "every rank arrived at rank 0",
				 plugin_clock_ms() - waited);
			dt_note(notes, notes_len, took);
			return 0;
		}
		if (!use_helper) {
			if (quiet)
				err[0] = '\0';
			return -1;
		}
		/* Rank 0 must move: the helper does it all. */
		dt_env_free(env);
	}
	/* The helper cannot read what only srun knew: it is told. */
	if (!st->layout.master_addr && hostfile_host[0] &&
	    rank0_host(st, envp, hostfile_host, err, errlen) < 0) {
		/* Each task of the node would say it: local task 0 does. */
		if (local_rank != 0)
			err[0] = '\0';
		return -1;
	}
	if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS &&
	    argc > 0 && argv)
		st->program = argv[0];
	*helper_ms = plugin_clock_ms();
	if (helper_bootstrap(&st->step, envp, secret[0] ? secret : NULL,
			     st->layout.master_addr, false, env,
			     rank == 0 ? store_fd : NULL, err, errlen) < 0)
		return -1;
	*helper_ms = plugin_clock_ms() - *helper_ms;
	return 0;
}

/*
 * torchrun mode: the agents' store is where the barrier met, which PMIx
 * may have moved off the step's first port (the MASTER_PORT of the
 * barrier's answer). 0, or -1 with ERR.
 */
static int store_port_from(struct plugin_state *st, const struct dt_env *met,
			   char *err, size_t errlen)
{
	const char *port = dt_env_get(met, "MASTER_PORT");
	char *end;
	unsigned long value;

	errno = 0;
	value = port ? strtoul(port, &end, 10) : 0;
	if (!port || errno || *end || value == 0 || value > 65535) {
		snprintf(err, errlen, "the start barrier gave no valid port "
			 "for torchrun's store: ask your administrator to "
			 "install one dist-train release on every node");
		return -1;
	}
	st->ports.port[0] = (uint16_t)value;
	return 0;
}

/* The task's environment ENVP, as it was before the node's part. */
static void node_view(struct dt_node_env_view *view,
		      const struct plugin_state *st, char **envp)
{
	view->node = &st->node_env;
	view->getenv = dt_envp_getenv;
	view->arg = envp;
}

int task_train_env(const struct plugin_state *st, uint32_t rank,
		   uint32_t local_rank, const char *step_id,
		   dt_getenv_fn getenv, void *arg, struct dt_env *env,
		   char *err, size_t errlen)
{
	struct dt_env_request req;

	memset(&req, 0, sizeof(req));
	req.layout = &st->layout;
	req.rank = rank;
	req.local_rank = local_rank;
	req.ports = &st->ports;
	req.cpus_per_task = st->cpus_per_task;
	req.step_id = step_id;
	req.getenv = getenv;
	req.getenv_arg = arg;
	req.socket_ifname = st->socket_ifname[0] ? st->socket_ifname : NULL;
	return dt_train_env(&req, env, err, errlen);
}

/*
 * Where the node's part of the environment holds for this task
 * (common/node_env.h): only what is its own is set, its rank and what
 * its binding adds, and it is bound as the node foresaw; the rest is in
 * its environment already. Each condition is one thing that would make
 * the whole environment, worked out below, come out otherwise, and a
 * task's first touches of memory cost far more than the work itself
 * (doc/performance.md). 0: done; 1: not so, the whole way instead; -1:
 * failed (told).
 */
static int task_own_part(spank_t sp, struct plugin_state *st, uint32_t rank,
			 uint32_t local_rank, char **envp)
{
	const char *container = dt_envp_get(envp, "SLURM_CONTAINER");
	struct dt_node_env_view view;
	struct dt_env env = { 0 };
	int kept, rc = 1;

	/* Rank 0 holds the step's store port (store.c); verbose notes. */
	if (!st->node_env.set.count || st->node_env.partial || rank == 0 ||
	    st->step.verbose ||
	    (container && *container) || needs_barrier(&st->step, envp) ||
	    (st->step.bind != DT_BIND_OFF && st->have_machine &&
	     !st->have_node_plan))
		return 1;
	node_view(&view, st, envp);
	if (!dt_node_env_intact(&st->node_env, dt_envp_getenv, envp) ||
	    !dt_env_reads_same(&st->node_reads, dt_node_env_getenv, &view))
		return 1;
	if (dt_train_env_task(rank, local_rank, &env) < 0 ||
	    (st->have_node_plan &&
	     dt_bind_foreseen(&st->node_plan, &st->node_binding, local_rank,
			      &env) < 0))
		goto out;
	kept = exit_stacks_task(sp, st, &env);
	if (kept < 0 || (kept == 0 && exit_stacks_named(st)))
		goto out;
	rc = apply(sp, &env) < 0 ? -1 : 0;
out:
	dt_env_free(&env);
	return rc;
}

int task_init(spank_t sp)
{
	struct plugin_state *st = plugin_state();
	struct dt_env env = { 0 };
	struct dt_node_env_view view;
	char step_id[32], err[sizeof(st->node_error)], notes[512] = "";
	/* slurmstepd took them out of the environment (step_env.c). */
	const char *secret = st->secret_hex, *hostfile_host = st->rank0_host;
	char *line = NULL, *peers = NULL;
	char **envp = NULL;
	double start = plugin_clock_ms(), helper_ms = 0;
	int store_fd = -1, hook, met, own;
	uint32_t rank;
	int local_rank, rc = -1;

	err[0] = '\0';
	if (!st->node_active) {
		/* srun gave the step the environment and this node did not
		 * (its plugstack.conf differs): the program still never sees
		 * what srun passed for the plugin alone (a secret the user
		 * exported for dist-train exec stays theirs). */
		spank_unsetenv(sp, DT_SECRET_ENV);
		spank_unsetenv(sp, DT_RANK0_HOST_ENV);
		spank_unsetenv(sp, DT_WATCH_PORT_ENV);
		return 0;
	}
	reuse_large_buffers();
	if (spank_get_item(sp, S_JOB_ENV, &envp) != ESPANK_SUCCESS)
		envp = NULL;
	plugin_node_name(envp, task_node, sizeof(task_node));
	/* slurmstepd already told srun, once for this node. */
	if (st->node_error[0])
		goto out;
	if (spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_TASK_ID, &local_rank) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_ENV, &envp) != ESPANK_SUCCESS) {
		snprintf(err, sizeof(err), "Slurm did not give the task's "
			 "rank to the plugin: ask your administrator to check "
			 "that dist-train was built for this node's Slurm "
			 "release");
		goto fail;
	}
	snprintf(step_id, sizeof(step_id), "%u.%u", st->job_id, st->step_id);
	if (in_foreign_root(st)) {
		/* Every task of the node would say the same: one does. */
		if (local_rank == 0)
			task_error("the task is already in a container: a "
				   "plugin listed before dist_train in "
				   "plugstack.conf (pyxis, for "
				   "--container-image) entered it, where the "
				   "helper and the node's paths are out of "
				   "reach. Ask your administrator to list "
				   "dist_train before pyxis in plugstack.conf "
				   "(see dist_train(8), CONTAINERS)");
		goto out;
	}

	own = st->step.torchrun ? 1 :
	      task_own_part(sp, st, rank, (uint32_t)local_rank, envp);
	if (own <= 0) {
		rc = own;
		goto out;
	}
	if (st->step.torchrun) {
		/* The agents meet before any of them reads the store that
		 * the first one hosts: its answer proves the port is the
		 * step's, and rank 0 holds it into the store from then on. */
		if (st->layout.world_size > 1) {
			struct dt_env agent = { 0 };
			const char *list;

			met = meet_at_barrier(sp, st, envp, rank, local_rank,
					      secret, step_id, hostfile_host,
					      &agent, &store_fd, notes,
					      sizeof(notes), &helper_ms, err,
					      sizeof(err));
			if (met == 0)
				met = store_port_from(st, &agent, err,
						      sizeof(err));
			/* Who may reach the store: common/store_guard.h. */
			list = dt_env_get(&agent, DT_STORE_PEERS_ENV);
			if (met == 0 && list && !(peers = strdup(list))) {
				snprintf(err, sizeof(err), "out of memory");
				met = -1;
			}
			dt_env_free(&agent);
			if (met < 0)
				goto fail;
		}
		/* Agents are not bound: their workers are, by themselves. */
		if (torchrun_task_env(st, envp, step_id, &env, notes,
				      sizeof(notes), err, sizeof(err)) < 0) {
			if (local_rank == 0)
				task_error("%s", err);
			goto out;
		}
		if (peers && dt_env_put(&env, DT_STORE_PEERS_ENV, peers,
					DT_ENV_SET) < 0) {
			snprintf(err, sizeof(err), "out of memory");
			goto fail;
		}
		goto set;
	}
	met = 1;
	if (needs_barrier(&st->step, envp)) {
		/* PMIx that slurmstepd could not foresee (an MpiDefault that
		 * srun did not export): the node's part goes first. */
		if (st->node_env.set.count &&
		    (undo_node_env(sp, st) < 0 ||
		     spank_get_item(sp, S_JOB_ENV, &envp) != ESPANK_SUCCESS))
			goto out;
		met = meet_at_barrier(sp, st, envp, rank, local_rank, secret,
				      step_id, hostfile_host, &env, &store_fd,
				      notes, sizeof(notes), &helper_ms, err,
				      sizeof(err));
	}
	if (met < 0)
		goto fail;
	if (met == 0)
		goto apply;
	if (!st->layout.master_addr &&
	    rank0_host(st, envp, hostfile_host, err, sizeof(err)) < 0) {
		/* Each task of the node would say it: local task 0 does. */
		if (local_rank != 0)
			goto out;
		goto fail;
	}

	node_view(&view, st, envp);
	if (task_train_env(st, rank, (uint32_t)local_rank, step_id,
			   dt_node_env_getenv, &view, &env, err,
			   sizeof(err)) < 0)
		goto fail;
apply:
	/* Read as before the node's part: a value the node set is not the
	 * user's (OMP_NUM_THREADS). */
	node_view(&view, st, envp);
	if (dt_bind_task(st->have_machine ? &st->machine : NULL,
			 st->machine_error, &st->step,
			 met == 1 && st->have_node_plan ? &st->node_plan : NULL,
			 dt_node_env_getenv, &view, &env, notes, sizeof(notes),
			 err, sizeof(err)) < 0) {
		/* Every task of the node would say the same: one does. */
		if (local_rank == 0)
			task_error("%s", err);
		goto out;
	}
	if (rebind_in_container(st, envp, &env) < 0) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
set:
	/* torch's store: see common/python_hook.h. */
	node_view(&view, st, envp);
	hook = dt_python_hook(st->step.worker_lib, NULL,
			      dt_node_env_getenv("PYTHONPATH", &view),
			      st->step.store_tree, &env);
	if (hook < 0 || exit_stacks_task(sp, st, &env) < 0) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	/* Its port, held from the barrier into the program (store.c
	 * takes STORE_FD either way). */
	if (rank == 0) {
		int held = store_hold(sp, store_fd, hook == 1,
				      st->step.worker_lib, envp, &env, err,
				      sizeof(err));

		store_fd = -1;
		if (held < 0)
			goto fail;
	}
	/* What the node set that this task does not (its binding came out
	 * otherwise) goes back to what it was. */
	if (spank_get_item(sp, S_JOB_ENV, &envp) != ESPANK_SUCCESS)
		envp = NULL;
	if (dt_node_env_complete(&st->node_env, dt_envp_getenv, envp,
				 &env) < 0) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	if (apply(sp, &env) < 0)
		goto out;
	/*
	 * spank_setenv may move the task's environment array and free the
	 * old one (Slurm 24.11 does; 22.05 happened not to), so ENVP is not
	 * to be read past this point: get it again.
	 */
	envp = NULL;

	if (st->step.verbose) {
		size_t len = dt_env_describe(&env, NULL, 0) + 1;
		const char *node = NULL;

		if (spank_get_item(sp, S_JOB_ENV, &envp) == ESPANK_SUCCESS)
			node = dt_envp_get(envp, "SLURMD_NODENAME");
		line = malloc(len);
		if (line) {
			dt_env_describe(&env, line, len);
			task_message("rank %u on %s: %s%s%s | took: node %.1f "
				     "ms (topology %.1f), task %.1f ms (helper "
				     "%.1f)", rank, node ? node : "?", line,
				     notes[0] ? " | " : "", notes, st->node_ms,
				     st->topology_ms,
				     plugin_clock_ms() - start, helper_ms);
		}
	}
	rc = 0;
	goto out;
fail:
	/* An empty ERR: the task's own rank 0, or its leader, says it. */
	if (err[0])
		task_error("%s", err);
out:
	if (store_fd >= 0)
		close(store_fd);
	free(line);
	free(peers);
	dt_env_free(&env);
	/*
	 * Slurm ends the task when a required plugin fails here, but runs
	 * the program anyway when plugstack.conf marks it optional: this
	 * process is the task, so it ends itself, alike in both modes, as
	 * Slurm would (exit code 1), without running slurmstepd's exit
	 * handlers.
	 */
	if (rc < 0)
		_exit(1);
	return rc;
}
