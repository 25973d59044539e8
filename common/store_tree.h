/*
 * The step's store behind the node tree (doc/performance.md, "The store
 * behind the node tree"). torch's env:// start sends every rank to one
 * TCPStore in rank 0's process; here each node's ranks reach the step's
 * store through their node's relay instead: one connection per node
 * upstream, a read of a key answered from the node's copy until the key
 * changes, and several ranks' reads of one key sent up once. Everything
 * else passes through in order.
 *
 * Three parts, one event loop each (or several in one loop, as the
 * benchmark runs them):
 * - the server, in rank 0's process, on the step's held port: the store
 *   guard (helper/store_guard.c) admits only the step's own connections
 *   to it, as it does for torch's store;
 * - a relay, in each node's local rank 0, on an abstract Unix socket
 *   (nothing left in a folder), that admits only processes of the job's
 *   user (SO_PEERCRED; each rank checks the relay's user the same way);
 * - each rank's client, the Python hook's store (a torch.distributed.Store
 *   subclass), which speaks the frames below to its node's relay.
 *
 * Frames, little-endian: u32 length of what follows, u32 id, u8 kind,
 * then the body. A string is a u32 length and its bytes. Requests:
 *   SET key value; GET timeout_ms key; ADD i64 key; CAS key expected
 *   desired; WAIT timeout_ms count keys...; CHECK count keys...; DELETE
 *   key; NUM_KEYS; APPEND key value.
 * Answers carry the request's id: OK; VALUE string; INT i64; TIMEOUT;
 * ERROR text.
 *
 * A write to a key some relays hold a copy of is fenced: the server tells
 * each of them (INVALIDATE key, with a fence's id), each drops its copy
 * and says so (DROPPED key, with that id), and only then does the writer
 * get its answer and does anyone see the new value: requests that touch
 * the key meanwhile wait, in order. So no rank reads a value older than a
 * write that any rank has seen complete, or seen the value of.
 */
#ifndef DIST_TRAIN_STORE_TREE_H
#define DIST_TRAIN_STORE_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum dt_store_op {
	DT_STORE_SET = 1,
	DT_STORE_GET,
	DT_STORE_ADD,
	DT_STORE_CAS,
	DT_STORE_WAIT,
	DT_STORE_CHECK,
	DT_STORE_DELETE,
	DT_STORE_NUM_KEYS,
	DT_STORE_APPEND,
	DT_STORE_DROPPED,	/* a relay to the server: its copy is gone */
};

enum dt_store_answer {
	DT_STORE_OK = 0x40,
	DT_STORE_VALUE,
	DT_STORE_INT,
	DT_STORE_TIMEOUT,
	DT_STORE_ERROR,
	DT_STORE_INVALIDATE,
};

/* Bounds on what a frame may carry: a longer one ends its connection. */
#define DT_STORE_FRAME_MAX (64u << 20)
#define DT_STORE_KEY_MAX 65536u
#define DT_STORE_WAIT_KEYS_MAX 4096u
#define DT_STORE_HEADER 9	/* length, id, kind */

/* A string inside a frame: not NUL-terminated. */
struct dt_store_str {
	const uint8_t *p;
	uint32_t len;
};

/* A request, parsed in place from a frame's body (pure). */
struct dt_store_request {
	uint32_t id;
	uint8_t op;
	uint32_t timeout_ms;
	int64_t amount;
	struct dt_store_str key, value, expected;
	uint32_t nkeys;		/* WAIT, CHECK: [KEYS_AT, KEYS_END) */
	const uint8_t *keys_at, *keys_end;
};

/*
 * Parse the frame at BUF (LEN bytes, header included) into REQ. -1 when
 * it is malformed: an unknown kind, a string past its end, a key longer
 * than DT_STORE_KEY_MAX, too many keys, or bytes left over.
 */
int dt_store_parse_request(const uint8_t *buf, size_t len,
			   struct dt_store_request *req);
/* The I-th key of a WAIT or CHECK already parsed (I < nkeys). */
struct dt_store_str dt_store_request_key(const struct dt_store_request *req,
					 uint32_t i);

/* torch's compare_set: what the key holds after it, given what it held
 * (PRESENT, CURRENT), and whether it was written. */
struct dt_store_str dt_store_cas_result(bool present,
					struct dt_store_str current,
					struct dt_store_str expected,
					struct dt_store_str desired,
					bool *write);

struct dt_store_loop;

/* A loop with nothing in it yet; NULL when out of memory or descriptors. */
struct dt_store_loop *dt_store_loop_new(void);

/* Serve the step's store on LISTEN_FD (a listening TCP socket, taken). */
int dt_store_loop_serve(struct dt_store_loop *loop, int listen_fd);

/*
 * A relay: accept the node's ranks on UNIX_FD (a listening Unix socket,
 * taken) and pass their requests up on UPSTREAM_FD (a connected socket to
 * the server, taken).
 */
int dt_store_loop_relay(struct dt_store_loop *loop, int unix_fd,
			int upstream_fd);

/* Run until *STOP is set (checked every 100 ms) or the loop fails: -1,
 * with why in ERR. */
int dt_store_loop_run(struct dt_store_loop *loop, volatile int *stop,
		      char *err, size_t errlen);

void dt_store_loop_free(struct dt_store_loop *loop);

#endif
