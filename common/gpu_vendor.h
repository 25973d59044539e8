/*
 * The GPU vendors a node may have, as a table: how each shows on PCI,
 * which variable its runtime narrows the visible GPUs with, and what else
 * that runtime applies on top. Everything vendor-specific the binding
 * needs is a field here, not a branch elsewhere.
 *
 * Pure: no hwloc, Slurm or driver calls (common/hwloc_machine.c asks it).
 */
#ifndef DIST_TRAIN_GPU_VENDOR_H
#define DIST_TRAIN_GPU_VENDOR_H

#include <stdbool.h>
#include <stdint.h>

enum dt_gpu_vendor_id {
	DT_GPU_NVIDIA,
	DT_GPU_AMD,
	DT_GPU_VENDORS
};

/* Libraries a vendor entry may name for one purpose, tried in order. */
#define DT_GPU_LIBS 5

/*
 * What --dist-train=check's GPU all-reduce loads on this vendor's GPUs
 * (helper/nccl_check.c): the collective library, which speaks NCCL's API
 * on every vendor, and the runtime that gives it device memory and a
 * stream, whose calls have one shape on every vendor. Names, looked up at
 * run time, so that neither is needed to build.
 */
struct dt_gpu_collective {
	const char *name;		/* "NCCL", "RCCL" */
	const char *label;		/* "libnccl", as in "libnccl 2.21.5" */
	/* Where the PyTorch of a Python environment brings its own, below
	 * site-packages; tried before LIBS. */
	const char *pip_path;
	const char *libs[DT_GPU_LIBS];	/* sonames or absolute paths */
	const char *install;		/* what a user installs: messages */
};

struct dt_gpu_runtime {
	const char *name;		/* "CUDA driver" */
	/* Tried where the collective library did not bring it. */
	const char *libs[DT_GPU_LIBS];
	const char *device_node;	/* there once the driver is loaded */
	const char *tool;		/* what lists the GPUs: messages */
	const char *install;		/* what an administrator installs */
	/* Entry points. A device is made current by SET_DEVICE where the
	 * runtime has it (HIP), else by DEVICE_GET, CTX_RETAIN and CTX_SET
	 * (CUDA's driver API: a primary context). */
	const char *init, *device_count, *set_device, *device_get,
		   *ctx_retain, *ctx_release, *ctx_set, *mem_alloc, *mem_free,
		   *htod, *dtoh, *stream_create, *stream_sync, *stream_destroy;
};

struct dt_gpu_vendor {
	const char *name;		/* "NVIDIA", "AMD" */
	uint16_t pci_vendor;		/* 0x10de, 0x1002 */
	/* PCI classes that are this vendor's GPUs: class & mask == want. */
	struct { uint16_t want, mask; } classes[2];
	/* What the runtime narrows its GPUs with, in Slurm's numbers. */
	const char *visible;
	/* Set so that the runtime's ordinals follow the plan's order; NULL
	 * where the runtime has no such switch. */
	const char *order_name, *order_value;
	/* Variables the runtime applies after VISIBLE: unset when a task is
	 * narrowed to its own GPU, or they would narrow it again. */
	const char *refilter[3];
	/* What a user installs to use them: for messages. */
	const char *driver;
	struct dt_gpu_collective collective;
	struct dt_gpu_runtime runtime;
};

extern const struct dt_gpu_vendor dt_gpu_vendors[DT_GPU_VENDORS];

/*
 * The vendor whose GPU a PCI device of VENDOR and CLASS (16 bits: class
 * and subclass, 0x0302) is, or -1. An AMD display controller of class
 * 0x0300 (a server board's own graphics) is none.
 */
int dt_gpu_vendor_of(uint16_t pci_vendor, uint16_t pci_class);

/*
 * A KFD topology node's properties text (/sys/class/kfd/kfd/topology/
 * nodes/N/properties): the PCI bus id of a GPU node ("0000:c1:00.0")
 * into BUSID. Returns 1 for a GPU (SIMDs, a PCI location), 0 for a CPU
 * node, -1 when the text is not such a file.
 */
int dt_kfd_node_parse(const char *text, char *busid, unsigned busid_len);

#endif
