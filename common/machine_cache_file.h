/*
 * The node's machine cache on disk, the thin layer under
 * common/machine_cache.h: a file only root writes, read by every step's
 * slurmstepd, refreshed when the node changes.
 */
#ifndef DIST_TRAIN_MACHINE_CACHE_FILE_H
#define DIST_TRAIN_MACHINE_CACHE_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "topology.h"

/*
 * What would make a cached machine wrong, on one line: this build's
 * version, the boot, the online CPUs and NUMA nodes, the PCI devices and
 * the network interfaces. 0, or -1 when it cannot be read.
 */
int dt_node_fingerprint(char *buf, size_t len);

/*
 * The machine cached at PATH, whole, if the file is root's, writable by
 * root only, and made for FINGERPRINT. Returns 0; 1 when there is none or
 * it is stale; -1 with ERR when it is unsafe or malformed (then ignored).
 */
int dt_machine_cache_read(const char *path, const char *fingerprint,
			  struct dt_machine *whole, char *err, size_t errlen);

/*
 * As root: discover this node whole and replace PATH with it atomically,
 * its folder made root's and 0755 if missing (refused if it is anyone
 * else's). WHOLE gets the machine. 0; 1 with ERR when the machine was
 * discovered (WHOLE holds it) but could not be saved; -1 with ERR when
 * it could not be discovered.
 */
int dt_machine_cache_write(const char *path, const char *fingerprint,
			   struct dt_machine *whole, char *err,
			   size_t errlen);

/* The PUs this process may run on, ALLOWED[pu] for pu < *N. 0, or -1. */
int dt_allowed_pus(bool **allowed, unsigned *n);

#endif
