#include "config.h"

#include "train_env.h"
#include "error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int push(struct dt_env *env, const char *name, const char *value,
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
	e->name = name;
	e->action = action;
	e->value = NULL;
	if (value && !(e->value = strdup(value)))
		return -1;
	env->count++;
	return 0;
}

static int push_u32(struct dt_env *env, const char *name, uint32_t v)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%" PRIu32, v);
	return push(env, name, buf, DT_ENV_SET);
}

void dt_env_free(struct dt_env *env)
{
	if (!env)
		return;
	for (size_t i = 0; i < env->count; i++)
		free(env->entries[i].value);
	free(env->entries);
	memset(env, 0, sizeof(*env));
}

const char *dt_env_get(const struct dt_env *env, const char *name)
{
	for (size_t i = env->count; i > 0; i--)
		if (!strcmp(env->entries[i - 1].name, name))
			return env->entries[i - 1].value;
	return NULL;
}

/*
 * A value already in the task's environment is the user's, unless an
 * earlier dist-train step (the parent of this srun) left it there.
 */
static const char *user_value(const struct dt_env_request *req,
			      const char *name)
{
	const char *parent = req->getenv("DIST_TRAIN_STEP", req->getenv_arg);
	const char *v;

	if (parent && strcmp(parent, req->step_id))
		return NULL;
	v = req->getenv(name, req->getenv_arg);
	return v && *v ? v : NULL;
}

int dt_train_env(const struct dt_env_request *req, struct dt_env *out,
		 char *err, size_t errlen)
{
	const struct dt_layout *l = req->layout;
	const char *addr = user_value(req, "MASTER_ADDR");
	const char *port = user_value(req, "MASTER_PORT");
	const char *omp = user_value(req, "OMP_NUM_THREADS");
	char buf[16];
	int rc = 0;

	if (port && !dt_is_port(port)) {
		dt_errf(err, errlen, "MASTER_PORT='%s' in your environment is "
			"not a port number (1-65535): fix or unset it", port);
		return -1;
	}

	rc |= push_u32(out, "RANK", req->rank);
	rc |= push_u32(out, "LOCAL_RANK", req->local_rank);
	rc |= push_u32(out, "WORLD_SIZE", l->world_size);
	rc |= push_u32(out, "LOCAL_WORLD_SIZE", l->local_size);
	rc |= push_u32(out, "GROUP_RANK", l->node_rank);
	rc |= push_u32(out, "GROUP_WORLD_SIZE", l->num_nodes);
	/* One role, as torchrun has without --role. */
	rc |= push_u32(out, "ROLE_RANK", req->rank);
	rc |= push_u32(out, "ROLE_WORLD_SIZE", l->world_size);
	rc |= push(out, "ROLE_NAME", "default", DT_ENV_SET);

	if (addr)
		rc |= push(out, "MASTER_ADDR", addr, DT_ENV_KEPT);
	else
		rc |= push(out, "MASTER_ADDR", l->master_addr, DT_ENV_SET);
	if (port) {
		rc |= push(out, "MASTER_PORT", port, DT_ENV_KEPT);
	} else {
		snprintf(buf, sizeof(buf), "%u", req->ports->port[0]);
		rc |= push(out, "MASTER_PORT", buf, DT_ENV_SET);
	}

	/* torchrun's rule: one thread each when processes share a node. */
	if (omp) {
		rc |= push(out, "OMP_NUM_THREADS", omp, DT_ENV_KEPT);
	} else if (l->local_size > 1) {
		rc |= push_u32(out, "OMP_NUM_THREADS",
			       req->cpus_per_task ? req->cpus_per_task : 1);
	}

	/* Without an agent nobody hosts that store: every rank would wait. */
	if (req->getenv("TORCHELASTIC_USE_AGENT_STORE", req->getenv_arg))
		rc |= push(out, "TORCHELASTIC_USE_AGENT_STORE", NULL,
			   DT_ENV_UNSET);

	rc |= push(out, "DIST_TRAIN_VERSION", PACKAGE_VERSION, DT_ENV_SET);
	rc |= push(out, "DIST_TRAIN_STEP", req->step_id, DT_ENV_SET);
	rc |= push_u32(out, "DIST_TRAIN_NODE_RANK", l->node_rank);
	rc |= push_u32(out, "DIST_TRAIN_NUM_NODES", l->num_nodes);
	if (l->nodes)
		rc |= push(out, "DIST_TRAIN_NODES", l->nodes, DT_ENV_SET);
	rc |= push(out, "DIST_TRAIN_RANK_SOURCE",
		   dt_rank_source_name(l->source), DT_ENV_SET);
	rc |= push(out, "DIST_TRAIN_PORT_SOURCE",
		   port ? "user" : dt_port_source_name(req->ports->source),
		   DT_ENV_SET);
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

		/* The node list can be long; the verbose line stays short. */
		if (!strcmp(e->name, "DIST_TRAIN_NODES"))
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
