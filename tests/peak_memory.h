/*
 * The process's peak resident memory, for the tests that measure it: the
 * unit tests (tests/unit/unit.h), tests/bench/rendezvous_scale.c, the
 * tests' SPANK plugin tests/integration/huge_env.c, and of the store
 * tree's server in tests/bench/store_scale.c.
 */
#ifndef DIST_TRAIN_TESTS_PEAK_MEMORY_H
#define DIST_TRAIN_TESTS_PEAK_MEMORY_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* VmHWM in kB from STATUS (a /proc/PID/status), or -1. */
static inline long peak_memory_kb_at(const char *status)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen(status, "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			kb = atol(line + 6);
	if (f)
		fclose(f);
	return kb;
}

/* This process's. */
static inline long peak_memory_kb(void)
{
	return peak_memory_kb_at("/proc/self/status");
}

/* Measure the peak from now on (Linux 4.0 and later). */
static inline void reset_peak_memory(void)
{
	FILE *f = fopen("/proc/self/clear_refs", "w");

	if (f) {
		fputs("5", f);
		fclose(f);
	}
}

#endif
