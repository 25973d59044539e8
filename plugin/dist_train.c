/*
 * The SPANK entry points of dist_train.so, and nothing else: each one
 * dispatches to the file that handles its context (see plugin.h).
 *
 * The plugin runs inside every job step of the cluster. Whatever goes
 * wrong, an entry point that runs in slurmstepd returns 0 (a failing
 * slurm_spank_init can drain a node); only srun, sbatch and salloc fail
 * the command, and only a task asked to get the environment fails itself.
 */
#include "config.h"

#include <stdlib.h>

#include "plugin.h"
#include "../common/admin_path.h"

static struct plugin_state state;

struct plugin_state *plugin_state(void)
{
	return &state;
}

/* What Slurm looks up; plugin/dist_train.map hides everything else. */
#pragma GCC visibility push(default)

SPANK_PLUGIN(dist_train, 1)

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();
	char **env = NULL, node[256] = "";

	if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR &&
	    ctx != S_CTX_REMOTE)
		return 0;

	if (ctx == S_CTX_REMOTE) {
		if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS)
			env = NULL;
		plugin_node_name(env, node, sizeof(node));
	}
	/* No descriptor yet: 0 is not one of the plugin's. */
	state.exit_stacks_fd = -1;
	state.reporter_fd = -1;
	dt_config_init(&state.site);
	state.site_ok = dt_config_parse_site(&state.site, ac, av,
					     state.site_error,
					     sizeof(state.site_error)) == 0 &&
		(ctx != S_CTX_REMOTE ||
		 dt_config_for_node(&state.site, node, state.site_error,
				    sizeof(state.site_error)) == 0) &&
		dt_admin_paths_check(&state.site, state.site_error,
				     sizeof(state.site_error)) == 0;
	if (!state.site_ok) {
		dt_config_init(&state.site);
		/* Users hear of it when they ask for --dist-train. */
		if (ctx == S_CTX_REMOTE)
			dt_log_error("disabled on %s: %s", node,
				     state.site_error);
	}
	state.step = state.site;

	if (options_register(sp) != 0)
		return ctx == S_CTX_REMOTE ? 0 : -1;
	return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	(void)ac, (void)av;

	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
		return srun_post_opt(sp);
	case S_CTX_REMOTE:
		/* slurmstepd parses the user's settings in user_init, as the
		 * user, not here as root: only the node's cache is seen to. */
		return slurmstepd_post_opt(sp);
	default:
		return 0;
	}
}

int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	(void)ac, (void)av;

	if (spank_context() != S_CTX_LOCAL)
		return 0;
	return srun_local_user_init(sp);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	(void)ac, (void)av;

	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return slurmstepd_user_init(sp);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac, (void)av;

	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return task_init(sp);
}

int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
	(void)ac, (void)av;

	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return slurmstepd_task_exit(sp);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp, (void)ac, (void)av;

	if (spank_context() == S_CTX_REMOTE)
		slurmstepd_exit();
	else if (spank_context() == S_CTX_LOCAL)
		watch_finish();
	options_free();
	return 0;
}

#pragma GCC visibility pop
