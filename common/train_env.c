#include "config.h"

#include "train_env.h"
#include "error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fix where the helper's records do not parse. */
#define ONE_HELPER \
	"ask your administrator to install the helper (helper= in " \
	"plugstack.conf) of the plugin's own release"

int dt_env_add(struct dt_env *env, const char *name, const char *value,
	       enum dt_env_action action)
{
	struct dt_env_entry *e;

	if (env->count == env->cap) {
		size_t ncap = env->cap ? env->cap * 2 : 32;
		struct dt_env_entry *ne;

		ne = realloc(env->entries, ncap * sizeof(*ne));
		if (!ne)
			return -1;
		env->entries = ne;
		env->cap = ncap;
	}
	e = &env->entries[env->count];
	e->action = action;
	e->name = strdup(name);
	e->value = value ? strdup(value) : NULL;
	if (!e->name || (value && !e->value)) {
		free(e->name);
		free(e->value);
		return -1;
	}
	env->count++;
	return 0;
}

static int push_u32(struct dt_env *env, const char *name, uint32_t v)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%" PRIu32, v);
	return dt_env_add(env, name, buf, DT_ENV_SET);
}

void dt_env_free(struct dt_env *env)
{
	if (!env)
		return;
	for (size_t i = 0; i < env->count; i++) {
		free(env->entries[i].name);
		free(env->entries[i].value);
	}
	free(env->entries);
	memset(env, 0, sizeof(*env));
}

const struct dt_env_entry *dt_env_find(const struct dt_env *env,
				       const char *name)
{
	for (size_t i = env->count; i > 0; i--)
		if (!strcmp(env->entries[i - 1].name, name))
			return &env->entries[i - 1];
	return NULL;
}

const char *dt_env_get(const struct dt_env *env, const char *name)
{
	const struct dt_env_entry *e = dt_env_find(env, name);

	return e ? e->value : NULL;
}

int dt_env_put(struct dt_env *env, const char *name, const char *value,
	       enum dt_env_action action)
{
	struct dt_env_entry *e = (struct dt_env_entry *)dt_env_find(env, name);
	char *copy = NULL;

	if (!e)
		return dt_env_add(env, name, value, action);
	if (value && !(copy = strdup(value)))
		return -1;
	free(e->value);
	e->value = copy;
	e->action = action;
	return 0;
}

void dt_env_remove(struct dt_env *env, size_t i)
{
	if (i >= env->count)
		return;
	free(env->entries[i].name);
	free(env->entries[i].value);
	memmove(&env->entries[i], &env->entries[i + 1],
		(env->count - i - 1) * sizeof(env->entries[0]));
	env->count--;
}

int dt_env_prepend(struct dt_env *env, const char *name, const char *item,
		   const char *rest)
{
	char *value;
	int rc;

	if (!rest || !*rest)
		return dt_env_put(env, name, item, DT_ENV_SET);
	value = malloc(strlen(item) + strlen(rest) + 2);
	if (!value)
		return -1;
	sprintf(value, "%s:%s", item, rest);
	rc = dt_env_put(env, name, value, DT_ENV_SET);
	free(value);
	return rc;
}

const char *dt_user_env(dt_getenv_fn getenv, void *arg, const char *step_id,
			const char *name)
{
	const char *parent = getenv("DIST_TRAIN_STEP", arg);
	const char *v;

	if (parent && strcmp(parent, step_id))
		return NULL;
	v = getenv(name, arg);
	return v && *v ? v : NULL;
}

static const char *user_value(const struct dt_env_request *req,
			      const char *name)
{
	return dt_user_env(req->getenv, req->getenv_arg, req->step_id, name);
}

/* The user's value of NAME is kept; else VALUE is set. */
static int push_unless_user(struct dt_env *env,
			    const struct dt_env_request *req,
			    const char *name, const char *value)
{
	const char *user = user_value(req, name);

	if (user)
		return dt_env_add(env, name, user, DT_ENV_KEPT);
	return dt_env_add(env, name, value, DT_ENV_SET);
}

/*
 * JAX ignores MASTER_*: its Slurm detection takes the first host of the
 * sorted step nodelist (wrong when rank 0 is elsewhere, as with -m
 * arbitrary) and a port from the job id (the same for two steps of one
 * job). It reads this one first, and nothing else does.
 */
static int push_jax_coordinator(struct dt_env *out,
				const struct dt_env_request *req)
{
	const char *addr = dt_env_get(out, "MASTER_ADDR");
	const char *port = dt_env_get(out, "MASTER_PORT");
	bool v6;
	size_t len;
	char *value;
	int rc;

	if (!addr || !port)
		return -1;
	v6 = strchr(addr, ':') && addr[0] != '[';
	len = strlen(addr) + strlen(port) + 4;
	if (!(value = malloc(len)))
		return -1;
	snprintf(value, len, v6 ? "[%s]:%s" : "%s:%s", addr, port);
	rc = push_unless_user(out, req, "JAX_COORDINATOR_ADDRESS", value);
	free(value);
	return rc;
}

/* What the project adds in every mode: where this task stands. */
static int push_step_info(struct dt_env *out, const struct dt_layout *l,
			  const char *step_id, const char *rank_source,
			  const char *port_source)
{
	int rc = 0;

	rc |= dt_env_add(out, "DIST_TRAIN_VERSION", PACKAGE_VERSION,
			 DT_ENV_SET);
	rc |= dt_env_add(out, "DIST_TRAIN_STEP", step_id, DT_ENV_SET);
	rc |= push_u32(out, "DIST_TRAIN_NODE_RANK", l->node_rank);
	rc |= push_u32(out, "DIST_TRAIN_NUM_NODES", l->num_nodes);
	if (l->nodes)
		rc |= dt_env_add(out, "DIST_TRAIN_NODES", l->nodes,
				 DT_ENV_SET);
	rc |= dt_env_add(out, "DIST_TRAIN_RANK_SOURCE", rank_source,
			 DT_ENV_SET);
	rc |= dt_env_add(out, "DIST_TRAIN_PORT_SOURCE", port_source,
			 DT_ENV_SET);
	return rc;
}

/*
 * IFNAME, the interface the ranks reach rank 0 (or the first node's
 * agent) through, for NCCL ("=NAME": exactly that one) and gloo (which
 * would otherwise take the address of its host name: 127.0.1.1 in
 * Debian's /etc/hosts on rank 0's node, which no other node can reach),
 * unless the user set them. Nothing when IFNAME is NULL.
 */
static int push_socket_ifname(struct dt_env *out,
			      const struct dt_env_request *req,
			      const char *ifname)
{
	int rc = 0;

	if (ifname) {
		rc |= push_unless_user(out, req, "NCCL_SOCKET_IFNAME", ifname);
		rc |= push_unless_user(out, req, "GLOO_SOCKET_IFNAME",
				       ifname + (ifname[0] == '='));
	}
	return rc;
}

bool dt_train_env_per_task(const char *name)
{
	/* What dt_train_env_task derives from the rank and local rank. */
	return !strcmp(name, "RANK") || !strcmp(name, "LOCAL_RANK") ||
	       !strcmp(name, "ROLE_RANK");
}

int dt_train_env_task(uint32_t rank, uint32_t local_rank, struct dt_env *out)
{
	int rc = 0;

	rc |= push_u32(out, "RANK", rank);
	rc |= push_u32(out, "LOCAL_RANK", local_rank);
	/* One role, as torchrun has without --role. */
	rc |= push_u32(out, "ROLE_RANK", rank);
	return rc ? -1 : 0;
}

int dt_train_env(const struct dt_env_request *req, struct dt_env *out,
		 char *err, size_t errlen)
{
	const struct dt_layout *l = req->layout;
	const char *port = user_value(req, "MASTER_PORT");
	const char *omp = user_value(req, "OMP_NUM_THREADS");
	char buf[16];
	int rc = 0;

	if (port && !dt_is_port(port)) {
		dt_errf(err, errlen, "MASTER_PORT='%s' in your environment is "
			"not a port number (1-65535): fix or unset it", port);
		return -1;
	}

	rc |= dt_train_env_task(req->rank, req->local_rank, out);
	rc |= push_u32(out, "WORLD_SIZE", l->world_size);
	rc |= push_u32(out, "LOCAL_WORLD_SIZE", l->local_size);
	rc |= push_u32(out, "GROUP_RANK", l->node_rank);
	rc |= push_u32(out, "GROUP_WORLD_SIZE", l->num_nodes);
	rc |= push_u32(out, "ROLE_WORLD_SIZE", l->world_size);
	rc |= dt_env_add(out, "ROLE_NAME", "default", DT_ENV_SET);

	rc |= push_unless_user(out, req, "MASTER_ADDR", l->master_addr);
	snprintf(buf, sizeof(buf), "%u", req->ports->port[0]);
	rc |= push_unless_user(out, req, "MASTER_PORT", buf);
	if (!rc)
		rc |= push_jax_coordinator(out, req);

	/* torchrun's rule: one thread each when processes share a node. */
	if (omp) {
		rc |= dt_env_add(out, "OMP_NUM_THREADS", omp, DT_ENV_KEPT);
	} else if (l->local_size > 1) {
		rc |= push_u32(out, "OMP_NUM_THREADS",
			       req->cpus_per_task ? req->cpus_per_task : 1);
	}

	if (req->nccl_comm_id)
		rc |= push_unless_user(out, req, "NCCL_COMM_ID",
				       req->nccl_comm_id);
	rc |= push_socket_ifname(out, req, req->socket_ifname);
	/*
	 * The program's PMIx client gets the hash store. PMIx 4.2 under
	 * Slurm 22.05 serves a rank's second client (the program, after the
	 * helper) wrong per-process data from its shared-memory store, and
	 * PMIx 5's (shmem2) now and then fails the client of a rank whose
	 * helper was not one (PMIX_ERR_BAD_PARAM in gds_shmem2.c).
	 */
	if (req->pmix_bootstrap)
		rc |= push_unless_user(out, req, "PMIX_MCA_gds", "hash");

	/* Without an agent nobody hosts that store: every rank would wait. */
	if (req->getenv("TORCHELASTIC_USE_AGENT_STORE", req->getenv_arg))
		rc |= dt_env_add(out, "TORCHELASTIC_USE_AGENT_STORE", NULL,
				 DT_ENV_UNSET);

	rc |= push_step_info(out, l, req->step_id,
			     dt_rank_source_name(l->source),
			     port ? "user" :
			     dt_port_source_name(req->ports->source));
	if (rc) {
		dt_errf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

size_t dt_env_describe(const struct dt_env *env, char *buf, size_t len)
{
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < env->count; i++) {
		const struct dt_env_entry *e = &env->entries[i];
		int n;

		/* Node lists and worker plans are long: the line stays short. */
		if (!strcmp(e->name, "DIST_TRAIN_NODES") ||
		    !strcmp(e->name, "DIST_TRAIN_WORKER_PLAN"))
			continue;
		if (e->action == DT_ENV_UNSET)
			n = snprintf(buf + (used < len ? used : len),
				     used < len ? len - used : 0, "%s-%s",
				     used ? " " : "", e->name);
		else
			n = snprintf(buf + (used < len ? used : len),
				     used < len ? len - used : 0, "%s%s=%s%s",
				     used ? " " : "", e->name, e->value,
				     e->action == DT_ENV_KEPT ? "(kept)" : "");
		if (n > 0)
			used += (size_t)n;
	}
	return used;
}

size_t dt_env_serialize(const struct dt_env *env, char *buf, size_t len)
{
	size_t used = 0;

	for (size_t i = 0; i < env->count; i++) {
		const struct dt_env_entry *e = &env->entries[i];
		char kind = e->action == DT_ENV_SET ? 'S' :
			    e->action == DT_ENV_KEPT ? 'K' : 'U';
		size_t need = 2 + strlen(e->name) +
			      (e->value ? 1 + strlen(e->value) : 0) + 1;

		if (used + need <= len) {
			char *p = buf + used;

			*p++ = kind;
			*p++ = ' ';
			p += sprintf(p, "%s", e->name);
			if (e->value)
				p += sprintf(p, "=%s", e->value);
			*p = '\0';
		}
		used += need;
	}
	return used;
}

static bool valid_name(const char *name, size_t len)
{
	if (!len || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

int dt_env_deserialize(const char *buf, size_t len, struct dt_env *out,
		       char *err, size_t errlen)
{
	size_t pos = 0;

	while (pos < len) {
		const char *rec = buf + pos;
		const char *end = memchr(rec, '\0', len - pos);
		const char *name, *eq;
		char namebuf[256];
		size_t nlen;
		enum dt_env_action action;

		if (!end) {
			dt_errf(err, errlen, "the helper's result ends in an "
				"unterminated record: " ONE_HELPER);
			goto fail;
		}
		pos += (size_t)(end - rec) + 1;
		if (end - rec < 3 || rec[1] != ' ')
			goto bad;
		action = rec[0] == 'S' ? DT_ENV_SET : rec[0] == 'K' ?
			 DT_ENV_KEPT : rec[0] == 'U' ? DT_ENV_UNSET :
			 (enum dt_env_action)-1;
		if ((int)action < 0)
			goto bad;
		name = rec + 2;
		eq = strchr(name, '=');
		if ((action == DT_ENV_UNSET) != !eq)
			goto bad;
		nlen = eq ? (size_t)(eq - name) : strlen(name);
		if (nlen >= sizeof(namebuf) || !valid_name(name, nlen))
			goto bad;
		memcpy(namebuf, name, nlen);
		namebuf[nlen] = '\0';
		if (dt_env_add(out, namebuf, eq ? eq + 1 : NULL, action) < 0) {
			dt_errf(err, errlen, "out of memory");
			goto fail;
		}
		continue;
bad:
		dt_errf(err, errlen, "the helper's result holds a malformed "
			"record '%.40s': " ONE_HELPER, rec);
		goto fail;
	}
	return 0;
fail:
	dt_env_free(out);
	return -1;
}

int dt_torchrun_env(const struct dt_torchrun_request *req, struct dt_env *out,
		    char *err, size_t errlen)
{
	const struct dt_layout *l = req->layout;
	struct dt_env_request user = { 0 };
	char buf[300];
	int rc = 0;

	/* push_unless_user reads the task's environment through these. */
	user.getenv = req->getenv;
	user.getenv_arg = req->getenv_arg;
	user.step_id = req->step_id;

	if (req->max_nodes)
		snprintf(buf, sizeof(buf), "%u:%u", req->min_nodes,
			 req->max_nodes);
	else
		snprintf(buf, sizeof(buf), "%u", l->num_nodes);
	rc |= push_unless_user(out, &user, "PET_NNODES", buf);
	snprintf(buf, sizeof(buf), "%u", req->nproc);
	rc |= push_unless_user(out, &user, "PET_NPROC_PER_NODE", buf);
	rc |= push_unless_user(out, &user, "PET_RDZV_BACKEND", "c10d");
	/* The first node's agent hosts the store: its name must be the one
	 * it calls itself, which Slurm's node name is. */
	snprintf(buf, sizeof(buf), "%s:%u", l->master_addr,
		 req->ports->port[0]);
	rc |= push_unless_user(out, &user, "PET_RDZV_ENDPOINT", buf);
	rc |= push_unless_user(out, &user, "PET_RDZV_ID", req->step_id);
	snprintf(buf, sizeof(buf), "%u", req->restarts);
	rc |= push_unless_user(out, &user, "PET_MAX_RESTARTS", buf);
	snprintf(buf, sizeof(buf), "join_timeout=%u", req->timeout);
	rc |= push_unless_user(out, &user, "PET_RDZV_CONF", buf);
	/*
	 * PyTorch 2.4 and later share the rendezvous store with the
	 * workers, under a prefix made of each agent's own restart count.
	 * When a node is lost, only the agents whose workers failed count a
	 * restart; the others re-form for the new membership without
	 * counting, so the workers of the new group look for each other
	 * under different prefixes and never meet (seen with 2.6 and 2.14;
	 * 1.13 reads no such variable). Workers then make their own store.
	 */
	rc |= push_unless_user(out, &user, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE",
			       "1");
	/* The workers' gloo and NCCL, as in the default mode. */
	rc |= push_socket_ifname(out, &user, req->socket_ifname);
	rc |= push_step_info(out, l, req->step_id, "torchrun",
			     dt_port_source_name(req->ports->source));
	if (rc) {
		dt_errf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}
