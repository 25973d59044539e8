/*
 * slurmstepd, once per node and step (slurm_spank_user_init, running with
 * the user's effective uid): work out what every task of this node shares.
 * The tasks are forked afterwards and inherit this state.
 *
 * Errors are not returned (Slurm would not fail the step for them): they
 * are reported once, with slurm_error, which srun shows prefixed with the
 * node's name, and every task of this node then fails in task_init.
 */
#include "config.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <slurm/slurm.h>

#include "plugin.h"
#include "../common/bind_apply.h"
#include "../common/binding.h"
#include "../common/envp.h"
#include "../common/error.h"
#include "../common/hostlist.h"
#include "../common/hwloc_machine.h"
#include "../common/machine_cache.h"
#include "../common/machine_cache_file.h"
#include "../common/netif.h"
#include "../common/python_hook.h"

static int get_u32(spank_t sp, spank_item_t item, uint32_t *out)
{
	return spank_get_item(sp, item, out) == ESPANK_SUCCESS ? 0 : -1;
}

/*
 * This node's name, for the messages below (srun 26.05 shows slurmstepd's
 * with a time stamp, not the node's name): SLURMD_NODENAME where the step's
 * environment has it, else this node's entry in SLURM_STEP_NODELIST, else
 * the host's name.
 */
static const char *node_name(spank_t sp)
{
	static char name[256];
	struct dt_hostlist *hl = NULL;
	char **env = NULL;
	const char *list;
	uint32_t id;

	if (name[0])
		return name;
	if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS)
		env = NULL;
	list = env ? dt_envp_get(env, "SLURM_STEP_NODELIST") : NULL;
	if (env && !dt_envp_get(env, "SLURMD_NODENAME") && list &&
	    get_u32(sp, S_JOB_NODEID, &id) == 0 &&
	    strlen(list) <= DT_STEP_TEXT_BASE &&
	    dt_hostlist_parse(list, &hl, NULL, 0) == 0) {
		int n = dt_hostlist_nth(hl, id, name, sizeof(name));

		dt_hostlist_free(hl);
		if (n > 0 && (size_t)n < sizeof(name))
			return name;
	}
	plugin_node_name(env, name, sizeof(name));
	return name;
}

/*
 * The node's topology, once for all its tasks (I/O discovery is slow).
 * Without it the step runs unbound, and verbose mode says why.
 */
static void load_machine(spank_t sp, struct plugin_state *st)
{
	char *alloc_cores = NULL, err[256];
	double start = plugin_clock_ms();

	st->have_machine = false;
	if (st->step.bind == DT_BIND_OFF)
		return;
	if (spank_get_item(sp, S_STEP_ALLOC_CORES, &alloc_cores) !=
	    ESPANK_SUCCESS)
		alloc_cores = NULL;
	if (st->have_whole && !st->step.topology[0]) {
		bool *allowed;
		unsigned n;

		if (dt_allowed_pus(&allowed, &n) == 0 &&
		    dt_machine_restrict(&st->whole, allowed, n, alloc_cores,
					&st->machine, err, sizeof(err)) == 0) {
			free(allowed);
			/* The cache keeps no MIG layout: it may change. */
			dt_machine_read_mig(&st->machine);
			st->have_machine = true;
			goto out;
		}
		free(allowed);
	}
	if (dt_machine_load(st->step.topology[0] ? st->step.topology : NULL,
			    alloc_cores, &st->machine, err, sizeof(err)) < 0) {
		snprintf(st->machine_error, sizeof(st->machine_error),
			 "not bound: %s", err);
		dt_log_info("step %u.%u on %s: %s", st->job_id, st->step_id,
			    node_name(sp), st->machine_error);
		goto out;
	}
	dt_log_debug("step %u.%u: %u cores, %u GPUs, %u NICs (allocated "
		     "cores %s)", st->job_id, st->step_id, st->machine.ncores,
		     st->machine.ngpus, st->machine.nnics,
		     alloc_cores ? alloc_cores : "unknown");
	st->have_machine = true;
out:
	st->machine.slurm_minors = st->step.slurm_gpus_minors;
	st->topology_ms = plugin_clock_ms() - start;
}

/*
 * slurmstepd, as root, before the user's settings are read: the files
 * the tasks' stacks of their end go into (exit_stacks.c), and the node's
 * machine from its cache (common/machine_cache_file.h), written first if
 * it is missing or the node changed, for a step that may want binding.
 * Whatever fails, user_init discovers the node as before.
 */
int slurmstepd_post_opt(spank_t sp)
{
	struct plugin_state *st = plugin_state();
	char fingerprint[DT_FINGERPRINT_MAX], err[300];
	uint32_t step_id;
	int rc;

	st->stepd_pid = getpid();
	if ((st->option_seen || st->site.default_on) &&
	    get_u32(sp, S_JOB_STEPID, &step_id) == 0 &&
	    step_id <= SLURM_MAX_NORMAL_STEP_ID)
		exit_stacks_open(sp, st);
	if (!st->site_ok || st->site.topology[0] ||
	    !st->site.topology_cache[0] ||
	    (!st->option_seen && !st->site.default_on) ||
	    dt_node_fingerprint(fingerprint, sizeof(fingerprint)) < 0)
		return 0;
	rc = dt_machine_cache_read(st->site.topology_cache, fingerprint,
				   &st->whole, err, sizeof(err));
	if (rc < 0)
		dt_log_info("on %s: %s", node_name(sp), err);
	if (rc != 0) {
		rc = dt_machine_cache_write(st->site.topology_cache,
					    fingerprint, &st->whole, err,
					    sizeof(err));
		if (rc != 0)
			dt_log_info("no node cache on %s: %s", node_name(sp),
				    err);
		if (rc < 0)
			return 0;
	}
	st->have_whole = true;
	return 0;
}

/*
 * The interface this node reaches the step's other nodes through, for
 * gloo and NCCL where no helper runs (the helper takes the one the ranks
 * reached rank 0 through): without it gloo on rank 0's node takes the
 * address of its host name, 127.0.1.1 in Debian's /etc/hosts, which no
 * other node reaches. Rank 0's node looks towards the step's next node,
 * the others towards rank 0's. Once per node, as the user.
 */
static void find_socket_ifname(struct plugin_state *st)
{
	const char *peer = st->layout.master_addr, *nodes = st->layout.nodes;
	char next[256];

	st->socket_ifname[0] = '\0';
	if (st->layout.num_nodes < 2 || !peer)
		return;
	if (st->runs_rank0) {
		/* The first node in the list that is not rank 0's. */
		for (peer = NULL; nodes && *nodes && !peer;) {
			size_t n = strcspn(nodes, ",");

			if (n > 0 && n < sizeof(next) &&
			    (strncmp(nodes, st->layout.master_addr, n) ||
			     st->layout.master_addr[n])) {
				memcpy(next, nodes, n);
				next[n] = '\0';
				peer = next;
			}
			nodes += n + (nodes[n] == ',');
		}
		if (!peer)
			return;
	}
	if (dt_netif_towards_host(peer, st->socket_ifname + 1,
				  sizeof(st->socket_ifname) - 1) == 0)
		st->socket_ifname[0] = '=';
}

/*
 * Into TASK, what the binding gives every task of the node alike, from
 * one plan made here for them all, which each task then uses instead of
 * making its own (a GPU node's tasks each make theirs). GETENV/ARG: the
 * step's environment. 0, or -1: no memory.
 */
static int node_binding_env(struct plugin_state *st, dt_getenv_fn getenv,
			    void *arg, struct dt_env *task)
{
	const struct dt_env *common = &st->node_binding.common;

	/* For as many tasks as each task's LOCAL_WORLD_SIZE says. */
	st->have_node_plan = st->have_machine &&
			     dt_bind_node_plan(&st->machine, &st->step,
					       getenv, arg,
					       st->layout.local_size,
					       &st->node_plan) == 0;
	if (dt_bind_node_env(&st->machine, &st->step,
			     st->have_node_plan ? &st->node_plan : NULL,
			     getenv, arg, &st->node_binding) < 0)
		return -1;
	for (size_t i = 0; i < common->count; i++)
		if (dt_env_put(task, common->entries[i].name,
			       common->entries[i].value,
			       common->entries[i].action) < 0)
			return -1;
	return 0;
}

/*
 * What every task of the node gets alike, set once in the step's
 * environment, which each task inherits, instead of by every task
 * (common/node_env.h). Not where the tasks meet at the start barrier
 * first (the helper and PMIx make their environment from the task's), nor
 * in torchrun mode, nor where rank 0's node comes from the hostfile: each
 * task sets it all there, as before. ENV: the step's environment, not to
 * be read once anything is set.
 */
static void set_node_env(spank_t sp, struct plugin_state *st,
			 uint32_t first_rank, char **env)
{
	const char *mpi = dt_envp_get(env, "SLURM_MPI_TYPE");
	struct dt_env_reads *reads = &st->node_reads;
	struct dt_env task = { 0 };
	char step_id[32], err[256];

	if (st->step.torchrun || st->step.check || st->step.nccl ||
	    !st->layout.master_addr ||
	    (st->step.use_pmix && mpi && !strncmp(mpi, "pmix", 4)))
		return;
	snprintf(step_id, sizeof(step_id), "%u.%u", st->job_id, st->step_id);
	/* What it is made from is kept: a task whose environment holds the
	 * same needs only its own part (task.c). */
	reads->getenv = dt_envp_getenv;
	reads->arg = env;
	/* The node's first task's, less what is each task's own. */
	if (task_train_env(st, first_rank, 0, step_id, dt_env_reads_getenv,
			   reads, &task, err, sizeof(err)) < 0 ||
	    dt_python_hook(st->step.worker_lib, NULL,
			   dt_env_reads_getenv("PYTHONPATH", reads),
			   st->step.store_tree, &task) < 0 ||
	    node_binding_env(st, dt_env_reads_getenv, reads, &task) < 0 ||
	    exit_stacks_env(st, &task) < 0 ||
	    dt_node_env_from(&task, dt_envp_getenv, env, &st->node_env) < 0)
		goto out;
	for (size_t i = 0; i < st->node_env.set.count;) {
		const struct dt_env_entry *e = &st->node_env.set.entries[i];

		/* Not set here: each task sets it. */
		if (spank_setenv(sp, e->name, e->value, 1) != ESPANK_SUCCESS)
			dt_node_env_drop(&st->node_env, i);
		else
			i++;
	}
out:
	dt_env_free(&task);
}

/*
 * Whether the user asked for the environment with a --dist-train that is
 * not "off", judged without the site's settings (they may be broken).
 */
static bool asked_for(const struct plugin_state *st)
{
	struct dt_config probe;
	char err[8];

	if (!st->option_seen)
		return false;
	dt_config_init(&probe);
	return dt_config_parse_option(&probe, st->option_arg, err,
				      sizeof(err)) < 0 || probe.enabled;
}

int slurmstepd_user_init(spank_t sp)
{
	struct plugin_state *st = plugin_state();
	struct dt_slurm_step step;
	char **env = NULL;
	char err[sizeof(st->node_error)], why[400];
	double start = plugin_clock_ms();
	struct stat root;
	uint32_t local_id;

	st->node_active = false;
	st->node_error[0] = '\0';
	if (get_u32(sp, S_JOB_STEPID, &st->step_id) < 0 ||
	    st->step_id > SLURM_MAX_NORMAL_STEP_ID)
		return 0;	/* extern, batch and interactive steps */
	if (!st->site_ok && !asked_for(st))
		return 0;
	st->node_active = true;
	if (get_u32(sp, S_JOB_ID, &st->job_id) < 0)
		st->job_id = 0;
	/*
	 * srun validated the settings. Failing here too is for the site
	 * whose nodes read another plugstack.conf than srun, or mark the
	 * plugin optional: a step that asked for the environment never
	 * runs without it, and one that did not is left alone.
	 */
	if (!st->site_ok) {
		snprintf(err, sizeof(err), "--dist-train is unavailable: "
			 "plugstack.conf on this node is wrong (%.880s); ask "
			 "your administrator to fix it", st->site_error);
		goto fail;
	}
	st->step = st->site;
	if (st->option_seen &&
	    dt_config_parse_option(&st->step, st->option_arg, why,
				   sizeof(why)) < 0) {
		char arg[81];

		dt_escape(st->option_arg ? st->option_arg : "", arg,
			  sizeof(arg));
		snprintf(err, sizeof(err), "--dist-train=%s: %s", arg, why);
		goto fail;
	}
	if (!st->step.enabled) {
		st->node_active = false;
		return 0;
	}

	memset(&step, 0, sizeof(step));
	if (get_u32(sp, S_JOB_NNODES, &step.num_nodes) < 0 ||
	    get_u32(sp, S_JOB_NODEID, &step.node_id) < 0 ||
	    get_u32(sp, S_JOB_TOTAL_TASK_COUNT, &step.num_tasks) < 0 ||
	    get_u32(sp, S_JOB_LOCAL_TASK_COUNT, &step.local_tasks) < 0 ||
	    spank_get_item(sp, S_JOB_LOCAL_TO_GLOBAL_ID, (uint32_t)0,
			   &step.first_global_id) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS) {
		snprintf(err, sizeof(err), "Slurm did not give the step's "
			 "size and layout to the plugin: ask your "
			 "administrator to check that dist-train was built for "
			 "this node's Slurm release");
		goto fail;
	}
	if (dt_config_check_step(&st->step, step.num_nodes, step.num_tasks,
				 err, sizeof(err)) < 0 ||
	    dt_config_check_container(&st->step, SLURM_VERSION_NUMBER,
				      dt_envp_get(env, "SLURM_CONTAINER"),
				      err, sizeof(err)) < 0)
		goto fail;
	st->local_tasks = step.local_tasks;
	st->runs_rank0 = spank_get_item(sp, S_JOB_GLOBAL_TO_LOCAL_ID,
					(uint32_t)0, &local_id) ==
			 ESPANK_SUCCESS && local_id < step.local_tasks;
	if (get_u32(sp, S_STEP_CPUS_PER_TASK, &st->cpus_per_task) < 0)
		st->cpus_per_task = 0;
	step.nodelist = dt_envp_get(env, "SLURM_STEP_NODELIST");
	step.tasks_per_node = dt_envp_get(env, "SLURM_STEP_TASKS_PER_NODE");
	step.distribution = dt_envp_get(env, "SLURM_DISTRIBUTION");
	/* PMIx may still tell where rank 0 is: task_init decides. */
	step.rank0_elsewhere_ok = true;
	if (dt_layout_from_slurm(&step, &st->layout, err, sizeof(err)) < 0)
		goto fail;
	/* Kept only once the layout has bounded it. */
	free(st->distribution);
	st->distribution = step.distribution ? strdup(step.distribution) :
			   NULL;
	/* A requeued job's steps move off the ports of the run before. */
	if (dt_step_ports(dt_envp_get(env, "SLURM_STEP_RESV_PORTS"),
			  st->job_id, st->step_id,
			  dt_restart_count(dt_envp_get(env,
						       "SLURM_RESTART_COUNT")),
			  st->step.port_lo,
			  st->step.port_hi, &st->ports, err, sizeof(err)) < 0)
		goto fail;
	st->have_node_root = stat("/", &root) == 0;
	if (st->have_node_root) {
		st->node_root_dev = root.st_dev;
		st->node_root_ino = root.st_ino;
	}
	find_socket_ifname(st);
	load_machine(sp, st);
	report_setup(sp, st, env);
	set_node_env(sp, st, step.first_global_id, env);
	take_srun_env(sp, st);
#ifdef __GLIBC__
	/*
	 * What the node's setup freed (Slurm's 256 KiB buffer for each
	 * spank_setenv, the plugin's own) goes back to the kernel before
	 * Slurm forks the tasks: left in the heap, each task's first
	 * allocations take those pages, shared with slurmstepd, and the
	 * kernel copies each one (doc/performance.md, "Each task's CPU
	 * before its program").
	 */
	malloc_trim(0);
#endif
	st->node_ms = plugin_clock_ms() - start;
	return 0;
fail:
	take_srun_env(sp, st);
	snprintf(st->node_error, sizeof(st->node_error), "%s", err);
	dt_log_error("step %u.%u on %s: %s", st->job_id, st->step_id,
		     node_name(sp), err);
	return 0;
}

/*
 * slurmstepd, as a task ends: srun hears how (report.c); a failed torchrun
 * agent gets one line that says what usually ends elastic training, above
 * torchrun's tracebacks.
 */
int slurmstepd_task_exit(spank_t sp)
{
	struct plugin_state *st = plugin_state();
	int status;

	if (st->node_active && !st->node_error[0])
		report_task_exit(sp, st);
	/* Gone before Slurm ends the step's processes. */
	if (++st->tasks_ended >= st->local_tasks)
		exit_reporter_stop(st);
	if (!st->node_active || !st->step.torchrun || st->node_error[0] ||
	    spank_get_item(sp, S_TASK_EXIT_STATUS, &status) != ESPANK_SUCCESS ||
	    !WIFEXITED(status) || WEXITSTATUS(status) == 0)
		return 0;
	if (st->step.max_nodes)
		dt_log_error("on %s: the torchrun agent failed (exit %d): "
			     "elastic training stops when fewer than %u nodes "
			     "(elastic=%u:%u) are left to rendezvous within "
			     "its join_timeout (timeout=%u), or after "
			     "restarts=%u restarts; see torchrun's error above, "
			     "and raise --dist-train=timeout= or restarts= if "
			     "they ran out", node_name(sp),
			     WEXITSTATUS(status), st->step.min_nodes,
			     st->step.min_nodes, st->step.max_nodes,
			     st->step.timeout, st->step.restarts);
	else
		dt_log_error("on %s: the torchrun agent failed (exit %d) "
			     "after restarts=%u restarts, or when a node was "
			     "lost: see torchrun's error above, raise "
			     "--dist-train=restarts= if they ran out, or use "
			     "elastic=MIN:MAX to go on without a lost node",
			     node_name(sp), WEXITSTATUS(status),
			     st->step.restarts);
	return 0;
}

void slurmstepd_exit(void)
{
	struct plugin_state *st = plugin_state();

	exit_reporter_stop(st);
	dt_layout_free(&st->layout);
	dt_machine_free(&st->machine);
	dt_machine_free(&st->whole);
	dt_node_env_free(&st->node_env);
	explicit_bzero(st->secret_hex, sizeof(st->secret_hex));
	if (st->have_node_plan)
		dt_plan_free(&st->node_plan);
	st->have_node_plan = false;
	dt_node_binding_free(&st->node_binding);
	dt_env_free(&st->node_reads.seen);
	exit_stacks_close(st);
	free(st->distribution);
	st->distribution = NULL;
}
