/*
 * Rendezvous ports of a step.
 *
 * With MpiParams=ports=LO-HI in slurm.conf, Slurm reserves ports for every
 * step on its nodes (SLURM_STEP_RESV_PORTS, at least two): concurrent
 * steps never share one, so they are used first. Otherwise each step gets
 * a block of DT_PORTS_PER_STEP ports out of the site's range:
 *
 *   slots = (HIGH - LOW + 1) / DT_PORTS_PER_STEP
 *   slot  = (JOB_ID * 64 + STEP_ID) mod slots
 *   port  = LOW + slot * DT_PORTS_PER_STEP
 *
 * Concurrent steps of one job differ as long as fewer than `slots` run at
 * once; steps numbered below 64 of two jobs differ while the job ids are
 * less than slots / 64 apart.
 *
 * A requeued job keeps its id: its steps (RESTART_COUNT > 0, Slurm's
 * count of the job's restarts) move to another slot, hashed from the job,
 * the step and the count, never the slot of the first run, so that what
 * is left of the run before (a process still dying, a port it held) is not
 * in their way.
 */
#ifndef DIST_TRAIN_PORT_H
#define DIST_TRAIN_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* MASTER_PORT, NCCL's bootstrap, torchrun's rendezvous, one spare. */
#define DT_PORTS_PER_STEP 4

enum dt_port_source {
	DT_PORT_RESERVED,	/* SLURM_STEP_RESV_PORTS */
	DT_PORT_DERIVED,	/* the rule above */
	DT_PORT_PROBED,		/* those were taken: the next free one */
};

struct dt_step_ports {
	uint16_t port[DT_PORTS_PER_STEP];
	unsigned count;		/* 2..DT_PORTS_PER_STEP */
	enum dt_port_source source;
};

/*
 * SLURM_STEP_RESV_PORTS is read in slurmstepd, so bounded before it is
 * parsed: every port there is, written out one by one ("65535,").
 */
#define DT_RESV_PORTS_TEXT_MAX (65536u * 6)

/*
 * RESV_PORTS is SLURM_STEP_RESV_PORTS ("12000-12003", "12000,12007") or
 * NULL. Returns 0, or -1 with one sentence in ERR.
 */
int dt_step_ports(const char *resv_ports, uint32_t job_id, uint32_t step_id,
		  uint32_t restart_count, uint16_t range_lo, uint16_t range_hi,
		  struct dt_step_ports *out, char *err, size_t errlen);

const char *dt_port_source_name(enum dt_port_source source);

/*
 * SLURM_RESTART_COUNT (set in a requeued job's environment, and so in its
 * steps') as a count: 0 when TEXT is NULL or not a plain number of at
 * most 9 digits. The plugin and the helper read the same variable, so
 * that they derive the same ports.
 */
uint32_t dt_restart_count(const char *text);

/* Whether TEXT is a port number, 1 to 65535, in plain decimal. */
bool dt_is_port(const char *text);

#endif
