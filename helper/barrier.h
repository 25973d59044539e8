/*
 * The start barrier over TCP (messages: common/rendezvous.h). Rank 0
 * listens on MASTER_PORT, the port PyTorch's store will take after it, so
 * reaching the barrier proves MASTER_ADDR:MASTER_PORT is reachable; it
 * answers once every rank has arrived, or names the missing ones.
 *
 * Like PyTorch's TCPStore, every rank makes one connection to rank 0.
 */
#ifndef DIST_TRAIN_HELPER_BARRIER_H
#define DIST_TRAIN_HELPER_BARRIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/rendezvous.h"

struct barrier_result {
	char address[64];	/* rank 0's IP address that ranks reached */
	uint16_t nccl_port;
	bool nccl_check;	/* every rank can run the NCCL check */
};

/* Milliseconds on a monotonic clock. */
uint64_t now_ms(void);

/*
 * Listen on PORT on every address, as PyTorch's store will. Returns the
 * socket, or -1 with errno (EADDRINUSE: something holds the port).
 */
int barrier_listen(uint16_t port);

/* Whether PORT could be listened on now. */
bool port_is_free(uint16_t port);

/*
 * Rank 0: wait until every rank of SELF->world arrived or DEADLINE_MS,
 * then answer them all. TIMEOUT_S is only for the message. On success
 * fills RES; on a timeout returns -1 with ERR naming the missing ranks
 * (hosts from HOST_OF) and tells the others.
 */
int barrier_serve(int listen_fd, const struct dt_rdv_hello *self,
		  uint16_t nccl_port, bool want_nccl, uint64_t deadline_ms,
		  unsigned timeout_s, dt_rank_host_fn host_of, void *arg,
		  struct barrier_result *res, char *err, size_t errlen);

/*
 * Other ranks: reach HOST:PORT by CONNECT_DEADLINE_MS, say HELLO, then
 * wait up to REPLY_WAIT_MS for rank 0's answer. Returns 0 and fills RES,
 * or -1 with ERR; *FROM_RANK0 says ERR is rank 0's verdict (rank 0
 * reports it), not a problem of this rank.
 */
int barrier_join(const char *host, uint16_t port,
		 const struct dt_rdv_hello *hello, uint64_t connect_deadline_ms,
		 uint64_t reply_wait_ms, struct barrier_result *res,
		 bool *from_rank0, char *err, size_t errlen);

#endif
