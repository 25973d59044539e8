/*
 * State shared by the plugin's context files, and their entry points.
 *
 * dist_train.c defines the SPANK symbols and dispatches by context to:
 *   options.c      the --dist-train option (every context)
 *   srun.c         srun, sbatch, salloc: validation before anything runs
 *   slurmstepd.c   once per node and step: the node's layout and ports
 *   step_env.c     ... and srun's variables for the plugin alone, taken
 *                  out of the step's environment before any task
 *   task.c         each task, just before exec: its environment
 *   helper.c       ... computed by the dist-train helper, with PMIx
 *   member.c       ... or, in a lean PMIx step, without it: a member's,
 *                  told by its node's leader
 *   leader.c       ... and a node leader's, rank 0's included
 *   torchrun.c     ... or, in torchrun mode, for a torchrun agent
 *   store.c        ... and rank 0's hold on the port of torch's store
 *   watch.c        srun, after the start: how the tasks end, fail-fast
 *   report.c       ... and each node's slurmstepd telling it
 *   exit_reporter.c    (through one reporting process a node)
 *   exit_stacks.c  ... and keeping each rank's stacks of its end
 *   reap.c         waiting for the plugin's own children, bounded
 */
#ifndef DIST_TRAIN_PLUGIN_H
#define DIST_TRAIN_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "../common/bind_apply.h"
#include "../common/binding.h"
#include "../common/envp.h"
#include "../common/layout.h"
#include "../common/node_env.h"
#include "../common/port.h"
#include "../common/secret.h"
#include "../common/settings.h"
#include "../common/topology.h"

#define DT_NAME "dist-train"

/*
 * What srun hands the tasks of a step through the launch's environment
 * (srun.c), and each task takes out of it before its program runs
 * (task.c). Named SLURM_* because srun --export=NONE or --export=VARS
 * still carries those.
 */
#define DT_SECRET_ENV "SLURM_DIST_TRAIN_STEP_SECRET"	/* the step's secret */
#define DT_RANK0_HOST_ENV "SLURM_DIST_TRAIN_RANK0_HOST" /* -m arbitrary */
/* The port of srun's host where srun hears how tasks end (watch.c). */
#define DT_WATCH_PORT_ENV "SLURM_DIST_TRAIN_WATCH_PORT"
/* Where the step's records go, for the tasks too (an absolute path). */
#define DT_RECORD_DIR_ENV "SLURM_DIST_TRAIN_RECORD_DIR"
/* The secret a user exports for dist-train exec: not for the program. */
#define DT_USER_SECRET_ENV "DIST_TRAIN_STEP_SECRET"

#define dt_log_error(fmt, ...) slurm_error(DT_NAME ": " fmt, ##__VA_ARGS__)
#define dt_log_info(fmt, ...) slurm_info(DT_NAME ": " fmt, ##__VA_ARGS__)
#define dt_log_debug(fmt, ...) slurm_debug(DT_NAME ": " fmt, ##__VA_ARGS__)

struct plugin_state {
	/* slurm_spank_init: plugstack.conf arguments. */
	struct dt_config site;
	bool site_ok;
	char site_error[1024];

	/* Option callbacks: the last --dist-train value seen. */
	bool option_seen;
	char *option_arg;

	/* The step's configuration: site defaults, then the user's
	 * settings (srun: init_post_opt; slurmstepd: user_init). */
	struct dt_config step;

	/* slurmstepd user_init: the node's part, inherited by each task. */
	bool node_active;	/* this step gets the environment */
	char *distribution;	/* SLURM_DISTRIBUTION, for messages */
	char node_error[1024];	/* set: every task fails with it */
	bool runs_rank0;	/* global task 0 is one of this node's */
	struct dt_layout layout;
	struct dt_step_ports ports;
	uint32_t job_id;
	uint32_t step_id;
	uint32_t cpus_per_task;
	/* "=NAME": the interface towards the step's other nodes, or "". */
	char socket_ifname[64];
	/* What srun handed the step for the plugin (srun.c), taken out of
	 * its environment: the secret's hex, rank 0's host or "". */
	char secret_hex[DT_SECRET_HEX + 1];
	char rank0_host[256];
	/* The node's topology for binding, loaded once for its tasks. */
	bool have_machine;
	struct dt_machine machine;
	char machine_error[512];	/* why there is none */
	/* Its binding plan for all the node's tasks, where they share one
	 * (not on a node with GPUs), and what it gives them
	 * (common/bind_apply.h). */
	bool have_node_plan;
	struct dt_plan node_plan;
	struct dt_node_binding node_binding;
	/* task_init: the task's program (its argv[0]), for the helper's
	 * NCCL check, which prefers the NCCL of a Python program's own
	 * environment (helper/nccl_check.h); NULL when unknown. */
	const char *program;
	/* The root slurmstepd sees: a task whose root differs was moved
	 * into a container by a plugin listed before this one (pyxis). */
	bool have_node_root;
	dev_t node_root_dev;
	ino_t node_root_ino;
	/* The node's whole machine from its cache, read in post_opt. */
	bool have_whole;
	struct dt_machine whole;
	/* What user_init set in the step's environment for all the node's
	 * tasks (common/node_env.h); empty where each task sets it all. */
	struct dt_node_env node_env;
	/* What that part was made from (common/node_env.h). */
	struct dt_env_reads node_reads;

	/* What each part took (ms), for verbose and tests/bench/launch.sh:
	 * srun's callbacks, this node's user_init and its topology. */
	double srun_ms;
	double node_ms;
	double topology_ms;

	/* report.c: where this node tells srun how its tasks ended. */
	bool report_on;
	char report_host[48];
	char report_port[8];
	char report_node[64];
	uint8_t report_key[DT_SECRET_LEN];
	uid_t job_uid;
	gid_t job_gid;
	uint64_t started_ms;	/* the step's start here (monotonic) */
	/* The step's record folder, as srun named it; "": none. */
	char record_dir[1024];

	/* exit_stacks.c: the node's memory file (-1: none), and the tasks
	 * that have a region in it. */
	int exit_stacks_fd;
	uint32_t exit_stacks_n;

	/* exit_reporter.c: slurmstepd's own process (post_opt), the only
	 * one that may have the node's reporter; its pid (0: none) and
	 * slurmstepd's end of its socket; whether one failed to start. */
	pid_t stepd_pid;
	pid_t reporter_pid;
	int reporter_fd;
	bool reporter_failed;
	/* The node's tasks, and how many have ended (task_exit). */
	uint32_t local_tasks;
	uint32_t tasks_ended;
};

/* Now, in ms on the monotonic clock: what the parts above are timed by. */
static inline double plugin_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

struct plugin_state *plugin_state(void);

/*
 * This node's name as Slurm calls it, for messages from slurmstepd and the
 * tasks, which srun 26.05 shows with a time stamp instead of the node's
 * name, and for topology='s %n. slurmstepd's own SLURMD_NODENAME first:
 * slurmstepd sets it from its configuration, while ENVP's (the step's) is
 * srun's until each task's is set, which in a batch script is the batch
 * host's. Else ENVP's, else the host's name.
 */
static inline void plugin_node_name(char *const *envp, char *buf, size_t len)
{
	const char *name = getenv("SLURMD_NODENAME");

	if (!name || !*name)
		name = envp ? dt_envp_get(envp, "SLURMD_NODENAME") : NULL;
	if (name && *name && strlen(name) < len) {
		memcpy(buf, name, strlen(name) + 1);
		return;
	}
	if (gethostname(buf, len) < 0 || !memchr(buf, '\0', len))
		snprintf(buf, len, "this node");
}

/* reap.c: wait for the child PID until DEADLINE (now_ms()), then kill it
 * and its group, and reap it. 0, with its wait STATUS (-1 where Slurm's
 * own wait for any child reaped it first); -1: it was killed. */
int reap_child(pid_t pid, uint64_t deadline, int *status);

/* options.c */
int options_register(spank_t sp);
void options_free(void);

/* srun.c: local (srun) and allocator (sbatch, salloc) contexts. */
int srun_post_opt(spank_t sp);
int srun_local_user_init(spank_t sp);

/* slurmstepd.c */
int slurmstepd_post_opt(spank_t sp);
int slurmstepd_user_init(spank_t sp);
int slurmstepd_task_exit(spank_t sp);
void slurmstepd_exit(void);

/* report.c: slurmstepd's side of the watch, from user_init (ENV, the
 * step's environment) and as each task ends. */
void report_setup(spank_t sp, struct plugin_state *st, char **env);
void report_task_exit(spank_t sp, struct plugin_state *st);

/* How one record went: the sender's outcome (its exit status, where a
 * child of the task's own sent it). */
enum report_outcome {
	REPORT_HEARD = 0,	/* srun answered */
	REPORT_UNSENT = 1,	/* srun is out of reach */
	REPORT_NOT_USER = 2,	/* the sender could not become the user */
	REPORT_LATE = 3,	/* sent; srun's answer came late */
	REPORT_STACKS_SLOW = 4,	/* sent; the stacks' folder is too slow */
};

/* As the job's user (from root): 0, or -1. */
struct dt_task_exit;
int report_become_user(const struct plugin_state *st);
/* Task E's RECORD (LEN bytes) to srun, and its STACKS (NULL: none) into
 * the step's record folder: an outcome, each wait bounded. */
int report_deliver(const struct plugin_state *st, const char *record,
		   size_t len, const char *step_id,
		   const struct dt_task_exit *e, const char *stacks,
		   size_t stacks_len);

/* exit_reporter.c: the node's one reporting process, started by the first
 * record and stopped after the node's last (or at the step's end). A
 * record's outcome from it, -1 with how it went (GONE) where it failed (the
 * node then reports no more), or EXIT_REPORTER_NONE where this process
 * may have none (Slurm's contain_spank clone): a child sends it. */
#define EXIT_REPORTER_NONE (-2)
int exit_reporter_send(struct plugin_state *st, const char *record,
		       size_t len, const char *step_id,
		       const struct dt_task_exit *e, const char *stacks,
		       size_t stacks_len, char *gone, size_t gone_len);
void exit_reporter_stop(struct plugin_state *st);

struct dt_env;

/* step_env.c: srun's variables for the plugin, out of the step's
 * environment into ST, once a node (user_init). */
void take_srun_env(spank_t sp, struct plugin_state *st);

/* exit_stacks.c: the node's file, made in post_opt; whether the tasks
 * are to get it, and its name in the environment ENV of every task of the
 * node (0, or -1 without memory); kept across exec for the task in
 * task_init, and named in its ENV (1; 0: not kept; -1: no memory); what
 * the task LOCAL_ID, ended with wait STATUS, left in its region, a
 * malloc'd copy of at most EXIT_STACKS_MAX bytes into *LEN, or NULL where
 * there is nothing to keep; closed at the end. */
#define EXIT_STACKS_MAX (256u << 10)
void exit_stacks_open(spank_t sp, struct plugin_state *st);
bool exit_stacks_named(const struct plugin_state *st);
int exit_stacks_env(const struct plugin_state *st, struct dt_env *env);
int exit_stacks_task(spank_t sp, const struct plugin_state *st,
		     struct dt_env *env);
char *exit_stacks_take(struct plugin_state *st, uint32_t local_id, int status,
		       size_t *len);
void exit_stacks_close(struct plugin_state *st);

/* watch.c: srun's side, from local_user_init once the step's secret is
 * made, and at srun's end. */
int watch_start(spank_t sp, const struct dt_config *cfg);
void watch_finish(void);

/* task.c */
int task_init(spank_t sp);
/* What dt_train_env gives the task RANK, LOCAL_RANK of the step STEP_ID
 * ("JOBID.STEPID") on this node, whose environment GETENV/ARG reads; 0,
 * or -1 with ERR. */
int task_train_env(const struct plugin_state *st, uint32_t rank,
		   uint32_t local_rank, const char *step_id,
		   dt_getenv_fn getenv, void *arg, struct dt_env *env,
		   char *err, size_t errlen);

/* torchrun.c: a torchrun agent's environment; 0, or -1 with ERR. */
int torchrun_task_env(const struct plugin_state *st, char **envp,
		      const char *step_id, struct dt_env *env, char *notes,
		      size_t notes_len, char *err, size_t errlen);

/* helper.c: run `dist-train bootstrap`, handing it SECRET (hex, or NULL)
 * on a pipe, and RANK0_HOST (NULL: Slurm's layout says) once checked, or
 * with RANK0_PORT_ONLY, `bootstrap --rank0-port`; 0, or -1 (ERR may be
 * empty when the helper already told the user). *STORE_FD (STORE_FD not
 * NULL): rank 0's listening socket the helper passed back, or -1. */
int helper_bootstrap(const struct dt_config *cfg, char *const envp[],
		     const char *secret, const char *rank0_host,
		     bool rank0_port_only, struct dt_env *out, int *store_fd,
		     char *err, size_t errlen);

struct dt_rdv_result;

/*
 * member.c: whether this task (with the step's SECRET in hex, or "") is
 * one of a lean PMIx step's, which need no helper of their own: each
 * node's local rank 0 leads it (leader.c), its other tasks are members.
 */
bool lean_without_helper(const struct plugin_state *st, char **envp,
			 const char *secret);
/* What every lean task checks and takes first: PMIX_RANK is Slurm's
 * RANK; KEY, the step's SECRET as bytes; HOST, this node's name. 0, or
 * -1 with ERR. */
int lean_task_start(char **envp, uint32_t rank, const char *secret,
		    uint8_t key[DT_SECRET_LEN], char host[256], char *err,
		    size_t errlen);
/* A lean task's environment from rank 0's answer RES: 0, or -1 with ERR. */
int lean_task_env(const struct plugin_state *st, char **envp, uint32_t rank,
		  int local_rank, const char *step_id,
		  const struct dt_rdv_result *res, struct dt_env *env,
		  char *err, size_t errlen);
/* A member's, once the node's leader passed rank 0's answer on; 0, or -1
 * with ERR (*QUIET: rank 0 or the leader reports it). */
int member_task_env(const struct plugin_state *st, char **envp,
		    uint32_t rank, int local_rank, const char *secret,
		    const char *step_id, struct dt_env *env, bool *quiet,
		    char *err, size_t errlen);

/* leader.c: a leader's, rank 0's included, once every rank arrived; 0, or
 * -1 with ERR (*QUIET as above), or with *USE_HELPER and no ERR where rank
 * 0 must move off the step's first port: then the helper does it all.
 * *STORE_FD: rank 0's listening socket, kept for the store, or -1. */
int leader_task_env(const struct plugin_state *st, char **envp,
		    uint32_t rank, const char *secret, const char *step_id,
		    struct dt_env *env, int *store_fd, bool *use_helper,
		    bool *quiet, char *err, size_t errlen);

/* store.c: in rank 0's task, hold the store's port into the program
 * (common/store_port.h): STORE_FD, the barrier's socket, or a new one
 * when there was no barrier or it is not on the store's port. HOOK: the
 * Python hook is on the program's PYTHONPATH; WORKER_LIB guards the
 * store there (common/store_guard.h). 0, or -1 with ERR. */
int store_hold(spank_t sp, int store_fd, bool hook, const char *worker_lib,
	       char **envp, struct dt_env *env, char *err, size_t errlen);

#endif
