/*
 * Who may reach rank 0's store once the start barrier is over: the
 * addresses the ranks' connections proved themselves from, this node's
 * own, and loopback. A socket filter (classic BPF, which any user may
 * attach to their own socket) on the barrier's listening socket, which
 * becomes torch's store (common/store_hold.h), drops every other
 * connection's packets, its SYN first, so that a user elsewhere on the
 * network cannot connect to the store at all. Accepted connections
 * inherit it. A user on one of the step's nodes still can: the kernel
 * tells nodes apart, not users (see dist_train(8), SECURITY).
 *
 * Pure: this builds the program; common/rank0.c attaches it.
 */
#ifndef DIST_TRAIN_STORE_FILTER_H
#define DIST_TRAIN_STORE_FILTER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* A program's instructions are bounded (BPF_MAXINSNS): two per IPv4
 * address, nine per IPv6 one, so about 2,000 nodes at most. */
#define DT_FILTER_MAX_INSNS 4096

struct dt_peer_set {
	uint32_t *v4;		/* host byte order, as BPF loads them */
	size_t n4;
	uint8_t (*v6)[16];
	size_t n6;
};

/* Add SA's address (an IPv4-mapped IPv6 one as IPv4), once. 0, or -1
 * when out of memory or SA is neither family. */
int dt_peer_set_add(struct dt_peer_set *set, const struct sockaddr *sa);
void dt_peer_set_free(struct dt_peer_set *set);

struct sock_filter;

/*
 * The program that accepts IPv4 packets from SET's IPv4 addresses (and
 * 127.0.0.0/8 with LOOPBACK) and IPv6 ones from its IPv6 addresses (and
 * ::1 with LOOPBACK), and drops the rest, into PROG (MAX instructions).
 * Returns its length, or -1 when it does not fit.
 */
int dt_store_filter_build(const struct dt_peer_set *set, int loopback,
			  struct sock_filter *prog, size_t max);

#endif
