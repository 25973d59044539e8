/*
 * Rank 0's task, just before exec: the port of torch's store stays held
 * from the start barrier into the program (common/store_hold.h). Without
 * a barrier (no PMIx, no check) rank 0 takes the port here, which also
 * says at once, and clearly, when another program holds it.
 */
#include "config.h"

#include <stdio.h>

#include "plugin.h"
#include "../common/store_hold.h"
#include "../common/store_port.h"

int store_hold(spank_t sp, int store_fd, bool hook, const char *worker_lib,
	       char **envp, struct dt_env *env, char *err, size_t errlen)
{
	uint16_t port = dt_store_port(env);
	char **argv = NULL, node[256];
	int argc = 0, held;

	if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS)
		argc = 0;
	/* In Slurm's OCI containers the task runs the container runtime,
	 * which would hold the socket while the program, in the container,
	 * gets none of it: the port is let go there, as before. */
	if (dt_envp_get(envp, "SLURM_CONTAINER") &&
	    *dt_envp_get(envp, "SLURM_CONTAINER"))
		hook = false;
	held = dt_store_hold(store_fd, port, hook, worker_lib, argc, argv,
			     dt_envp_getenv, envp, env);
	if (held == -2) {
		plugin_node_name(envp, node, sizeof(node));
		snprintf(err, errlen, "port %u on %s, where rank 0's store is to "
			 "listen, is in use by another program: rerun with "
			 "--mpi=pmix, so that rank 0 moves to a free port, or "
			 "ask your administrator to set MpiParams=ports= in "
			 "slurm.conf, so that each step has ports of its own",
			 port, node);
		return -1;
	}
	if (held < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}
