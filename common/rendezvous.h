/*
 * The start barrier's messages. Every rank but 0 connects to rank 0 at
 * MASTER_ADDR:MASTER_PORT (the address PyTorch will use, so connecting is
 * also the reachability check) and says who it is; rank 0 answers all of
 * them once everyone is there, or names who is missing when time is up.
 *
 *   rank -> 0:  "DTB1 RANK WORLD HOST NCCL_OK\n"
 *   0 -> rank:  "OK ADDRESS NCCL_PORT NCCL_CHECK\n" or "FAIL MESSAGE\n"
 *
 * ADDRESS is the IP address of rank 0 that the ranks reached (for
 * NCCL_COMM_ID); NCCL_OK says the rank could run an NCCL all-reduce,
 * NCCL_CHECK that all could, so they will.
 */
#ifndef DIST_TRAIN_RENDEZVOUS_H
#define DIST_TRAIN_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DT_RDV_LINE_MAX 512

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

/* Each returns the line's length, or -1 if it does not fit in LEN. */
int dt_rdv_format_hello(char *buf, size_t len,
			const struct dt_rdv_hello *hello);
int dt_rdv_format_reply(char *buf, size_t len,
			const struct dt_rdv_reply *reply);

/* LINE without its '\n'. Return 0, or -1 when it is not such a line. */
int dt_rdv_parse_hello(const char *line, struct dt_rdv_hello *out);
int dt_rdv_parse_reply(const char *line, struct dt_rdv_reply *out);

/* The host running RANK, or NULL if unknown. */
typedef const char *(*dt_rank_host_fn)(uint32_t rank, void *arg);

/*
 * "rank 3 (n2)", "ranks 5-7 (n3), rank 9 (n4)": the ranks not ARRIVED,
 * runs on one host grouped, cut short with ", ..." past LEN. Returns the
 * number of missing ranks.
 */
uint32_t dt_rdv_describe_missing(const bool *arrived, uint32_t world,
				 dt_rank_host_fn host_of, void *arg,
				 char *buf, size_t len);

#endif
