/*
 * Who may reach rank 0's store. torch's TCPStore admits any connection;
 * rank 0's program, preloaded with the worker library, checks each one
 * the store accepts (helper/store_guard.c): one from rank 0's own node
 * must be a socket of the job's user (the kernel says whose), one from
 * elsewhere must come from an address a node of the step proved itself
 * from at the start barrier. Those addresses travel to the program in
 * DIST_TRAIN_STORE_PEERS, comma-separated. Here: the pure parts.
 */
#ifndef DIST_TRAIN_STORE_GUARD_H
#define DIST_TRAIN_STORE_GUARD_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#define DT_STORE_PEERS_ENV "DIST_TRAIN_STORE_PEERS"
/* The longest list carried (4,000 IPv4 nodes fit): past it, connections
 * from other nodes are not checked, as without a barrier. */
#define DT_STORE_PEERS_MAX 65536

/* The addresses of a list, sorted, for lookups. */
struct dt_peer_set {
	struct in6_addr *addrs;	/* IPv4 as IPv4-mapped IPv6 */
	size_t count;
};

/*
 * ADDRS (N textual addresses, IPv4 or IPv6) as a list: sorted, each once,
 * comma-separated, in a new string. NULL when out of memory, or with
 * *TOO_LONG set when longer than DT_STORE_PEERS_MAX.
 */
char *dt_store_peers_join(char *const addrs[], size_t n, bool *too_long);

/* Parse LIST into SET. -1 when a word is not an address, or out of
 * memory (SET is then empty). */
int dt_peer_set_parse(const char *list, struct dt_peer_set *set);
bool dt_peer_set_has(const struct dt_peer_set *set,
		     const struct in6_addr *addr);
void dt_peer_set_free(struct dt_peer_set *set);

/* SA's port, or 0 when it is not IP. */
unsigned dt_sockaddr_port(const struct sockaddr *sa);

/* SA's address as a key of a set (IPv4 mapped); -1 when not IP. */
int dt_peer_key(const struct sockaddr *sa, struct in6_addr *key);

/* What the kernel said of the connecting socket. */
enum dt_peer_owner {
	DT_OWNER_FOUND,		/* a socket of this node's network: OWNER */
	DT_OWNER_CLOSED,	/* one of this node's, closed already (or the
				 * connection was reset): its owner is no
				 * longer known (a probe that connected and
				 * left, or one that sent a request and left) */
	DT_OWNER_NOT_FOUND,	/* no such socket in this node's network */
	DT_OWNER_UNKNOWN	/* the kernel could not be asked */
};

enum dt_store_verdict {
	DT_STORE_ADMIT,
	DT_STORE_OTHER_USER,	/* from this node, another user's socket */
	DT_STORE_CLOSED,	/* from this node, closed: turned away
				 * unread, and unreported */
	DT_STORE_UNNAMED,	/* from an address of this node, a socket
				 * whose owner the kernel did not name */
	DT_STORE_NOT_PROVEN	/* from an address no node proved */
};

/*
 * Whether a connection to the store from PEER is admitted. OWNER_STATE
 * and OWNER: what the kernel said; SELF: the job's user. FROM_THIS_HOST:
 * PEER is one of this node's addresses (loopback, or an interface's):
 * such a connection is admitted only when the kernel names its owner,
 * whatever address or interface it came through. PROVEN: the addresses
 * proven at the barrier, or NULL when there was none: then connections
 * from other hosts are not checked.
 */
enum dt_store_verdict dt_store_admit(enum dt_peer_owner owner_state,
				     uid_t owner, uid_t self,
				     bool from_this_host,
				     const struct dt_peer_set *proven,
				     const struct in6_addr *peer);

#endif
