/*
 * --dist-train[=SETTINGS], registered in srun, sbatch, salloc and
 * slurmstepd. Slurm may call the callback several times for one command
 * (environment first, then the command line; in slurmstepd once from the
 * launch message and once from the environment): the last value wins, so
 * the callback only records it, and validates it where a user is waiting.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

static int option_cb(int val, const char *optarg, int remote);

/* struct spank_option wants writable strings. */
static char option_name[] = "dist-train";
static char option_arginfo[] = "SETTINGS";
/* srun --help shows it: made from the table of settings at registration. */
static char option_usage[1024];
#define OPTION_USAGE_HEAD \
	"Give every task torchrun's environment (RANK, LOCAL_RANK, " \
	"WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...) and bind it to its GPU. " \
	"SETTINGS, comma-separated: "
#define OPTION_USAGE_TAIL ". Defaults and meanings: dist-train settings, " \
	"dist_train(8)."

/* static: a global named like one of srun's would shadow it. */
static struct spank_option dist_train_option = {
	option_name, option_arginfo, option_usage, 2, 0, option_cb
};

static int option_cb(int val, const char *optarg, int remote)
{
	struct plugin_state *st = plugin_state();
	struct dt_config probe;
	char err[640];

	(void)val;
	free(st->option_arg);
	st->option_arg = NULL;
	if (!dt_option_arg_is_empty(optarg) &&
	    !(st->option_arg = strdup(optarg)))
		return remote ? 0 : -1;
	st->option_seen = true;
	if (remote)
		return 0;

	/* srun, sbatch, salloc: refuse before anything is submitted. */
	probe = st->site;
	if (dt_config_parse_option(&probe, optarg, err, sizeof(err)) < 0) {
		dt_log_error("--dist-train=%s: %s", optarg, err);
		return -1;
	}
	return 0;
}

int options_register(spank_t sp)
{
	char valid[512];
	spank_err_t rc;

	dt_settings_list(false, valid, sizeof(valid));
	snprintf(option_usage, sizeof(option_usage), "%s%s%s",
		 OPTION_USAGE_HEAD, valid, OPTION_USAGE_TAIL);
	rc = spank_option_register(sp, &dist_train_option);

	if (rc != ESPANK_SUCCESS) {
		dt_log_error("cannot register --dist-train (%s): ask your "
			     "administrator to check that no other plugin in "
			     "plugstack.conf adds --dist-train",
			     spank_strerror(rc));
		return -1;
	}
	return 0;
}

void options_free(void)
{
	struct plugin_state *st = plugin_state();

	free(st->option_arg);
	st->option_arg = NULL;
}
