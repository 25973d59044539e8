/*
 * A node's machine, as the binding plan needs it: the cores a step may use
 * (with their hardware threads and NUMA node), the NVIDIA GPUs in PCI bus
 * order, and the network devices with their PCI distance to each GPU.
 *
 * Plain data: common/hwloc_machine.c fills it from hwloc (this node, or an
 * XML file); tests fill it from XML topologies of real machines.
 */
#ifndef DIST_TRAIN_TOPOLOGY_H
#define DIST_TRAIN_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dt_core {
	int numa;		/* OS index of its NUMA node, -1 if none */
	unsigned first_pu;	/* its allowed PUs: pus[first_pu..+npus) */
	unsigned npus;
};

struct dt_gpu {
	char busid[16];		/* "0000:03:00.0" */
	int numa;		/* nearest NUMA node, -1 if unknown */
	int minor;		/* /dev/nvidiaN, -1 if unknown */
};

enum dt_nic_kind {
	DT_NIC_RDMA,		/* InfiniBand, or RoCE Ethernet */
	DT_NIC_ETHERNET,
};

struct dt_nic {
	char name[32];		/* "mlx5_0", or the interface: "eth0" */
	char netdev[32];	/* its interface ("ib0"), or "" */
	char busid[16];
	enum dt_nic_kind kind;
	int numa;
	int port;		/* RDMA: first active port, else 1 */
};

struct dt_machine {
	struct dt_core *cores;	/* allowed cores, in hwloc's logical order */
	unsigned ncores;
	unsigned *pus;		/* OS indexes of allowed PUs, by core */
	unsigned npus;
	int *numas;		/* NUMA nodes holding allowed cores, sorted */
	unsigned nnumas;
	struct dt_gpu *gpus;	/* NVIDIA GPUs, by PCI bus id */
	unsigned ngpus;
	struct dt_nic *nics;
	unsigned nnics;
	/* PCI hops between GPU g and NIC n: gpu_nic_hops[g * nnics + n]. */
	unsigned *gpu_nic_hops;
};

void dt_machine_free(struct dt_machine *m);

/* "0-3,8,10-11" from sorted or unsorted CPU numbers; snprintf-like. */
size_t dt_cpulist_format(const unsigned *cpus, unsigned n, char *buf,
			 size_t len);

/*
 * Parse "0,2-3" (numbers at most MAX) into a malloc'd array. Returns the
 * count, or -1 when TEXT is not such a list.
 */
int dt_intlist_parse(const char *text, unsigned max, unsigned **out);

/*
 * The GPUs of a step, as indexes into M->gpus in bus order. From
 * SLURM_STEP_GPUS, else SLURM_JOB_GPUS (device minors: /dev/nvidiaN),
 * else CUDA_VISIBLE_DEVICES (indexes in PCI bus order), else all GPUs.
 * Returns the count; -1 with ERR when a list names GPUs the node lacks or
 * cannot be read (UUIDs, MIG devices).
 */
int dt_step_gpus(const struct dt_machine *m, const char *step_gpus,
		 const char *job_gpus, const char *cuda_visible,
		 unsigned **out, char *err, size_t errlen);

#endif
