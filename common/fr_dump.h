/*
 * What `dist-train stacks` reads from a dump of PyTorch's NCCL flight
 * recorder: the rank's newest collective (its sequence number, what it
 * is, and how far it got), so that ranks can be grouped by it.
 *
 * The dump is a pickle (protocol 2, as torch's C++ pickler writes it) of
 * a dict whose "entries" list holds one dict per collective, oldest
 * first. Only plain values are read: a dump that names a class or calls
 * anything is refused, so reading one never runs code. Pure: the dump
 * is found and asked for by helper/stacks_collect.c.
 */
#ifndef DIST_TRAIN_FR_DUMP_H
#define DIST_TRAIN_FR_DUMP_H

#include <stddef.h>

/* A longer dump is refused: a value's place in it must fit 29 bits. */
#define DT_FR_DUMP_MAX (256u << 20)
#define DT_FR_DUMP_MAX_TEXT "256 MiB"

/* Values waiting outside a container at once (a list's items before its
 * APPENDS): torch writes each list's items at once, and its longest,
 * the entries, is 2,000 by default; a dump that holds more is refused. */
#define DT_FR_DEPTH_MAX (1u << 20)

/* Longest description kept; longer ones are cut. */
#define DT_FR_NEWEST_MAX 256

/*
 * The newest entry of DUMP (LEN bytes) as "#SEQ NAME STATE" (the
 * collective's sequence number in its process group, e.g. "#42
 * nccl:all_reduce started"), followed by ", process group ID (NAME)"
 * where the dump names it, into OUT; "no collective yet" when the list
 * is empty. Returns 0, or -1 with why into OUT ("not a flight recorder
 * dump: ...").
 */
int dt_fr_newest(const unsigned char *dump, size_t len, char *out,
		 size_t out_len);

#endif
