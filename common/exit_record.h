/*
 * How a task ended, as each node's slurmstepd tells srun (plugin/watch.c):
 * one line over TCP, signed with the step's secret, so that srun believes
 * only records of its own step's tasks. A record is at most
 * DT_EXIT_RECORD_MAX bytes:
 *
 *   DTX1 JOB.STEP RANK LOCAL_RANK NODE_RANK NODE STATUS OOM AFTER_MS AT_MS MAC
 *
 * STATUS is the wait status, OOM 1 where the node saw the out-of-memory
 * killer end the task, AFTER_MS the time since the step started on its
 * node, AT_MS the node's wall clock (ms since the epoch), and MAC
 * HMAC-SHA256(secret, "dist-train exit " and everything before " MAC") in
 * hex. A replayed record can only repeat an exit that happened.
 */
#ifndef DIST_TRAIN_EXIT_RECORD_H
#define DIST_TRAIN_EXIT_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "secret.h"

#define DT_EXIT_RECORD_MAX 512
#define DT_EXIT_NODE_MAX 64

struct dt_task_exit {
	uint32_t rank;		/* the task's id in the step */
	uint32_t local_rank;
	uint32_t node_rank;
	char node[DT_EXIT_NODE_MAX];
	int status;		/* as wait(2) gives it */
	bool oom;		/* ended by the out-of-memory killer */
	uint64_t after_ms;	/* since the step started on its node */
	uint64_t at_ms;		/* the node's clock, ms since the epoch */
};

/* The record of E for step STEP_ID ("JOB.STEP") into BUF (at least
 * DT_EXIT_RECORD_MAX bytes), newline-terminated; its length, or -1 where
 * a field does not fit (a node name with spaces, too long). */
int dt_exit_record_format(const uint8_t key[DT_SECRET_LEN],
			  const char *step_id, const struct dt_task_exit *e,
			  char *buf, size_t len);

/* TEXT (LEN bytes, the newline optional) into E where it is a well-formed
 * record of step STEP_ID signed with KEY; 0, or -1. */
int dt_exit_record_parse(const uint8_t key[DT_SECRET_LEN],
			 const char *step_id, const char *text, size_t len,
			 struct dt_task_exit *e);

#endif
