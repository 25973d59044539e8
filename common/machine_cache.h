/*
 * A node's machine, once discovered, kept as text so that a step's
 * slurmstepd reads it in well under a millisecond instead of loading hwloc
 * and discovering the node again (about 30 ms, plus the library's own
 * load). The text holds every core of the node and every PU of each; a
 * step restricts it to its own (dt_machine_restrict), exactly as hwloc
 * would have restricted a discovery made inside the step's cgroup.
 *
 * The text begins with a fingerprint of the node (the thin layer reads
 * it: boot id, online CPUs and NUMA nodes, PCI devices, network
 * interfaces): a text whose fingerprint differs is stale, and the caller
 * discovers again. Pure: no files, no hwloc.
 */
#ifndef DIST_TRAIN_MACHINE_CACHE_H
#define DIST_TRAIN_MACHINE_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "topology.h"

/* The longest text dt_machine_parse reads: a node of 4,096 PUs with its
 * devices needs under 100 KiB. */
#define DT_MACHINE_TEXT_MAX (1u << 20)
#define DT_FINGERPRINT_MAX 1024

/*
 * M (every core and PU of the node) as text, after FINGERPRINT (one line,
 * at most DT_FINGERPRINT_MAX bytes). Returns the length, as snprintf: call
 * with LEN 0 to size the buffer.
 */
size_t dt_machine_format(const struct dt_machine *m, const char *fingerprint,
			 char *buf, size_t len);

/*
 * Read TEXT (LEN bytes) back into OUT. Returns 0; 1 when its fingerprint
 * is not FINGERPRINT (stale: OUT is untouched); -1 with ERR when the text
 * is malformed or beyond its bounds.
 */
int dt_machine_parse(const char *text, size_t len, const char *fingerprint,
		     struct dt_machine *out, char *err, size_t errlen);

/*
 * The part of FULL a step may use: the PUs for which ALLOWED (indexed by
 * PU, NALLOWED long) is true, the cores keeping any (renumbered in order,
 * as hwloc numbers a restricted topology), and of those, when ALLOC_CORES
 * lists Slurm's cores of the step and all of them exist, only those; then
 * the NUMA nodes of the cores kept. Devices are kept whole. Returns 0, or
 * -1 with ERR (out of memory).
 */
int dt_machine_restrict(const struct dt_machine *full, const bool *allowed,
			unsigned nallowed, const char *alloc_cores,
			struct dt_machine *out, char *err, size_t errlen);

#endif
