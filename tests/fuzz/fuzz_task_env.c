/*
 * A task's Slurm variables, as the helper reads them (blank-separated
 * fields, in order: NODELIST TASKS_PER_NODE NUM_NODES NUM_TASKS NODEID
 * PROCID LOCALID GTIDS DISTRIBUTION), then the layout and environment.
 */
#include "config.h"

#include "fuzz.h"
#include "../../common/envp.h"
#include "../../common/layout.h"
#include "../../common/train_env.h"

static const char *const names[] = {
	"SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE",
	"SLURM_STEP_NUM_NODES", "SLURM_STEP_NUM_TASKS", "SLURM_NODEID",
	"SLURM_PROCID", "SLURM_LOCALID", "SLURM_GTIDS", "SLURM_DISTRIBUTION",
};
#define NFIELDS (sizeof(names) / sizeof(names[0]))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_string(data, size), *save = NULL, err[512];
	char *envp[NFIELDS + 1], vars[NFIELDS][512];
	struct dt_step_ports ports = { { 20000, 20001, 20002, 20003 }, 4,
				       DT_PORT_DERIVED };
	struct dt_slurm_step step;
	struct dt_task_ids ids;
	struct dt_layout l;
	size_t n = 0;

	for (char *w = strtok_r(text, " ", &save); w && n < NFIELDS;
	     w = strtok_r(NULL, " ", &save), n++) {
		snprintf(vars[n], sizeof(vars[n]), "%s=%s", names[n], w);
		envp[n] = vars[n];
	}
	envp[n] = NULL;
	if (dt_slurm_step_from_env(dt_envp_getenv, envp, &step, &ids, err,
				   sizeof(err)) == 0 &&
	    dt_layout_from_slurm(&step, &l, err, sizeof(err)) == 0) {
		struct dt_env_request req = { 0 };
		struct dt_env env = { 0 };

		FUZZ_ASSERT(l.master_addr && l.num_nodes == step.num_nodes);
		req.layout = &l;
		req.rank = ids.rank;
		req.local_rank = ids.local_rank;
		req.ports = &ports;
		req.step_id = "1.0";
		req.getenv = dt_envp_getenv;
		req.getenv_arg = envp;
		dt_train_env(&req, &env, err, sizeof(err));
		dt_env_free(&env);
		dt_layout_free(&l);
	}
	free(text);
	return 0;
}
