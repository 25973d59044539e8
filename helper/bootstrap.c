#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "commands.h"
#include "../common/join.h"
#include "nccl_check.h"
#include "../common/net.h"
#include "../common/netif.h"
#include "../common/node.h"
#include "pmix_client.h"
#include "../common/rank0.h"
#include "../common/store_guard.h"
#include "../common/python_hook.h"

/*
 * The PMIx key under which rank 0 publishes its rendezvous port, and the
 * step's secret when it made it.
 */
#define RENDEZVOUS_KEY "dist-train.rendezvous"
/* Where the plugin's srun puts the step's secret; see step_secret. */
#define SECRET_ENV "DIST_TRAIN_STEP_SECRET"
/* How a user makes one by hand. */
#define SECRET_RECIPE \
	"export " SECRET_ENV "=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \\n')"
/* How long a lean leader asks PMIx where rank 0 went, before it tries
 * the first port again (it may only have been slow). */
#define RELOCATE_LOOKUP_MS 500

/*
 * The step's secret: every rank proves with it that it belongs to the
 * step before rank 0 counts it. The plugin's srun makes it and Slurm's
 * launch carries it to the tasks, where the plugin hands it to us on a
 * pipe (--secret-fd) and takes it out of the program's environment. Run
 * by hand, we take it from SECRET_ENV, or with PMIx rank 0 makes one and
 * publishes it to the step's tasks only.
 */
static struct {
	bool have;
	uint8_t bytes[DT_SECRET_LEN];
} step_secret;

static int read_secret_fd(int fd)
{
	char hex[DT_SECRET_HEX + 2];
	size_t len = 0;
	ssize_t n;

	while (fd >= 0 && len < sizeof(hex) - 1) {
		n = read(fd, hex + len, sizeof(hex) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	if (fd >= 0)
		close(fd);
	hex[len] = '\0';
	if (len && hex[len - 1] == '\n')
		hex[len - 1] = '\0';
	if (dt_secret_parse(hex, step_secret.bytes) < 0) {
		explicit_bzero(hex, sizeof(hex));
		helper_error("--secret-fd: no step secret could be read: ask "
			     "your administrator to install the helper "
			     "(helper= in plugstack.conf) of the plugin's own "
			     "release");
		return -1;
	}
	explicit_bzero(hex, sizeof(hex));
	step_secret.have = true;
	return 0;
}

/*
 * Rank 0's host when only srun knew it (-m arbitrary without PMIx): the
 * plugin checked it against its node before passing it (plugin/task.c).
 */
static char rank0_host[256];
/* --rank0-port: only where rank 0 moved (bootstrap_rank0_port). */
static bool rank0_port_only;

int bootstrap_options(int argc, char **argv, const char *usage,
		      struct dt_config *cfg, int *result_fd, int *next)
{
	static const struct option longopts[] = {
		{ "settings", required_argument, NULL, 's' },
		{ "port-range", required_argument, NULL, 'p' },
		{ "result-fd", required_argument, NULL, 'r' },
		{ "secret-fd", required_argument, NULL, 'k' },
		{ "rank0-host", required_argument, NULL, 'R' },
		{ "rank0-port", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char err[640], word[64];
	char *words[1] = { word };
	int c;

	dt_config_init(cfg);
	cfg->enabled = true;
	*result_fd = -1;
	optind = 1;
	/* "+": stop at the program's name, its options are its own. */
	while ((c = getopt_long(argc, argv, "+hs:", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (dt_config_parse_option(cfg, optarg, err,
						   sizeof(err)) < 0) {
				helper_error("--settings=%s: %s", optarg, err);
				return 2;
			}
			break;
		case 'p':
			snprintf(word, sizeof(word), "port-range=%s", optarg);
			if (dt_config_parse_site(cfg, 1, words, err,
						 sizeof(err)) < 0) {
				helper_error("%s", err);
				return 2;
			}
			break;
		case 'r':
			*result_fd = atoi(optarg);
			break;
		case 'k':
			if (read_secret_fd(atoi(optarg)) < 0)
				return 2;
			break;
		case 'h':
			fputs(usage, stdout);
			return BOOTSTRAP_HELP;
		case 'R':
			if (strlen(optarg) >= sizeof(rank0_host)) {
				helper_error("--rank0-host: too long: ask your "
					     "administrator to give that node a "
					     "shorter name");
				return 2;
			}
			strcpy(rank0_host, optarg);
			break;
		case 'P':
			rank0_port_only = true;
			break;
		default:
			fprintf(stderr, "%s", usage);
			return 2;
		}
	}
	*next = optind;
	/* Whatever comes of it, the program run after us never sees it. */
	if (!step_secret.have && getenv(SECRET_ENV)) {
		int bad = dt_secret_parse(getenv(SECRET_ENV),
					      step_secret.bytes);

		unsetenv(SECRET_ENV);
		if (bad) {
			helper_error(SECRET_ENV " is not %d hex digits: "
				     "leave it to srun --dist-train, or "
				     SECRET_RECIPE " before srun",
				     DT_SECRET_HEX);
			return 2;
		}
		step_secret.have = true;
	}
	return 0;
}

static const char *process_getenv(const char *name, void *arg)
{
	(void)arg;
	return getenv(name);
}

/* Everything one task knows and decides during the bootstrap. */
struct task {
	const struct dt_config *cfg;
	struct pmix_session *pmix;
	struct dt_layout layout;
	struct dt_task_ids ids;
	struct dt_step_ports ports;	/* candidates, then the choice */
	char step_id[32];
	char host[256];
	/* Slurm's view, to name the host of a missing rank. */
	bool in_slurm;
	struct dt_slurm_step slurm_step;
	/*
	 * A member of a PMIx step that srun gave the secret: its leader is
	 * the node's PMIx client and tells it PMIx's view, which is checked
	 * against Slurm's (SLURM, SLURM_IDS) as PMIx's own word would be.
	 */
	bool pmix_by_leader;
	/*
	 * A PMIx step that srun gave the secret, not checked: the rank is
	 * PMIx's (PMIX_RANK, what PMIx_Init would say), the rest Slurm's,
	 * and no task is a PMIx client unless rank 0 must move off the
	 * step's first port and tell the others where it went.
	 */
	bool pmix_lean;
	struct dt_layout slurm;
	struct dt_task_ids slurm_ids;
	/* A leader with PMIx: what it checks and tells its members. */
	struct node_views views;
	/* Rank 0's listening socket after the barrier, for the store, and
	 * the addresses the barrier proved (common/store_guard.h). */
	int store_fd;
	char *peers;
};

static void task_free(struct task *t)
{
	free(t->peers);
	t->peers = NULL;
	if (t->store_fd >= 0)
		close(t->store_fd);
	t->store_fd = -1;
	pmix_close(t->pmix);
	dt_layout_free(&t->layout);
	dt_layout_free(&t->slurm);
}

/* Host of RANK: from PMIx, else from Slurm's block layout. */
static const char *rank_host(uint32_t rank, void *arg)
{
	struct task *t = arg;
	static char name[256];

	if (t->pmix)
		return pmix_rank_host(t->pmix, rank);
	if (!t->in_slurm || dt_slurm_rank_host(&t->slurm_step, rank, name,
					       sizeof(name)) < 0)
		return NULL;
	return name;
}

static void alarm_fired(int sig)
{
	static const char msg[] = DT_NAME ": error: the bootstrap did not "
				  "finish in time\n";

	(void)sig;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

/* Where this task stands: Slurm's facts, then PMIx's if there is PMIx. */
static int find_place(struct task *t, char *err, size_t errlen)
{
	const struct dt_config *cfg = t->cfg;
	struct dt_slurm_step step;
	struct dt_task_ids slurm_ids;
	struct dt_layout slurm = { 0 };
	struct dt_pmix_view view;
	const char *job, *stepid;
	bool want_pmix = cfg->use_pmix && pmix_available();
	int in_slurm, rc = -1;

	in_slurm = dt_slurm_step_from_env(process_getenv, NULL, &step,
					  &slurm_ids, err, errlen);
	if (in_slurm < 0)
		return -1;
	in_slurm = in_slurm == 0;
	if (!in_slurm && !want_pmix) {
		snprintf(err, errlen, "this is not a task of a Slurm step "
			 "nor of a PMIx job: run it with srun");
		return -1;
	}
	if (in_slurm) {
		step.rank0_elsewhere_ok = want_pmix || rank0_host[0];
		if (dt_layout_from_slurm(&step, &slurm, err, errlen) < 0)
			return -1;
		if (!want_pmix && !slurm.master_addr && rank0_host[0] &&
		    !(slurm.master_addr = strdup(rank0_host))) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		t->in_slurm = true;
		t->slurm_step = step;
	}

	/*
	 * PMIx_Init is most of what PMIx costs a launch. Where srun gave the
	 * step's secret (which also names the node's socket) and knew rank
	 * 0's host, no task needs it: Slurm's PMIx server numbers the tasks
	 * as Slurm does, which PMIX_RANK shows. The check (--dist-train=check)
	 * asks PMIx itself, on each node's leader only.
	 */
	if (want_pmix && in_slurm && step_secret.have) {
		const char *claimed = getenv("PMIX_RANK");

		if (claimed && strtoul(claimed, NULL, 10) != slurm_ids.rank) {
			snprintf(err, errlen, "PMIx and Slurm disagree on "
				 "this task's rank: PMIx says %s, Slurm %u; "
				 "use --dist-train=pmix=no to take the ranks "
				 "from Slurm alone, and ask your administrator "
				 "to check Slurm's mpi/pmix plugin", claimed,
				 slurm_ids.rank);
			goto out;
		}
		t->pmix_lean = claimed && !cfg->check && slurm.master_addr;
	}
	if (t->pmix_lean) {
		t->layout = slurm;
		t->layout.source = DT_RANKS_FROM_PMIX;
		memset(&slurm, 0, sizeof(slurm));
		t->ids = slurm_ids;
	} else if (want_pmix && in_slurm && step_secret.have &&
		   slurm_ids.local_rank != 0) {
		t->pmix_by_leader = true;
		t->slurm = slurm;
		memset(&slurm, 0, sizeof(slurm));
		t->slurm_ids = slurm_ids;
		t->ids = slurm_ids;
	} else if (want_pmix) {
		if (pmix_open(&t->pmix, err, errlen) < 0 ||
		    pmix_view(t->pmix, &view, err, errlen) < 0 ||
		    dt_layout_from_pmix(&view, in_slurm ? &slurm : NULL,
					in_slurm ? &slurm_ids : NULL,
					&t->layout, err, errlen) < 0)
			goto out;
		t->ids.rank = view.rank;
		t->ids.local_rank = view.local_rank;
	} else {
		t->layout = slurm;
		memset(&slurm, 0, sizeof(slurm));
		t->ids = slurm_ids;
	}

	job = getenv("SLURM_JOB_ID");
	stepid = getenv("SLURM_STEP_ID");
	snprintf(t->step_id, sizeof(t->step_id), "%s.%s", job ? job : "0",
		 stepid ? stepid : "0");
	if (dt_step_ports(getenv("SLURM_STEP_RESV_PORTS"),
			  job ? (uint32_t)strtoul(job, NULL, 10) : 0,
			  stepid ? (uint32_t)strtoul(stepid, NULL, 10) : 0,
			  dt_restart_count(getenv("SLURM_RESTART_COUNT")),
			  cfg->port_lo, cfg->port_hi, &t->ports, err,
			  errlen) < 0)
		goto out;
	rc = 0;
out:
	dt_layout_free(&slurm);
	return rc;
}

/*
 * Rank 0's rendezvous port, listening: the step's first port; with PMIx,
 * which can tell the others, the next free one when it is taken.
 */
static int listen_rendezvous(struct task *t, int *fd, char *err,
			     size_t errlen)
{
	uint16_t first = t->ports.port[0];

	for (unsigned i = 0; i < NET_PORT_SEARCH; i++) {
		uint16_t port;

		if (i < t->ports.count)
			port = t->ports.port[i];
		else
			port = (uint16_t)(t->cfg->port_lo +
				(first - t->cfg->port_lo + i) %
				(t->cfg->port_hi - t->cfg->port_lo + 1));
		*fd = net_listen(port);
		if (*fd >= 0) {
			if (i > 0)
				t->ports.source = DT_PORT_PROBED;
			t->ports.port[0] = port;
			return 0;
		}
		if (errno != EADDRINUSE)
			break;
		if (!t->pmix && !t->pmix_lean)
			break;
		/* Only through PMIx can the others learn where it went. */
		if (!t->pmix && pmix_open(&t->pmix, err, errlen) < 0)
			return -1;
	}
	if (t->pmix || t->pmix_lean)
		snprintf(err, errlen, "port %u on %s and the next ones of the "
			 "site's range are in use by other programs: rerun "
			 "the step, and ask your administrator to widen "
			 "port-range= in plugstack.conf or set "
			 "MpiParams=ports= in slurm.conf", first, t->host);
	else
		snprintf(err, errlen, "port %u on %s is in use by another "
			 "program: rerun with --mpi=pmix, so that rank 0 moves "
			 "to a free port, or ask your administrator to set "
			 "MpiParams=ports= in slurm.conf, so that each step has "
			 "ports of its own", first, t->host);
	return -1;
}

/* A free port for NCCL's bootstrap root, other than the rendezvous. */
static uint16_t nccl_port(const struct task *t)
{
	return net_nccl_port(t->ports.port[0], t->cfg->port_lo,
			     t->cfg->port_hi);
}

/*
 * Without a secret from srun or the environment, rank 0 makes one and
 * gives it with its port through PMIx, which only the step's tasks reach.
 * Without PMIx either, nothing could tell a rank from a stranger.
 */
static int need_secret(const struct task *t, bool *quiet, char *err,
		       size_t errlen)
{
	if (step_secret.have || t->pmix || t->layout.world_size < 2)
		return 0;
	/* Every rank would say the same: rank 0 does. */
	*quiet = t->ids.rank != 0;
	snprintf(err, errlen, "step %s has no secret for its ranks to prove "
		 "to rank 0 that they belong to it: run it under srun "
		 "--dist-train or srun --mpi=pmix, or " SECRET_RECIPE
		 " before srun", t->step_id);
	return -1;
}

/* This node's socket for its ranks (common/node.h). */
static void node_socket_name(const struct task *t,
			     char name[DT_RDV_NODE_SOCKET_LEN + 1])
{
	dt_rdv_node_socket(step_secret.bytes, t->step_id, t->host, name);
}

static int listen_node(const struct task *t, char *err, size_t errlen)
{
	char name[DT_RDV_NODE_SOCKET_LEN + 1];

	node_socket_name(t, name);
	return node_listen(name, err, errlen);
}

/* A member claims RANK: PMIx must place it on this node, not as its
 * leader. */
static int member_place(uint32_t rank, uint32_t *local_rank, char *err,
			size_t errlen, void *arg)
{
	struct task *t = arg;
	uint32_t node_id;

	if (pmix_place_of(t->pmix, rank, &node_id, local_rank, err,
			  errlen) < 0)
		goto refuse;
	if (node_id == t->layout.node_rank && *local_rank != t->ids.local_rank)
		return 0;
	snprintf(err, errlen, "a task on %s claimed rank %u, which PMIx puts "
		 "%s, so it was not let speak for it: report it to your "
		 "administrator, as that task may not belong to the step",
		 t->host, rank, node_id == t->layout.node_rank ? "on this "
		 "node as its local rank 0" : "on another node");
refuse:
	/* The leader reports it: the claim may not come from the step. */
	helper_error("on %s: %s", t->host, err);
	return -1;
}

/* A leader that is a PMIx client tells its members PMIx's view. */
static const struct node_views *leader_views(struct task *t)
{
	struct dt_rdv_view *base = &t->views.base;

	if (!t->pmix || t->pmix_lean || t->layout.local_size < 2)
		return NULL;
	t->views.check = member_place;
	t->views.arg = t;
	base->local_size = t->layout.local_size;
	base->world = t->layout.world_size;
	base->node_id = t->layout.node_rank;
	base->num_nodes = t->layout.num_nodes;
	snprintf(base->rank0_host, sizeof(base->rank0_host), "%s",
		 t->layout.master_addr);
	return &t->views;
}

/* Rank 0: listen, publish, wait for everyone. */
static int rendezvous_rank0(struct task *t, const struct dt_rdv_hello *hello,
			    uint64_t deadline, struct dt_rdv_result *res,
			    char *err, size_t errlen)
{
	struct rank0_params params;
	char value[16 + DT_SECRET_HEX + 1], hex[DT_SECRET_HEX + 1];
	char address[64];
	uint16_t port2 = 0;
	int fd, rc = -1;

	if (listen_rendezvous(t, &fd, err, errlen) < 0)
		return -1;
	if (t->cfg->nccl || hello->nccl_ok)
		port2 = nccl_port(t);
	snprintf(value, sizeof(value), "%u", t->ports.port[0]);
	if (t->pmix && !step_secret.have && hello->world > 1) {
		if (net_random(step_secret.bytes, DT_SECRET_LEN) < 0) {
			snprintf(err, errlen, "no random numbers (%s): ask "
				 "your administrator to check getrandom on this "
				 "node", strerror(errno));
			goto out;
		}
		step_secret.have = true;
		dt_secret_format(step_secret.bytes, hex);
		snprintf(value, sizeof(value), "%u %s", t->ports.port[0],
			 hex);
		explicit_bzero(hex, sizeof(hex));
	}
	if (t->pmix && pmix_publish(t->pmix, RENDEZVOUS_KEY, value, err,
				    errlen) < 0)
		goto out;
	if (hello->world > 1) {
		memset(&params, 0, sizeof(params));
		params.node_fd = -1;
		if (t->layout.local_size > 1) {
			params.node_fd = listen_node(t, err, errlen);
			if (params.node_fd < 0)
				goto out;
			params.members = t->layout.local_size - 1;
			params.views = leader_views(t);
		}
		if (dt_resolve_host(t->layout.master_addr, address,
			    sizeof(address)) == 0)
			params.address = address;
		params.nodes = t->layout.num_nodes;
		params.self = hello;
		params.secret = step_secret.bytes;
		params.port = t->ports.port[0];
		params.nccl_port = port2;
		params.want_nccl = t->cfg->check;
		params.deadline_ms = deadline;
		params.timeout_s = t->cfg->timeout;
		params.host_of = rank_host;
		params.host_arg = t;
		params.peers = &t->peers;
		rc = rank0_serve(fd, &params, res, err, errlen);
		if (params.node_fd >= 0)
			close(params.node_fd);
		goto out;
	}
	memset(res, 0, sizeof(*res));
	res->nccl_port = port2;
	res->nccl_check = t->cfg->check && hello->nccl_ok;
	if (dt_resolve_host(t->layout.master_addr, res->address,
		    sizeof(res->address)) < 0)
		snprintf(res->address, sizeof(res->address), "127.0.0.1");
	rc = 0;
out:
	explicit_bzero(value, sizeof(value));
	/* Proven by the barrier: kept for the program's store. */
	if (rc == 0)
		t->store_fd = fd;
	else
		close(fd);
	return rc;
}

/* Rank 0 listens on PORT: moved off the step's first, which was taken. */
static void move_port(struct task *t, uint16_t port)
{
	if (port == t->ports.port[0])
		return;
	t->ports.source = DT_PORT_PROBED;
	t->ports.port[0] = port;
}

/* What rank 0 published: "PORT" or "PORT SECRET"; 0, or -1 with ERR. */
static int read_published(struct task *t, char *value, char *err,
			  size_t errlen)
{
	char *secret = strchr(value, ' ');
	uint16_t port;

	if (secret)
		*secret++ = '\0';
	if (!dt_is_port(value)) {
		snprintf(err, errlen, "rank 0 published '%.20s' as its port: "
			 "ask your administrator to install one dist-train "
			 "release on every node", value);
		return -1;
	}
	if (secret && !step_secret.have) {
		if (dt_secret_parse(secret, step_secret.bytes) < 0) {
			snprintf(err, errlen, "rank 0 published no usable "
				 "secret: ask your administrator to install one "
				 "dist-train release on every node");
			return -1;
		}
		step_secret.have = true;
	}
	port = (uint16_t)atoi(value);
	move_port(t, port);
	return 0;
}

/*
 * A lean leader found no rank 0 on the step's first port: where did it go?
 * Rank 0 says so through PMIx when it moves (common/join.h).
 */
static int relocate(void *arg, uint16_t *port, char *err, size_t errlen)
{
	struct task *t = arg;
	char value[16 + DT_SECRET_HEX + 1];
	int rc;

	if (!t->pmix && pmix_open(&t->pmix, err, errlen) < 0)
		return -1;
	rc = pmix_lookup(t->pmix, 0, RENDEZVOUS_KEY, RELOCATE_LOOKUP_MS, value,
			 sizeof(value), err, errlen);
	if (rc == 0)
		rc = read_published(t, value, err, errlen) < 0 ? -1 : 1;
	else if (rc == 1)
		rc = 0;		/* not moved, or not yet */
	explicit_bzero(value, sizeof(value));
	*port = t->ports.port[0];
	return rc;
}

bool bootstrap_wants_rank0_port(void)
{
	return rank0_port_only;
}

int bootstrap_rank0_port(const struct dt_config *cfg, struct dt_env *out)
{
	struct task t;
	char err[1024], text[8];
	uint16_t port;
	int rc = 1, found;

	memset(&t, 0, sizeof(t));
	t.cfg = cfg;
	t.store_fd = -1;
	/* PMIx_Init can hang where the step is gone: end quietly, the
	 * plugin hears a kill as "rank 0 said nothing". */
	signal(SIGALRM, SIG_DFL);
	alarm(10);
	/* The plugin tries the first port again when we cannot tell: its
	 * message at the deadline is the one that matters. */
	found = relocate(&t, &port, err, sizeof(err));
	snprintf(text, sizeof(text), "%u", port);
	if (found >= 0 && (!found ||
	    dt_env_add(out, "MASTER_PORT", text, DT_ENV_SET) == 0))
		rc = 0;
	alarm(0);
	task_free(&t);
	return rc;
}

/* Other ranks: learn rank 0's port, reach it, wait for the word. */
static int rendezvous_join(struct task *t, const struct dt_rdv_hello *hello,
			   uint64_t deadline, struct dt_rdv_result *res,
			   bool *quiet, char *err, size_t errlen)
{
	char value[16 + DT_SECRET_HEX + 1], name[DT_RDV_NODE_SOCKET_LEN + 1];
	struct join_target target = {
		.host = t->layout.master_addr, .timeout_s = t->cfg->timeout,
		.relocate = t->pmix_lean ? relocate : NULL, .arg = t,
		.retry_ms = join_retry_ms(t->layout.num_nodes),
	};
	uint64_t reply_wait;
	int node_fd = -1, rc;

	if (t->pmix) {
		int left = (int)(deadline > now_ms() ? deadline - now_ms() : 0);

		rc = pmix_lookup(t->pmix, 0, RENDEZVOUS_KEY, left, value,
				 sizeof(value), err, errlen);

		if (rc == 1) {
			/* All ranks of a node see the same: one speaks. */
			*quiet = t->ids.local_rank != 0;
			snprintf(err, errlen, "rank 0 (on %s) did not arrive "
				 "within %u s: see rank 0's own message; if it "
				 "has none, give it longer with "
				 "--dist-train=timeout=SECONDS, or ask your "
				 "administrator to check that node",
				 t->layout.master_addr, t->cfg->timeout);
			return -1;
		}
		rc = rc < 0 ? -1 : read_published(t, value, err, errlen);
		explicit_bzero(value, sizeof(value));
		if (rc < 0)
			return -1;
	}
	if (!step_secret.have) {
		snprintf(err, errlen, "rank 0 gave no secret to prove this "
			 "rank with: ask your administrator to install one "
			 "dist-train release on every node");
		return -1;
	}
	/* Rank 0 answers within its own timeout of its start, which was
	 * before we could connect: wait that long once connected. */
	reply_wait = (uint64_t)t->cfg->timeout * 1000 + 10000;
	if (t->ids.local_rank != 0) {
		node_socket_name(t, name);
		return dt_member_join(name, step_secret.bytes, t->ids.rank,
				 hello->nccl_ok, deadline, reply_wait, res,
				 quiet, err, errlen);
	}
	/* The node's leader: speaks for its members, who came before it
	 * gives up on the late ones, shortly before rank 0 does. */
	if (t->layout.local_size > 1) {
		node_fd = listen_node(t, err, errlen);
		if (node_fd < 0)
			return -1;
	}
	target.port = t->ports.port[0];
	rc = node_lead(node_fd, t->layout.local_size,
		       node_gather_deadline(deadline),
		       leader_views(t), &target, step_secret.bytes, hello,
		       deadline, reply_wait, res, quiet, err, errlen);
	if (node_fd >= 0)
		close(node_fd);
	return rc;
}

/* A member without PMIx: its layout from PMIx's view that its leader
 * sent, checked against Slurm's as pmix_view's would be. */
static int apply_view(struct task *t, const struct dt_rdv_result *res,
		      char *err, size_t errlen)
{
	const struct dt_rdv_view *v = &res->view;
	struct dt_pmix_view view;

	if (!v->present) {
		snprintf(err, errlen, "this node's local rank 0 did not pass "
			 "on what PMIx says of this rank: ask your "
			 "administrator to install one dist-train release on "
			 "every node");
		return -1;
	}
	memset(&view, 0, sizeof(view));
	view.rank = t->ids.rank;
	view.local_rank = v->local_rank;
	view.world_size = v->world;
	view.local_size = v->local_size;
	view.node_id = v->node_id;
	view.num_nodes = v->num_nodes;
	view.rank0_host = v->rank0_host;
	if (dt_layout_from_pmix(&view, &t->slurm, &t->slurm_ids, &t->layout,
				err, errlen) < 0)
		return -1;
	t->ids.local_rank = v->local_rank;
	return 0;
}

/* The NCCL all-reduce of --dist-train=check, when every rank can. */
static int nccl_check(struct task *t, const struct dt_rdv_result *res,
		      const char *ifname, char *err, size_t errlen)
{
	const char *node = getenv("SLURMD_NODENAME");
	char id[128];

	snprintf(id, sizeof(id), "%s:%u", res->address, res->nccl_port);
	setenv("NCCL_COMM_ID", id, 0);
	if (ifname)
		setenv("NCCL_SOCKET_IFNAME", ifname, 0);
	if (nccl_allreduce_check(t->layout.world_size, t->ids.rank,
				 t->ids.local_rank, t->layout.local_size,
				 node && *node ? node : t->host, err,
				 errlen) < 0)
		return -1;
	return 0;
}

int bootstrap(const struct dt_config *cfg, struct dt_env *out,
	      int *store_fd)
{
	struct task t;
	struct dt_rdv_hello hello;
	struct dt_rdv_result res;
	struct dt_env_request req;
	char err[1024], why[512] = "", ifname[80], comm_id[128], *cpus;
	const char *node = getenv("SLURMD_NODENAME"), *lib, *coll;
	bool have_ifname = false, quiet = false;
	uint64_t deadline, started = now_ms(), placed, met;
	unsigned budget;
	int rc = 1;

	memset(&t, 0, sizeof(t));
	t.cfg = cfg;
	t.store_fd = -1;
	if (store_fd)
		*store_fd = -1;
	/* A last resort against a wait that escaped its own timeout. */
	budget = cfg->timeout + 10 + (cfg->check ? cfg->timeout : 0);
	signal(SIGALRM, alarm_fired);
	alarm(budget);
	deadline = now_ms() + (uint64_t)cfg->timeout * 1000;
	if (gethostname(t.host, sizeof(t.host) - 1) < 0)
		snprintf(t.host, sizeof(t.host), "unknown");

	if (find_place(&t, err, sizeof(err)) < 0 ||
	    need_secret(&t, &quiet, err, sizeof(err)) < 0)
		goto fail;
	placed = now_ms();

	memset(&hello, 0, sizeof(hello));
	hello.ranks = &t.ids.rank;
	hello.nranks = 1;
	hello.world = t.layout.world_size;
	snprintf(hello.host, sizeof(hello.host), "%s", t.host);
	hello.nccl_ok = cfg->check &&
			nccl_usable(t.layout.local_size, why, sizeof(why));
	if (t.ids.rank == 0) {
		if (rendezvous_rank0(&t, &hello, deadline, &res, err,
				     sizeof(err)) < 0)
			goto fail;
	} else if (rendezvous_join(&t, &hello, deadline, &res, &quiet, err,
				   sizeof(err)) < 0 ||
		   (t.pmix_by_leader &&
		    apply_view(&t, &res, err, sizeof(err)) < 0)) {
		goto fail;
	} else {
		move_port(&t, res.port);
	}
	met = now_ms();

	if (dt_netif_towards(res.address, ifname + 1, sizeof(ifname) - 1) == 0) {
		ifname[0] = '=';	/* NCCL: this name exactly */
		have_ifname = true;
	}
	if (res.nccl_check &&
	    nccl_check(&t, &res, have_ifname ? ifname : NULL, err,
		       sizeof(err)) < 0)
		goto fail;
	if (cfg->check && t.ids.rank == 0) {
		fprintf(stderr, DT_NAME ": check: all %u ranks reached rank 0 "
			"at %s:%u (%s)", t.layout.world_size,
			t.layout.master_addr, t.ports.port[0], res.address);
		lib = nccl_describe();
		coll = nccl_collective_name();
		if (res.nccl_check)
			fprintf(stderr, "; %s all-reduce across them: ok "
				"(%s)\n", coll, lib ? lib : coll);
		else
			fprintf(stderr, "; %s all-reduce skipped: not every "
				"rank has %s and a GPU (rank 0: %s%s%s)\n",
				coll, coll, why[0] ? why : "ok",
				lib ? ", " : "", lib ? lib : "");
	}

	snprintf(comm_id, sizeof(comm_id), "%s:%u", res.address,
		 res.nccl_port);
	cpus = getenv("SLURM_CPUS_PER_TASK");
	memset(&req, 0, sizeof(req));
	req.layout = &t.layout;
	req.rank = t.ids.rank;
	req.local_rank = t.ids.local_rank;
	req.ports = &t.ports;
	req.cpus_per_task = cpus ? (uint32_t)strtoul(cpus, NULL, 10) : 0;
	req.step_id = t.step_id;
	req.getenv = process_getenv;
	req.nccl_comm_id = cfg->nccl && res.nccl_port ? comm_id : NULL;
	req.socket_ifname = have_ifname ? ifname : NULL;
	req.pmix_bootstrap = t.pmix || t.pmix_by_leader || t.pmix_lean;
	if (dt_train_env(&req, out, err, sizeof(err)) < 0)
		goto fail;
	if (t.peers && store_fd &&
	    dt_env_put(out, DT_STORE_PEERS_ENV, t.peers, DT_ENV_SET) < 0) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	/* tests/bench/launch.sh reads where the time went. */
	if (cfg->verbose)
		fprintf(stderr, DT_NAME ": rank %u: the helper took: place %llu "
			"ms%s, rendezvous %llu ms, the rest %llu ms\n",
			t.ids.rank, (unsigned long long)(placed - started),
			t.pmix_lean ? (t.pmix ? " (PMIX_RANK; PMIx for the port)"
				      : " (PMIX_RANK)") :
			t.pmix ? " (PMIx)" :
			t.pmix_by_leader ? " (PMIx by the node's leader)" : "",
			(unsigned long long)(met - placed),
			(unsigned long long)(now_ms() - met));
	if (store_fd) {
		*store_fd = t.store_fd;
		t.store_fd = -1;
	}
	rc = 0;
	goto done;
fail:
	/* srun 26.05 does not say which node a task's line comes from. */
	if (!quiet)
		helper_error("on %s: %s", node && *node ? node : t.host, err);
done:
	alarm(0);
	task_free(&t);
	return rc;
}

int bootstrap_python_hook(const struct dt_config *cfg, struct dt_env *env,
			  bool *added)
{
	int rc = dt_python_hook(cfg->worker_lib,
				getenv("DIST_TRAIN_PYTHON_HOOK"),
				getenv("PYTHONPATH"), cfg->store_tree, env);

	if (rc < 0) {
		helper_error("out of memory");
		return 1;
	}
	if (added)
		*added = rc == 1;
	return 0;
}

void bootstrap_describe(const struct dt_env *env, const char *notes)
{
	size_t len = dt_env_describe(env, NULL, 0) + 1;
	char *line = malloc(len);
	const char *rank = dt_env_get(env, "RANK");
	char host[256] = "?";

	if (!line)
		return;
	gethostname(host, sizeof(host) - 1);
	dt_env_describe(env, line, len);
	fprintf(stderr, DT_NAME ": rank %s on %s: %s%s%s\n", rank ? rank : "?",
		host, line, notes[0] ? " | " : "", notes);
	free(line);
}
