/*
 * The start barrier's protocol, as a pure core: no sockets in here. Every
 * rank but 0 connects to rank 0 at MASTER_ADDR:MASTER_PORT (the address
 * PyTorch will use, so connecting is also the reachability check); rank 0
 * answers all of them once everyone is there, or names who is missing when
 * time is up.
 *
 * Rank 0's port can be reached by every user of the cluster, so no word
 * counts before its sender proved it knows the step's secret (32 random
 * bytes only the step's tasks have), and rank 0 proves the same to them:
 *
 *   0 -> peer:  "DTB2 NONCE\n"                              on accept
 *   peer -> 0:  "DTB2 RANK WORLD HOST NCCL_OK CNONCE MAC\n"
 *   0 -> peer:  "OK MAC ADDRESS NCCL_PORT NCCL_CHECK\n"     or
 *               "FAIL MAC MESSAGE\n"
 *
 * NONCE and CNONCE are 16 bytes, MAC 32, in hex. The hello's MAC is
 * HMAC-SHA256(secret, "dist-train hello " NONCE " " the hello's words up to
 * CNONCE), so it holds for this connection only; the answer's is
 * HMAC-SHA256(secret, "dist-train answer " CNONCE " " VERB " " the rest).
 * ADDRESS is rank 0's address that the ranks reached (for NCCL_COMM_ID);
 * NCCL_OK says the rank could run an NCCL all-reduce, NCCL_CHECK that all
 * could, so they will.
 *
 * Rank 0's side is a state machine over connections (dt_rdv_server): the
 * caller's event loop feeds it what arrives and does what it decides.
 * Strangers cannot hold resources: at most max_pending connections may be
 * unproven at once (a new one evicts the oldest, so a late real rank still
 * gets in), each for hello_ms, each for one line of DT_RDV_LINE_MAX bytes.
 */
#ifndef DIST_TRAIN_RENDEZVOUS_H
#define DIST_TRAIN_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "secret.h"

#define DT_RDV_LINE_MAX 512
#define DT_RDV_NONCE_LEN 16
#define DT_RDV_NONE UINT32_MAX

struct dt_rdv_hello {
	uint32_t rank;
	uint32_t world;
	char host[256];
	bool nccl_ok;
};

struct dt_rdv_reply {
	bool ok;
	char address[64];	/* OK */
	uint16_t nccl_port;	/* OK */
	bool nccl_check;	/* OK */
	char message[DT_RDV_LINE_MAX]; /* FAIL */
};

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
 * Rank 0's answer LINE (without '\n') to the hello bound to CNONCE. Returns
 * 0 and fills OUT, or -1 when LINE is not an answer rank 0 made with
 * SECRET for this connection.
 */
int dt_rdv_read_answer(const uint8_t secret[DT_SECRET_LEN],
		       const uint8_t cnonce[DT_RDV_NONCE_LEN],
		       const char *line, struct dt_rdv_reply *out);

/* Rank 0's side. */
struct dt_rdv_server_config {
	uint32_t world;
	const uint8_t *secret;	/* DT_SECRET_LEN bytes */
	const uint8_t *seed;	/* DT_RDV_NONCE_LEN random bytes: the nonces */
	const char *host;	/* rank 0's, for messages */
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

/* Connection ID is gone; a rank that had joined is missing again. */
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

/* The rank on connection ID, or -1 when it has not proven itself. */
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
