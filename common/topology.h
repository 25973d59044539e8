/*
 * A node's machine, as the binding plan needs it: the cores a step may use
 * (with their hardware threads and NUMA node), the GPUs of one vendor
 * (common/gpu_vendor.h) in the order its runtime numbers them, and the
 * network devices with their PCI distance to each GPU.
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
	int minor;		/* NVIDIA: /dev/nvidiaN; -1 if unknown */
	unsigned mig;		/* MIG GPU instances it holds (per step) */
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
	/* The runtime's order: NVIDIA's with CUDA_DEVICE_ORDER=PCI_BUS_ID
	 * (bus id), AMD's (KFD node order, bus id where it is not known). */
	struct dt_gpu *gpus;
	unsigned ngpus;
	int gpu_vendor;		/* enum dt_gpu_vendor_id, where ngpus > 0 */
	/* Slurm numbers the GPUs by NVIDIA device minor (the site's
	 * slurm-gpus=minors), not in the order above. */
	bool slurm_minors;
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

struct dt_gpu_vendor;

/*
 * GPUS (N of them, in bus order) as the ROCm runtime numbers them: the
 * KFD topology's GPU nodes in node order, given by their PCI bus ids
 * (KFD, NKFD of them). A bus id KFD names several times (an MI300 in TPX
 * or CPX mode: several GPUs behind one PCI device) gives as many GPUs; a
 * GPU KFD does not name keeps its place after those it does, and a bus id
 * of no GPU in GPUS is passed over. OUT has room for N + NKFD entries.
 * Returns how many it holds.
 */
unsigned dt_gpus_in_kfd_order(const struct dt_gpu *gpus, unsigned n,
			      const char (*kfd)[16], unsigned nkfd,
			      struct dt_gpu *out);

/* M's GPU vendor's entry in dt_gpu_vendors, or NULL where M has no GPU. */
const struct dt_gpu_vendor *dt_machine_gpu_vendor(const struct dt_machine *m);

/* The name of M's GPU vendor ("NVIDIA"; "" where M has no GPU), and the
 * variable its runtime narrows the visible GPUs with
 * (CUDA_VISIBLE_DEVICES where M has none). */
const char *dt_gpu_vendor_name(const struct dt_machine *m);
const char *dt_gpu_visible_name(const struct dt_machine *m);

/*
 * The GPUs of a step, as indexes into M->gpus, in M's order. From
 * SLURM_STEP_GPUS, else SLURM_JOB_GPUS: indexes in slurmd's GPU list,
 * which AutoDetect (NVML, RSMI) fills in the order it finds the GPUs,
 * M's order (Slurm's gres_gpu.c sorts them so), or, with M->slurm_minors,
 * NVIDIA's device minors (/dev/nvidiaN) where the driver told them; else
 * VISIBLE (the vendor's variable: the same numbers), else all
 * GPUs. MIG devices in VISIBLE (MIG-<uuid>) are placed on the one GPU
 * that holds MIG instances (gpus[].mig): the result repeats it, once per
 * instance. Returns the count; -1 with ERR when a list names GPUs the
 * node lacks or cannot be read; 0 with ERR saying why where the GPUs
 * cannot be told (UUIDs; MIG instances on several GPUs, or none known,
 * which dt_step_gpus_placing_mig may place): the tasks are then bound by
 * NUMA node.
 */
int dt_step_gpus(const struct dt_machine *m, const char *step_gpus,
		 const char *job_gpus, const char *visible,
		 unsigned **out, char *err, size_t errlen);

/*
 * The GPU that holds the MIG device UUID ("MIG-..."): its device minor
 * (/dev/nvidiaN) into *MINOR. 0, or -1 with WHY. NVIDIA's library says
 * (common/nvml_mig.h), in a task, as its user: never in slurmstepd.
 */
typedef int (*dt_mig_parent_fn)(void *arg, const char *uuid, int *minor,
				char *why, size_t whylen);

/*
 * dt_step_gpus, where MIG instances of several GPUs (or of GPUs whose
 * driver files this node does not show) are each placed on the GPU that
 * PARENT names: each task on its instance's GPU, the GPU's NUMA node's
 * cores split between the tasks it holds. 0 with ERR, bound by NUMA node,
 * where PARENT cannot place one.
 */
int dt_step_gpus_placing_mig(const struct dt_machine *m, const char *step_gpus,
			     const char *job_gpus, const char *visible,
			     dt_mig_parent_fn parent, void *parent_arg,
			     unsigned **out, char *err, size_t errlen);

#endif
