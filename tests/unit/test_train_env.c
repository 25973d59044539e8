/* The environment each task gets. */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "../../common/envp.h"
#include "../../common/node_env.h"
#include "../../common/train_env.h"

static struct dt_layout layout = {
	.source = DT_RANKS_FROM_SLURM,
	.node_rank = 1, .num_nodes = 4, .world_size = 8, .local_size = 1,
	.max_local_size = 5, .master_addr = "n1", .nodes = "n1,n2,n3,n4",
};

static struct dt_step_ports ports = {
	.port = { 20256, 20257, 20258, 20259 }, .count = 4,
	.source = DT_PORT_DERIVED,
};

/* dt_train_env for one task, reading its environment through GETENV. */
static struct dt_env compute_with(const struct dt_layout *l, uint32_t rank,
				  uint32_t local_rank, const char *ifname,
				  dt_getenv_fn getenv, void *arg,
				  int expect_rc)
{
	struct dt_env_request req;
	struct dt_env env = { 0 };

	memset(&req, 0, sizeof(req));
	req.layout = l;
	req.rank = rank;
	req.local_rank = local_rank;
	req.ports = &ports;
	req.cpus_per_task = 4;
	req.step_id = "42.3";
	req.socket_ifname = ifname;
	req.getenv = getenv;
	req.getenv_arg = arg;
	CU_ASSERT_EQUAL(dt_train_env(&req, &env, NULL, 0), expect_rc);
	return env;
}

static struct dt_env compute(const struct dt_layout *l, uint32_t rank,
			     uint32_t local_rank, char **envp, int expect_rc)
{
	return compute_with(l, rank, local_rank, NULL, dt_envp_getenv, envp,
			    expect_rc);
}

static enum dt_env_action action(const struct dt_env *env, const char *name)
{
	for (size_t i = 0; i < env->count; i++)
		if (!strcmp(env->entries[i].name, name))
			return env->entries[i].action;
	return (enum dt_env_action)-1;
}

static void test_torchrun_variables(void)
{
	char *envp[] = { NULL };
	struct dt_env env = compute(&layout, 5, 0, envp, 0);

	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "RANK"), "5");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "LOCAL_RANK"), "0");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "WORLD_SIZE"), "8");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "LOCAL_WORLD_SIZE"), "1");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "GROUP_RANK"), "1");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "GROUP_WORLD_SIZE"), "4");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "ROLE_RANK"), "5");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "ROLE_WORLD_SIZE"), "8");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "ROLE_NAME"), "default");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "MASTER_ADDR"), "n1");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "MASTER_PORT"), "20256");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "JAX_COORDINATOR_ADDRESS"),
			       "n1:20256");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_STEP"), "42.3");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_NODE_RANK"), "1");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_NUM_NODES"), "4");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_NODES"),
			       "n1,n2,n3,n4");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_RANK_SOURCE"),
			       "slurm");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_PORT_SOURCE"),
			       "derived");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_VERSION"),
			       PACKAGE_VERSION);
	/* One task on this node: torchrun leaves OMP_NUM_THREADS alone. */
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "OMP_NUM_THREADS"));
	/* Never: they would make ranks wait for an agent's store. */
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "TORCHELASTIC_USE_AGENT_STORE"));
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "TORCHELASTIC_RUN_ID"));
	dt_env_free(&env);
}

static void test_shared_node_threads(void)
{
	struct dt_layout l = layout;
	char *envp[] = { NULL };
	char *user[] = { "OMP_NUM_THREADS=7", NULL };
	struct dt_env env;

	l.local_size = 5;
	env = compute(&l, 0, 0, envp, 0);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "OMP_NUM_THREADS"), "4");
	dt_env_free(&env);
	env = compute(&l, 0, 0, user, 0);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "OMP_NUM_THREADS"), "7");
	CU_ASSERT_EQUAL(action(&env, "OMP_NUM_THREADS"), DT_ENV_KEPT);
	dt_env_free(&env);
}

static void test_user_rendezvous_wins(void)
{
	char *envp[] = { "MASTER_ADDR=head", "MASTER_PORT=29500",
			 "RANK=99", NULL };
	struct dt_env env = compute(&layout, 5, 0, envp, 0);

	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "MASTER_ADDR"), "head");
	CU_ASSERT_EQUAL(action(&env, "MASTER_ADDR"), DT_ENV_KEPT);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "MASTER_PORT"), "29500");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_PORT_SOURCE"),
			       "user");
	/* Ranks are never the user's. */
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "RANK"), "5");
	/* JAX meets where torch does. */
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "JAX_COORDINATOR_ADDRESS"),
			       "head:29500");
	dt_env_free(&env);
}

static void test_jax_coordinator(void)
{
	char *v6[] = { "MASTER_ADDR=fd00::1", NULL };
	char *mine[] = { "JAX_COORDINATOR_ADDRESS=c:1", NULL };
	struct dt_env env = compute(&layout, 5, 0, v6, 0);

	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "JAX_COORDINATOR_ADDRESS"),
			       "[fd00::1]:20256");
	dt_env_free(&env);
	env = compute(&layout, 5, 0, mine, 0);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "JAX_COORDINATOR_ADDRESS"),
			       "c:1");
	CU_ASSERT_EQUAL(action(&env, "JAX_COORDINATOR_ADDRESS"), DT_ENV_KEPT);
	dt_env_free(&env);
}

/* A nested srun inside a dist-train task inherits, it does not choose. */
static void test_inherited_values_are_replaced(void)
{
	char *envp[] = { "MASTER_ADDR=n9", "MASTER_PORT=21000",
			 "DIST_TRAIN_STEP=41.0", NULL };
	struct dt_env env = compute(&layout, 5, 0, envp, 0);

	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "MASTER_ADDR"), "n1");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "MASTER_PORT"), "20256");
	CU_ASSERT_EQUAL(action(&env, "MASTER_PORT"), DT_ENV_SET);
	dt_env_free(&env);
}

static void test_bad_user_port(void)
{
	char *envp[] = { "MASTER_PORT=http", NULL };
	struct dt_env_request req;
	struct dt_env env = { 0 };
	char err[256];

	memset(&req, 0, sizeof(req));
	req.layout = &layout;
	req.ports = &ports;
	req.step_id = "42.3";
	req.getenv = dt_envp_getenv;
	req.getenv_arg = envp;
	CU_ASSERT_EQUAL(dt_train_env(&req, &env, err, sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "MASTER_PORT='http' in your environment "
			       "is not a port number (1-65535): fix or unset "
			       "it");
	dt_env_free(&env);
}

static void test_agent_store_removed(void)
{
	char *envp[] = { "TORCHELASTIC_USE_AGENT_STORE=True", NULL };
	struct dt_env env = compute(&layout, 0, 0, envp, 0);

	CU_ASSERT_EQUAL(action(&env, "TORCHELASTIC_USE_AGENT_STORE"),
			DT_ENV_UNSET);
	dt_env_free(&env);
}

static void test_long_node_lists_left_out(void)
{
	struct dt_layout l = layout;
	char *envp[] = { NULL };
	struct dt_env env;

	l.nodes = NULL;
	env = compute(&l, 0, 0, envp, 0);
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "DIST_TRAIN_NODES"));
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "MASTER_ADDR"), "n1");
	dt_env_free(&env);
}

static void test_describe(void)
{
	char *envp[] = { "MASTER_PORT=29500",
			 "TORCHELASTIC_USE_AGENT_STORE=1", NULL };
	struct dt_env env = compute(&layout, 5, 0, envp, 0);
	char line[1024], tiny[8];
	size_t need = dt_env_describe(&env, line, sizeof(line));

	CU_ASSERT_EQUAL(need, strlen(line));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, "RANK=5 LOCAL_RANK=0 "));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, " MASTER_PORT=29500(kept) "));
	CU_ASSERT_PTR_NOT_NULL(strstr(line, " -TORCHELASTIC_USE_AGENT_STORE"));
	CU_ASSERT_PTR_NULL(strstr(line, "DIST_TRAIN_NODES"));
	CU_ASSERT_EQUAL(dt_env_describe(&env, tiny, sizeof(tiny)), need);
	CU_ASSERT_STRING_EQUAL(tiny, "RANK=5 ");
	dt_env_free(&env);
}

static void test_helper_additions(void)
{
	char *envp[] = { "NCCL_SOCKET_IFNAME=ib0", NULL };
	struct dt_env_request req;
	struct dt_env env = { 0 };

	memset(&req, 0, sizeof(req));
	req.layout = &layout;
	req.ports = &ports;
	req.step_id = "42.3";
	req.getenv = dt_envp_getenv;
	req.getenv_arg = envp;
	req.nccl_comm_id = "10.0.0.1:20257";
	req.socket_ifname = "=eth0";
	req.pmix_bootstrap = true;
	CU_ASSERT_EQUAL(dt_train_env(&req, &env, NULL, 0), 0);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "NCCL_COMM_ID"),
			       "10.0.0.1:20257");
	/* The user's interface choice stays. */
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "NCCL_SOCKET_IFNAME"), "ib0");
	CU_ASSERT_EQUAL(action(&env, "NCCL_SOCKET_IFNAME"), DT_ENV_KEPT);
	/* Gloo's name has no "=". */
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "GLOO_SOCKET_IFNAME"), "eth0");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "PMIX_MCA_gds"), "hash");
	dt_env_free(&env);
}

static void test_records_round_trip(void)
{
	char *envp[] = { "MASTER_PORT=29500", "TORCHELASTIC_USE_AGENT_STORE=1",
			 NULL };
	struct dt_env env = compute(&layout, 5, 0, envp, 0), back = { 0 };
	size_t len = dt_env_serialize(&env, NULL, 0);
	char *buf = malloc(len);

	CU_ASSERT_FATAL(buf != NULL);
	CU_ASSERT_EQUAL(dt_env_serialize(&env, buf, len), len);
	CU_ASSERT_EQUAL(dt_env_deserialize(buf, len, &back, NULL, 0), 0);
	CU_ASSERT_EQUAL(back.count, env.count);
	for (size_t i = 0; i < env.count && i < back.count; i++) {
		CU_ASSERT_STRING_EQUAL(back.entries[i].name,
				       env.entries[i].name);
		CU_ASSERT_EQUAL(back.entries[i].action, env.entries[i].action);
		if (env.entries[i].value)
			CU_ASSERT_STRING_EQUAL(back.entries[i].value,
					       env.entries[i].value);
	}
	CU_ASSERT_EQUAL(action(&back, "TORCHELASTIC_USE_AGENT_STORE"),
			DT_ENV_UNSET);
	free(buf);
	dt_env_free(&env);
	dt_env_free(&back);
}

static void test_bad_records(void)
{
	static const struct { const char *buf; size_t len; } bad[] = {
		{ "S RANK=1", 8 },		/* unterminated */
		{ "X RANK=1", 9 },
		{ "S 1RANK=1", 10 },
		{ "S RA-NK=1", 10 },
		{ "U RANK=1", 9 },
		{ "S RANK", 7 },
		{ "S =1", 5 },
		{ "SRANK=1", 8 },
	};
	struct dt_env env = { 0 };
	char err[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CU_ASSERT_EQUAL(dt_env_deserialize(bad[i].buf, bad[i].len, &env,
						   err, sizeof(err)), -1);
		CU_ASSERT(err[0] != '\0');
		CU_ASSERT_EQUAL(env.count, 0);
	}
	CU_ASSERT_EQUAL(dt_env_deserialize("U A\0S B=x=y\0", 12, &env, NULL,
					   0), 0);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "B"), "x=y");
	dt_env_free(&env);
}

static struct dt_env torchrun_env(unsigned min, unsigned max, char **envp)
{
	struct dt_torchrun_request req;
	struct dt_env env = { 0 };

	memset(&req, 0, sizeof(req));
	req.layout = &layout;
	req.ports = &ports;
	req.nproc = 8;
	req.min_nodes = min;
	req.max_nodes = max;
	req.restarts = 3;
	req.timeout = 300;
	req.step_id = "42.3";
	req.socket_ifname = "=eth0";
	req.getenv = dt_envp_getenv;
	req.getenv_arg = envp;
	CU_ASSERT_EQUAL(dt_torchrun_env(&req, &env, NULL, 0), 0);
	return env;
}

static void test_torchrun_agent(void)
{
	char *none[] = { NULL };
	char *user[] = { "PET_RDZV_CONF=join_timeout=60", NULL };
	struct dt_env env = torchrun_env(0, 0, none);

	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "PET_NNODES"), "4");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "PET_NPROC_PER_NODE"), "8");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "PET_RDZV_BACKEND"), "c10d");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "PET_RDZV_ENDPOINT"),
			       "n1:20256");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "PET_RDZV_ID"), "42.3");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "PET_MAX_RESTARTS"), "3");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "PET_RDZV_CONF"),
			       "join_timeout=300");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env,
					  "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"),
			       "1");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_RANK_SOURCE"),
			       "torchrun");
	/* The workers inherit them: gloo must not take 127.0.1.1. */
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "GLOO_SOCKET_IFNAME"), "eth0");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "NCCL_SOCKET_IFNAME"), "=eth0");
	/* torchrun gives its workers these itself. */
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "RANK"));
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "LOCAL_RANK"));
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "WORLD_SIZE"));
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "MASTER_ADDR"));
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "OMP_NUM_THREADS"));
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "TORCHELASTIC_RUN_ID"));
	dt_env_free(&env);

	env = torchrun_env(2, 4, user);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "PET_NNODES"), "2:4");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "PET_RDZV_CONF"),
			       "join_timeout=60");
	CU_ASSERT_EQUAL(action(&env, "PET_RDZV_CONF"), DT_ENV_KEPT);
	dt_env_free(&env);
}

/* Search paths: the item first, the rest kept, no stray colon. */
static void test_prepend(void)
{
	struct dt_env env = { 0 };

	CU_ASSERT_EQUAL(dt_env_prepend(&env, "LD_PRELOAD", "/a.so", NULL), 0);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "LD_PRELOAD"), "/a.so");
	CU_ASSERT_EQUAL(dt_env_prepend(&env, "LD_PRELOAD", "/b.so", ""), 0);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "LD_PRELOAD"), "/b.so");
	CU_ASSERT_EQUAL(dt_env_prepend(&env, "LD_PRELOAD", "/c.so",
				       "/u.so:/v.so"), 0);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "LD_PRELOAD"),
			       "/c.so:/u.so:/v.so");
	CU_ASSERT_EQUAL(action(&env, "LD_PRELOAD"), DT_ENV_SET);
	CU_ASSERT_EQUAL(env.count, 1);
	dt_env_free(&env);
}

/* A layout of four tasks a node: what the node sets once is theirs. */
static struct dt_layout node_layout = {
	.source = DT_RANKS_FROM_SLURM,
	.node_rank = 1, .num_nodes = 2, .world_size = 8, .local_size = 4,
	.max_local_size = 4, .master_addr = "n1", .nodes = "n1,n2",
};

static struct dt_env compute_via(uint32_t rank, uint32_t local_rank,
				 dt_getenv_fn getenv, void *arg)
{
	return compute_with(&node_layout, rank, local_rank, "=eth0", getenv,
			    arg, 0);
}

static bool same_entries(const struct dt_env *a, const struct dt_env *b)
{
	if (a->count != b->count)
		return false;
	for (size_t i = 0; i < a->count; i++) {
		const struct dt_env_entry *x = &a->entries[i], *y = &b->entries[i];

		if (strcmp(x->name, y->name) || x->action != y->action ||
		    (!x->value) != (!y->value) ||
		    (x->value && strcmp(x->value, y->value)))
			return false;
	}
	return true;
}

/* An environment array made of ENVP with ENV's changes made, as
 * spank_setenv and spank_unsetenv would; only the changes that
 * dt_env_entry_changes asks for are made. Freed by free_envp. */
static char **changed(char *const *envp, const struct dt_env *env)
{
	char **out = calloc(128, sizeof(*out));
	size_t n = 0;

	for (; envp[n]; n++)
		out[n] = strdup(envp[n]);
	for (size_t i = 0; i < env->count; i++) {
		const struct dt_env_entry *e = &env->entries[i];
		size_t len = strlen(e->name), j;

		if (!dt_env_entry_changes(e, dt_envp_getenv, out))
			continue;
		for (j = 0; j < n; j++)
			if (!strncmp(out[j], e->name, len) &&
			    out[j][len] == '=')
				break;
		if (j < n) {
			free(out[j]);
			memmove(&out[j], &out[j + 1], (n - j) * sizeof(*out));
			n--;
		}
		if (e->action == DT_ENV_SET) {
			out[n] = malloc(len + strlen(e->value) + 2);
			sprintf(out[n++], "%s=%s", e->name, e->value);
		}
	}
	out[n] = NULL;
	return out;
}

static void free_envp(char **envp)
{
	for (size_t i = 0; envp[i]; i++)
		free(envp[i]);
	free(envp);
}

/* Whether two environment arrays hold the same variables. */
static bool same_envp(char *const *a, char *const *b)
{
	size_t na = 0, nb = 0;

	for (; a[na]; na++) {
		const char *eq = strchr(a[na], '=');
		char name[64];
		const char *v;

		if (!eq)
			return false;
		snprintf(name, sizeof(name), "%.*s", (int)(eq - a[na]), a[na]);
		v = dt_envp_get(b, name);
		if (!v || strcmp(v, eq + 1))
			return false;
	}
	while (b[nb])
		nb++;
	return na == nb;
}

/* Every variable but the task's own ranks is the same for each task of
 * a node: what slurmstepd sets once for all of them. */
static void test_node_part_is_shared(void)
{
	char *envp[] = { "PYTHONPATH=/u", NULL };
	struct dt_env a = compute_via(4, 0, dt_envp_getenv, envp);
	struct dt_env b = compute_via(7, 3, dt_envp_getenv, envp);

	CU_ASSERT_EQUAL_FATAL(a.count, b.count);
	for (size_t i = 0; i < a.count; i++) {
		const struct dt_env_entry *x = &a.entries[i], *y = &b.entries[i];

		CU_ASSERT_STRING_EQUAL(x->name, y->name);
		if (dt_train_env_per_task(x->name)) {
			CU_ASSERT_STRING_NOT_EQUAL(x->value, y->value);
		} else if (x->value && y->value) {
			CU_ASSERT_STRING_EQUAL(x->value, y->value);
		}
	}
	CU_ASSERT_TRUE(dt_train_env_per_task("RANK"));
	CU_ASSERT_FALSE(dt_train_env_per_task("WORLD_SIZE"));
	dt_env_free(&a);
	dt_env_free(&b);
}

/*
 * Set once for the node and then read back through the view, a task's
 * environment comes out as if nothing had been set before it: the same
 * entries, and the same environment once applied. Also where the user set
 * some of it (kept), a nested srun inherited it, or Slurm changed one of
 * the node's values since.
 */
static void test_node_env_round_trip(void)
{
	char *plain[] = { "PATH=/bin", NULL };
	char *user[] = { "PATH=/bin", "MASTER_PORT=29500",
			 "OMP_NUM_THREADS=7", NULL };
	char *nested[] = { "MASTER_ADDR=n9", "MASTER_PORT=21000",
			   "DIST_TRAIN_STEP=41.0", "WORLD_SIZE=2", NULL };
	char *same_step[] = { "DIST_TRAIN_STEP=42.3", "MASTER_PORT=29500",
			      NULL };
	char **cases[] = { plain, user, nested, same_step };

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char **before = cases[c], **node_set, **direct, **via;
		struct dt_env first = compute_via(4, 0, dt_envp_getenv, before);
		struct dt_env expect, got;
		struct dt_node_env node;
		struct dt_node_env_view view;

		CU_ASSERT_EQUAL_FATAL(dt_node_env_from(&first, dt_envp_getenv,
						       before, &node), 0);
		CU_ASSERT_PTR_NULL(dt_env_find(&node.set, "RANK"));
		CU_ASSERT_PTR_NULL(dt_env_find(&node.set, "LOCAL_RANK"));
		CU_ASSERT_EQUAL(node.set.count, node.was.count);
		node_set = changed(before, &node.set);
		view.node = &node;
		view.getenv = dt_envp_getenv;
		view.arg = node_set;
		expect = compute_via(6, 2, dt_envp_getenv, before);
		got = compute_via(6, 2, dt_node_env_getenv, &view);
		CU_ASSERT_TRUE_FATAL(first.count > 0 && expect.count > 0);
		CU_ASSERT_TRUE(same_entries(&expect, &got));
		direct = changed(before, &expect);
		via = changed(node_set, &got);
		CU_ASSERT_TRUE(same_envp(direct, via));
		free_envp(direct);
		free_envp(via);
		free_envp(node_set);
		dt_env_free(&first);
		dt_env_free(&expect);
		dt_env_free(&got);
		dt_node_env_free(&node);
	}
}

/* A value changed after the node set it (by Slurm or another plugin) is
 * read as it is now; one the node left alone, as it was before. */
static void test_node_env_view(void)
{
	char *before[] = { "PYTHONPATH=/u", NULL };
	char *now[] = { "PYTHONPATH=/hook:/u", "WORLD_SIZE=99", "X=1", NULL };
	struct dt_env first = { 0 };
	struct dt_node_env node;
	struct dt_node_env_view view = { &node, dt_envp_getenv, now };

	dt_env_add(&first, "PYTHONPATH", "/hook:/u", DT_ENV_SET);
	dt_env_add(&first, "WORLD_SIZE", "8", DT_ENV_SET);
	dt_env_add(&first, "RANK", "4", DT_ENV_SET);
	dt_env_add(&first, "MASTER_PORT", "29500", DT_ENV_KEPT);
	CU_ASSERT_EQUAL_FATAL(dt_node_env_from(&first, dt_envp_getenv, before,
					       &node), 0);
	CU_ASSERT_EQUAL(node.set.count, 2);
	CU_ASSERT_STRING_EQUAL(dt_node_env_getenv("PYTHONPATH", &view), "/u");
	CU_ASSERT_STRING_EQUAL(dt_node_env_getenv("WORLD_SIZE", &view), "99");
	CU_ASSERT_STRING_EQUAL(dt_node_env_getenv("X", &view), "1");
	CU_ASSERT_PTR_NULL(dt_node_env_getenv("RANK", &view));
	/* Not set after all: read as it is. */
	dt_node_env_drop(&node, 0);
	CU_ASSERT_EQUAL(node.set.count, 1);
	CU_ASSERT_STRING_EQUAL(dt_node_env_getenv("PYTHONPATH", &view),
			       "/hook:/u");
	dt_node_env_drop(&node, 5);
	CU_ASSERT_EQUAL(node.was.count, 1);
	dt_node_env_free(&node);
	dt_env_free(&first);
}

/* Before a start barrier: what puts back the names that still hold the
 * node's value, and only those. */
static void test_node_env_undo(void)
{
	char *before[] = { "PYTHONPATH=/u", NULL };
	char *now[] = { "PYTHONPATH=/hook:/u", "WORLD_SIZE=99",
			"MASTER_ADDR=n1", NULL };
	struct dt_env first = { 0 }, undo = { 0 };
	struct dt_node_env node;

	dt_env_add(&first, "PYTHONPATH", "/hook:/u", DT_ENV_SET);
	dt_env_add(&first, "WORLD_SIZE", "8", DT_ENV_SET);
	dt_env_add(&first, "MASTER_ADDR", "n1", DT_ENV_SET);
	CU_ASSERT_EQUAL_FATAL(dt_node_env_from(&first, dt_envp_getenv, before,
					       &node), 0);
	CU_ASSERT_EQUAL_FATAL(dt_node_env_undo(&node, dt_envp_getenv, now,
					       &undo), 0);
	CU_ASSERT_EQUAL(undo.count, 2);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&undo, "PYTHONPATH"), "/u");
	CU_ASSERT_EQUAL(action(&undo, "PYTHONPATH"), DT_ENV_SET);
	CU_ASSERT_EQUAL(action(&undo, "MASTER_ADDR"), DT_ENV_UNSET);
	/* Slurm changed it since: it stands. */
	CU_ASSERT_PTR_NULL(dt_env_find(&undo, "WORLD_SIZE"));
	dt_env_free(&undo);
	dt_node_env_free(&node);
	dt_env_free(&first);
}

/* A task whose environment lacks a name the node set (its binding came
 * out otherwise): the name goes back to what it was, unless changed. */
static void test_node_env_complete(void)
{
	char *before[] = { "DIST_TRAIN_CPUS=7", NULL };
	char *now[] = { "DIST_TRAIN_CPUS=0-3", "DIST_TRAIN_NUMA=0",
			"DIST_TRAIN_BIND=x", "WORLD_SIZE=8", NULL };
	struct dt_env node_part = { 0 }, task = { 0 };
	struct dt_node_env node;

	dt_env_add(&node_part, "DIST_TRAIN_CPUS", "0-3", DT_ENV_SET);
	dt_env_add(&node_part, "DIST_TRAIN_NUMA", "0", DT_ENV_SET);
	dt_env_add(&node_part, "DIST_TRAIN_BIND", "numa", DT_ENV_SET);
	dt_env_add(&node_part, "WORLD_SIZE", "8", DT_ENV_SET);
	CU_ASSERT_EQUAL_FATAL(dt_node_env_from(&node_part, dt_envp_getenv,
					       before, &node), 0);
	dt_env_add(&task, "WORLD_SIZE", "8", DT_ENV_SET);
	CU_ASSERT_EQUAL_FATAL(dt_node_env_complete(&node, dt_envp_getenv, now,
						   &task), 0);
	CU_ASSERT_EQUAL(task.count, 3);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&task, "DIST_TRAIN_CPUS"), "7");
	CU_ASSERT_EQUAL(action(&task, "DIST_TRAIN_CPUS"), DT_ENV_SET);
	CU_ASSERT_EQUAL(action(&task, "DIST_TRAIN_NUMA"), DT_ENV_UNSET);
	/* Changed since by someone else: it stands. */
	CU_ASSERT_PTR_NULL(dt_env_find(&task, "DIST_TRAIN_BIND"));
	/* Taken out again, one entry at a time. */
	dt_env_remove(&task, 0);
	CU_ASSERT_EQUAL(task.count, 2);
	CU_ASSERT_PTR_NULL(dt_env_find(&task, "WORLD_SIZE"));
	dt_env_remove(&task, 9);
	CU_ASSERT_EQUAL(task.count, 2);
	dt_env_free(&task);
	dt_node_env_free(&node);
	dt_env_free(&node_part);
}

/* What the node's part was made from, and whether a task's environment
 * would make the same; whether the node's values still stand. */
static void test_node_env_reads(void)
{
	char *step[] = { "MASTER_PORT=1234", "A=1", NULL };
	char *same[] = { "A=1", "MASTER_PORT=1234", "B=2", NULL };
	char *other[] = { "MASTER_PORT=1235", "A=1", NULL };
	char *more[] = { "MASTER_PORT=1234", "OMP_NUM_THREADS=4", NULL };
	struct dt_env_reads reads = { dt_envp_getenv, step, { 0 }, false };
	struct dt_env first = { 0 };
	struct dt_node_env node;
	char *now[] = { "WORLD_SIZE=8", NULL }, *changed[] = { NULL };

	CU_ASSERT_STRING_EQUAL(dt_env_reads_getenv("MASTER_PORT", &reads),
			       "1234");
	CU_ASSERT_PTR_NULL(dt_env_reads_getenv("OMP_NUM_THREADS", &reads));
	CU_ASSERT_STRING_EQUAL(dt_env_reads_getenv("MASTER_PORT", &reads),
			       "1234");
	CU_ASSERT_EQUAL(reads.seen.count, 2);
	/* Names it never read do not count. */
	CU_ASSERT_TRUE(dt_env_reads_same(&reads, dt_envp_getenv, same));
	CU_ASSERT_FALSE(dt_env_reads_same(&reads, dt_envp_getenv, other));
	/* Absent then, there now. */
	CU_ASSERT_FALSE(dt_env_reads_same(&reads, dt_envp_getenv, more));
	reads.failed = true;
	CU_ASSERT_FALSE(dt_env_reads_same(&reads, dt_envp_getenv, same));
	dt_env_free(&reads.seen);

	dt_env_add(&first, "WORLD_SIZE", "8", DT_ENV_SET);
	CU_ASSERT_EQUAL_FATAL(dt_node_env_from(&first, dt_envp_getenv,
					       changed, &node), 0);
	CU_ASSERT_TRUE(dt_node_env_intact(&node, dt_envp_getenv, now));
	CU_ASSERT_FALSE(dt_node_env_intact(&node, dt_envp_getenv, changed));
	dt_node_env_free(&node);
	dt_env_free(&first);
}

/* A task's own part: its ranks, and only those. */
static void test_train_env_task(void)
{
	struct dt_env env = { 0 };

	CU_ASSERT_EQUAL_FATAL(dt_train_env_task(9, 1, &env), 0);
	CU_ASSERT_EQUAL(env.count, 3);
	for (size_t i = 0; i < env.count; i++)
		CU_ASSERT_TRUE(dt_train_env_per_task(env.entries[i].name));
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "RANK"), "9");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "LOCAL_RANK"), "1");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "ROLE_RANK"), "9");
	dt_env_free(&env);
}

static void test_entry_changes(void)
{
	char *envp[] = { "A=1", NULL };
	struct dt_env_entry set_same = { "A", "1", DT_ENV_SET };
	struct dt_env_entry set_other = { "A", "2", DT_ENV_SET };
	struct dt_env_entry set_new = { "B", "1", DT_ENV_SET };
	struct dt_env_entry unset_there = { "A", NULL, DT_ENV_UNSET };
	struct dt_env_entry unset_absent = { "B", NULL, DT_ENV_UNSET };
	struct dt_env_entry kept = { "B", "1", DT_ENV_KEPT };

	CU_ASSERT_FALSE(dt_env_entry_changes(&set_same, dt_envp_getenv, envp));
	CU_ASSERT_TRUE(dt_env_entry_changes(&set_other, dt_envp_getenv, envp));
	CU_ASSERT_TRUE(dt_env_entry_changes(&set_new, dt_envp_getenv, envp));
	CU_ASSERT_TRUE(dt_env_entry_changes(&unset_there, dt_envp_getenv,
					    envp));
	CU_ASSERT_FALSE(dt_env_entry_changes(&unset_absent, dt_envp_getenv,
					     envp));
	CU_ASSERT_FALSE(dt_env_entry_changes(&kept, dt_envp_getenv, envp));
}

/* A name is found whole, whatever its neighbours share with it. */
static void test_envp_lookup(void)
{
	char *envp[] = { "RANKS=9", "LOCAL_RANK=1", "NOVALUE", "RANK=",
			 "RANK=3", "R", "MASTER_ADDR=n1", NULL };

	CU_ASSERT_STRING_EQUAL(dt_envp_get(envp, "RANK"), "");
	CU_ASSERT_STRING_EQUAL(dt_envp_get(envp, "RANKS"), "9");
	CU_ASSERT_STRING_EQUAL(dt_envp_get(envp, "LOCAL_RANK"), "1");
	CU_ASSERT_STRING_EQUAL(dt_envp_get(envp, "MASTER_ADDR"), "n1");
	CU_ASSERT_PTR_NULL(dt_envp_get(envp, "R"));
	CU_ASSERT_PTR_NULL(dt_envp_get(envp, "NOVALUE"));
	CU_ASSERT_PTR_NULL(dt_envp_get(envp, "MASTER"));
	CU_ASSERT_PTR_NULL(dt_envp_get(envp, "WORLD_SIZE"));
	CU_ASSERT_PTR_NULL(dt_envp_get(NULL, "RANK"));
	CU_ASSERT_STRING_EQUAL(dt_envp_getenv("RANKS", envp), "9");
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_envp_lookup),
	UNIT_TEST(test_prepend),
	UNIT_TEST(test_torchrun_variables),
	UNIT_TEST(test_shared_node_threads),
	UNIT_TEST(test_user_rendezvous_wins),
	UNIT_TEST(test_jax_coordinator),
	UNIT_TEST(test_inherited_values_are_replaced),
	UNIT_TEST(test_bad_user_port),
	UNIT_TEST(test_agent_store_removed),
	UNIT_TEST(test_long_node_lists_left_out),
	UNIT_TEST(test_describe),
	UNIT_TEST(test_helper_additions),
	UNIT_TEST(test_records_round_trip),
	UNIT_TEST(test_bad_records),
	UNIT_TEST(test_torchrun_agent),
	UNIT_TEST(test_node_part_is_shared),
	UNIT_TEST(test_node_env_round_trip),
	UNIT_TEST(test_node_env_view),
	UNIT_TEST(test_node_env_undo),
	UNIT_TEST(test_node_env_complete),
	UNIT_TEST(test_node_env_reads),
	UNIT_TEST(test_train_env_task),
	UNIT_TEST(test_entry_changes),
};

UNIT_MAIN("train_env", tests)
