#include "config.h"

#include "settings.h"
#include "binding.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum scope {
	SCOPE_SITE = 1,		/* plugstack.conf argument */
	SCOPE_USER = 2,		/* --dist-train setting */
};

enum value_kind {
	VALUE_NONE,		/* a bare word: "off" */
	VALUE_OPTIONAL,		/* "verbose" or "verbose=no" */
	VALUE_REQUIRED,		/* "port-range=20000-28999" */
};

struct setting {
	const char *name;
	const char *syntax;	/* how messages show it */
	unsigned scopes;
	enum value_kind kind;
	/* VALUE is NULL when the word had no '='. */
	int (*apply)(struct dt_config *cfg, const char *value,
		     char *err, size_t errlen);
	/*
	 * For the help texts and the documentation, which are made from this
	 * table (dist-train settings): the default as a value the setting
	 * takes, so that a unit test can check it against dt_config_init, or
	 * in parentheses where it is no such value; and what it does.
	 */
	const char *default_text;
	const char *summary;
};

static int parse_bool(const char *name, const char *value, bool *out,
		      char *err, size_t errlen)
{
	static const char *const yes[] = { "yes", "on", "true", "1" };
	static const char *const no[] = { "no", "off", "false", "0" };

	if (!value) {
		*out = true;
		return 0;
	}
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcmp(value, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcmp(value, no[i])) {
			*out = false;
			return 0;
		}
	}
	dt_errf(err, errlen, "bad value '%s' for '%s': expected yes or no",
		value, name);
	return -1;
}

/* One of two words: *IS_SECOND says which. */
static int parse_either(const char *name, const char *value,
			const char *first, const char *second, bool *is_second,
			char *err, size_t errlen)
{
	if (!strcmp(value, first) || !strcmp(value, second)) {
		*is_second = !strcmp(value, second);
		return 0;
	}
	dt_errf(err, errlen, "bad value '%s' for '%s': expected %s or %s",
		value, name, first, second);
	return -1;
}

/* A decimal in [LO, HI], nothing else. */
static int parse_uint(const char *text, unsigned long lo, unsigned long hi,
		      unsigned long *out)
{
	char *end;
	unsigned long v;

	if (!text || text[0] < '0' || text[0] > '9')
		return -1;
	v = strtoul(text, &end, 10);
	if (*end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int apply_on(struct dt_config *cfg, const char *value,
		    char *err, size_t errlen)
{
	(void)value, (void)err, (void)errlen;
	cfg->enabled = true;
	return 0;
}

static int apply_off(struct dt_config *cfg, const char *value,
		     char *err, size_t errlen)
{
	(void)value, (void)err, (void)errlen;
	cfg->enabled = false;
	return 0;
}

static int apply_verbose(struct dt_config *cfg, const char *value,
			 char *err, size_t errlen)
{
	return parse_bool("verbose", value, &cfg->verbose, err, errlen);
}

static int apply_pmix(struct dt_config *cfg, const char *value,
		      char *err, size_t errlen)
{
	return parse_bool("pmix", value, &cfg->use_pmix, err, errlen);
}

static int apply_nccl(struct dt_config *cfg, const char *value,
		      char *err, size_t errlen)
{
	return parse_bool("nccl", value, &cfg->nccl, err, errlen);
}

static int apply_check(struct dt_config *cfg, const char *value,
		       char *err, size_t errlen)
{
	return parse_bool("check", value, &cfg->check, err, errlen);
}

static int apply_fail_fast(struct dt_config *cfg, const char *value,
			   char *err, size_t errlen)
{
	return parse_bool("fail-fast", value, &cfg->fail_fast, err, errlen);
}

static int apply_store(struct dt_config *cfg, const char *value,
		       char *err, size_t errlen)
{
	return parse_either("store", value, "torch", "tree", &cfg->store_tree,
			    err, errlen);
}

static int apply_record(struct dt_config *cfg, const char *value,
			char *err, size_t errlen)
{
	size_t n = strlen(value);

	cfg->record_off = !strcmp(value, "off");
	cfg->record_dir[0] = '\0';
	if (cfg->record_off)
		return 0;
	if (n == 0 || n >= sizeof(cfg->record_dir)) {
		dt_errf(err, errlen, "bad value for 'record': expected a "
			"folder, or off");
		return -1;
	}
	memcpy(cfg->record_dir, value, n + 1);
	return 0;
}

static int apply_timeout(struct dt_config *cfg, const char *value,
			 char *err, size_t errlen)
{
	unsigned long v;

	if (parse_uint(value, 1, DT_MAX_TIMEOUT, &v) < 0) {
		dt_errf(err, errlen, "bad value '%s' for 'timeout': expected "
			"seconds, 1 to %d", value, DT_MAX_TIMEOUT);
		return -1;
	}
	cfg->timeout = (unsigned)v;
	return 0;
}

static int apply_bind(struct dt_config *cfg, const char *value,
		      char *err, size_t errlen)
{
	static const int modes[] = { DT_BIND_GPU, DT_BIND_NUMA, DT_BIND_OFF };

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (!strcmp(value, dt_bind_mode_name(modes[i]))) {
			cfg->bind = modes[i];
			return 0;
		}
	}
	dt_errf(err, errlen, "bad value '%s' for 'bind': expected gpu, numa "
		"or off", value);
	return -1;
}

static int apply_visible_gpus(struct dt_config *cfg, const char *value,
			      char *err, size_t errlen)
{
	return parse_either("visible-gpus", value, "all", "own",
			    &cfg->own_gpu_only, err, errlen);
}

static int apply_share_gpus(struct dt_config *cfg, const char *value,
			    char *err, size_t errlen)
{
	return parse_bool("share-gpus", value, &cfg->share_gpus, err, errlen);
}

static int set_path(char *buf, const char *name, const char *value,
		    char *err, size_t errlen)
{
	if (value[0] != '/' || strlen(value) >= DT_HELPER_PATH_MAX) {
		dt_errf(err, errlen, "bad value '%s' for '%s': expected an "
			"absolute path", value, name);
		return -1;
	}
	strcpy(buf, value);
	return 0;
}

static int apply_topology(struct dt_config *cfg, const char *value,
			  char *err, size_t errlen)
{
	return set_path(cfg->topology, "topology", value, err, errlen);
}

int dt_config_for_node(struct dt_config *cfg, const char *node, char *err,
		       size_t errlen)
{
	char path[DT_HELPER_PATH_MAX];
	const char *at;
	size_t used = 0, node_len = strlen(node);
	const char *from = cfg->topology;

	if (!strstr(from, DT_NODE_PLACEHOLDER))
		return 0;
	/* A node's name from slurm.conf; one that could leave the folder
	 * (a "/" or "..") is not put in a path. */
	if (!node_len || strchr(node, '/') || !strcmp(node, "..") ||
	    !strcmp(node, ".")) {
		/* message: the caller names the fix (plugin/dist_train.c) */
		dt_errf(err, errlen, "topology=%s: this node's name '%s' "
			"cannot stand for %%n in a path",
			cfg->topology, node);
		return -1;
	}
	while ((at = strstr(from, DT_NODE_PLACEHOLDER))) {
		size_t before = (size_t)(at - from);

		if (used + before + node_len >= sizeof(path))
			goto too_long;
		memcpy(path + used, from, before);
		memcpy(path + used + before, node, node_len);
		used += before + node_len;
		from = at + strlen(DT_NODE_PLACEHOLDER);
	}
	if (used + strlen(from) >= sizeof(path))
		goto too_long;
	strcpy(path + used, from);
	strcpy(cfg->topology, path);
	return 0;
too_long:
	/* message: the caller names the fix (plugin/dist_train.c) */
	dt_errf(err, errlen, "topology=%s: too long once %%n is this node's "
		"name '%s'", cfg->topology, node);
	return -1;
}

static int apply_topology_cache(struct dt_config *cfg, const char *value,
				char *err, size_t errlen)
{
	if (!strcmp(value, "off")) {
		cfg->topology_cache[0] = '\0';
		return 0;
	}
	return set_path(cfg->topology_cache, "topology-cache", value, err,
			errlen);
}

static int apply_slurm_gpus(struct dt_config *cfg, const char *value,
			    char *err, size_t errlen)
{
	if (!strcmp(value, "autodetect") || !strcmp(value, "minors")) {
		cfg->slurm_gpus_minors = !strcmp(value, "minors");
		return 0;
	}
	dt_errf(err, errlen, "bad value '%s' for 'slurm-gpus': expected "
		"autodetect or minors", value);
	return -1;
}

static int apply_torchrun(struct dt_config *cfg, const char *value,
			  char *err, size_t errlen)
{
	return parse_bool("torchrun", value, &cfg->torchrun, err, errlen);
}

/* elastic=MIN:MAX nodes; it implies torchrun. */
static int apply_elastic(struct dt_config *cfg, const char *value,
			 char *err, size_t errlen)
{
	const char *colon = strchr(value, ':');
	unsigned long lo, hi;
	char lo_text[16];
	size_t n = colon ? (size_t)(colon - value) : 0;

	if (!colon || n == 0 || n >= sizeof(lo_text))
		goto bad;
	memcpy(lo_text, value, n);
	lo_text[n] = '\0';
	if (parse_uint(lo_text, 1, 1u << 24, &lo) < 0 ||
	    parse_uint(colon + 1, 1, 1u << 24, &hi) < 0)
		goto bad;
	if (lo > hi) {
		dt_errf(err, errlen, "elastic=%s: the minimum %lu is above the "
			"maximum %lu; expected MIN:MAX with MIN <= MAX", value,
			lo, hi);
		return -1;
	}
	cfg->min_nodes = (unsigned)lo;
	cfg->max_nodes = (unsigned)hi;
	cfg->torchrun = true;
	return 0;
bad:
	dt_errf(err, errlen, "bad value '%s' for 'elastic': expected MIN:MAX "
		"nodes, such as 2:4", value);
	return -1;
}

static int apply_restarts(struct dt_config *cfg, const char *value,
			  char *err, size_t errlen)
{
	unsigned long v;

	if (parse_uint(value, 0, 1000000, &v) < 0) {
		dt_errf(err, errlen, "bad value '%s' for 'restarts': expected a "
			"number", value);
		return -1;
	}
	cfg->restarts = (unsigned)v;
	return 0;
}

static int apply_nproc(struct dt_config *cfg, const char *value,
		       char *err, size_t errlen)
{
	unsigned long v;

	if (parse_uint(value, 1, 4096, &v) < 0) {
		dt_errf(err, errlen, "bad value '%s' for 'nproc': expected a "
			"number of processes per node, 1 to 4096", value);
		return -1;
	}
	cfg->nproc = (unsigned)v;
	return 0;
}

/* An absolute path into BUF (of DT_HELPER_PATH_MAX), for setting NAME. */
/* Admins name the helper; never a job (it runs in every task). */
static int apply_helper(struct dt_config *cfg, const char *value,
			char *err, size_t errlen)
{
	return set_path(cfg->helper, "helper", value, err, errlen);
}

static int apply_worker_lib(struct dt_config *cfg, const char *value,
			    char *err, size_t errlen)
{
	return set_path(cfg->worker_lib, "worker-lib", value, err, errlen);
}

static int apply_default(struct dt_config *cfg, const char *value,
			 char *err, size_t errlen)
{
	if (!strcmp(value, "on"))
		cfg->default_on = true;
	else if (!strcmp(value, "off"))
		cfg->default_on = false;
	else {
		dt_errf(err, errlen, "bad value '%s' for 'default': expected "
			"on or off", value);
		return -1;
	}
	cfg->enabled = cfg->default_on;
	return 0;
}

static int apply_port_range(struct dt_config *cfg, const char *value,
			    char *err, size_t errlen)
{
	char lo_text[8];
	const char *dash = strchr(value, '-');
	unsigned long lo, hi;
	size_t n = dash ? (size_t)(dash - value) : 0;

	if (!dash || n == 0 || n >= sizeof(lo_text))
		goto bad;
	memcpy(lo_text, value, n);
	lo_text[n] = '\0';
	if (parse_uint(lo_text, 1024, 65535, &lo) < 0 ||
	    parse_uint(dash + 1, 1024, 65535, &hi) < 0 || hi < lo + 3)
		goto bad;
	cfg->port_lo = (uint16_t)lo;
	cfg->port_hi = (uint16_t)hi;
	return 0;
bad:
	dt_errf(err, errlen, "bad value '%s' for 'port-range': expected "
		"LOW-HIGH with 1024 <= LOW, LOW + 3 <= HIGH <= 65535", value);
	return -1;
}

static const struct setting settings[] = {
	{ "on", "on", SCOPE_USER, VALUE_NONE, apply_on, "(the site's default=)",
	  "give the step the environment (what a bare --dist-train does)" },
	{ "off", "off", SCOPE_USER, VALUE_NONE, apply_off,
	  "(the site's default=)",
	  "leave the step alone (opts out of #SBATCH --dist-train or the "
	  "site's default=on)" },
	{ "verbose", "verbose[=yes|no]", SCOPE_USER | SCOPE_SITE,
	  VALUE_OPTIONAL, apply_verbose, "no",
	  "each task prints one line on stderr: what it got, what its setup "
	  "took" },
	{ "nccl", "nccl[=yes|no]", SCOPE_USER | SCOPE_SITE, VALUE_OPTIONAL,
	  apply_nccl, "no",
	  "set NCCL_COMM_ID, so that a plain NCCL program bootstraps from the "
	  "environment" },
	{ "check", "check[=yes|no]", SCOPE_USER | SCOPE_SITE, VALUE_OPTIONAL,
	  apply_check, "no",
	  "before the program, every rank reaches rank 0 and, where there "
	  "are GPUs, an NCCL (AMD: RCCL) all-reduce runs" },
	{ "pmix", "pmix[=yes|no]", SCOPE_USER | SCOPE_SITE, VALUE_OPTIONAL,
	  apply_pmix, "yes",
	  "ranks from PMIx and a start barrier when the step has PMIx "
	  "(srun --mpi=pmix)" },
	{ "timeout", "timeout=SECONDS", SCOPE_USER | SCOPE_SITE,
	  VALUE_REQUIRED, apply_timeout, "300",
	  "how long ranks wait for each other at the start (1 to 86400)" },
	{ "bind", "bind=gpu|numa|off", SCOPE_USER | SCOPE_SITE,
	  VALUE_REQUIRED, apply_bind, "gpu",
	  "gpu: each task's GPU, its NUMA node's cores and memory, the "
	  "nearest NIC; numa: spread over NUMA nodes; off: no binding" },
	{ "visible-gpus", "visible-gpus=all|own", SCOPE_USER | SCOPE_SITE,
	  VALUE_REQUIRED, apply_visible_gpus, "all",
	  "all: every task sees the step's GPUs and uses GPU LOCAL_RANK; "
	  "own: CUDA_VISIBLE_DEVICES (AMD: ROCR_VISIBLE_DEVICES) is its own "
	  "GPU only" },
	{ "share-gpus", "share-gpus[=yes|no]", SCOPE_USER | SCOPE_SITE,
	  VALUE_OPTIONAL, apply_share_gpus, "no",
	  "allow more tasks than GPUs on a node (NCCL still refuses two "
	  "ranks of one communicator on one GPU)" },
	{ "torchrun", "torchrun[=yes|no]", SCOPE_USER, VALUE_OPTIONAL,
	  apply_torchrun, "no",
	  "each task is a torchrun agent, one per node, that starts the "
	  "workers" },
	{ "elastic", "elastic=MIN:MAX", SCOPE_USER, VALUE_REQUIRED,
	  apply_elastic, "(the step's nodes)",
	  "torchrun mode, elastic: go on while at least MIN nodes are left "
	  "(needs srun --no-kill)" },
	{ "restarts", "restarts=N", SCOPE_USER | SCOPE_SITE, VALUE_REQUIRED,
	  apply_restarts, "3", "torchrun's worker restart budget" },
	{ "nproc", "nproc=N", SCOPE_USER, VALUE_REQUIRED, apply_nproc,
	  "(one per GPU, else --cpus-per-task)",
	  "torchrun's workers per node" },
	{ "store", "store=tree|torch", SCOPE_USER | SCOPE_SITE,
	  VALUE_REQUIRED, apply_store, "tree",
	  "tree: a Python program's init_process_group reaches rank 0's "
	  "store through its node, one connection a node; torch: every rank "
	  "connects to torch's own store on rank 0" },
	{ "fail-fast", "fail-fast[=yes|no]", SCOPE_USER | SCOPE_SITE,
	  VALUE_OPTIONAL, apply_fail_fast, "yes",
	  "the first task that fails (non-zero exit, a signal) stops the "
	  "step, and srun names it; torchrun mode: once an agent gives up; "
	  "elastic: once fewer than MIN nodes are left" },
	{ "record", "record=DIR|off", SCOPE_USER | SCOPE_SITE, VALUE_REQUIRED,
	  apply_record, "(srun's working directory)",
	  "where srun writes dist-train-JOB.STEP.json when a step fails: "
	  "which task failed first, how, and what it stopped" },
	{ "default", "default=on|off", SCOPE_SITE, VALUE_REQUIRED,
	  apply_default, "off",
	  "on: every step gets the environment without --dist-train (users "
	  "opt out with --dist-train=off)" },
	{ "port-range", "port-range=LOW-HIGH", SCOPE_SITE, VALUE_REQUIRED,
	  apply_port_range, "20000-28999",
	  "where MASTER_PORT is taken when slurm.conf reserves no ports "
	  "(MpiParams=ports); keep it below 32768" },
	{ "helper", "helper=PATH", SCOPE_SITE, VALUE_REQUIRED,
	  apply_helper, "(BINDIR/dist-train)",
	  "the dist-train command the plugin runs in tasks, as the user" },
	{ "topology", "topology=FILE", SCOPE_SITE, VALUE_REQUIRED,
	  apply_topology, "(discovered)",
	  "an hwloc XML of the node (lstopo --of xml), read instead of "
	  "discovering the node; %n in it is the node's name" },
	{ "topology-cache", "topology-cache=PATH|off", SCOPE_SITE,
	  VALUE_REQUIRED, apply_topology_cache, DT_TOPOLOGY_CACHE_DEFAULT,
	  "where slurmstepd keeps the node's machine, discovered once as "
	  "root; off: discover in every step" },
	{ "slurm-gpus", "slurm-gpus=autodetect|minors", SCOPE_SITE,
	  VALUE_REQUIRED, apply_slurm_gpus, "autodetect",
	  "how SLURM_STEP_GPUS numbers a node's GPUs: autodetect: in the "
	  "order gres.conf's AutoDetect finds them (NVIDIA: PCI bus order), "
	  "as when gres.conf lists them in that order; minors: as "
	  "/dev/nvidiaN, for a gres.conf that lists File=/dev/nvidia[0-N] "
	  "on nodes whose minors do not follow the bus" },
	{ "worker-lib", "worker-lib=PATH", SCOPE_SITE, VALUE_REQUIRED,
	  apply_worker_lib, "(PKGLIBDIR/dist_train_worker.so)",
	  "the library preloaded into torchrun's workers to bind each one, "
	  "into rank 0's program to guard its store, and into a container "
	  "step's program to bind it again" },
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static void list_valid(unsigned scope, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < NSETTINGS; i++) {
		int n;

		if (!(settings[i].scopes & scope))
			continue;
		n = snprintf(buf + used, len - used, "%s%s",
			     used ? ", " : "", settings[i].syntax);
		if (n < 0 || (size_t)n >= len - used)
			return;
		used += (size_t)n;
	}
}

/* Apply one "name" or "name=value" word of the given scope. */
static int apply_word(struct dt_config *cfg, unsigned scope, const char *word,
		      size_t wordlen, const char *what, char *err,
		      size_t errlen)
{
	char name[32], valid[1024], value[256];
	const char *eq = memchr(word, '=', wordlen);
	size_t namelen = eq ? (size_t)(eq - word) : wordlen;
	const struct setting *s = NULL;
	int rc;

	if (namelen < sizeof(name)) {
		memcpy(name, word, namelen);
		name[namelen] = '\0';
		for (size_t i = 0; i < NSETTINGS; i++)
			if ((settings[i].scopes & scope) &&
			    !strcmp(settings[i].name, name))
				s = &settings[i];
	}
	if (!s) {
		bool site_only = false;

		/* A user giving a key of the site's own. */
		for (size_t i = 0; i < NSETTINGS && scope == SCOPE_USER &&
		     namelen < sizeof(name); i++)
			site_only = site_only ||
				    (settings[i].scopes == SCOPE_SITE &&
				     !strcmp(settings[i].name, name));
		list_valid(scope, valid, sizeof(valid));
		if (site_only) {
			dt_errf(err, errlen, "%s '%s' is the administrator's (a "
				"plugstack.conf argument), not yours to give: "
				"remove it; valid: %s", what, name, valid);
			return -1;
		}
		dt_errf(err, errlen, "unknown %s '%.*s'; valid: %s", what,
			(int)wordlen, word, valid);
		return -1;
	}
	if (eq && s->kind == VALUE_NONE) {
		dt_errf(err, errlen, "%s '%s' takes no value: remove '=' and "
			"what follows", what, name);
		return -1;
	}
	if (!eq && s->kind == VALUE_REQUIRED) {
		dt_errf(err, errlen, "%s '%s' needs a value: write it as %s",
			what, name, s->syntax);
		return -1;
	}
	if (eq) {
		size_t vlen = wordlen - namelen - 1;

		if (vlen >= sizeof(value)) {
			dt_errf(err, errlen, "value of '%s' is too long: give a "
				"shorter one", name);
			return -1;
		}
		memcpy(value, eq + 1, vlen);
		value[vlen] = '\0';
	}
	rc = s->apply(cfg, eq ? value : NULL, err, errlen);
	return rc;
}

void dt_config_init(struct dt_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->port_lo = DT_DEFAULT_PORT_LO;
	cfg->port_hi = DT_DEFAULT_PORT_HI;
	cfg->use_pmix = true;
	cfg->timeout = DT_DEFAULT_TIMEOUT;
	cfg->bind = DT_BIND_GPU;
	cfg->fail_fast = true;
	cfg->store_tree = true;
	cfg->restarts = DT_DEFAULT_RESTARTS;
	snprintf(cfg->helper, sizeof(cfg->helper), "%s", DT_HELPER_DEFAULT);
	snprintf(cfg->worker_lib, sizeof(cfg->worker_lib), "%s",
		 DT_WORKER_LIB_DEFAULT);
	snprintf(cfg->topology_cache, sizeof(cfg->topology_cache), "%s",
		 DT_TOPOLOGY_CACHE_DEFAULT);
}

int dt_config_parse_site(struct dt_config *cfg, int argc, char *const argv[],
			 char *err, size_t errlen)
{
	for (int i = 0; i < argc; i++) {
		if (!strchr(argv[i], '=')) {
			char valid[512];

			list_valid(SCOPE_SITE, valid, sizeof(valid));
			dt_errf(err, errlen, "plugstack.conf argument '%s' is "
				"not KEY=VALUE; valid: %s", argv[i], valid);
			return -1;
		}
		if (apply_word(cfg, SCOPE_SITE, argv[i], strlen(argv[i]),
			       "plugstack.conf argument", err, errlen) < 0)
			return -1;
	}
	return 0;
}

bool dt_option_arg_is_empty(const char *arg)
{
	return !arg || !*arg || !strcmp(arg, "(null)");
}

int dt_config_parse_option(struct dt_config *cfg, const char *arg,
			   char *err, size_t errlen)
{
	const char *p = arg;

	cfg->enabled = true;
	if (dt_option_arg_is_empty(arg))
		return 0;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);

		if (n == 0) {
			dt_errf(err, errlen, "empty setting in '%s': remove the "
				"extra comma", arg);
			return -1;
		}
		if (apply_word(cfg, SCOPE_USER, p, n, "setting", err,
			       errlen) < 0)
			return -1;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

size_t dt_config_format_settings(const struct dt_config *cfg, char *buf,
				 size_t len)
{
	int n = snprintf(buf, len, "%s,verbose=%s,pmix=%s,nccl=%s,check=%s,"
			 "timeout=%u,bind=%s,visible-gpus=%s,share-gpus=%s,"
			 "torchrun=%s,restarts=%u,store=%s",
			 cfg->enabled ? "on" : "off",
			 cfg->verbose ? "yes" : "no",
			 cfg->use_pmix ? "yes" : "no",
			 cfg->nccl ? "yes" : "no", cfg->check ? "yes" : "no",
			 cfg->timeout, dt_bind_mode_name(cfg->bind),
			 cfg->own_gpu_only ? "own" : "all",
			 cfg->share_gpus ? "yes" : "no",
			 cfg->torchrun ? "yes" : "no", cfg->restarts,
			 cfg->store_tree ? "tree" : "torch");

	/* elastic= and nproc= have no neutral value: only when set. */
	if (n >= 0 && cfg->max_nodes && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ",elastic=%u:%u",
			      cfg->min_nodes, cfg->max_nodes);
	if (n >= 0 && cfg->nproc && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ",nproc=%u",
			      cfg->nproc);

	return n < 0 ? 0 : (size_t)n;
}

int dt_config_check_step(const struct dt_config *cfg, uint32_t nodes,
			 uint32_t tasks, char *err, size_t errlen)
{
	if (!cfg->enabled || !cfg->torchrun)
		return 0;
	if (tasks != nodes) {
		dt_errf(err, errlen, "--dist-train=torchrun runs one torchrun "
			"agent per node, which starts the processes: use "
			"--ntasks-per-node=1 (this step has %u tasks on %u "
			"nodes)", tasks, nodes);
		return -1;
	}
	if (cfg->max_nodes > nodes) {
		dt_errf(err, errlen, "--dist-train=elastic=%u:%u asks for up "
			"to %u nodes but the step has %u: use --nodes=%u, or "
			"elastic=%u:%u", cfg->min_nodes, cfg->max_nodes,
			cfg->max_nodes, nodes, cfg->max_nodes,
			cfg->min_nodes > nodes ? nodes : cfg->min_nodes, nodes);
		return -1;
	}
	return 0;
}

/*
 * Up to 22.05 slurmstepd writes the container's config.json, environment
 * included, once per step before the tasks exist: what a plugin sets in a
 * task never reaches the program (not even SLURM_PROCID does). From 23.02
 * each task writes its own, after the plugins' task_init.
 */
#define DT_SLURM_23_02 ((23UL << 16) | (2UL << 8))

int dt_config_check_container(const struct dt_config *cfg,
			      unsigned long slurm_version, const char *bundle,
			      char *err, size_t errlen)
{
	if (!cfg->enabled || !bundle || !*bundle ||
	    slurm_version >= DT_SLURM_23_02)
		return 0;
	dt_errf(err, errlen, "--dist-train cannot reach a program in Slurm "
		"%lu.%02lu's OCI container (--container=%.200s): this release "
		"gives the container the step's environment before any task's, "
		"so the program would run without RANK and MASTER_ADDR. Run "
		"the container runtime as the task's command instead (its "
		"environment is passed on), or use Slurm 23.02 or later",
		slurm_version >> 16, (slurm_version >> 8) & 255, bundle);
	return -1;
}

int dt_setting_describe(size_t index, struct dt_setting_info *info)
{
	const struct setting *s;

	if (index >= NSETTINGS)
		return -1;
	s = &settings[index];
	info->name = s->name;
	info->syntax = s->syntax;
	info->default_text = s->default_text;
	info->summary = s->summary;
	info->user = (s->scopes & SCOPE_USER) != 0;
	info->site = (s->scopes & SCOPE_SITE) != 0;
	return 0;
}

size_t dt_settings_list(bool site, char *buf, size_t len)
{
	list_valid(site ? SCOPE_SITE : SCOPE_USER, buf, len);
	return strlen(buf);
}
