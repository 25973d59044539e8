/*
 * What the helper does in each task, for the plugin (`dist-train
 * bootstrap`) or by itself (`exec`, `env`): find the task's place (PMIx,
 * cross-checked against Slurm, or Slurm alone), agree with rank 0 on a
 * rendezvous port that is free, wait until every rank has arrived,
 * optionally run an NCCL all-reduce, and compute the environment.
 */
#ifndef DIST_TRAIN_HELPER_BOOTSTRAP_H
#define DIST_TRAIN_HELPER_BOOTSTRAP_H

#include <stdbool.h>

#include "../common/settings.h"
#include "../common/train_env.h"

/*
 * Parse the options `bootstrap`, `exec` and `env` share:
 *   -s, --settings=SETTINGS   as --dist-train=SETTINGS (on by default)
 *   --port-range=LOW-HIGH     the site's range
 *   --result-fd=N             (bootstrap) where the records go
 *   --rank0-host=NAME         (bootstrap) rank 0's node, where Slurm's
 *                             layout does not say it (-m arbitrary)
 *   --rank0-port              (bootstrap) only ask PMIx where rank 0
 *                             moved (bootstrap_rank0_port)
 *   -h, --help                print USAGE on stdout
 * Stops at "--" or the first non-option; *NEXT is its index. Returns 0,
 * BOOTSTRAP_HELP after printing USAGE (the command then exits 0), or 2
 * after printing a usage error.
 */
#define BOOTSTRAP_HELP (-1)
int bootstrap_options(int argc, char **argv, const char *usage,
		      struct dt_config *cfg, int *result_fd, int *next);

/*
 * Run the bootstrap and fill OUT (zeroed by the caller). Returns 0, or the
 * exit status after printing one message (none when rank 0 reports it).
 * *STORE_FD (when STORE_FD is not NULL): rank 0's listening socket, which
 * the barrier proved, for the program's store (common/store_port.h); -1
 * on other ranks. The caller closes it.
 */
int bootstrap(const struct dt_config *cfg, struct dt_env *out,
	      int *store_fd);

/*
 * For the plugin's node leaders in a lean PMIx step, which are no PMIx
 * clients (plugin/leader.c): the port rank 0 published through PMIx when
 * it moved off the step's first, as MASTER_PORT in OUT (absent when it
 * published none, or not yet). Returns 0, or 1 when PMIx cannot tell:
 * quietly, as the plugin then tries the first port again.
 */
bool bootstrap_wants_rank0_port(void);
int bootstrap_rank0_port(const struct dt_config *cfg, struct dt_env *out);

/* The verbose line for this task on stderr, with NOTES if any. */
void bootstrap_describe(const struct dt_env *env, const char *notes);

/*
 * What dist-train exec and env add after the bootstrap, as the plugin
 * does for its tasks: the Python hook first on PYTHONPATH (see
 * common/python_hook.h). An uninstalled dist-train is told where the
 * hook is by DIST_TRAIN_PYTHON_HOOK. *ADDED (when not NULL): whether it
 * was. Returns 0, or 1 with a message.
 */
int bootstrap_python_hook(const struct dt_config *cfg, struct dt_env *env,
			  bool *added);

#endif
