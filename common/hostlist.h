/*
 * Slurm host lists ("n[01-04],gpu[1,3]"), expanded exactly as
 * `scontrol show hostnames` of Slurm 22.05 expands them.
 *
 * Pure code: no Slurm library is involved, so the plugin, the helper and
 * containers without Slurm's client tools all share one implementation.
 */
#ifndef DIST_TRAIN_HOSTLIST_H
#define DIST_TRAIN_HOSTLIST_H

#include <stddef.h>
#include <stdint.h>

/* Slurm's own limits, mirrored so that whatever it rejects is rejected. */
#define DT_HOSTLIST_MAX_RANGE_HOSTS  65536u        /* hosts in one lo-hi */
#define DT_HOSTLIST_MAX_PREFIX_HOSTS 65536u        /* a non-final group */
#define DT_HOSTLIST_MAX_RANGES       (256u * 1024u) /* ranges in a group */
#define DT_HOSTLIST_MAX_HOSTS        2147483647u   /* Slurm counts in int */

struct dt_hostlist;

/*
 * Parse TEXT. On success returns 0 and sets *OUT (free with
 * dt_hostlist_free). On a malformed list returns -1 and writes one
 * sentence naming the problem into ERR.
 */
int dt_hostlist_parse(const char *text, struct dt_hostlist **out,
		      char *err, size_t errlen);

/*
 * dt_hostlist_parse, refusing a list of more than MAX_HOSTS hosts as soon
 * as that is seen, before the rest takes memory: -2 then, with ERR saying
 * so (a list this long is malformed for the caller, who explains it).
 */
int dt_hostlist_parse_capped(const char *text, size_t max_hosts,
			     struct dt_hostlist **out, char *err,
			     size_t errlen);

void dt_hostlist_free(struct dt_hostlist *hl);

/* Number of hosts, duplicates included. */
size_t dt_hostlist_count(const struct dt_hostlist *hl);

/*
 * Write host N (0-based, in expansion order) into BUF as a C string.
 * Returns the name's length, as snprintf does (truncated if >= LEN), or -1
 * when N is out of range.
 */
int dt_hostlist_nth(const struct dt_hostlist *hl, size_t n,
		    char *buf, size_t len);

/*
 * Call FN for every host in order. NAME is only valid during the call.
 * Stops early and returns FN's value if FN returns non-zero; else 0.
 */
typedef int (*dt_hostlist_fn)(const char *name, size_t len, void *arg);
int dt_hostlist_foreach(const struct dt_hostlist *hl, dt_hostlist_fn fn,
			void *arg);

/* Longest host name the list can produce (for sizing buffers). */
size_t dt_hostlist_max_name_len(const struct dt_hostlist *hl);

#define DT_HOSTFILE_WORD_MAX 1024

/*
 * The first host of a Slurm host file (SLURM_HOSTFILE), whose first LEN
 * bytes are TEXT (not necessarily terminated): where -m arbitrary puts
 * task 0. Blank lines and '#' comments are skipped; a line holds names or
 * ranges ("n[3-4]") separated by commas or blanks, each name maybe with a
 * "*COUNT". Writes the name into HOST; returns 0, or -1 when there is
 * none or it does not fit, or its first word is over DT_HOSTFILE_WORD_MAX.
 */
int dt_hostfile_first_host(const char *text, size_t len, char *host,
			   size_t hostlen);

#endif
