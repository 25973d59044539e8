/*
 * dist-train exec [-s SETTINGS] [--] PROGRAM [ARGS...]: the plugin's work
 * without the plugin. Under `srun --mpi=pmix` (or plain srun), each task
 * bootstraps, binds itself, sets its environment, then becomes PROGRAM.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "bootstrap.h"
#include "nccl_check.h"
#include "commands.h"
#include "../common/bind_apply.h"
#include "../common/binding.h"
#include "../common/hwloc_machine.h"
#include "../common/store_hold.h"
#include "../common/store_port.h"

#define USAGE \
	"usage: " DT_NAME " exec [-s SETTINGS] [--port-range=LOW-HIGH] [--] " \
	"PROGRAM [ARGS...]\n" \
	"\n" \
	"Set up this task for distributed training, as srun --dist-train " \
	"does, then\n" \
	"run PROGRAM: run it under srun in every task, where the plugin is " \
	"not\n" \
	"installed (srun --mpi=pmix " DT_NAME " exec -- python3 train.py).\n" \
	"\n" \
	"  -s, --settings=SETTINGS  as --dist-train=SETTINGS (see " DT_NAME \
	" settings)\n" \
	"  --port-range=LOW-HIGH    where MASTER_PORT is taken without " \
	"reserved ports\n" \
	"  -h, --help               show this help\n" \
	"\n" \
	"See dist-train(1).\n"

static const char *process_getenv(const char *name, void *arg)
{
	(void)arg;
	return getenv(name);
}

int cmd_exec(int argc, char **argv)
{
	struct dt_config cfg;
	struct dt_env env = { 0 };
	struct dt_machine machine;
	char why[256] = "", notes[512] = "", err[512];
	bool have_machine, hook;
	int fd, next, rc, store_fd = -1;

	rc = bootstrap_options(argc, argv, USAGE, &cfg, &fd, &next);
	if (rc)
		return rc == BOOTSTRAP_HELP ? 0 : rc;
	if (next < argc && !strcmp(argv[next], "--"))
		next++;
	if (next >= argc) {
		helper_error("no program to run: give one, as in '" DT_NAME
			     " exec -- python3 train.py' (" DT_NAME
			     " exec --help)");
		return 2;
	}
	nccl_set_program(argv[next]);
	rc = bootstrap(&cfg, &env, &store_fd);
	if (rc)
		goto out;
	/* This task alone: its topology is read here, for it. */
	have_machine = cfg.bind != DT_BIND_OFF &&
		       dt_machine_load(cfg.topology[0] ? cfg.topology : NULL,
				       NULL, &machine, why, sizeof(why)) == 0;
	machine.slurm_minors = cfg.slurm_gpus_minors;
	rc = dt_bind_task(have_machine ? &machine : NULL, why, &cfg, NULL,
			  process_getenv, NULL, &env, notes, sizeof(notes),
			  err, sizeof(err));
	if (have_machine)
		dt_machine_free(&machine);
	if (rc < 0) {
		/* srun 26.05 does not say which node a task's line is from. */
		helper_error("on %s: %s", getenv("SLURMD_NODENAME") ?
			     getenv("SLURMD_NODENAME") : "this host", err);
		rc = 1;
		goto out;
	}
	rc = bootstrap_python_hook(&cfg, &env, &hook);
	if (rc)
		goto out;
	/* Rank 0's proven port, held into a Python program's store. */
	if (store_fd >= 0 &&
	    dt_store_hold(store_fd, dt_store_port(&env), hook, cfg.worker_lib,
			  argc - next, argv + next, process_getenv, NULL,
			  &env) == -1) {
		store_fd = -1;
		helper_error("out of memory");
		rc = 1;
		goto out;
	}
	store_fd = -1;
	for (size_t i = 0; i < env.count; i++) {
		const struct dt_env_entry *e = &env.entries[i];

		if (e->action == DT_ENV_UNSET)
			unsetenv(e->name);
		else if (setenv(e->name, e->value, 1) < 0)
			helper_error("cannot set %s (%s): rerun the program, "
				     "and report it if it recurs", e->name,
				     strerror(errno));
	}
	if (cfg.verbose)
		bootstrap_describe(&env, notes);
	dt_env_free(&env);
	/* The program lives as it would without us (see main.c). */
	prctl(PR_SET_PDEATHSIG, 0);
	execvp(argv[next], argv + next);
	helper_error("cannot run %s (%s): give the program's path, or add "
		     "its folder to PATH", argv[next], strerror(errno));
	return 127;
out:
	if (store_fd >= 0)
		close(store_fd);
	dt_env_free(&env);
	return rc;
}
