/*
 * srun (local context), sbatch and salloc (allocator context): everything
 * that can be checked before a job or step exists is checked here, so a
 * mistake ends the command with one message instead of failing tasks.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "plugin.h"

int srun_post_opt(spank_t sp)
{
	struct plugin_state *st = plugin_state();
	const char *port;
	char err[640];

	(void)sp;
	st->step = st->site;
	if (!st->option_seen)
		return 0;
	if (!st->site_ok) {
		dt_log_error("--dist-train is unavailable: plugstack.conf is "
			     "wrong (%s); ask the cluster's administrator to "
			     "fix it", st->site_error);
		return -1;
	}
	if (dt_config_parse_option(&st->step, st->option_arg, err,
				   sizeof(err)) < 0) {
		dt_log_error("--dist-train=%s: %s", st->option_arg, err);
		return -1;
	}
	if (!st->step.enabled)
		return 0;

	/* The tasks inherit it; say so now rather than from every task. */
	port = getenv("MASTER_PORT");
	if (port && *port && !dt_is_port(port)) {
		dt_log_error("MASTER_PORT='%s' in your environment is not a "
			     "port number (1-65535): fix or unset it", port);
		return -1;
	}
	return 0;
}
