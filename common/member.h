/*
 * A node's member: a task that is not its node's local rank 0 reaches
 * that leader over the node's Unix socket (abstract, named from the
 * step's secret), says its rank, and takes rank 0's answer, which the
 * leader passes on and the secret proves (common/rendezvous.h). The
 * helper's members and the plugin's (a lean PMIx step, where a member
 * needs no helper of its own) run this same code.
 */
#ifndef DIST_TRAIN_MEMBER_H
#define DIST_TRAIN_MEMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "rendezvous.h"

/* What every rank learns when the barrier opens. */
struct dt_rdv_result {
	char address[64];	/* rank 0's IP address that ranks reached */
	uint16_t port;		/* rank 0's rendezvous port (MASTER_PORT) */
	uint16_t nccl_port;
	bool nccl_check;	/* every rank can run the NCCL check */
	struct dt_rdv_view view; /* a member's, from a leader with PMIx */
};

/* The address of the node's abstract socket NAME (no file: it is gone
 * with its last user); its length. */
socklen_t dt_node_address(const char *name, struct sockaddr_un *a);

/*
 * Rank 0's answer LINE to the hello made with CNONCE: 0 and RES when it
 * lets the rank go; -1 with ERR otherwise (UNPROVEN when SECRET did not
 * make it; *FROM_RANK0 when it is rank 0's refusal).
 */
int dt_join_verdict(const uint8_t *secret, const uint8_t *cnonce,
		    const char *line, const char *unproven,
		    struct dt_rdv_result *res, bool *from_rank0, char *err,
		    size_t errlen);

/*
 * Reach the leader at NAME by CONNECT_DEADLINE_MS (it may not listen
 * yet), say RANK, and wait up to REPLY_WAIT_MS for the answer, proven
 * with SECRET. Returns 0 and fills RES, or -1 with ERR; *FROM_RANK0 says
 * someone else reports it (rank 0 or the leader).
 */
int dt_member_join(const char *name, const uint8_t *secret, uint32_t rank,
		   bool nccl_ok, uint64_t connect_deadline_ms,
		   uint64_t reply_wait_ms, struct dt_rdv_result *res,
		   bool *from_rank0, char *err, size_t errlen);

#endif
