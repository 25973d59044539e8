/*
 * Rank 0's side of the start barrier: an event loop (epoll) over the
 * protocol's pure core, common/rendezvous.h. Rank 0 listens on
 * MASTER_PORT, the port PyTorch's store will take after it, so reaching
 * the barrier proves MASTER_ADDR:MASTER_PORT is reachable; it answers once
 * every rank has proven itself, or names the missing ones. Like PyTorch's
 * TCPStore, every rank makes one connection to rank 0.
 */
#ifndef DIST_TRAIN_COMMON_RANK0_H
#define DIST_TRAIN_COMMON_RANK0_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "member.h"
#include "rendezvous.h"

struct node_views;

struct rank0_params {
	const struct dt_rdv_hello *self;	/* rank 0, and the world */
	const uint8_t *secret;			/* DT_SECRET_LEN bytes */
	uint16_t port;				/* listened on */
	uint16_t nccl_port;
	bool want_nccl;
	uint64_t deadline_ms;		/* now_ms() time */
	unsigned timeout_s;		/* for the message only */
	dt_rank_host_fn host_of;	/* names missing ranks' hosts */
	void *host_arg;
	uint32_t max_pending;		/* 0: RANK0_MAX_PENDING */
	uint32_t hello_ms;		/* 0: RANK0_HELLO_MS */
	/* Rank 0 leads its node too (common/node.h): its socket, or -1,
	 * and how many members to expect there. */
	int node_fd;
	uint32_t members;
	const struct node_views *views;	/* or NULL (common/node.h) */
	uint32_t nodes;			/* the step's: one connection each */
	/* Rank 0's address, for when no other node connects. */
	const char *address;
	/* When not NULL: on success, the addresses the other nodes proved
	 * themselves from, as DIST_TRAIN_STORE_PEERS lists them
	 * (common/store_guard.h), for the caller to free; NULL when they
	 * are too many to list, or out of memory. */
	char **peers;
};

/* Unproven connections held at once, and how long each may take. */
#define RANK0_MAX_PENDING 16384
#define RANK0_HELLO_MS 5000

/*
 * Serve LISTEN_FD until every rank of the world proved itself or the
 * deadline, then answer them all. On success fills RES; otherwise returns
 * -1 with ERR (naming the missing ranks on a timeout) and tells the ranks
 * that came.
 */
int rank0_serve(int listen_fd, const struct rank0_params *p,
		struct dt_rdv_result *res, char *err, size_t errlen);

#endif
