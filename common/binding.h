/*
 * Where each task of a node runs: its GPU, the cores and memory of that
 * GPU's NUMA node, and the network device nearest to the GPU.
 *
 * Local rank i gets the step's GPU i (by PCI bus id). Tasks sharing a NUMA
 * node split its allowed cores without overlap, in whole cores. Without
 * GPUs, tasks are spread evenly over the NUMA nodes. Pure: the plugin, the
 * helper and `dist-train plan` all compute the same plan.
 */
#ifndef DIST_TRAIN_BINDING_H
#define DIST_TRAIN_BINDING_H

#include <stdbool.h>
#include <stddef.h>

#include "envp.h"
#include "topology.h"

struct dt_env;

enum dt_bind_mode {
	DT_BIND_OFF,
	DT_BIND_NUMA,		/* cores and memory, spread over NUMA nodes */
	DT_BIND_GPU,		/* GPU, then its NUMA node's cores and memory */
};

struct dt_plan_request {
	const struct dt_machine *machine;
	unsigned ntasks;	/* tasks on this node */
	enum dt_bind_mode mode;
	bool share_gpus;	/* more tasks than GPUs is allowed */
	const unsigned *gpus;	/* the step's GPUs (dt_step_gpus) */
	unsigned ngpus;
};

struct dt_task_plan {
	int gpu;		/* index into machine->gpus, or -1 */
	int gpu_ordinal;	/* its place among the step's GPUs, or -1 */
	int numa;		/* the NUMA node it is bound to, or -1 */
	unsigned *cpus;		/* OS indexes of its PUs */
	unsigned ncpus;
	unsigned ncores;
	int nic;		/* index into machine->nics, or -1 */
	bool shares_cores;	/* more tasks than cores: some overlap */
};

struct dt_plan {
	enum dt_bind_mode mode;	/* done: GPU on a GPU-less node is NUMA */
	struct dt_task_plan *tasks;
	unsigned ntasks;
};

/* Returns 0, or -1 with ERR (more tasks than GPUs, no usable core). */
int dt_plan_compute(const struct dt_plan_request *req, struct dt_plan *out,
		    char *err, size_t errlen);
void dt_plan_free(struct dt_plan *plan);

const char *dt_bind_mode_name(enum dt_bind_mode mode);

/* What a task's environment gets from its part of the plan. */
struct dt_bind_env_request {
	const struct dt_machine *machine;
	const struct dt_plan *plan;
	unsigned local_rank;
	bool cpus_bound;	/* its affinity is the plan's */
	bool own_gpu_only;	/* CUDA_VISIBLE_DEVICES: its GPU alone */
	dt_getenv_fn getenv;	/* the task's environment */
	void *getenv_arg;
};

/*
 * Add to ENV: CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES (own GPU only),
 * OMP_NUM_THREADS (its cores, unless the user set it), UCX_NET_DEVICES
 * (its RDMA device, unless set), and DIST_TRAIN_{BIND,GPU,GPU_ORDINAL,
 * NUMA,CPUS,NIC,NIC_NETDEV}. Returns 0, or -1 with ERR.
 */
int dt_binding_env(const struct dt_bind_env_request *req, struct dt_env *env,
		   char *err, size_t errlen);

/*
 * The plan of a node's torchrun workers, handed to them through the
 * agent's environment (DIST_TRAIN_WORKER_PLAN): for each local rank,
 * ';'-separated, what dt_binding_env gives it, as "NAME=VALUE" words
 * separated by blanks. REQ->local_rank is ignored. Returns a malloc'd
 * string, or NULL with ERR.
 */
char *dt_worker_plan(const struct dt_bind_env_request *req, char *err,
		     size_t errlen);

/* The words of local rank RANK in PLAN (malloc'd), or NULL. */
char *dt_worker_entry(const char *plan, unsigned rank);

#endif
