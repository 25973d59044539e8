/*
 * The start barrier's protocol, as a pure core: no sockets in here. Rank 0
 * listens at MASTER_ADDR:MASTER_PORT (the address PyTorch will use, so
 * reaching it is also the reachability check); it answers every rank once
 * all are there, or names who is missing when time is up.
 *
 * One process per node speaks for the node: its local rank 0, the node's
 * leader, gathers its local ranks over a Unix socket (checked by peer
 * credentials, named from the step's secret so that no one else can take
 * the name) and makes one connection to rank 0 for all of them; rank 0
 * gathers its own node's the same way. So rank 0 sees one connection per
 * node.
 *
 * Rank 0's port can be reached by every user of the cluster, so no word
 * counts before its sender proved it knows the step's secret (32 random
 * bytes only the step's tasks have), and rank 0 proves the same to them:
 *
 *   0 -> leader:  "DTB2 NONCE PORT MAC\n"                     on accept
 *   leader -> 0:  "DTB2 RANKS WORLD HOST NCCL_OK CNONCE MAC\n"
 *   0 -> leader:  "OK MAC ADDRESS PORT NCCL_PORT NCCL_CHECK\n"     or
 *                 "FAIL MAC MESSAGE\n"
 *   member -> leader (Unix socket): "DTL1 RANK NCCL_OK CNONCE\n"
 *   leader -> member: the answer, made for the member's CNONCE; where the
 *                 leader has PMIx, an OK ends with the member's view:
 *                 "OK MAC ADDRESS PORT NCCL_PORT NCCL_CHECK LOCAL_RANK
 *                  LOCAL_SIZE WORLD NODE_ID NUM_NODES RANK0_HOST\n"
 *
 * RANKS is a list of ascending ranks and ranges ("3", "8-15,17"). NONCE
 * and CNONCE are 16 bytes, MAC 32, in hex. The challenge's MAC is
 * HMAC-SHA256(secret, "dist-train challenge " NONCE " " PORT), PORT the
 * one rank 0 listens on: so a leader tells rank 0 from another program on
 * the port it tried (even one that relays what rank 0 says on another
 * port), and can look for rank 0 elsewhere. The hello's MAC is
 * HMAC-SHA256(secret, "dist-train hello " NONCE " " the hello's words up to
 * CNONCE), so it holds for this connection only; the answer's is
 * HMAC-SHA256(secret, "dist-train answer " CNONCE " " VERB " " the rest).
 * ADDRESS is rank 0's address that the ranks reached (for NCCL_COMM_ID),
 * PORT the port it listened on (MASTER_PORT: where the step's first port
 * was taken, rank 0 moved, and every rank learns it here);
 * NCCL_OK says the ranks could run an NCCL all-reduce, NCCL_CHECK that all
 * could, so they will.
 *
 * Only a node's leader needs to be a PMIx client (PMIx_Init is most of a
 * PMIx step's launch cost): a member claims its rank, the leader checks
 * it against PMIx and hands back what PMIx says of it (struct dt_rdv_view),
 * which the member cross-checks with Slurm as it would PMIx's own word.
 *
 * Rank 0's side is a state machine over connections (dt_rdv_server): the
 * caller's event loop feeds it what arrives and does what it decides.
 * Strangers cannot hold resources: at most max_pending connections may be
 * unproven at once (a new one evicts the oldest, so a late real rank still
 * gets in), each for hello_ms, each for one line of DT_RDV_LINE_MAX bytes,
 * and all of them for DT_RDV_BUFFERED_MAX bytes of lines sent in pieces.
 */
#ifndef DIST_TRAIN_RENDEZVOUS_H
#define DIST_TRAIN_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "secret.h"

#define DT_RDV_LINE_MAX 4096
/* Bytes the unproven may make rank 0 keep, for hellos sent in pieces. */
#define DT_RDV_BUFFERED_MAX (4u << 20)
#define DT_RDV_NONCE_LEN 16
#define DT_RDV_NONE UINT32_MAX

struct dt_rdv_hello {
	const uint32_t *ranks;	/* ascending */
	uint32_t nranks;
	uint32_t world;
	char host[256];
	bool nccl_ok;		/* all of them */
};

/* What PMIx says of a member, from its leader (an OK's last words). */
struct dt_rdv_view {
	bool present;
	uint32_t local_rank;	/* PMIX_LOCAL_RANK */
	uint32_t local_size;	/* PMIX_LOCAL_SIZE */
	uint32_t world;		/* PMIX_JOB_SIZE */
	uint32_t node_id;	/* PMIX_NODEID */
	uint32_t num_nodes;	/* PMIX_NUM_NODES */
	char rank0_host[256];	/* PMIX_HOSTNAME of rank 0 */
};

struct dt_rdv_reply {
	bool ok;
	char address[64];	/* OK */
	uint16_t port;		/* OK: rank 0's rendezvous port, not 0 */
	uint16_t nccl_port;	/* OK */
	bool nccl_check;	/* OK */
	struct dt_rdv_view view; /* OK, from a leader with PMIx */
	char message[DT_RDV_LINE_MAX]; /* FAIL */
};

/*
 * 0 when CHALLENGE (a line without '\n') was made by rank 0 of the step
 * with SECRET, listening on PORT; -1 otherwise.
 */
int dt_rdv_challenge_ok(const uint8_t secret[DT_SECRET_LEN],
			const char *challenge, uint16_t port);

/*
 * A rank's side. From rank 0's challenge LINE (without '\n'), the hello
 * line to send, '\n' included, proven with SECRET and bound to CNONCE (16
 * random bytes of this connection). Returns its length, or -1 when LINE is
 * not a challenge or HELLO does not fit.
 */
int dt_rdv_hello_line(const uint8_t secret[DT_SECRET_LEN],
		      const uint8_t cnonce[DT_RDV_NONCE_LEN],
		      const char *challenge, const struct dt_rdv_hello *hello,
		      char *buf, size_t len);

/*
 * A leader's answer REPLY to the member whose hello had CNONCE: made as
 * rank 0 makes its answers. Returns its length ('\n' included), or -1.
 */
int dt_rdv_answer_for(const uint8_t secret[DT_SECRET_LEN],
		      const uint8_t cnonce[DT_RDV_NONCE_LEN],
		      const struct dt_rdv_reply *reply, char *buf, size_t len);

/* A member's hello to its leader, '\n' included; its length, or -1. */
int dt_rdv_member_line(uint32_t rank, bool nccl_ok,
		       const uint8_t cnonce[DT_RDV_NONCE_LEN], char *buf,
		       size_t len);
/* LINE without its '\n'; 0, or -1 when it is not such a hello. */
int dt_rdv_parse_member(const char *line, uint32_t *rank, bool *nccl_ok,
			uint8_t cnonce[DT_RDV_NONCE_LEN]);

/* The length of the name of a node's Unix socket (abstract: no file). */
#define DT_RDV_NODE_SOCKET_LEN 43	/* "dist-train-" and 32 hex digits */
/*
 * The name of the Unix socket of the step STEP_ID's leader on HOST, and a
 * '\0': from the secret, so that only the step's tasks know it.
 */
void dt_rdv_node_socket(const uint8_t secret[DT_SECRET_LEN],
			const char *step_id, const char *host,
			char name[DT_RDV_NODE_SOCKET_LEN + 1]);

/*
 * Rank 0's answer LINE (without '\n') to the hello bound to CNONCE. Returns
 * 0 and fills OUT, or -1 when LINE is not an answer rank 0 made with
 * SECRET for this connection.
 */
int dt_rdv_read_answer(const uint8_t secret[DT_SECRET_LEN],
		       const uint8_t cnonce[DT_RDV_NONCE_LEN],
		       const char *line, struct dt_rdv_reply *out);

/*
 * The words of a proven OK answer after its MAC ("ADDRESS PORT NCCL_PORT
 * NCCL_CHECK", and the view if there is one) into OUT; 0, or -1 when they
 * are malformed or the view contradicts itself.
 */
int dt_rdv_parse_ok(const char *words, struct dt_rdv_reply *out);

/* Rank 0's side. */
struct dt_rdv_server_config {
	uint32_t world;
	const uint8_t *secret;	/* DT_SECRET_LEN bytes */
	const uint8_t *seed;	/* DT_RDV_NONCE_LEN random bytes: the nonces */
	const char *host;	/* rank 0's, for messages */
	uint16_t port;		/* listened on: its challenges name it */
	bool nccl_ok;		/* rank 0 can run the NCCL check */
	uint32_t max_pending;	/* unproven connections at once (>= 1) */
	uint32_t hello_ms;	/* for each to prove itself */
};

enum dt_rdv_verdict {
	DT_RDV_WAIT,		/* keep the connection, nothing to do */
	DT_RDV_JOINED,		/* a rank proved itself and counts */
	DT_RDV_DROP,		/* close it: not one of the step's */
	DT_RDV_REFUSE,		/* send the line made, then close it */
};

struct dt_rdv_server;

struct dt_rdv_server *dt_rdv_server_new(const struct dt_rdv_server_config *c);
void dt_rdv_server_free(struct dt_rdv_server *s);

/* Connection ids are below this. */
uint32_t dt_rdv_server_slots(const struct dt_rdv_server *s);

/*
 * A connection was accepted at NOW. Returns the challenge line to send
 * (its length) and *ID. When the unproven ones were at their bound, the
 * oldest was evicted: *EVICTED names it, to be closed first (its id may be
 * *ID again); otherwise *EVICTED is DT_RDV_NONE.
 */
int dt_rdv_accept(struct dt_rdv_server *s, uint64_t now, uint32_t *id,
		  uint32_t *evicted, char *buf, size_t len);

/*
 * DATA arrived on connection ID. For DT_RDV_REFUSE, *OUT_LEN bytes of BUF
 * are the answer to send before closing. DT_RDV_DROP and DT_RDV_REFUSE
 * have already forgotten the connection.
 */
enum dt_rdv_verdict dt_rdv_input(struct dt_rdv_server *s, uint32_t id,
				 const char *data, size_t size, char *buf,
				 size_t len, size_t *out_len);

/*
 * RANK of rank 0's own node arrived through its leader, rank 0. Returns 0;
 * or -1 with a message in ERR for a rank out of range or there already.
 */
int dt_rdv_join_member(struct dt_rdv_server *s, uint32_t rank, bool nccl_ok,
		       const char *host, char *err, size_t errlen);
/* ... and left before the answer: it is missing again. */
void dt_rdv_leave_member(struct dt_rdv_server *s, uint32_t rank,
			 bool nccl_ok);

/* Connection ID is gone; the ranks that had joined are missing again. */
void dt_rdv_closed(struct dt_rdv_server *s, uint32_t id);

/*
 * The oldest unproven connection whose time is up at NOW, forgotten, for
 * the caller to close; DT_RDV_NONE when there is none.
 */
uint32_t dt_rdv_expired(struct dt_rdv_server *s, uint64_t now);

/* When the next unproven connection's time is up; UINT64_MAX: none. */
uint64_t dt_rdv_next_expiry(const struct dt_rdv_server *s);

/* Every rank has joined (rank 0 counts itself). */
bool dt_rdv_complete(const struct dt_rdv_server *s);
uint32_t dt_rdv_joined(const struct dt_rdv_server *s);
/* Every rank that joined, and rank 0, can run the NCCL check. */
bool dt_rdv_all_nccl(const struct dt_rdv_server *s);

/* The first rank on connection ID, or -1 when it has not proven itself. */
int64_t dt_rdv_rank_of(const struct dt_rdv_server *s, uint32_t id);

/* REPLY for the rank on connection ID, proven; its length, or -1. */
int dt_rdv_answer(const struct dt_rdv_server *s, uint32_t id,
		  const struct dt_rdv_reply *reply, char *buf, size_t len);

/* The host running RANK, or NULL if unknown. */
typedef const char *(*dt_rank_host_fn)(uint32_t rank, void *arg);

/* The ranks that have not joined, as dt_rdv_describe_missing says. */
uint32_t dt_rdv_server_missing(const struct dt_rdv_server *s,
			       dt_rank_host_fn host_of, void *arg, char *buf,
			       size_t len);

/*
 * "rank 3 (n2)", "ranks 5-7 (n3), rank 9 (n4)": the ranks not ARRIVED,
 * runs on one host grouped, cut short with ", ..." past LEN. Returns the
 * number of missing ranks.
 */
uint32_t dt_rdv_describe_missing(const bool *arrived, uint32_t world,
				 dt_rank_host_fn host_of, void *arg,
				 char *buf, size_t len);

#endif
