/* The environment each task gets. */
#include "config.h"

#include <string.h>

#include "unit.h"
#include "../../common/envp.h"
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

static struct dt_env compute(const struct dt_layout *l, uint32_t rank,
			     uint32_t local_rank, char **envp, int expect_rc)
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
	req.getenv = dt_envp_getenv;
	req.getenv_arg = envp;
	CU_ASSERT_EQUAL(dt_train_env(&req, &env, NULL, 0), expect_rc);
	return env;
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

static const struct unit_test tests[] = {
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
};

UNIT_MAIN("train_env", tests)
