/*
 * dist-train exec [-s SETTINGS] [--] PROGRAM [ARGS...]: the plugin's work
 * without the plugin. Under `srun --mpi=pmix` (or plain srun), each task
 * bootstraps, sets its environment, then becomes PROGRAM.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "commands.h"

int cmd_exec(int argc, char **argv)
{
	struct dt_config cfg;
	struct dt_env env = { 0 };
	int fd, next, rc;

	rc = bootstrap_options(argc, argv, &cfg, &fd, &next);
	if (rc)
		return rc;
	if (next < argc && !strcmp(argv[next], "--"))
		next++;
	if (next >= argc) {
		helper_error("usage: " DT_NAME " exec [--settings=SETTINGS] "
			     "[--] PROGRAM [ARGS...]");
		return 2;
	}
	rc = bootstrap(&cfg, &env);
	if (rc)
		goto out;
	for (size_t i = 0; i < env.count; i++) {
		const struct dt_env_entry *e = &env.entries[i];

		if (e->action == DT_ENV_UNSET)
			unsetenv(e->name);
		else if (setenv(e->name, e->value, 1) < 0)
			helper_error("cannot set %s: %s", e->name,
				     strerror(errno));
	}
	if (cfg.verbose)
		bootstrap_describe(&env);
	dt_env_free(&env);
	execvp(argv[next], argv + next);
	helper_error("cannot run %s: %s", argv[next], strerror(errno));
	return 127;
out:
	dt_env_free(&env);
	return rc;
}
