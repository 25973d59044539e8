/*
 * dist-train: the command-line companion of the dist_train SPANK plugin.
 */
#include "config.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "commands.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{ "exec", cmd_exec,
	  "set up this task for distributed training, then run a program" },
	{ "env", cmd_env,
	  "set up this task, then print its environment as shell code" },
	{ "plan", cmd_plan,
	  "show the GPU, NUMA node, CPUs and NIC of each local rank" },
	{ "hostnames", cmd_hostnames,
	  "expand a Slurm host list, one host per line" },
	{ "stacks", cmd_stacks,
	  "every rank's Python stack in a running step, grouped" },
	{ "why", cmd_why,
	  "what ended a step, after the job is gone, from its record" },
	{ "settings", cmd_settings,
	  "list the --dist-train settings and plugstack.conf arguments" },
	{ "bootstrap", cmd_bootstrap,
	  "(run by the dist_train plugin in each task)" },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

void helper_error(const char *fmt, ...)
{
	va_list ap;

	fputs(DT_NAME ": error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void usage(FILE *out)
{
	fprintf(out, "usage: " DT_NAME " COMMAND [ARGS...]\n\ncommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-12s %s\n", commands[i].name,
			commands[i].summary);
	fprintf(out, "  %-12s %s\n  %-12s %s\n\n'" DT_NAME " COMMAND --help' "
		"shows a command's options. See dist-train(1).\n",
		"help", "show this help", "version", "show the version");
}

/*
 * The helper never outlives what started it: a step killed during the
 * bootstrap (scancel) leaves nothing behind, even when the helper runs in
 * a process group of its own. The parent may have died before the request
 * took hold: then it is already gone.
 */
static void die_with_parent(void)
{
	pid_t parent = getppid();

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() != parent)
		_exit(1);
}

int main(int argc, char **argv)
{
	die_with_parent();
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "-h")) {
		/* "help COMMAND" is "COMMAND --help". */
		for (size_t i = 0; argc > 2 && i < NCOMMANDS; i++) {
			static char help_option[] = "--help";
			char *help_argv[] = { argv[2], help_option, NULL };

			if (!strcmp(argv[2], commands[i].name))
				return commands[i].run(2, help_argv);
		}
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		printf(DT_NAME " " PACKAGE_VERSION "\n");
		return 0;
	}
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	helper_error("unknown command '%s'; run '" DT_NAME " help'",
		     argv[1]);
	return 2;
}
