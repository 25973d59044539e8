/*
 * The binding plan on hwloc XML topologies of real machines
 * (tests/topologies/, read through common/hwloc_machine.c).
 */
#include "config.h"

#include <string.h>

#include "unit.h"
#include "../../common/bind_apply.h"
#include "../../common/binding.h"
#include "../../common/envp.h"
#include "../../common/gpu_vendor.h"
#include "../../common/hwloc_machine.h"
#include "../../common/nvml_mig.h"
#include "../../common/settings.h"
#include "../../common/train_env.h"

#define XML(name) DT_TOPOLOGIES "/" name
#define TWO_SOCKETS_3_GPUS XML("32em64t-2n8c2t-pci-normalio.xml")
#define VPI_3_GPUS XML("24em64t-2n6c2t-pci.xml")
#define FOUR_NUMA_NO_GPU XML("96em64t-4n4d3ca2co-pci.xml")
#define POWER8_4_GPUS XML("power8gpudistances.xml")
#define GH200_4_GPUS XML("gh200-4gpu-alps.xml")
#define GB200_TRAY XML("gb200-tray.xml")
#define MI250X_8_GCDS XML("mi250x-lumi-frontier.xml")
#define MI300A_4_APUS XML("mi300a-4apu-llnl.xml")

static struct dt_machine load(const char *xml, const char *alloc_cores)
{
	struct dt_machine m;
	char err[256] = "";

	if (dt_machine_load(xml, alloc_cores, &m, err, sizeof(err)) < 0)
		fprintf(stderr, "cannot load %s: %s\n", xml, err);
	CU_ASSERT_FATAL(err[0] == '\0');
	return m;
}

/* Plan NTASKS on M with the GPUs of the step given as indexes. */
/* ... MIG instances placed by PARENT where one GPU does not hold all. */
static int plan_placing_mig(const struct dt_machine *m, unsigned ntasks,
			    enum dt_bind_mode mode, bool share,
			    const char *gpus, dt_mig_parent_fn parent,
			    void *parent_arg, struct dt_plan *out, char *err,
			    size_t errlen)
{
	struct dt_plan_request req;
	unsigned *ids = NULL;
	int n = dt_step_gpus_placing_mig(m, NULL, NULL, gpus, parent,
					 parent_arg, &ids, err, errlen), rc;

	CU_ASSERT_FATAL(n >= 0);
	memset(&req, 0, sizeof(req));
	req.machine = m;
	req.ntasks = ntasks;
	req.mode = mode;
	req.share_gpus = share;
	req.gpus = ids;
	req.ngpus = (unsigned)n;
	rc = dt_plan_compute(&req, out, err, errlen);
	free(ids);
	return rc;
}

static int plan(const struct dt_machine *m, unsigned ntasks,
		enum dt_bind_mode mode, bool share, const char *gpus,
		struct dt_plan *out, char *err, size_t errlen)
{
	return plan_placing_mig(m, ntasks, mode, share, gpus, NULL, NULL, out,
				err, errlen);
}

static const char *cpus(const struct dt_task_plan *t)
{
	static char buf[8][256];
	static int next;
	char *b = buf[next++ % 8];

	dt_cpulist_format(t->cpus, t->ncpus, b, 256);
	return b;
}

static void test_machine_description(void)
{
	struct dt_machine m = load(TWO_SOCKETS_3_GPUS, NULL);
	int mlx = -1;

	CU_ASSERT_EQUAL(m.ncores, 16);
	CU_ASSERT_EQUAL(m.npus, 32);
	CU_ASSERT_EQUAL(m.nnumas, 2);
	/* NVIDIA's display-class devices, by bus id; the AMD one is not. */
	CU_ASSERT_EQUAL_FATAL(m.ngpus, 3);
	CU_ASSERT_STRING_EQUAL(m.gpus[0].busid, "0000:03:00.0");
	CU_ASSERT_EQUAL(m.gpus[0].numa, 0);
	/* Found by PCI identity with or without a CUDA OS device. */
	CU_ASSERT_STRING_EQUAL(m.gpus[1].busid, "0000:83:00.0");
	CU_ASSERT_STRING_EQUAL(m.gpus[2].busid, "0000:84:00.0");
	CU_ASSERT_EQUAL(m.gpus[1].numa, 1);
	CU_ASSERT_EQUAL(m.gpus[2].minor, -1);	/* XML: no driver to ask */
	for (unsigned n = 0; n < m.nnics; n++)
		if (!strcmp(m.nics[n].name, "mlx5_0"))
			mlx = (int)n;
	CU_ASSERT_FATAL(mlx >= 0);
	CU_ASSERT_EQUAL(m.nics[mlx].kind, DT_NIC_RDMA);
	CU_ASSERT_STRING_EQUAL(m.nics[mlx].netdev, "ib0");
	CU_ASSERT_EQUAL(m.nics[mlx].port, 1);
	CU_ASSERT_EQUAL(m.nics[mlx].numa, 1);
	dt_machine_free(&m);
}

/* One task per GPU: its NUMA node's cores, split where shared. */
static void test_gpus_on_both_numa_nodes(void)
{
	struct dt_machine m = load(TWO_SOCKETS_3_GPUS, NULL);
	struct dt_plan p;

	CU_ASSERT_FATAL(plan(&m, 3, DT_BIND_GPU, false, NULL, &p, NULL, 0)
			== 0);
	CU_ASSERT_EQUAL(p.mode, DT_BIND_GPU);
	CU_ASSERT_EQUAL(p.tasks[0].gpu, 0);
	CU_ASSERT_EQUAL(p.tasks[0].numa, 0);
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[0]), "0-7,16-23");
	CU_ASSERT_EQUAL(p.tasks[0].ncores, 8);
	CU_ASSERT_EQUAL(p.tasks[1].gpu_ordinal, 1);
	CU_ASSERT_EQUAL(p.tasks[1].numa, 1);
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[1]), "8-11,24-27");
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[2]), "12-15,28-31");
	for (unsigned r = 0; r < 3; r++) {
		CU_ASSERT_FALSE(p.tasks[r].shares_cores);
		/* RDMA before Ethernet. */
		CU_ASSERT_STRING_EQUAL(m.nics[p.tasks[r].nic].name, "mlx5_0");
	}
	dt_plan_free(&p);
	dt_machine_free(&m);
}

static void test_more_tasks_than_gpus(void)
{
	struct dt_machine m = load(TWO_SOCKETS_3_GPUS, NULL);
	struct dt_plan p;
	char err[512];

	CU_ASSERT_EQUAL(plan(&m, 4, DT_BIND_GPU, false, NULL, &p, err,
			     sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "4 tasks on this node but 3 GPUs for the "
			       "step: run at most 3 tasks per node "
			       "(--ntasks-per-node=3), or let tasks share "
			       "GPUs with --dist-train=share-gpus");
	/* Shared: task 3 joins GPU 0 and halves NUMA node 0's cores. */
	CU_ASSERT_FATAL(plan(&m, 4, DT_BIND_GPU, true, NULL, &p, NULL, 0)
			== 0);
	CU_ASSERT_EQUAL(p.tasks[3].gpu, 0);
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[0]), "0-3,16-19");
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[3]), "4-7,20-23");
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[1]), "8-11,24-27");
	dt_plan_free(&p);

	/* Twice too many: NUMA node 1 holds 4 tasks, 2 cores each. */
	CU_ASSERT_FATAL(plan(&m, 6, DT_BIND_GPU, true, NULL, &p, NULL, 0)
			== 0);
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[1]), "8-9,24-25");
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[2]), "10-11,26-27");
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[4]), "12-13,28-29");
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[5]), "14-15,30-31");
	CU_ASSERT_EQUAL(p.tasks[5].gpu, 2);
	dt_plan_free(&p);
	dt_machine_free(&m);
}

/* Only the step's cores count (S_STEP_ALLOC_CORES). */
static void test_restricted_cores(void)
{
	struct dt_machine m = load(TWO_SOCKETS_3_GPUS, "0-1,8-9");
	struct dt_plan p;

	CU_ASSERT_EQUAL(m.ncores, 4);
	CU_ASSERT_FATAL(plan(&m, 3, DT_BIND_GPU, false, NULL, &p, NULL, 0)
			== 0);
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[0]), "0-1,16-17");
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[1]), "8,24");
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[2]), "9,25");
	dt_plan_free(&p);
	dt_machine_free(&m);

	/* No core near GPUs 1 and 2: the node is one domain for all. */
	m = load(TWO_SOCKETS_3_GPUS, "0-3");
	CU_ASSERT_FATAL(plan(&m, 3, DT_BIND_GPU, false, NULL, &p, NULL, 0)
			== 0);
	CU_ASSERT_EQUAL(p.tasks[1].numa, -1);
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[0]), "0-1,16-17");
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[1]), "2,18");
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[2]), "3,19");
	dt_plan_free(&p);
	dt_machine_free(&m);

	/* A list that does not describe this machine is not used. */
	m = load(TWO_SOCKETS_3_GPUS, "0-99");
	CU_ASSERT_EQUAL(m.ncores, 16);
	dt_machine_free(&m);
}

/* The name of T's NIC, "-" where it has none. */
static const char *nic_name(const struct dt_machine *m,
			    const struct dt_task_plan *t)
{
	return t->nic >= 0 ? m->nics[t->nic].name : "-";
}

static void test_step_gpu_subset(void)
{
	struct dt_machine m = load(TWO_SOCKETS_3_GPUS, NULL);
	struct dt_plan p;
	unsigned *ids;
	char err[256];

	/* SLURM_STEP_GPUS: indexes in AutoDetect's order, the bus's. */
	CU_ASSERT_EQUAL(dt_step_gpus(&m, "1,2", "0-2", NULL, &ids, err,
				     sizeof(err)), 2);
	CU_ASSERT_EQUAL(ids[0], 1);
	free(ids);
	/*
	 * A node whose device minors do not follow the bus (the driver
	 * numbered 0000:03:00.0 as /dev/nvidia2): Slurm's AutoDetect still
	 * counts in bus order (gres_gpu.c sorts by NVML's links), a
	 * gres.conf listing File=/dev/nvidia[0-2] counts by minor.
	 */
	m.gpus[0].minor = 2;
	m.gpus[1].minor = 0;
	m.gpus[2].minor = 1;
	CU_ASSERT_EQUAL(dt_step_gpus(&m, "0", NULL, NULL, &ids, err,
				     sizeof(err)), 1);
	CU_ASSERT_EQUAL(ids[0], 0);
	free(ids);
	m.slurm_minors = true;
	CU_ASSERT_EQUAL(dt_step_gpus(&m, "0", NULL, NULL, &ids, err,
				     sizeof(err)), 1);
	CU_ASSERT_EQUAL(ids[0], 1);
	free(ids);
	/* The user's CUDA_VISIBLE_DEVICES counts in CUDA's (bus) order. */
	CU_ASSERT_EQUAL(dt_step_gpus(&m, NULL, NULL, "0", &ids, err,
				     sizeof(err)), 1);
	CU_ASSERT_EQUAL(ids[0], 0);
	free(ids);
	m.slurm_minors = false;
	m.gpus[0].minor = m.gpus[1].minor = m.gpus[2].minor = -1;
	CU_ASSERT_FATAL(plan(&m, 2, DT_BIND_GPU, false, "1-2", &p, NULL, 0)
			== 0);
	CU_ASSERT_EQUAL(p.tasks[0].gpu, 1);
	CU_ASSERT_EQUAL(p.tasks[0].gpu_ordinal, 0);
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[0]), "8-11,24-27");
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[1]), "12-15,28-31");
	dt_plan_free(&p);

	CU_ASSERT_EQUAL(dt_step_gpus(&m, "7", NULL, NULL, &ids, err,
				     sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "SLURM_STEP_GPUS='7' names GPU 7, but "
			       "this node has 3 NVIDIA GPUs: unset it if you "
			       "set it, or use --dist-train=bind=numa");
	/* UUIDs alone (Slurm's env_uuid): bound by NUMA node, and why. */
	CU_ASSERT_EQUAL(dt_step_gpus(&m, NULL, NULL, "GPU-8d2c5f3a", &ids,
				     err, sizeof(err)), 0);
	free(ids);
	CU_ASSERT_STRING_EQUAL(err, "GPUs: CUDA_VISIBLE_DEVICES names them by "
			       "UUID, bound by NUMA node");
	CU_ASSERT_EQUAL(dt_step_gpus(&m, "0,x", NULL, NULL, &ids, err,
				     sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "SLURM_STEP_GPUS='0,x' is not a list of "
			       "GPU numbers: unset it if you set it, or use "
			       "--dist-train=bind=numa, which binds each task "
			       "to a NUMA node and leaves the GPUs to you");
	CU_ASSERT_EQUAL(dt_step_gpus(&m, "1,1", NULL, NULL, &ids, err,
				     sizeof(err)), -1);
	dt_machine_free(&m);
}

/*
 * GPUs Slurm counts on a node where none shows as a GPU (a GRES without
 * devices, as on the test cluster) are not placed: the node is bound as
 * one without GPUs.
 */
static void test_step_gpus_without_nvidia_gpus(void)
{
	struct dt_machine m = { 0 };
	unsigned *ids = NULL;
	char err[256];

	CU_ASSERT_EQUAL(dt_step_gpus(&m, "0,1", NULL, "0,1", &ids, err,
				     sizeof(err)), 0);
	free(ids);
	CU_ASSERT_EQUAL(dt_step_gpus(&m, NULL, NULL, "GPU-8d2c5f3a", &ids,
				     err, sizeof(err)), 0);
	free(ids);
}

static void test_power8_with_cuda_and_nvml_devices(void)
{
	struct dt_machine m = load(POWER8_4_GPUS, NULL);
	struct dt_plan p;

	CU_ASSERT_EQUAL(m.ngpus, 4);
	CU_ASSERT_EQUAL(m.nnics, 0);
	CU_ASSERT_FATAL(plan(&m, 4, DT_BIND_GPU, false, NULL, &p, NULL, 0)
			== 0);
	CU_ASSERT_EQUAL(p.tasks[0].numa, 0);
	CU_ASSERT_EQUAL(p.tasks[1].numa, 0);
	CU_ASSERT_EQUAL(p.tasks[2].numa, 1);
	CU_ASSERT_EQUAL(p.tasks[3].numa, 1);
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[0]), "0-1,8-9");
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[3]), "96-97,104-105");
	CU_ASSERT_EQUAL(p.tasks[0].nic, -1);
	dt_plan_free(&p);
	dt_machine_free(&m);
}

/*
 * Grace Hopper: each GPU's memory is a NUMA node of its own (hwloc's
 * GPUMemory) with its Grace's CPUs. It is never a task's memory nor a
 * domain: rank i gets GPU i, Grace i's node and its 72 cores, and the
 * module's NIC, as CSCS documents for Alps.
 */
static void test_grace_hopper(void)
{
	struct dt_machine m = load(GH200_4_GPUS, NULL);
	struct dt_plan p;
	char want[32];

	CU_ASSERT_EQUAL(m.ngpus, 4);
	CU_ASSERT_EQUAL(m.nnumas, 4);
	CU_ASSERT_EQUAL(m.nnics, 4);
	CU_ASSERT_FATAL(plan(&m, 4, DT_BIND_GPU, false, NULL, &p, NULL, 0)
			== 0);
	CU_ASSERT_EQUAL(p.mode, DT_BIND_GPU);
	for (unsigned i = 0; i < 4; i++) {
		CU_ASSERT_EQUAL(m.numas[i], (int)i);
		CU_ASSERT_EQUAL(m.gpus[i].numa, (int)i);
		CU_ASSERT_EQUAL(p.tasks[i].numa, (int)i);
		snprintf(want, sizeof(want), "%u-%u", 72 * i, 72 * i + 71);
		CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[i]), want);
		snprintf(want, sizeof(want), "cxi%u", i);
		CU_ASSERT_STRING_EQUAL(nic_name(&m, &p.tasks[i]), want);
	}
	dt_plan_free(&p);
	dt_machine_free(&m);
}

/*
 * A GB200 tray: two GPUs per Grace, each GPU's memory a NUMA node of its
 * own. Both GPUs of a Grace get its node, its cores split in halves, and
 * a NIC each; no task's memory is a GPU's.
 */
static void test_grace_blackwell(void)
{
	static const char *const want_cpus[4] = { "0-35", "36-71", "72-107",
						  "108-143" };
	struct dt_machine m = load(GB200_TRAY, NULL);
	struct dt_plan p;
	char want[16];

	CU_ASSERT_EQUAL(m.ngpus, 4);
	CU_ASSERT_EQUAL(m.nnumas, 2);
	CU_ASSERT_FATAL(plan(&m, 4, DT_BIND_GPU, false, NULL, &p, NULL, 0)
			== 0);
	for (unsigned i = 0; i < 4; i++) {
		CU_ASSERT_EQUAL(m.gpus[i].numa, (int)i / 2);
		CU_ASSERT_EQUAL(p.tasks[i].numa, (int)i / 2);
		CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[i]), want_cpus[i]);
		snprintf(want, sizeof(want), "mlx5_%u", i);
		CU_ASSERT_STRING_EQUAL(nic_name(&m, &p.tasks[i]), want);
	}
	dt_plan_free(&p);
	dt_machine_free(&m);
}

/* Without GPUs, tasks spread evenly over the NUMA nodes. */
static void test_node_without_gpus(void)
{
	struct dt_machine m = load(FOUR_NUMA_NO_GPU, NULL);
	struct dt_plan p;

	CU_ASSERT_EQUAL(m.ngpus, 0);
	CU_ASSERT_EQUAL(m.nnumas, 4);
	CU_ASSERT_FATAL(plan(&m, 4, DT_BIND_GPU, false, NULL, &p, NULL, 0)
			== 0);
	CU_ASSERT_EQUAL(p.mode, DT_BIND_NUMA);
	for (unsigned r = 0; r < 4; r++) {
		CU_ASSERT_EQUAL(p.tasks[r].numa, (int)r);
		CU_ASSERT_EQUAL(p.tasks[r].gpu, -1);
		CU_ASSERT_EQUAL(p.tasks[r].ncores, 24);
		/* The NIC nearest to its NUMA node, when it has one. */
		if (p.tasks[r].nic >= 0 && m.nics[p.tasks[r].nic].numa >= 0)
			CU_ASSERT_EQUAL(m.nics[p.tasks[r].nic].numa, (int)r);
	}
	dt_plan_free(&p);
	CU_ASSERT_FATAL(plan(&m, 8, DT_BIND_NUMA, false, NULL, &p, NULL, 0)
			== 0);
	CU_ASSERT_EQUAL(p.tasks[1].numa, 0);
	CU_ASSERT_EQUAL(p.tasks[2].numa, 1);
	CU_ASSERT_EQUAL(p.tasks[0].ncores, 12);
	CU_ASSERT_EQUAL(p.tasks[0].cpus[0] != p.tasks[1].cpus[0], 1);
	dt_plan_free(&p);
	dt_machine_free(&m);
}

/*
 * The plan slurmstepd makes once for a node's tasks, and the environment
 * binding gives them: only where no task needs GPUs of its own; what is
 * the same for all the node's, the rest each task's.
 */
static void test_node_plan(void)
{
	struct dt_machine m = load(FOUR_NUMA_NO_GPU, NULL);
	struct dt_machine gpus = load(TWO_SOCKETS_3_GPUS, NULL);
	char *none[] = { NULL };
	char *cpu_bind[] = { "SLURM_CPU_BIND_TYPE=map_cpu:",
			     "SLURM_MEM_BIND_TYPE=local", NULL };
	char *gpu_bind[] = { "SLURMD_TRES_BIND=gpu:closest", NULL };
	struct dt_node_binding nb;
	struct dt_config cfg;
	struct dt_plan p;
	struct dt_env env = { 0 };

	dt_config_init(&cfg);
	cfg.bind = DT_BIND_GPU;
	/* Eight tasks over four NUMA nodes: each its own CPUs and NUMA. */
	CU_ASSERT_EQUAL_FATAL(dt_bind_node_plan(&m, &cfg, dt_envp_getenv, none,
						8, &p), 0);
	CU_ASSERT_EQUAL(p.ntasks, 8);
	CU_ASSERT_EQUAL_FATAL(dt_bind_node_env(&m, &cfg, &p, dt_envp_getenv,
					       none, &nb), 0);
	CU_ASSERT_TRUE(nb.bind_cpus && nb.bind_memory);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&nb.common, "DIST_TRAIN_BIND"),
			       "numa");
	CU_ASSERT_PTR_NULL(dt_env_find(&nb.common, "DIST_TRAIN_CPUS"));
	CU_ASSERT_PTR_NULL(dt_env_find(&nb.common, "DIST_TRAIN_NUMA"));
	CU_ASSERT_STRING_EQUAL(dt_env_get(&nb.common, "OMP_NUM_THREADS"),
			       "12");
	CU_ASSERT_EQUAL_FATAL(nb.ntasks, 8);
	/* Each task's own: what the plan gives it beyond the common. */
	CU_ASSERT_STRING_EQUAL(dt_env_get(&nb.each[2], "DIST_TRAIN_NUMA"), "1");
	CU_ASSERT_PTR_NOT_NULL(dt_env_find(&nb.each[2], "DIST_TRAIN_CPUS"));
	CU_ASSERT_PTR_NULL(dt_env_find(&nb.each[2], "DIST_TRAIN_BIND"));
	/* Past the plan's tasks: not foreseen, the task binds itself. */
	CU_ASSERT_EQUAL(dt_bind_foreseen(&p, &nb, 8, &env), -1);
	CU_ASSERT_EQUAL(env.count, 0);
	dt_node_binding_free(&nb);
	CU_ASSERT_PTR_NULL(nb.each);
	dt_plan_free(&p);
	/* One task: all of it is common. */
	CU_ASSERT_EQUAL_FATAL(dt_bind_node_plan(&m, &cfg, dt_envp_getenv, none,
						1, &p), 0);
	CU_ASSERT_EQUAL_FATAL(dt_bind_node_env(&m, &cfg, &p, dt_envp_getenv,
					       none, &nb), 0);
	CU_ASSERT_PTR_NOT_NULL(dt_env_find(&nb.common, "DIST_TRAIN_CPUS"));
	CU_ASSERT_STRING_EQUAL(dt_env_get(&nb.common, "DIST_TRAIN_NUMA"), "0");
	CU_ASSERT_EQUAL(nb.each[0].count, 0);
	dt_node_binding_free(&nb);
	/* The user's --cpu-bind and --mem-bind: the tasks bind neither, and
	 * none gets the plan's CPUs. */
	CU_ASSERT_EQUAL_FATAL(dt_bind_node_env(&m, &cfg, &p, dt_envp_getenv,
					       cpu_bind, &nb), 0);
	CU_ASSERT_FALSE(nb.bind_cpus || nb.bind_memory);
	CU_ASSERT_PTR_NULL(dt_env_find(&nb.common, "DIST_TRAIN_CPUS"));
	CU_ASSERT_STRING_EQUAL(dt_env_get(&nb.common, "DIST_TRAIN_NUMA"), "0");
	/* Nothing to bind: foreseen, and nothing added. */
	CU_ASSERT_EQUAL(dt_bind_foreseen(&p, &nb, 0, &env), 0);
	CU_ASSERT_EQUAL(env.count, 0);
	dt_node_binding_free(&nb);
	dt_plan_free(&p);
	/* A GPU node: each task's GPUs are its own. Not with --gpu-bind,
	 * which leaves the plan NUMA nodes alone. */
	CU_ASSERT_EQUAL(dt_bind_node_plan(&gpus, &cfg, dt_envp_getenv, none,
					  3, &p), 1);
	CU_ASSERT_EQUAL_FATAL(dt_bind_node_plan(&gpus, &cfg, dt_envp_getenv,
						gpu_bind, 3, &p), 0);
	CU_ASSERT_EQUAL(p.mode, DT_BIND_NUMA);
	dt_plan_free(&p);
	/* Binding off: no plan, and every task says so alike. */
	cfg.bind = DT_BIND_OFF;
	CU_ASSERT_EQUAL(dt_bind_node_plan(&m, &cfg, dt_envp_getenv, none, 8,
					  &p), 1);
	CU_ASSERT_EQUAL_FATAL(dt_bind_node_env(&m, &cfg, NULL, dt_envp_getenv,
					       none, &nb), 0);
	CU_ASSERT_EQUAL(nb.common.count, 1);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&nb.common, "DIST_TRAIN_BIND"),
			       "off");
	CU_ASSERT_PTR_NULL(nb.each);
	dt_node_binding_free(&nb);
	/* No machine: nothing to plan. */
	cfg.bind = DT_BIND_NUMA;
	CU_ASSERT_EQUAL(dt_bind_node_plan(NULL, &cfg, dt_envp_getenv, none, 8,
					  &p), 1);
	dt_machine_free(&gpus);
	dt_machine_free(&m);
}

static void test_vpi_card(void)
{
	struct dt_machine m = load(VPI_3_GPUS, NULL);
	struct dt_plan p;

	/* 3D-class NVIDIA devices without any GPU OS device still count. */
	CU_ASSERT_EQUAL(m.ngpus, 3);
	CU_ASSERT_FATAL(plan(&m, 3, DT_BIND_GPU, false, NULL, &p, NULL, 0)
			== 0);
	CU_ASSERT_STRING_EQUAL(m.nics[p.tasks[0].nic].name, "mlx4_0");
	CU_ASSERT_STRING_EQUAL(m.nics[p.tasks[0].nic].netdev, "ib0");
	/* Hardware threads stay with their core. */
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[1]), "1,3,5,13,15,17");
	CU_ASSERT_EQUAL(p.tasks[1].ncores, 3);
	dt_plan_free(&p);
	dt_machine_free(&m);
}

static void test_more_tasks_than_cores(void)
{
	struct dt_machine m = load(POWER8_4_GPUS, "0-1");
	struct dt_plan p;

	CU_ASSERT_FATAL(plan(&m, 3, DT_BIND_NUMA, false, NULL, &p, NULL, 0)
			== 0);
	CU_ASSERT_TRUE(p.tasks[0].shares_cores);
	CU_ASSERT_EQUAL(p.tasks[2].cpus[0], p.tasks[0].cpus[0]);
	dt_plan_free(&p);
	dt_machine_free(&m);
}

static struct dt_env bind_env(const struct dt_machine *m,
			      const struct dt_plan *p, unsigned rank, bool own,
			      char **envp)
{
	struct dt_bind_env_request req;
	struct dt_env env = { 0 };

	memset(&req, 0, sizeof(req));
	req.machine = m;
	req.plan = p;
	req.local_rank = rank;
	req.cpus_bound = true;
	req.own_gpu_only = own;
	req.getenv = dt_envp_getenv;
	req.getenv_arg = envp;
	CU_ASSERT_EQUAL(dt_binding_env(&req, &env, NULL, 0), 0);
	return env;
}

static void test_environment(void)
{
	struct dt_machine m = load(TWO_SOCKETS_3_GPUS, NULL);
	char *none[] = { NULL };
	char *slurm[] = { "CUDA_VISIBLE_DEVICES=4,6", "OMP_NUM_THREADS=2",
			  "UCX_NET_DEVICES=mlx5_1:1", NULL };
	struct dt_plan p;
	struct dt_env env;

	CU_ASSERT_FATAL(plan(&m, 3, DT_BIND_GPU, false, NULL, &p, NULL, 0)
			== 0);
	env = bind_env(&m, &p, 2, false, none);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_BIND"), "gpu");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "CUDA_DEVICE_ORDER"),
			       "PCI_BUS_ID");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_GPU"),
			       "0000:84:00.0");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_GPU_ORDINAL"), "2");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_NUMA"), "1");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_CPUS"),
			       "12-15,28-31");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "OMP_NUM_THREADS"), "4");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_NIC"), "mlx5_0");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_NIC_NETDEV"), "ib0");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "UCX_NET_DEVICES"), "mlx5_0:1");
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "CUDA_VISIBLE_DEVICES"));
	dt_env_free(&env);

	/* Each task its own GPU: the entry of Slurm's list for it. */
	env = bind_env(&m, &p, 1, true, slurm);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "CUDA_VISIBLE_DEVICES"), "6");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_GPU_ORDINAL"), "0");
	/* The user's choices stay. */
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "OMP_NUM_THREADS"));
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "UCX_NET_DEVICES"));
	dt_env_free(&env);
	env = bind_env(&m, &p, 1, true, none);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "CUDA_VISIBLE_DEVICES"), "1");
	dt_env_free(&env);
	dt_plan_free(&p);

	CU_ASSERT_FATAL(plan(&m, 3, DT_BIND_OFF, false, NULL, &p, NULL, 0)
			== 0);
	env = bind_env(&m, &p, 0, false, none);
	CU_ASSERT_EQUAL(env.count, 1);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_BIND"), "off");
	CU_ASSERT_EQUAL(p.tasks[0].ncpus, 0);
	dt_env_free(&env);
	dt_plan_free(&p);
	dt_machine_free(&m);
}

/*
 * MIG: Slurm gives the step MIG devices, and SLURM_STEP_GPUS counts
 * instances, which are no GPU's minors. With one GPU holding instances,
 * every task goes to it, its NUMA node's cores split between them, and
 * visible-gpus=own gives each its own instance; otherwise the tasks are
 * bound by NUMA node, and the reason is said.
 */
static void test_mig(void)
{
	struct dt_machine m = load(POWER8_4_GPUS, NULL);
	char *slurm[] = { "CUDA_VISIBLE_DEVICES=MIG-5d3c0a1e-aaaa,MIG-77b1f2c4-bbbb",
			  "SLURM_STEP_GPUS=0,1", NULL };
	struct dt_plan_request req;
	struct dt_plan p;
	struct dt_env env;
	unsigned *ids;
	char err[256];

	m.gpus[2].mig = 3;
	CU_ASSERT_EQUAL(dt_step_gpus(&m, "0,1", NULL, slurm[0] + 21, &ids,
				     err, sizeof(err)), 2);
	CU_ASSERT_EQUAL(ids[0], 2);
	CU_ASSERT_EQUAL(ids[1], 2);
	memset(&req, 0, sizeof(req));
	req.machine = &m;
	req.ntasks = 2;
	req.mode = DT_BIND_GPU;
	req.gpus = ids;
	req.ngpus = 2;
	CU_ASSERT_FATAL(dt_plan_compute(&req, &p, err, sizeof(err)) == 0);
	free(ids);
	CU_ASSERT_EQUAL(p.tasks[0].gpu, 2);
	CU_ASSERT_EQUAL(p.tasks[1].gpu, 2);
	CU_ASSERT_EQUAL(p.tasks[0].numa, m.gpus[2].numa);
	CU_ASSERT_EQUAL(p.tasks[1].numa, m.gpus[2].numa);
	CU_ASSERT(p.tasks[0].ncpus > 0 && p.tasks[1].ncpus > 0);
	CU_ASSERT(p.tasks[0].cpus[p.tasks[0].ncpus - 1] < p.tasks[1].cpus[0]);
	env = bind_env(&m, &p, 1, true, slurm);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "CUDA_VISIBLE_DEVICES"),
			       "MIG-77b1f2c4-bbbb");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_GPU_ORDINAL"), "0");
	dt_env_free(&env);
	env = bind_env(&m, &p, 1, false, slurm);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_GPU_ORDINAL"), "1");
	CU_ASSERT_PTR_NULL(dt_env_find(&env, "CUDA_VISIBLE_DEVICES"));
	dt_env_free(&env);
	dt_plan_free(&p);

	m.gpus[0].mig = 1;
	CU_ASSERT_EQUAL(dt_step_gpus(&m, "0,1", NULL, "MIG-a,MIG-b", &ids, err,
				     sizeof(err)), 0);
	free(ids);
	CU_ASSERT_STRING_EQUAL(err, "GPUs: MIG instances of several GPUs, "
			       "which cannot be told apart without NVML, "
			       "bound by NUMA node");
	m.gpus[0].mig = m.gpus[2].mig = 0;
	CU_ASSERT_EQUAL(dt_step_gpus(&m, NULL, NULL, "MIG-a", &ids, err,
				     sizeof(err)), 0);
	free(ids);
	CU_ASSERT_STRING_EQUAL(err, "GPUs: MIG instances of a GPU this node "
			       "does not show, bound by NUMA node");
	CU_ASSERT_EQUAL(dt_step_gpus(&m, NULL, NULL, "MIG-a,0", &ids, err,
				     sizeof(err)), -1);
	{
		/* The user's list is bounded before it is read. */
		size_t len = 1025 * 6;
		char *many = malloc(len + 1);

		CU_ASSERT_FATAL(many != NULL);
		for (size_t i = 0; i < 1025; i++)
			memcpy(many + 6 * i, "MIG-a,", 6);
		many[len - 1] = '\0';
		CU_ASSERT_EQUAL(dt_step_gpus(&m, NULL, NULL, many, &ids, err,
					     sizeof(err)), -1);
		CU_ASSERT_STRING_EQUAL(err, "CUDA_VISIBLE_DEVICES names more "
				       "than 1024 MIG devices: unset it if you "
				       "set it, or use --dist-train=bind=numa");
		free(many);
	}
	dt_machine_free(&m);
}

/*
 * MIG instances on several GPUs: which is on which, NVML says, asked in
 * the task (here a stand-in for it, unit/mock_nvml.c): each task goes to
 * its instance's GPU and that GPU's NUMA node. Where NVML is missing, or
 * cannot place an instance, the tasks are bound by NUMA node, saying why.
 */
static void test_mig_on_several_gpus(void)
{
	struct dt_machine m = load(POWER8_4_GPUS, NULL);
	struct dt_nvml nvml = { .library = DT_MOCK_NVML };
	struct dt_nvml none = { .library = "libdist-train-no-nvml.so.1" };
	struct dt_plan p;
	unsigned *ids;
	char err[256];

	for (unsigned g = 0; g < m.ngpus; g++)
		m.gpus[g].minor = (int)g;
	m.gpus[0].mig = m.gpus[2].mig = 1;
	CU_ASSERT_FATAL(m.gpus[0].numa != m.gpus[2].numa);
	CU_ASSERT_FATAL(plan_placing_mig(&m, 2, DT_BIND_GPU, false,
		"MIG-on-gpu2,MIG-on-gpu0", dt_nvml_mig_parent, &nvml, &p, err,
		sizeof(err)) == 0);
	CU_ASSERT_EQUAL(p.tasks[0].gpu, 2);
	CU_ASSERT_EQUAL(p.tasks[0].numa, m.gpus[2].numa);
	CU_ASSERT_EQUAL(p.tasks[1].gpu, 0);
	CU_ASSERT_EQUAL(p.tasks[1].numa, m.gpus[0].numa);
	dt_plan_free(&p);

	CU_ASSERT_EQUAL(dt_step_gpus_placing_mig(&m, NULL, NULL,
		"MIG-on-gpu0,MIG-gone", dt_nvml_mig_parent, &nvml, &ids, err,
		sizeof(err)), 0);
	free(ids);
	CU_ASSERT_STRING_EQUAL(err, "GPUs: MIG instances of several GPUs, "
			       "which NVML could not place (MIG-gone: Not "
			       "Found), bound by NUMA node");
	m.gpus[2].minor = 7;
	CU_ASSERT_EQUAL(dt_step_gpus_placing_mig(&m, NULL, NULL, "MIG-on-gpu2",
		dt_nvml_mig_parent, &nvml, &ids, err, sizeof(err)), 0);
	free(ids);
	CU_ASSERT_STRING_EQUAL(err, "GPUs: MIG device MIG-on-gpu2 is on "
			       "/dev/nvidia2, which this node does not show, "
			       "bound by NUMA node");
	dt_nvml_close(&nvml);

	CU_ASSERT_EQUAL(dt_step_gpus_placing_mig(&m, NULL, NULL, "MIG-on-gpu0",
		dt_nvml_mig_parent, &none, &ids, err, sizeof(err)), 0);
	free(ids);
	CU_ASSERT_STRING_EQUAL(err, "GPUs: MIG instances of several GPUs, "
			       "which NVML could not place "
			       "(libdist-train-no-nvml.so.1 is not installed "
			       "here), bound by NUMA node");
	dt_nvml_close(&none);
	dt_machine_free(&m);
}

/*
 * The ROCm runtime's order: amdkfd's GPU nodes, in node order; an MI300
 * in TPX mode (three GPUs behind one PCI device) is three GPUs; a GPU
 * amdkfd does not name comes after, a node of no known GPU is passed over.
 */
static void kfd_order(void)
{
	static const struct dt_gpu bus[4] = {
		{ "0000:c1:00.0", 3, -1, 0 }, { "0000:c6:00.0", 3, -1, 0 },
		{ "0000:c9:00.0", 1, -1, 0 }, { "0000:ce:00.0", 1, -1, 0 },
	};
	static const char kfd[6][16] = {
		"0000:c9:00.0", "0000:c1:00.0", "0000:c1:00.0",
		"0000:c1:00.0", "0000:ff:00.0", "0000:c6:00.0",
	};
	static const char *const want[6] = {
		"0000:c9:00.0", "0000:c1:00.0", "0000:c1:00.0",
		"0000:c1:00.0", "0000:c6:00.0", "0000:ce:00.0",
	};
	struct dt_gpu out[10];

	CU_ASSERT_EQUAL_FATAL(dt_gpus_in_kfd_order(bus, 4, kfd, 6, out), 6);
	for (unsigned i = 0; i < 6; i++)
		CU_ASSERT_STRING_EQUAL(out[i].busid, want[i]);
	CU_ASSERT_EQUAL(out[0].numa, 1);
	CU_ASSERT_EQUAL(out[3].numa, 3);
	CU_ASSERT_EQUAL(dt_gpus_in_kfd_order(bus, 4, kfd, 0, out), 4);
	CU_ASSERT_STRING_EQUAL(out[0].busid, "0000:c1:00.0");
}

/* Which PCI devices are whose GPUs, and amdkfd's word on a GPU's bus. */
/*
 * Each vendor entry gives --dist-train=check all it loads and calls
 * (helper/nccl_check.c): a collective library and a runtime by name, and
 * a way to make a GPU current; a vendor is added by its entry alone.
 */
static void test_vendor_check_entries(void)
{
	for (int v = 0; v < DT_GPU_VENDORS; v++) {
		const struct dt_gpu_collective *c = &dt_gpu_vendors[v].collective;
		const struct dt_gpu_runtime *r = &dt_gpu_vendors[v].runtime;
		const char *const calls[] = {
			r->init, r->device_count, r->mem_alloc, r->mem_free,
			r->htod, r->dtoh, r->stream_create, r->stream_sync,
			r->stream_destroy,
		};

		CU_ASSERT_PTR_NOT_NULL(c->name);
		CU_ASSERT_PTR_NOT_NULL(c->label);
		CU_ASSERT_PTR_NOT_NULL(c->pip_path);
		CU_ASSERT_PTR_NOT_NULL(c->libs[0]);
		CU_ASSERT_PTR_NOT_NULL(c->install);
		CU_ASSERT_PTR_NOT_NULL(r->name);
		CU_ASSERT_PTR_NOT_NULL(r->libs[0]);
		CU_ASSERT_TRUE(r->device_node && r->device_node[0] == '/');
		CU_ASSERT_PTR_NOT_NULL(r->tool);
		CU_ASSERT_PTR_NOT_NULL(r->install);
		for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
			CU_ASSERT_PTR_NOT_NULL(calls[i]);
		/* hipSetDevice, or CUDA's primary context. */
		CU_ASSERT_TRUE(r->set_device ? !r->device_get :
			       r->device_get && r->ctx_retain && r->ctx_set &&
			       r->ctx_release);
	}
	CU_ASSERT_STRING_EQUAL(dt_gpu_vendors[DT_GPU_AMD].collective.name,
			       "RCCL");
	CU_ASSERT_STRING_EQUAL(dt_gpu_vendors[DT_GPU_NVIDIA].collective.libs[0],
			       "libnccl.so.2");
}

static void test_gpu_vendors(void)
{
	/* A KFD GPU node's properties, as amdkfd writes them (shortened):
	 * location_id 0xc100 is bus c1, device 0, function 0. */
	static const char gpu_node[] =
		"cpu_cores_count 0\nsimd_count 440\nmem_banks_count 1\n"
		"gfx_target_version 90010\nvendor_id 4098\ndevice_id 29708\n"
		"location_id 49408\ndomain 0\ndrm_render_minor 128\n"
		"hive_id 12735104513718108162\nunique_id 17144981435618516270\n";
	static const char cpu_node[] =
		"cpu_cores_count 64\nsimd_count 0\nmem_banks_count 1\n"
		"location_id 0\ndomain 0\n";
	char busid[16] = "";

	CU_ASSERT_EQUAL(dt_gpu_vendor_of(0x10de, 0x0302), DT_GPU_NVIDIA);
	CU_ASSERT_EQUAL(dt_gpu_vendor_of(0x10de, 0x0300), DT_GPU_NVIDIA);
	CU_ASSERT_EQUAL(dt_gpu_vendor_of(0x10de, 0x0200), -1);
	CU_ASSERT_EQUAL(dt_gpu_vendor_of(0x1002, 0x0380), DT_GPU_AMD);
	CU_ASSERT_EQUAL(dt_gpu_vendor_of(0x1002, 0x1200), DT_GPU_AMD);
	/* A server board's own AMD graphics is no GPU to bind. */
	CU_ASSERT_EQUAL(dt_gpu_vendor_of(0x1002, 0x0300), -1);
	CU_ASSERT_EQUAL(dt_gpu_vendor_of(0x8086, 0x0380), -1);

	CU_ASSERT_EQUAL(dt_kfd_node_parse(gpu_node, busid, sizeof(busid)), 1);
	CU_ASSERT_STRING_EQUAL(busid, "0000:c1:00.0");
	CU_ASSERT_EQUAL(dt_kfd_node_parse(cpu_node, busid, sizeof(busid)), 0);
	CU_ASSERT_EQUAL(dt_kfd_node_parse("simd_count 4\nlocation_id 513\n"
					  "domain 2\nsomething new: x\n",
					  busid, sizeof(busid)), 1);
	CU_ASSERT_STRING_EQUAL(busid, "0002:02:00.1");
	CU_ASSERT_EQUAL(dt_kfd_node_parse("", busid, sizeof(busid)), -1);
	kfd_order();
	CU_ASSERT_EQUAL(dt_kfd_node_parse("simd_count 4\nlocation_id 70000\n",
					  busid, sizeof(busid)), -1);
}

/*
 * An MI250X node as LUMI and Frontier publish it: GCD r goes to rank r
 * with the 8 cores of its L3 (both threads), its NUMA node and that NUMA
 * node's Slingshot NIC; ROCR_VISIBLE_DEVICES narrows a task to its GCD,
 * and HIP's own variables, which would narrow it again, go.
 */
static void test_amd_mi250x(void)
{
	static const int numa[8] = { 3, 3, 1, 1, 0, 0, 2, 2 };
	static const unsigned first_core[8] = { 48, 56, 16, 24, 0, 8, 32, 40 };
	static const char *const nic[8] = { "cxi0", "cxi0", "cxi1", "cxi1",
					    "cxi2", "cxi2", "cxi3", "cxi3" };
	struct dt_machine m = load(MI250X_8_GCDS, NULL);
	char *slurm[] = { "ROCR_VISIBLE_DEVICES=0,1,2,3,4,5,6,7",
			  "HIP_VISIBLE_DEVICES=0", "CUDA_VISIBLE_DEVICES=0,1",
			  NULL };
	const struct dt_env_entry *e;
	struct dt_plan p;
	struct dt_env env;
	unsigned *ids;
	char err[256], want[32];

	CU_ASSERT_EQUAL(m.gpu_vendor, DT_GPU_AMD);
	CU_ASSERT_EQUAL(m.ngpus, 8);
	CU_ASSERT_EQUAL(m.nnumas, 4);
	CU_ASSERT_EQUAL(m.nnics, 4);
	CU_ASSERT_STRING_EQUAL(dt_gpu_visible_name(&m), "ROCR_VISIBLE_DEVICES");
	CU_ASSERT_FATAL(plan(&m, 8, DT_BIND_GPU, false, NULL, &p, NULL, 0)
			== 0);
	for (unsigned r = 0; r < 8; r++) {
		CU_ASSERT_EQUAL(p.tasks[r].gpu, (int)r);
		CU_ASSERT_EQUAL(p.tasks[r].numa, numa[r]);
		snprintf(want, sizeof(want), "%u-%u,%u-%u", first_core[r],
			 first_core[r] + 7, first_core[r] + 64,
			 first_core[r] + 71);
		CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[r]), want);
		CU_ASSERT_STRING_EQUAL(nic_name(&m, &p.tasks[r]), nic[r]);
	}
	env = bind_env(&m, &p, 5, true, slurm);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "ROCR_VISIBLE_DEVICES"), "5");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_GPU"),
			       "0000:d6:00.0");
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_GPU_ORDINAL"), "0");
	CU_ASSERT_PTR_NULL(dt_env_get(&env, "CUDA_DEVICE_ORDER"));
	e = dt_env_find(&env, "HIP_VISIBLE_DEVICES");
	CU_ASSERT(e && e->action == DT_ENV_UNSET);
	e = dt_env_find(&env, "CUDA_VISIBLE_DEVICES");
	CU_ASSERT(e && e->action == DT_ENV_UNSET);
	dt_env_free(&env);
	env = bind_env(&m, &p, 5, false, slurm);
	CU_ASSERT_STRING_EQUAL(dt_env_get(&env, "DIST_TRAIN_GPU_ORDINAL"), "5");
	CU_ASSERT_PTR_NULL(dt_env_find(&env, "ROCR_VISIBLE_DEVICES"));
	dt_env_free(&env);
	dt_plan_free(&p);

	/* Two GCDs of a node (--gpus-per-node=2): Slurm's numbers are
	 * indexes in the runtime's order; both GCDs share NUMA node 0. */
	CU_ASSERT_EQUAL(dt_step_gpus(&m, "4,5", NULL, "4,5", &ids, err,
				     sizeof(err)), 2);
	CU_ASSERT_EQUAL(ids[0], 4);
	CU_ASSERT_EQUAL(ids[1], 5);
	free(ids);
	CU_ASSERT_FATAL(plan(&m, 2, DT_BIND_GPU, false, "4,5", &p, NULL, 0)
			== 0);
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[0]), "0-7,64-71");
	CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[1]), "8-15,72-79");
	dt_plan_free(&p);
	CU_ASSERT_EQUAL(dt_step_gpus(&m, NULL, NULL, "9", &ids, err,
				     sizeof(err)), -1);
	CU_ASSERT_STRING_EQUAL(err, "ROCR_VISIBLE_DEVICES='9' names GPU 9, "
			       "but this node has 8 AMD GPUs: unset it if you "
			       "set it, or use --dist-train=bind=numa");
	dt_machine_free(&m);
}

/*
 * MI300A, as LLNL documents El Capitan's nodes: APU i is package and NUMA
 * node i, its GPU a processing accelerator (class 1200) in PCI domain i;
 * rank i gets GPU i, cores 24i-24i+23 with their threads, and cxi i.
 */
static void test_amd_mi300a(void)
{
	struct dt_machine m = load(MI300A_4_APUS, NULL);
	struct dt_plan p;
	char want[48];

	CU_ASSERT_EQUAL(m.gpu_vendor, DT_GPU_AMD);
	CU_ASSERT_EQUAL(m.ngpus, 4);
	CU_ASSERT_FATAL(plan(&m, 4, DT_BIND_GPU, false, NULL, &p, NULL, 0)
			== 0);
	for (unsigned i = 0; i < 4; i++) {
		snprintf(want, sizeof(want), "%04x:02:00.0", i);
		CU_ASSERT_STRING_EQUAL(m.gpus[p.tasks[i].gpu].busid, want);
		CU_ASSERT_EQUAL(p.tasks[i].numa, (int)i);
		snprintf(want, sizeof(want), "%u-%u,%u-%u", 24 * i, 24 * i + 23,
			 96 + 24 * i, 96 + 24 * i + 23);
		CU_ASSERT_STRING_EQUAL(cpus(&p.tasks[i]), want);
		snprintf(want, sizeof(want), "cxi%u", i);
		CU_ASSERT_STRING_EQUAL(nic_name(&m, &p.tasks[i]), want);
	}
	dt_plan_free(&p);
	dt_machine_free(&m);
}

/* torchrun's workers get their part of the node's plan from the agent. */
static void test_worker_plan(void)
{
	struct dt_machine m = load(TWO_SOCKETS_3_GPUS, NULL);
	struct dt_bind_env_request req;
	char *none[] = { NULL };
	struct dt_plan p;
	char *words, *entry;

	CU_ASSERT_FATAL(plan(&m, 3, DT_BIND_GPU, false, NULL, &p, NULL, 0)
			== 0);
	memset(&req, 0, sizeof(req));
	req.machine = &m;
	req.plan = &p;
	req.cpus_bound = true;
	req.getenv = dt_envp_getenv;
	req.getenv_arg = none;
	words = dt_worker_plan(&req, NULL, 0);
	CU_ASSERT_FATAL(words != NULL);
	CU_ASSERT_EQUAL(strchr(strchr(words, ';') + 1, ';') != NULL, 1);
	entry = dt_worker_entry(words, 1);
	CU_ASSERT_STRING_EQUAL(entry, "DIST_TRAIN_BIND=gpu "
			       "CUDA_DEVICE_ORDER=PCI_BUS_ID "
			       "DIST_TRAIN_GPU=0000:83:00.0 "
			       "DIST_TRAIN_GPU_ORDINAL=1 DIST_TRAIN_NUMA=1 "
			       "DIST_TRAIN_CPUS=8-11,24-27 OMP_NUM_THREADS=4 "
			       "DIST_TRAIN_NIC=mlx5_0 DIST_TRAIN_NIC_NETDEV=ib0 "
			       "UCX_NET_DEVICES=mlx5_0:1");
	free(entry);
	entry = dt_worker_entry(words, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(entry, "DIST_TRAIN_CPUS=0-7,16-23 "));
	free(entry);
	CU_ASSERT_PTR_NULL(dt_worker_entry(words, 3));
	free(words);
	dt_plan_free(&p);
	dt_machine_free(&m);
}

static void test_lists(void)
{
	unsigned cpus[] = { 9, 0, 1, 2, 3, 8, 12 }, *ids;
	char buf[64];

	dt_cpulist_format(cpus, 7, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "0-3,8-9,12");
	CU_ASSERT_EQUAL(dt_cpulist_format(cpus, 7, buf, 4), 10);
	CU_ASSERT_EQUAL(dt_intlist_parse("0,2-4", 10, &ids), 4);
	CU_ASSERT_EQUAL(ids[3], 4);
	free(ids);
	CU_ASSERT_EQUAL(dt_intlist_parse("3-1", 10, &ids), -1);
	CU_ASSERT_EQUAL(dt_intlist_parse("1,", 10, &ids), -1);
	CU_ASSERT_EQUAL(dt_intlist_parse("11", 10, &ids), -1);
	CU_ASSERT_EQUAL(dt_intlist_parse("", 10, &ids), -1);
	CU_ASSERT_EQUAL(dt_intlist_parse("a", 10, &ids), -1);
}

static const struct unit_test tests[] = {
	UNIT_TEST(test_machine_description),
	UNIT_TEST(test_gpus_on_both_numa_nodes),
	UNIT_TEST(test_more_tasks_than_gpus),
	UNIT_TEST(test_restricted_cores),
	UNIT_TEST(test_step_gpu_subset),
	UNIT_TEST(test_step_gpus_without_nvidia_gpus),
	UNIT_TEST(test_power8_with_cuda_and_nvml_devices),
	UNIT_TEST(test_grace_hopper),
	UNIT_TEST(test_grace_blackwell),
	UNIT_TEST(test_gpu_vendors),
	UNIT_TEST(test_vendor_check_entries),
	UNIT_TEST(test_mig),
	UNIT_TEST(test_mig_on_several_gpus),
	UNIT_TEST(test_amd_mi250x),
	UNIT_TEST(test_amd_mi300a),
	UNIT_TEST(test_node_without_gpus),
	UNIT_TEST(test_node_plan),
	UNIT_TEST(test_vpi_card),
	UNIT_TEST(test_more_tasks_than_cores),
	UNIT_TEST(test_environment),
	UNIT_TEST(test_worker_plan),
	UNIT_TEST(test_lists),
};

UNIT_MAIN("binding", tests)
