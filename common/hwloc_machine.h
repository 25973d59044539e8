/*
 * The thin layer over hwloc: build a struct dt_machine from this node (I/O
 * devices included) or from an XML topology file.
 *
 * libhwloc is opened at run time: the plugin is also loaded by srun, and
 * Slurm's client tools do not require hwloc, so linking it would make srun
 * fail where it is missing. Only exported hwloc functions are used.
 */
#ifndef DIST_TRAIN_HWLOC_MACHINE_H
#define DIST_TRAIN_HWLOC_MACHINE_H

#include <stddef.h>

#include "topology.h"

/*
 * Load the machine. XML is a topology file, or NULL for this node. The
 * allowed cores are those of hwloc's allowed cpuset (the cgroup's), and,
 * when ALLOC_CORES lists Slurm's cores of the step (S_STEP_ALLOC_CORES,
 * logical core numbers) and all of them exist here, only those. Returns 0,
 * or -1 with ERR (no libhwloc, unreadable XML).
 */
int dt_machine_load(const char *xml, const char *alloc_cores,
		    struct dt_machine *out, char *err, size_t errlen);

/*
 * This node whole: every core and PU, those this process's cgroup does not
 * allow included, for the node's cache (common/machine_cache.h), which
 * each step restricts to its own. 0, or -1 with ERR.
 */
int dt_machine_discover_whole(struct dt_machine *out, char *err,
			      size_t errlen);

/*
 * How many MIG GPU instances each of this node's NVIDIA GPUs holds now,
 * into M->gpus[g].mig, from the driver's capability files
 * (/proc/driver/nvidia/capabilities/gpuMINOR/mig/giN): an administrator
 * may change them between jobs, so they are read for each step and never
 * cached. No GPU library is opened.
 */
void dt_machine_read_mig(struct dt_machine *m);

#endif
