/*
 * slurmstepd, once a node, in user_init: what srun handed the step for
 * the plugin alone (srun.c) leaves the step's environment before any
 * task starts, so that no program sees it, even where the node's setup
 * failed: the step's secret, srun's or else one the user exported for
 * dist-train exec, and rank 0's host from srun's hostfile, which the
 * node's tasks inherit in the plugin's state (task.c), and the watch's
 * port, slurmstepd's alone (report.c read it). Only a real secret is
 * kept; the helper says what is missing.
 */
#include "config.h"

#include <string.h>

#include "plugin.h"

/*
 * What srun handed the step in NAME, out of the step's environment before
 * any task starts, so that no program sees it, even where the node's
 * setup failed. Copied into BUF when it fits; BUF is "" otherwise.
 */
static void take_env(spank_t sp, const char *name, char *buf, size_t len)
{
	char **envp = NULL;
	const char *value = NULL;

	buf[0] = '\0';
	if (spank_get_item(sp, S_JOB_ENV, &envp) == ESPANK_SUCCESS)
		value = dt_envp_get(envp, name);
	if (!value)
		return;
	if (strlen(value) < len)
		memcpy(buf, value, strlen(value) + 1);
	spank_unsetenv(sp, name);
}

void take_srun_env(spank_t sp, struct plugin_state *st)
{
	char user[DT_SECRET_HEX + 1], port[8];

	take_env(sp, DT_USER_SECRET_ENV, user, sizeof(user));
	take_env(sp, DT_SECRET_ENV, st->secret_hex, sizeof(st->secret_hex));
	if (!st->secret_hex[0])
		memcpy(st->secret_hex, user, sizeof(user));
	explicit_bzero(user, sizeof(user));
	if (strlen(st->secret_hex) != DT_SECRET_HEX)
		explicit_bzero(st->secret_hex, sizeof(st->secret_hex));
	take_env(sp, DT_RANK0_HOST_ENV, st->rank0_host,
		 sizeof(st->rank0_host));
	take_env(sp, DT_WATCH_PORT_ENV, port, sizeof(port));
}
