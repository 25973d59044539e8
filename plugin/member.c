/*
 * A member's environment in a lean PMIx step, without a helper of its own.
 *
 * Where srun gave the step's secret and Slurm says where rank 0 runs, the
 * node's local rank 0 runs the helper, which meets rank 0 for the whole
 * node (helper/node.h), and no task is a PMIx client: each takes its rank
 * from PMIX_RANK. The node's other tasks only need rank 0's answer (the
 * port it listens on, which it may have moved), so each waits for it here,
 * on the node's socket, as the helper's members do (common/member.h): one
 * helper per node instead of one per task.
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

bool member_without_helper(const struct plugin_state *st, char **envp,
			   int local_rank, const char *secret)
{
	return st->step.use_pmix && !st->step.check && local_rank != 0 &&
	       secret[0] && st->layout.master_addr &&
	       dt_envp_get(envp, "PMIX_NAMESPACE") &&
	       dt_envp_get(envp, "PMIX_RANK");
}

int member_task_env(const struct plugin_state *st, char **envp,
		    uint32_t rank, int local_rank, const char *secret,
		    const char *step_id, struct dt_env *env, bool *quiet,
		    char *err, size_t errlen)
{
	const char *claimed = dt_envp_get(envp, "PMIX_RANK");
	char name[DT_RDV_NODE_SOCKET_LEN + 1], host[256] = "", comm_id[128];
	uint8_t key[DT_SECRET_LEN];
	uint64_t wait_ms = (uint64_t)st->step.timeout * 1000;
	struct dt_rdv_result res;
	struct dt_layout layout = st->layout;
	struct dt_step_ports ports = st->ports;
	struct dt_env_request req;
	int rc = -1;

	*quiet = false;
	/* What the helper checks too (helper/bootstrap.c). */
	if (strtoul(claimed, NULL, 10) != rank) {
		snprintf(err, errlen, "PMIx and Slurm disagree on this task's "
			 "rank: PMIx says %s, Slurm %u", claimed, rank);
		return -1;
	}
	if (dt_secret_parse(secret, key) < 0) {
		snprintf(err, errlen, "the step's secret is malformed");
		return -1;
	}
	if (gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "unknown");
	dt_rdv_node_socket(key, step_id, host, name);
	/* The leader answers once rank 0 did, within the step's timeout of
	 * its start: wait that long, and a little more, once connected. */
	if (dt_member_join(name, key, rank, false, now_ms() + wait_ms,
			   wait_ms + 10000, &res, quiet, err, errlen) < 0)
		goto out;

	layout.source = DT_RANKS_FROM_PMIX;
	if (res.port != ports.port[0]) {
		ports.source = DT_PORT_PROBED;
		ports.port[0] = res.port;
	}
	snprintf(comm_id, sizeof(comm_id), "%s:%u", res.address,
		 res.nccl_port);
	memset(&req, 0, sizeof(req));
	req.layout = &layout;
	req.rank = rank;
	req.local_rank = (uint32_t)local_rank;
	req.ports = &ports;
	req.cpus_per_task = st->cpus_per_task;
	req.step_id = step_id;
	req.getenv = dt_envp_getenv;
	req.getenv_arg = envp;
	req.nccl_comm_id = st->step.nccl && res.nccl_port ? comm_id : NULL;
	req.socket_ifname = st->socket_ifname[0] ? st->socket_ifname : NULL;
	req.pmix_bootstrap = true;
	rc = dt_train_env(&req, env, err, errlen);
out:
	explicit_bzero(key, sizeof(key));
	return rc;
}
