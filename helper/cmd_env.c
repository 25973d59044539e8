/*
 * dist-train env [-s SETTINGS]: bootstrap, then print the environment as
 * shell code for eval, one `export NAME='VALUE'` or `unset NAME` a line.
 */
#include "config.h"

#include <stdio.h>

#include "bootstrap.h"
#include "commands.h"

/* VALUE in single quotes, each ' written as '\''. */
static void print_quoted(const char *value)
{
	putchar('\'');
	for (const char *p = value; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", stdout);
		else
			putchar(*p);
	}
	putchar('\'');
}

int cmd_env(int argc, char **argv)
{
	struct dt_config cfg;
	struct dt_env env = { 0 };
	int fd, next, rc;

	rc = bootstrap_options(argc, argv, &cfg, &fd, &next);
	if (rc)
		return rc;
	if (next != argc) {
		helper_error("usage: " DT_NAME " env [--settings=SETTINGS]");
		return 2;
	}
	rc = bootstrap(&cfg, &env);
	if (rc)
		goto out;
	rc = bootstrap_python_hook(&cfg, &env);
	if (rc)
		goto out;
	for (size_t i = 0; i < env.count; i++) {
		const struct dt_env_entry *e = &env.entries[i];

		if (e->action == DT_ENV_UNSET) {
			printf("unset %s\n", e->name);
		} else {
			printf("export %s=", e->name);
			print_quoted(e->value);
			putchar('\n');
		}
	}
	if (cfg.verbose)
		bootstrap_describe(&env, "");
	if (fflush(stdout) == EOF)
		rc = 1;
out:
	dt_env_free(&env);
	return rc;
}
