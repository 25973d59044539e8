/*
 * One process per node speaks for the node at rank 0: the node's leader
 * (its local rank 0) gathers the other local ranks, its members, over a
 * Unix socket (abstract, named from the step's secret; only processes of
 * the step's user are let in, by peer credentials), joins rank 0 once for
 * all of them, and hands each member rank 0's answer, made for it (see
 * common/rendezvous.h). Rank 0 leads its own node inside its event loop
 * (common/rank0.c); other leaders use node_lead.
 */
#ifndef DIST_TRAIN_COMMON_NODE_H
#define DIST_TRAIN_COMMON_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "join.h"
#include "rank0.h"

struct node_member {
	int fd;
	bool joined;		/* its hello came and was taken */
	bool nccl_ok;
	uint32_t rank;
	uint32_t local_rank;	/* as the leader's PMIx says, if it has */
	uint8_t cnonce[DT_RDV_NONCE_LEN];
	uint16_t len;
	char line[128];
};

/*
 * Where the leader is the node's only PMIx client, what it checks of each
 * member and tells it (common/rendezvous.h). NULL where members need no
 * view: the step has no PMIx, or every task is a client itself.
 */
struct node_views {
	/* RANK runs on this node: 0 and its *LOCAL_RANK; or -1 and ERR. */
	int (*check)(uint32_t rank, uint32_t *local_rank, char *err,
		     size_t errlen, void *arg);
	void *arg;
	struct dt_rdv_view base;	/* what the node's ranks share */
};

/* Listen on the node's socket NAME; the socket, or -1 with ERR. */
int node_listen(const char *name, char *err, size_t errlen);

/* The next member at LISTEN_FD, non-blocking, if it runs as this user;
 * -1 when there is none (or it was turned away). */
int node_accept(int listen_fd);

/* Read from M: 1 when its hello is complete and well formed, 0 when more
 * is to come, -1 when it is to be dropped (gone, or not a member). */
int node_member_read(struct node_member *m);

/* M's hello came: 0 when VIEWS (if any) finds its rank here; or -1,
 * with ERR. */
int node_member_check(struct node_member *m, const struct node_views *views,
		      char *err, size_t errlen);

/* Tell M REPLY, with its view from VIEWS if any, made for it with SECRET,
 * and close it. */
void node_member_answer(struct node_member *m, const uint8_t *secret,
			const struct dt_rdv_reply *reply,
			const struct node_views *views);

/* When a leader whose rank 0 gives up at DEADLINE_MS stops waiting for
 * late members: shortly before, so that it can still speak for the rest. */
uint64_t node_gather_deadline(uint64_t deadline_ms);

/*
 * A leader other than rank 0: gather the node's other LOCAL_SIZE - 1
 * ranks at LISTEN_FD until GATHER_DEADLINE_MS, join rank 0 at TARGET
 * for all of them with SELF's rank, and tell each the answer (with its
 * view from VIEWS, if any). Returns as join_rank0 does.
 */
int node_lead(int listen_fd, uint32_t local_size, uint64_t gather_deadline_ms,
	      const struct node_views *views,
	      const struct join_target *target, const uint8_t *secret,
	      const struct dt_rdv_hello *self, uint64_t connect_deadline_ms,
	      uint64_t reply_wait_ms, struct dt_rdv_result *res,
	      bool *from_rank0, char *err, size_t errlen);

#endif
