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

#define USAGE \
	"usage: " DT_NAME " env [-s SETTINGS] [--port-range=LOW-HIGH]\n" \
	"\n" \
	"Set up this task as " DT_NAME " exec does, then print its " \
	"environment as\n" \
	"shell code instead of running a program: eval \"$(" DT_NAME \
	" env)\" in a task's\n" \
	"script.\n" \
	"\n" \
	"  -s, --settings=SETTINGS  as --dist-train=SETTINGS (see " DT_NAME \
	" settings)\n" \
	"  --port-range=LOW-HIGH    where MASTER_PORT is taken without " \
	"reserved ports\n" \
	"  -h, --help               show this help\n" \
	"\n" \
	"See dist-train(1).\n"

int cmd_env(int argc, char **argv)
{
	struct dt_config cfg;
	struct dt_env env = { 0 };
	int fd, next, rc;

	rc = bootstrap_options(argc, argv, USAGE, &cfg, &fd, &next);
	if (rc)
		return rc == BOOTSTRAP_HELP ? 0 : rc;
	if (next != argc) {
		helper_error("unexpected argument '%s': remove it, as " DT_NAME
			     " env takes options only (" DT_NAME " env --help)",
			     argv[next]);
		return 2;
	}
	rc = bootstrap(&cfg, &env, NULL);
	if (rc)
		goto out;
	rc = bootstrap_python_hook(&cfg, &env, NULL);
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
