/*
 * A lean PMIx step's node leader, without a helper (see plugin/member.c).
 *
 * Each node's local rank 0 gathers its node's members and joins rank 0
 * for all of them; rank 0 serves the start barrier. Both run here, in the
 * task, as the user, just before its program: a helper process per node
 * (a fork and exec, on the launch's critical path) is what PMIx launches
 * spent most of their time on. PMIx itself comes in only where rank 0
 * must move off the step's first port, which another program holds: rank
 * 0 then runs the helper's whole bootstrap, which finds a free port and
 * publishes it, and a leader that finds no rank 0 asks the helper where
 * it went (`dist-train bootstrap --rank0-port`).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "plugin.h"
#include "../common/envp.h"
#include "../common/join.h"
#include "../common/layout.h"
#include "../common/net.h"
#include "../common/netif.h"
#include "../common/node.h"
#include "../common/port.h"
#include "../common/rank0.h"
#include "../common/store_guard.h"
#include "../common/train_env.h"

struct leader {
	const struct plugin_state *st;
	char **envp;
	const uint8_t *secret;
	uint64_t deadline;
};

/* The host of a missing RANK, for rank 0's message: Slurm's layout. */
static const char *rank_host(uint32_t rank, void *arg)
{
	static char name[256];
	struct dt_slurm_step step = {
		.nodelist = dt_envp_get(arg, "SLURM_STEP_NODELIST"),
		.tasks_per_node = dt_envp_get(arg, "SLURM_STEP_TASKS_PER_NODE"),
		.distribution = dt_envp_get(arg, "SLURM_DISTRIBUTION"),
	};

	if (!step.nodelist || !step.tasks_per_node ||
	    dt_slurm_rank_host(&step, rank, name, sizeof(name)) < 0)
		return NULL;
	return name;
}

/*
 * No rank 0 of this step on the first port: did it move? (join.h) Where
 * the helper cannot tell (PMIx too slow, or this node came after the step
 * gave up), rank 0 said nothing: the first port is tried again until the
 * deadline, whose message says what matters.
 */
static int relocate(void *arg, uint16_t *port, char *err, size_t errlen)
{
	struct leader *l = arg;
	struct dt_env found = { 0 };
	const char *value;
	int rc = 0;

	if (helper_bootstrap(&l->st->step, l->envp, NULL, NULL, true, &found,
			     NULL, err, errlen) == 0) {
		value = dt_env_get(&found, "MASTER_PORT");
		rc = value && dt_is_port(value);
		if (rc)
			*port = (uint16_t)atoi(value);
	}
	err[0] = '\0';
	dt_env_free(&found);
	return rc;
}

/* Rank 0, listening on LISTEN_FD: serve the barrier for the step. */
static int serve(struct leader *l, int listen_fd, int node_fd,
		 const struct dt_rdv_hello *self, struct dt_rdv_result *res,
		 char **peers, char *err, size_t errlen)
{
	const struct plugin_state *st = l->st;
	struct rank0_params params;
	char address[64];

	memset(&params, 0, sizeof(params));
	if (dt_resolve_host(st->layout.master_addr, address,
			    sizeof(address)) == 0)
		params.address = address;
	params.self = self;
	params.secret = l->secret;
	params.port = st->ports.port[0];
	if (st->step.nccl)
		params.nccl_port = net_nccl_port(st->ports.port[0],
						 st->step.port_lo,
						 st->step.port_hi);
	params.deadline_ms = l->deadline;
	params.timeout_s = st->step.timeout;
	params.host_of = rank_host;
	params.host_arg = l->envp;
	params.node_fd = node_fd;
	params.members = node_fd >= 0 ? st->layout.local_size - 1 : 0;
	params.nodes = st->layout.num_nodes;
	params.peers = peers;
	return rank0_serve(listen_fd, &params, res, err, errlen);
}

/* Any other leader: gather the node's members, join rank 0 for them. */
static int join(struct leader *l, int node_fd,
		const struct dt_rdv_hello *self, struct dt_rdv_result *res,
		bool *quiet, char *err, size_t errlen)
{
	const struct plugin_state *st = l->st;
	struct join_target target = {
		.host = st->layout.master_addr,
		.port = st->ports.port[0],
		.timeout_s = st->step.timeout,
		.retry_ms = join_retry_ms(st->layout.num_nodes),
		.relocate = relocate,
		.arg = l,
	};
	/* Rank 0 answers within its own timeout of its start, which was
	 * before we could connect: wait that long once connected. */
	uint64_t reply_wait = (uint64_t)st->step.timeout * 1000 + 10000;

	return node_lead(node_fd, st->layout.local_size,
			 node_gather_deadline(l->deadline), NULL, &target,
			 l->secret, self, l->deadline, reply_wait, res, quiet,
			 err, errlen);
}

int leader_task_env(const struct plugin_state *st, char **envp,
		    uint32_t rank, const char *secret, const char *step_id,
		    struct dt_env *env, int *store_fd, bool *use_helper,
		    bool *quiet, char *err, size_t errlen)
{
	char name[DT_RDV_NODE_SOCKET_LEN + 1], host[256];
	uint8_t key[DT_SECRET_LEN];
	struct leader l = { st, envp, key,
			    now_ms() + (uint64_t)st->step.timeout * 1000 };
	struct dt_rdv_hello self;
	struct dt_rdv_result res;
	struct rlimit files;
	bool have_files;
	char *peers = NULL;
	int listen_fd = -1, node_fd = -1, rc = -1;

	*use_helper = false;
	*quiet = false;
	*store_fd = -1;
	if (lean_task_start(envp, rank, secret, key, host, err, errlen) < 0)
		return -1;
	/* Rank 0's loop may raise it; the program gets the one it had. */
	have_files = getrlimit(RLIMIT_NOFILE, &files) == 0;
	if (rank == 0) {
		listen_fd = net_listen(st->ports.port[0]);
		if (listen_fd < 0 && errno == EADDRINUSE) {
			/* Only PMIx can tell the others where rank 0 went. */
			*use_helper = true;
			goto out;
		}
		if (listen_fd < 0) {
			snprintf(err, errlen, "cannot listen on port %u on %s "
				 "(%s): rerun the step, and ask your "
				 "administrator to check port-range= in "
				 "plugstack.conf or MpiParams=ports= in "
				 "slurm.conf if it recurs", st->ports.port[0],
				 host, strerror(errno));
			goto out;
		}
	}
	if (st->layout.local_size > 1) {
		dt_rdv_node_socket(key, step_id, host, name);
		node_fd = node_listen(name, err, errlen);
		if (node_fd < 0)
			goto out;
	}
	memset(&self, 0, sizeof(self));
	self.ranks = &rank;
	self.nranks = 1;
	self.world = st->layout.world_size;
	snprintf(self.host, sizeof(self.host), "%s", host);
	if ((rank == 0 ? serve(&l, listen_fd, node_fd, &self, &res, &peers,
			       err, errlen) :
	     join(&l, node_fd, &self, &res, quiet, err, errlen)) < 0)
		goto out;
	rc = lean_task_env(st, envp, rank, 0, step_id, &res, env, err, errlen);
	/* Rank 0's port, proven by the barrier, stays held for the store,
	 * which admits only the nodes proven here (common/store_guard.h). */
	if (rc == 0 && peers &&
	    dt_env_put(env, DT_STORE_PEERS_ENV, peers, DT_ENV_SET) < 0) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
	}
	if (rc == 0 && rank == 0) {
		*store_fd = listen_fd;
		listen_fd = -1;
	}
out:
	if (have_files)
		setrlimit(RLIMIT_NOFILE, &files);
	if (node_fd >= 0)
		close(node_fd);
	if (listen_fd >= 0)
		close(listen_fd);
	explicit_bzero(key, sizeof(key));
	free(peers);
	return rc;
}
