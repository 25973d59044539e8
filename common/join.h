/*
 * Every rank but 0: reach rank 0, prove this task belongs to the step,
 * and wait for rank 0's answer, which it proves too (common/rendezvous.h).
 */
#ifndef DIST_TRAIN_COMMON_JOIN_H
#define DIST_TRAIN_COMMON_JOIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rank0.h"

/*
 * Where rank 0 is expected: HOST:PORT, the step's first port. Where rank 0
 * can move off that port when it is taken, and say where it went, the
 * caller gives RELOCATE: called when what answers there is not rank 0, or
 * when nothing has answered for a while. It returns 1 with the *PORT rank
 * 0 moved to, 0 when rank 0 said nothing of moving (yet), or -1 with ERR
 * when it cannot learn.
 */
struct join_target {
	const char *host;
	uint16_t port;
	unsigned timeout_s;	/* the step's, for the message only */
	unsigned retry_ms;	/* the longest wait between tries (0: 50) */
	int (*relocate)(void *arg, uint16_t *port, char *err, size_t errlen);
	void *arg;
};

/*
 * The longest wait between a leader's tries at rank 0 for a step of NODES:
 * a try comes at most this late after rank 0 listens, and all nodes
 * together send it about 20,000 tries a second.
 */
unsigned join_retry_ms(uint32_t nodes);

/*
 * Reach TARGET and prove HELLO with SECRET by CONNECT_DEADLINE_MS (trying
 * again while rank 0 is not there or dropped this connection before it
 * was proven), then wait up to REPLY_WAIT_MS for rank 0's answer. Returns
 * 0 and fills RES, or -1 with ERR; *FROM_RANK0 says ERR is rank 0's
 * verdict (rank 0 reports it), not a problem of this rank.
 */
int join_rank0(const struct join_target *target, const uint8_t *secret,
	       const struct dt_rdv_hello *hello, uint64_t connect_deadline_ms,
	       uint64_t reply_wait_ms, struct dt_rdv_result *res,
	       bool *from_rank0, char *err, size_t errlen);

#endif
