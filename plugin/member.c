/*
 * A lean PMIx step's tasks, without a helper.
 *
 * Where srun gave the step's secret and Slurm says where rank 0 runs, no
 * task is a PMIx client: each takes its rank from PMIX_RANK, and the start
 * barrier runs in the tasks themselves, just before their programs: each
 * node's local rank 0 leads its node (plugin/leader.c), and the node's
 * other tasks, its members, only need rank 0's answer (the port it listens
 * on, which it may have moved), so each waits for it here, on the node's
 * socket (common/member.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin.h"
#include "../common/envp.h"
#include "../common/member.h"
#include "../common/net.h"
#include "../common/train_env.h"

bool lean_without_helper(const struct plugin_state *st, char **envp,
			 const char *secret)
{
	return st->step.use_pmix && !st->step.check && secret[0] &&
	       st->layout.master_addr && st->layout.world_size > 1 &&
	       dt_envp_get(envp, "PMIX_NAMESPACE") &&
	       dt_envp_get(envp, "PMIX_RANK");
}

int lean_task_start(char **envp, uint32_t rank, const char *secret,
		    uint8_t key[DT_SECRET_LEN], char host[256], char *err,
		    size_t errlen)
{
	const char *claimed = dt_envp_get(envp, "PMIX_RANK");

	/* What the helper checks too (helper/bootstrap.c). */
	if (strtoul(claimed, NULL, 10) != rank) {
		snprintf(err, errlen, "PMIx and Slurm disagree on this task's "
			 "rank: PMIx says %s, Slurm %u; use "
			 "--dist-train=pmix=no to take the ranks from Slurm "
			 "alone, and ask your administrator to check Slurm's "
			 "mpi/pmix plugin", claimed, rank);
		return -1;
	}
	if (dt_secret_parse(secret, key) < 0) {
		snprintf(err, errlen, "the step's secret is malformed: ask "
			 "your administrator to install one dist-train "
			 "release on every node, srun's hosts included");
		return -1;
	}
	memset(host, 0, 256);
	if (gethostname(host, 255) < 0)
		snprintf(host, 256, "unknown");
	return 0;
}

int lean_task_env(const struct plugin_state *st, char **envp, uint32_t rank,
		  int local_rank, const char *step_id,
		  const struct dt_rdv_result *res, struct dt_env *env,
		  char *err, size_t errlen)
{
	struct dt_layout layout = st->layout;
	struct dt_step_ports ports = st->ports;
	struct dt_env_request req;
	char comm_id[128];

	layout.source = DT_RANKS_FROM_PMIX;
	if (res->port != ports.port[0]) {
		ports.source = DT_PORT_PROBED;
		ports.port[0] = res->port;
	}
	snprintf(comm_id, sizeof(comm_id), "%s:%u", res->address,
		 res->nccl_port);
	memset(&req, 0, sizeof(req));
	req.layout = &layout;
	req.rank = rank;
	req.local_rank = (uint32_t)local_rank;
	req.ports = &ports;
	req.cpus_per_task = st->cpus_per_task;
	req.step_id = step_id;
	req.getenv = dt_envp_getenv;
	req.getenv_arg = envp;
	req.nccl_comm_id = st->step.nccl && res->nccl_port ? comm_id : NULL;
	req.socket_ifname = st->socket_ifname[0] ? st->socket_ifname : NULL;
	req.pmix_bootstrap = true;
	return dt_train_env(&req, env, err, errlen);
}

int member_task_env(const struct plugin_state *st, char **envp,
		    uint32_t rank, int local_rank, const char *secret,
		    const char *step_id, struct dt_env *env, bool *quiet,
		    char *err, size_t errlen)
{
	char name[DT_RDV_NODE_SOCKET_LEN + 1], host[256];
	uint8_t key[DT_SECRET_LEN];
	uint64_t wait_ms = (uint64_t)st->step.timeout * 1000;
	struct dt_rdv_result res;
	int rc = -1;

	*quiet = false;
	if (lean_task_start(envp, rank, secret, key, host, err, errlen) < 0)
		return -1;
	dt_rdv_node_socket(key, step_id, host, name);
	/* The leader answers once rank 0 did, within the step's timeout of
	 * its start: wait that long, and a little more, once connected. */
	if (dt_member_join(name, key, rank, false, now_ms() + wait_ms,
			   wait_ms + 10000, &res, quiet, err, errlen) < 0)
		goto out;
	rc = lean_task_env(st, envp, rank, local_rank, step_id, &res, env, err,
			   errlen);
out:
	explicit_bzero(key, sizeof(key));
	return rc;
}
