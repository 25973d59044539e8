/*
 * The plugin's configuration: site defaults from plugstack.conf arguments,
 * then the user's --dist-train[=SETTINGS] for one step. One table of
 * settings drives both parsers, the messages that list valid settings and
 * the documentation.
 */
#ifndef DIST_TRAIN_SETTINGS_H
#define DIST_TRAIN_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Outside Linux's default ephemeral range (32768-60999). */
#define DT_DEFAULT_PORT_LO 20000
#define DT_DEFAULT_PORT_HI 28999
/* How long ranks wait for each other at the start (seconds). */
#define DT_DEFAULT_TIMEOUT 300
#define DT_MAX_TIMEOUT 86400
#define DT_HELPER_PATH_MAX 1024
#define DT_DEFAULT_RESTARTS 3
/* The node's machine, cached by root (common/machine_cache_file.h):
 * under /run, so that a boot clears it. */
#define DT_TOPOLOGY_CACHE_DEFAULT "/run/dist-train/machine"

struct dt_config {
	/* Site only (plugstack.conf). */
	bool default_on;	/* steps get it without --dist-train */
	uint16_t port_lo;	/* range for derived ports */
	uint16_t port_hi;
	char helper[DT_HELPER_PATH_MAX]; /* the dist-train command */
	char topology[DT_HELPER_PATH_MAX]; /* hwloc XML of the node, or "" */
	char worker_lib[DT_HELPER_PATH_MAX]; /* preloaded into torchrun's workers */
	char topology_cache[DT_HELPER_PATH_MAX]; /* the node's machine, or "" */
	/* slurm-gpus=minors: Slurm's GPU numbers are /dev/nvidiaN minors
	 * (a gres.conf listing them by hand), not AutoDetect's order. */
	bool slurm_gpus_minors;

	/* Per step: the site's value is the default, the user's wins. */
	bool enabled;
	bool verbose;
	bool use_pmix;		/* bootstrap through PMIx when the step has it */
	bool nccl;		/* NCCL_COMM_ID for plain NCCL programs */
	bool check;		/* verify the rendezvous before the program */
	unsigned timeout;	/* seconds any wait may last */
	int bind;		/* enum dt_bind_mode */
	bool own_gpu_only;	/* CUDA_VISIBLE_DEVICES: each task's own */
	bool share_gpus;	/* allow more tasks than GPUs */
	/* torchrun mode: tasks are torchrun agents, one per node. */
	bool torchrun;
	unsigned min_nodes;	/* elastic=MIN:MAX; 0: the step's nodes */
	unsigned max_nodes;
	unsigned restarts;	/* torchrun's --max-restarts */
	unsigned nproc;		/* workers per node; 0: one per GPU */
	/* init_process_group's store: through each node's relay
	 * (helper/python/sitecustomize.py), or torch's own alone. */
	bool store_tree;
	/* After the start (plugin/watch.c). */
	bool fail_fast;		/* a failed task stops the step */
	bool record_off;	/* no record of a failed step */
	char record_dir[DT_HELPER_PATH_MAX]; /* its folder; "": srun's */
};

/* Built-in defaults: off unless asked for, quiet, the default port range. */
void dt_config_init(struct dt_config *cfg);

/*
 * Apply plugstack.conf arguments (KEY=VALUE words). Returns 0, or -1 with
 * one sentence in ERR naming the bad argument and the valid ones.
 */
int dt_config_parse_site(struct dt_config *cfg, int argc, char *const argv[],
			 char *err, size_t errlen);

/*
 * On NODE (slurmstepd, once its name is known): each "%n" of topology=
 * becomes NODE's name, so that one plugstack.conf line gives each node of
 * a cluster of several kinds its own file. Returns 0, or -1 with ERR
 * where the name is not a plain one or the path grows too long.
 */
int dt_config_for_node(struct dt_config *cfg, const char *node, char *err,
		       size_t errlen);

/* The per-node placeholder of topology=, replaced by dt_config_for_node. */
#define DT_NODE_PLACEHOLDER "%n"

/*
 * Apply the value of --dist-train on top of CFG and enable it. ARG may be
 * NULL, "" or "(null)": that is how Slurm hands over a bare
 * "#SBATCH --dist-train" to the steps of the job.
 */
int dt_config_parse_option(struct dt_config *cfg, const char *arg,
			   char *err, size_t errlen);

/* Whether ARG carries no settings (see dt_config_parse_option). */
bool dt_option_arg_is_empty(const char *arg);

/*
 * The per-step settings of CFG as a --dist-train value that
 * dt_config_parse_option reads back ("verbose=no,pmix=yes,..."): how the
 * plugin hands them to the helper. Returns the length, as snprintf.
 */
size_t dt_config_format_settings(const struct dt_config *cfg, char *buf,
				 size_t len);

/*
 * Whether a step of NODES nodes and TASKS tasks can run CFG (torchrun mode
 * wants one agent per node, and elastic=MIN:MAX at most MAX nodes). srun
 * asks before launch and every node asks again, so that a site whose
 * plugstack.conf marks the plugin optional still never runs the step.
 * Returns 0, or -1 with one sentence in ERR naming the fix.
 */
int dt_config_check_step(const struct dt_config *cfg, uint32_t nodes,
			 uint32_t tasks, char *err, size_t errlen);

/*
 * Whether a step run in Slurm's OCI container (srun --container=BUNDLE,
 * BUNDLE non-empty) gets CFG's environment, on the Slurm release
 * SLURM_VERSION (as SLURM_VERSION_NUMBER) the plugin was built for.
 * Returns 0, or -1 with one sentence in ERR naming the release and the fix.
 */
int dt_config_check_container(const struct dt_config *cfg,
			      unsigned long slurm_version, const char *bundle,
			      char *err, size_t errlen);

/*
 * One row of the table of settings: its name, how it is written, its
 * default ("no", "300", or a description in parentheses where the
 * default is no value the setting takes), what it does, and who may give
 * it (--dist-train, plugstack.conf). The help texts and the documentation
 * are made from these (dist-train settings), so that they cannot drift.
 */
struct dt_setting_info {
	const char *name;
	const char *syntax;
	const char *default_text;
	const char *summary;
	bool user;
	bool site;
};

/* Row INDEX of the table into INFO; -1 past the last. */
int dt_setting_describe(size_t index, struct dt_setting_info *info);

/*
 * The syntax of every user setting (or every plugstack.conf argument,
 * with SITE), comma-separated, as the refusals list them. Returns the
 * length written.
 */
size_t dt_settings_list(bool site, char *buf, size_t len);

#endif
