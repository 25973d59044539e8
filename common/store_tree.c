/*
 * The step's store behind the node tree: the frames, the server and the
 * relay (common/store_tree.h). One thread runs a loop; nothing here
 * blocks but epoll_wait.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "store_tree.h"

#define EVENTS 512
#define READ_CHUNK 65536
#define TICK_MS 50
#define NOT_AN_INTEGER "the key does not hold an integer"

/* ---- frames (pure) ---- */

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p)
{
	return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static void put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

struct cursor {
	const uint8_t *p, *end;
	bool bad;
};

static uint32_t take_u32(struct cursor *c)
{
	uint32_t v;

	if (c->bad || c->end - c->p < 4) {
		c->bad = true;
		return 0;
	}
	v = get_u32(c->p);
	c->p += 4;
	return v;
}

static struct dt_store_str take_str(struct cursor *c, uint32_t max)
{
	struct dt_store_str s = { 0 };
	uint32_t len = take_u32(c);

	if (c->bad || len > max || (size_t)(c->end - c->p) < len) {
		c->bad = true;
		return s;
	}
	s.p = c->p;
	s.len = len;
	c->p += len;
	return s;
}

int dt_store_parse_request(const uint8_t *buf, size_t len,
			   struct dt_store_request *req)
{
	struct cursor c = { buf + DT_STORE_HEADER, buf + len, false };
	uint32_t i;

	memset(req, 0, sizeof(*req));
	if (len < DT_STORE_HEADER || get_u32(buf) != len - 4)
		return -1;
	req->id = get_u32(buf + 4);
	req->op = buf[8];
	switch (req->op) {
	case DT_STORE_SET:
	case DT_STORE_APPEND:
		req->key = take_str(&c, DT_STORE_KEY_MAX);
		req->value = take_str(&c, DT_STORE_FRAME_MAX);
		break;
	case DT_STORE_GET:
		req->timeout_ms = take_u32(&c);
		req->key = take_str(&c, DT_STORE_KEY_MAX);
		break;
	case DT_STORE_ADD:
		if (c.end - c.p < 8) {
			c.bad = true;
			break;
		}
		req->amount = (int64_t)get_u64(c.p);
		c.p += 8;
		req->key = take_str(&c, DT_STORE_KEY_MAX);
		break;
	case DT_STORE_CAS:
		req->key = take_str(&c, DT_STORE_KEY_MAX);
		req->expected = take_str(&c, DT_STORE_FRAME_MAX);
		req->value = take_str(&c, DT_STORE_FRAME_MAX);
		break;
	case DT_STORE_WAIT:
		req->timeout_ms = take_u32(&c);
		/* fall through */
	case DT_STORE_CHECK:
		req->nkeys = take_u32(&c);
		req->keys_at = c.p;
		if (req->nkeys == 0 || req->nkeys > DT_STORE_WAIT_KEYS_MAX)
			c.bad = true;
		for (i = 0; i < req->nkeys && !c.bad; i++)
			take_str(&c, DT_STORE_KEY_MAX);
		req->keys_end = c.p;
		break;
	case DT_STORE_DELETE:
	case DT_STORE_DROPPED:
		req->key = take_str(&c, DT_STORE_KEY_MAX);
		break;
	case DT_STORE_NUM_KEYS:
		break;
	default:
		return -1;
	}
	return c.bad || c.p != c.end ? -1 : 0;
}

struct dt_store_str dt_store_request_key(const struct dt_store_request *req,
					 uint32_t i)
{
	struct cursor c = { req->keys_at, req->keys_end, false };
	struct dt_store_str s = { 0 };

	do
		s = take_str(&c, DT_STORE_KEY_MAX);
	while (i-- > 0);
	return s;
}

static bool str_eq(struct dt_store_str a, struct dt_store_str b)
{
	return a.len == b.len && (a.len == 0 || !memcmp(a.p, b.p, a.len));
}

struct dt_store_str dt_store_cas_result(bool present,
					struct dt_store_str current,
					struct dt_store_str expected,
					struct dt_store_str desired,
					bool *write)
{
	/* torch: a missing key is written only when nothing was expected;
	 * otherwise the caller gets back what it expected. */
	*write = present ? str_eq(current, expected) : expected.len == 0;
	if (*write)
		return desired;
	return present ? current : expected;
}

/* ---- buffers and tables ---- */

struct buf {
	uint8_t *p;
	size_t off, len, cap;	/* unread or unsent: [off, len) */
};

static int buf_reserve(struct buf *b, size_t more)
{
	size_t cap;
	uint8_t *p;

	if (b->off && b->off == b->len)
		b->off = b->len = 0;
	if (b->len + more <= b->cap)
		return 0;
	if (b->off) {
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		if (b->len + more <= b->cap)
			return 0;
	}
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + more)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

static uint64_t hash_bytes(const uint8_t *p, size_t len)
{
	uint64_t h = 1469598103934665603ull;

	while (len--)
		h = (h ^ *p++) * 1099511628211ull;
	return h;
}

/* A key of the server's table, or of a relay's copies. */
struct entry {
	struct entry *next;	/* in its bucket */
	uint8_t *key;
	uint32_t klen;
	uint8_t *val;
	size_t vlen;
	bool present;		/* the server: set; a relay: a copy held */
	bool asked;		/* a relay: a read of it is upstream */
	struct waiter *waiters;
	struct sub { int fd; uint32_t gen; } *subs;	/* copies held */
	size_t nsubs, capsubs;
	struct fence *fence;	/* the server: a write waits for copies */
	struct deferred *deferred, **deferred_tail;	/* meanwhile */
};

/*
 * A write held until every relay with a copy of its key dropped it: its
 * answer, and the relays yet to say so.
 */
struct fence {
	struct fence *next, *prev;	/* the loop's */
	struct entry *e;
	uint32_t id;
	int fd;
	uint32_t gen, answer_id;
	uint8_t kind;
	uint8_t *body;
	size_t len;
	struct sub *waiting;
	size_t nwaiting;
};

/* A request that touched a fenced key: served once the fence is gone. */
struct deferred {
	struct deferred *next;
	int fd;
	uint32_t gen;
	size_t len;
	uint8_t frame[];
};

struct table {
	struct entry **buckets;
	size_t nbuckets, count;
};

static struct entry *table_find(struct table *t, struct dt_store_str key,
				bool create)
{
	uint64_t h = hash_bytes(key.p, key.len);
	struct entry *e, **slot;
	size_t i;

	if (t->nbuckets) {
		for (e = t->buckets[h & (t->nbuckets - 1)]; e; e = e->next)
			if (e->klen == key.len &&
			    (!key.len || !memcmp(e->key, key.p, key.len)))
				return e;
	}
	if (!create)
		return NULL;
	if (t->count >= t->nbuckets) {
		size_t n = t->nbuckets ? t->nbuckets * 2 : 1024;
		struct entry **b = calloc(n, sizeof(*b)), *next;

		if (!b)
			return NULL;
		for (i = 0; i < t->nbuckets; i++)
			for (e = t->buckets[i]; e; e = next) {
				next = e->next;
				slot = &b[hash_bytes(e->key, e->klen) & (n - 1)];
				e->next = *slot;
				*slot = e;
			}
		free(t->buckets);
		t->buckets = b;
		t->nbuckets = n;
	}
	e = calloc(1, sizeof(*e));
	if (!e || !(e->key = malloc(key.len ? key.len : 1))) {
		free(e);
		return NULL;
	}
	if (key.len)
		memcpy(e->key, key.p, key.len);
	e->klen = key.len;
	slot = &t->buckets[h & (t->nbuckets - 1)];
	e->next = *slot;
	*slot = e;
	t->count++;
	return e;
}

static void table_free(struct table *t)
{
	struct entry *e, *next;
	size_t i;

	for (i = 0; i < t->nbuckets; i++)
		for (e = t->buckets[i]; e; e = next) {
			struct deferred *d, *dn;

			next = e->next;
			for (d = e->deferred; d; d = dn) {
				dn = d->next;
				free(d);
			}
			free(e->key);
			free(e->val);
			free(e->subs);
			free(e);
		}
	free(t->buckets);
	memset(t, 0, sizeof(*t));
}

/* ---- connections ---- */

enum conn_kind {
	SERVER_LISTEN, SERVER_CONN, RELAY_LISTEN, RELAY_CLIENT, RELAY_UP
};

struct relay;

struct conn {
	int fd;
	uint32_t gen;
	enum conn_kind kind;
	struct relay *relay;
	struct buf in, out;
	bool dirty, writing, dead;
	struct conn *next_dirty;
};

/*
 * A read or wait parked on a key. The server parks a GET or WAIT until
 * the key is set or its time is up; a relay parks its ranks' reads of a
 * key while one read of it is upstream.
 */
struct waiter {
	struct waiter *next;		/* on its key */
	struct waiter *all_prev, *all_next;	/* the server's timers */
	int fd;
	uint32_t gen, id;
	uint8_t op;
	uint64_t deadline;		/* 0: none */
	struct entry *on;
	uint8_t *frame;			/* WAIT: its request, kept */
	size_t frame_len;
};

/* A relay's request upstream, by the id it was sent with. */
struct pending {
	struct pending *next;
	uint32_t up_id;
	int fd;
	uint32_t gen, id;		/* the rank's */
	struct entry *read;		/* a shared read: its key */
};

struct relay {
	struct conn *up;
	uint32_t next_id;
	struct table copies;
	struct pending **pend;
	size_t npend_buckets;
};

struct dt_store_loop {
	int epfd;
	struct conn **conns;	/* by descriptor */
	size_t nconns;
	uint32_t next_gen;
	struct conn *dirty;
	struct table keys;	/* the server's */
	size_t present;
	struct waiter *timers;
	struct fence *fences;
	uint32_t next_fence;
	uint64_t next_tick;
	struct relay **relays;
	size_t nrelays;
	uint8_t scratch[READ_CHUNK];
	char err[256];
};

static uint64_t clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct conn *conn_of(struct dt_store_loop *l, int fd, uint32_t gen)
{
	struct conn *c;

	if (fd < 0 || (size_t)fd >= l->nconns)
		return NULL;
	c = l->conns[fd];
	return c && c->gen == gen && !c->dead ? c : NULL;
}

static struct conn *conn_add(struct dt_store_loop *l, int fd,
			     enum conn_kind kind, struct relay *relay)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
	struct conn *c;

	if ((size_t)fd >= l->nconns) {
		size_t n = l->nconns ? l->nconns : 1024;
		struct conn **cs;

		while (n <= (size_t)fd)
			n *= 2;
		cs = realloc(l->conns, n * sizeof(*cs));
		if (!cs)
			return NULL;
		memset(cs + l->nconns, 0, (n - l->nconns) * sizeof(*cs));
		l->conns = cs;
		l->nconns = n;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->fd = fd;
	c->gen = ++l->next_gen;
	c->kind = kind;
	c->relay = relay;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(c);
		return NULL;
	}
	l->conns[fd] = c;
	return c;
}

/* Queue a frame on C: header (LEN covers BODY1 and BODY2), then both. */
static int send_frame(struct dt_store_loop *l, struct conn *c, uint32_t id,
		      uint8_t kind, const void *body1, size_t len1,
		      const void *body2, size_t len2)
{
	size_t total = DT_STORE_HEADER + len1 + len2;
	uint8_t *p;

	if (!c || c->dead)
		return 0;
	if (buf_reserve(&c->out, total) < 0)
		return -1;
	p = c->out.p + c->out.len;
	put_u32(p, (uint32_t)(total - 4));
	put_u32(p + 4, id);
	p[8] = kind;
	if (len1)
		memcpy(p + DT_STORE_HEADER, body1, len1);
	if (len2)
		memcpy(p + DT_STORE_HEADER + len1, body2, len2);
	c->out.len += total;
	if (!c->dirty) {
		c->dirty = true;
		c->next_dirty = l->dirty;
		l->dirty = c;
	}
	return 0;
}

static int send_str(struct dt_store_loop *l, struct conn *c, uint32_t id,
		    uint8_t kind, const void *s, size_t len)
{
	uint8_t n[4];

	put_u32(n, (uint32_t)len);
	return send_frame(l, c, id, kind, n, 4, s, len);
}

static int send_int(struct dt_store_loop *l, struct conn *c, uint32_t id,
		    int64_t v)
{
	uint8_t b[8];

	put_u32(b, (uint32_t)(uint64_t)v);
	put_u32(b + 4, (uint32_t)((uint64_t)v >> 32));
	return send_frame(l, c, id, DT_STORE_INT, b, 8, NULL, 0);
}

static void conn_close(struct dt_store_loop *l, struct conn *c);

/* ---- the server ---- */

static void timer_unlink(struct dt_store_loop *l, struct waiter *w)
{
	if (w->all_prev)
		w->all_prev->all_next = w->all_next;
	else if (l->timers == w)
		l->timers = w->all_next;
	if (w->all_next)
		w->all_next->all_prev = w->all_prev;
	w->all_prev = w->all_next = NULL;
}

static void waiter_free(struct waiter *w)
{
	free(w->frame);
	free(w);
}

static int park(struct dt_store_loop *l, struct entry *e, struct conn *c,
		const struct dt_store_request *req, const uint8_t *frame,
		size_t len)
{
	struct waiter *w = calloc(1, sizeof(*w));

	if (!w)
		return -1;
	w->fd = c->fd;
	w->gen = c->gen;
	w->id = req->id;
	w->op = req->op;
	w->deadline = req->timeout_ms ? clock_ms() + req->timeout_ms : 0;
	w->on = e;
	if (req->op == DT_STORE_WAIT) {
		w->frame = malloc(len);
		if (!w->frame) {
			free(w);
			return -1;
		}
		memcpy(w->frame, frame, len);
		w->frame_len = len;
	}
	w->next = e->waiters;
	e->waiters = w;
	w->all_next = l->timers;
	if (l->timers)
		l->timers->all_prev = w;
	l->timers = w;
	return 0;
}

static int answer_value(struct dt_store_loop *l, struct conn *c, uint32_t id,
			struct entry *e)
{
	/* The asker may keep a copy: it hears when the key changes. */
	if (e->nsubs == e->capsubs) {
		size_t n = e->capsubs ? e->capsubs * 2 : 4;
		struct sub *s = realloc(e->subs, n * sizeof(*s));

		if (!s)
			return -1;
		e->subs = s;
		e->capsubs = n;
	}
	e->subs[e->nsubs].fd = c->fd;
	e->subs[e->nsubs++].gen = c->gen;
	return send_str(l, c, id, DT_STORE_VALUE, e->val, e->vlen);
}

static int serve_wait(struct dt_store_loop *l, struct conn *c,
		      const struct dt_store_request *req, const uint8_t *frame,
		      size_t len);

/* E changed and may be seen: parked reads of it go on. */
static int wake(struct dt_store_loop *l, struct entry *e)
{
	struct waiter *w, *next;
	struct dt_store_request req;
	int rc = 0;

	if (!e->present)
		return 0;
	w = e->waiters;
	e->waiters = NULL;
	for (; w; w = next) {
		struct conn *to = conn_of(l, w->fd, w->gen);

		next = w->next;
		timer_unlink(l, w);
		if (!to) {
		} else if (w->op == DT_STORE_GET) {
			rc |= answer_value(l, to, w->id, e);
		} else if (dt_store_parse_request(w->frame, w->frame_len,
						  &req) == 0) {
			/* The time left, not the whole wait again. */
			uint64_t now = clock_ms();

			req.timeout_ms = !w->deadline ? 0 :
				w->deadline > now ?
				(uint32_t)(w->deadline - now) : 1;
			rc |= serve_wait(l, to, &req, w->frame, w->frame_len);
		}
		waiter_free(w);
	}
	return rc;
}

static int serve(struct dt_store_loop *l, struct conn *c, const uint8_t *frame,
		 size_t len);

/* The fence on E is down: the writer's answer, the parked reads, then
 * what waited for it, in order (one may raise a fence again). */
static int fence_down(struct dt_store_loop *l, struct entry *e)
{
	struct fence *f = e->fence;
	struct deferred *d, *next;
	int rc;

	if (f->prev)
		f->prev->next = f->next;
	else
		l->fences = f->next;
	if (f->next)
		f->next->prev = f->prev;
	e->fence = NULL;
	rc = send_frame(l, conn_of(l, f->fd, f->gen), f->answer_id, f->kind,
			f->body, f->len, NULL, 0);
	free(f->body);
	free(f->waiting);
	free(f);
	rc |= wake(l, e);
	d = e->deferred;
	e->deferred = NULL;
	e->deferred_tail = NULL;
	for (; d; d = next) {
		struct conn *c = conn_of(l, d->fd, d->gen);

		next = d->next;
		if (c && serve(l, c, d->frame, d->len) < 0)
			conn_close(l, c);
		free(d);
	}
	return rc;
}

/*
 * E changed (written by C's request ID): answer KIND with BODY now where no
 * relay holds a copy; else raise a fence, tell each relay, and answer
 * once all have dropped theirs.
 */
static int settle(struct dt_store_loop *l, struct entry *e, struct conn *c,
		  uint32_t id, uint8_t kind, const void *body1, size_t len1,
		  const void *body2, size_t len2)
{
	size_t i, len = len1 + len2;
	struct fence *f;
	int rc = 0;

	if (e->nsubs == 0)
		return send_frame(l, c, id, kind, body1, len1, body2, len2) |
		       wake(l, e);
	f = calloc(1, sizeof(*f));
	if (!f || !(f->waiting = calloc(e->nsubs, sizeof(*f->waiting))) ||
	    (len && !(f->body = malloc(len)))) {
		if (f)
			free(f->waiting);
		free(f);
		return -1;
	}
	if (len1)
		memcpy(f->body, body1, len1);
	if (len2)
		memcpy(f->body + len1, body2, len2);
	f->len = len;
	f->kind = kind;
	f->e = e;
	f->fd = c->fd;
	f->gen = c->gen;
	f->answer_id = id;
	if (++l->next_fence == 0)
		l->next_fence = 1;
	f->id = l->next_fence;
	for (i = 0; i < e->nsubs; i++) {
		struct conn *to = conn_of(l, e->subs[i].fd, e->subs[i].gen);
		size_t k;

		for (k = 0; to && k < f->nwaiting; k++)
			if (f->waiting[k].fd == to->fd &&
			    f->waiting[k].gen == to->gen)
				to = NULL;	/* asked twice, told once */
		if (!to)
			continue;
		f->waiting[f->nwaiting++] = e->subs[i];
		rc |= send_str(l, to, f->id, DT_STORE_INVALIDATE, e->key,
			       e->klen);
	}
	e->nsubs = 0;
	f->next = l->fences;
	if (l->fences)
		l->fences->prev = f;
	l->fences = f;
	e->fence = f;
	if (f->nwaiting == 0)
		return rc | fence_down(l, e);
	return rc;
}

/* Relay FD, GEN no longer holds a copy under fence F (it said so, or it
 * is gone). Whether the fence came down is in *DOWN. */
static int fence_told(struct dt_store_loop *l, struct fence *f, int fd,
		      uint32_t gen, bool *down)
{
	size_t k;

	*down = false;
	for (k = 0; k < f->nwaiting; k++)
		if (f->waiting[k].fd == fd && f->waiting[k].gen == gen) {
			f->waiting[k] = f->waiting[--f->nwaiting];
			*down = f->nwaiting == 0;
			return *down ? fence_down(l, f->e) : 0;
		}
	return 0;
}

/* Hold FRAME from C until the fence on E is down. */
static int defer(struct entry *e, struct conn *c, const uint8_t *frame,
		 size_t len)
{
	struct deferred *d = malloc(sizeof(*d) + len);

	if (!d)
		return -1;
	d->next = NULL;
	d->fd = c->fd;
	d->gen = c->gen;
	d->len = len;
	memcpy(d->frame, frame, len);
	if (e->deferred_tail)
		*e->deferred_tail = d;
	else
		e->deferred = d;
	e->deferred_tail = &d->next;
	return 0;
}

static int serve_wait(struct dt_store_loop *l, struct conn *c,
		      const struct dt_store_request *req, const uint8_t *frame,
		      size_t len)
{
	struct entry *e = NULL;
	uint32_t i;

	for (i = 0; i < req->nkeys; i++) {
		e = table_find(&l->keys, dt_store_request_key(req, i),
			       req->op == DT_STORE_WAIT);
		if (req->op == DT_STORE_WAIT && !e)
			return -1;
		if (!e || !e->present)
			break;
	}
	if (req->op == DT_STORE_CHECK)
		return send_int(l, c, req->id, i == req->nkeys);
	if (i == req->nkeys)
		return send_frame(l, c, req->id, DT_STORE_OK, NULL, 0, NULL, 0);
	return e ? park(l, e, c, req, frame, len) : -1;
}

static int set_value(struct entry *e, const void *p, size_t len, bool append)
{
	size_t off = append && e->present ? e->vlen : 0;
	uint8_t *v = realloc(e->val, off + len ? off + len : 1);

	if (!v)
		return -1;
	if (len)
		memcpy(v + off, p, len);
	e->val = v;
	e->vlen = off + len;
	return 0;
}

/* The fenced key among those REQ touches, if any. */
static struct entry *fenced(struct dt_store_loop *l,
			    const struct dt_store_request *req)
{
	struct entry *e = NULL;
	uint32_t i;

	if (req->op == DT_STORE_WAIT || req->op == DT_STORE_CHECK) {
		for (i = 0; i < req->nkeys; i++) {
			e = table_find(&l->keys, dt_store_request_key(req, i),
				       false);
			if (e && e->fence)
				return e;
		}
		return NULL;
	}
	if (req->key.p)
		e = table_find(&l->keys, req->key, false);
	return e && e->fence ? e : NULL;
}

static int serve(struct dt_store_loop *l, struct conn *c, const uint8_t *frame,
		 size_t len)
{
	struct dt_store_request req;
	struct entry *e = NULL;
	uint8_t b[8], n4[4];
	bool write, was;
	char num[32];
	long long v;
	int n;

	if (dt_store_parse_request(frame, len, &req) < 0)
		return -1;
	if (req.op == DT_STORE_DROPPED) {
		bool down;

		e = table_find(&l->keys, req.key, false);
		if (e && e->fence && e->fence->id == req.id)
			return fence_told(l, e->fence, c->fd, c->gen, &down);
		return 0;
	}
	if ((e = fenced(l, &req)))
		return defer(e, c, frame, len);
	if (req.key.p) {
		bool create = req.op != DT_STORE_DELETE;

		e = table_find(&l->keys, req.key, create);
		if (create && !e)
			return -1;
	}
	was = e && e->present;
	switch (req.op) {
	case DT_STORE_SET:
	case DT_STORE_APPEND:
		if (set_value(e, req.value.p, req.value.len,
			      req.op == DT_STORE_APPEND) < 0)
			return -1;
		e->present = true;
		l->present += !was;
		return settle(l, e, c, req.id, DT_STORE_OK, NULL, 0, NULL, 0);
	case DT_STORE_GET:
		if (e->present)
			return answer_value(l, c, req.id, e);
		return park(l, e, c, &req, frame, len);
	case DT_STORE_ADD: {
		char *end;

		v = 0;
		if (was) {
			n = snprintf(num, sizeof(num), "%.*s",
				     (int)(e->vlen < 31 ? e->vlen : 31),
				     (const char *)e->val);
			errno = 0;
			v = strtoll(num, &end, 10);
			if (e->vlen > 31 || errno || end == num || *end)
				return send_str(l, c, req.id, DT_STORE_ERROR,
						NOT_AN_INTEGER,
						sizeof(NOT_AN_INTEGER) - 1);
		}
		v += req.amount;
		n = snprintf(num, sizeof(num), "%lld", v);
		if (set_value(e, num, (size_t)n, false) < 0)
			return -1;
		e->present = true;
		l->present += !was;
		put_u32(b, (uint32_t)(uint64_t)v);
		put_u32(b + 4, (uint32_t)((uint64_t)v >> 32));
		return settle(l, e, c, req.id, DT_STORE_INT, b, 8, NULL, 0);
	}
	case DT_STORE_CAS: {
		struct dt_store_str cur = { e->val, (uint32_t)e->vlen };
		struct dt_store_str out = dt_store_cas_result(
			was, cur, req.expected, req.value, &write);

		if (!write)
			return send_str(l, c, req.id, DT_STORE_VALUE, out.p,
					out.len);
		if (set_value(e, req.value.p, req.value.len, false) < 0)
			return -1;
		e->present = true;
		l->present += !was;
		put_u32(n4, (uint32_t)e->vlen);
		return settle(l, e, c, req.id, DT_STORE_VALUE, n4, 4, e->val,
			      e->vlen);
	}
	case DT_STORE_WAIT:
	case DT_STORE_CHECK:
		return serve_wait(l, c, &req, frame, len);
	case DT_STORE_DELETE:
		if (was) {
			e->present = false;
			l->present--;
			free(e->val);
			e->val = NULL;
			e->vlen = 0;
		}
		put_u32(b, was);
		put_u32(b + 4, 0);
		if (!was)
			return send_int(l, c, req.id, 0);
		return settle(l, e, c, req.id, DT_STORE_INT, b, 8, NULL, 0);
	case DT_STORE_NUM_KEYS:
		return send_int(l, c, req.id, (int64_t)l->present);
	}
	return -1;
}

/* Parked reads whose time is up are answered so. */
static void expire(struct dt_store_loop *l, uint64_t now)
{
	struct waiter *w, *next, **pp;

	for (w = l->timers; w; w = next) {
		next = w->all_next;
		if (!w->deadline || w->deadline > now)
			continue;
		for (pp = &w->on->waiters; *pp && *pp != w; pp = &(*pp)->next)
			;
		if (*pp)
			*pp = w->next;
		timer_unlink(l, w);
		send_frame(l, conn_of(l, w->fd, w->gen), w->id,
			   DT_STORE_TIMEOUT, NULL, 0, NULL, 0);
		waiter_free(w);
	}
}

/* A connection gone: its parked reads go with it. */
static void drop_waiters(struct dt_store_loop *l, struct conn *c)
{
	struct waiter *w, *next, **pp;

	for (w = l->timers; w; w = next) {
		next = w->all_next;
		if (w->fd != c->fd || w->gen != c->gen)
			continue;
		for (pp = &w->on->waiters; *pp && *pp != w; pp = &(*pp)->next)
			;
		if (*pp)
			*pp = w->next;
		timer_unlink(l, w);
		waiter_free(w);
	}
}

/* ---- the relay ---- */

static struct pending **pend_slot(struct relay *r, uint32_t id)
{
	struct pending **pp = &r->pend[id & (r->npend_buckets - 1)];

	while (*pp && (*pp)->up_id != id)
		pp = &(*pp)->next;
	return pp;
}

static int pend_add(struct relay *r, int fd, uint32_t gen, uint32_t id,
		    struct entry *read, uint32_t *up_id)
{
	struct pending *p = calloc(1, sizeof(*p)), **slot;

	if (!p)
		return -1;
	if (++r->next_id == 0)	/* 0 is the server's own */
		r->next_id = 1;
	p->up_id = r->next_id;
	p->fd = fd;
	p->gen = gen;
	p->id = id;
	p->read = read;
	slot = &r->pend[p->up_id & (r->npend_buckets - 1)];
	p->next = *slot;
	*slot = p;
	*up_id = p->up_id;
	return 0;
}

/* A rank's request: a read from the node's copy, or up. */
static int relay_request(struct dt_store_loop *l, struct conn *c,
			 uint8_t *frame, size_t len)
{
	struct relay *r = c->relay;
	struct dt_store_request req;
	struct waiter *w;
	struct entry *e = NULL;
	uint32_t up_id;

	/* Bounded and well-formed before it goes anywhere; nothing goes
	 * once the server is gone (the rank's socket closes). */
	if (!r->up || dt_store_parse_request(frame, len, &req) < 0 ||
	    req.op == DT_STORE_DROPPED)
		return -1;
	if (req.op == DT_STORE_GET) {
		e = table_find(&r->copies, req.key, true);
		if (!e)
			return -1;
		if (e->present)
			return send_str(l, c, req.id, DT_STORE_VALUE, e->val,
					e->vlen);
		w = calloc(1, sizeof(*w));
		if (!w)
			return -1;
		w->fd = c->fd;
		w->gen = c->gen;
		w->id = req.id;
		w->next = e->waiters;
		e->waiters = w;
		if (e->asked)
			return 0;	/* one read of a key upstream */
		e->asked = true;
	}
	if (pend_add(r, c->fd, c->gen, req.id, e, &up_id) < 0)
		return -1;
	put_u32(frame + 4, up_id);
	return send_frame(l, r->up, up_id, frame[8], frame + DT_STORE_HEADER,
			  len - DT_STORE_HEADER, NULL, 0);
}

/* The server's answer: to its rank, or to every rank that read the key. */
static int relay_answer(struct dt_store_loop *l, struct relay *r,
			uint8_t *frame, size_t len)
{
	uint32_t id = get_u32(frame + 4);
	struct pending **pp, *p;
	struct waiter *w, *next;
	struct cursor cur = { frame + DT_STORE_HEADER, frame + len, false };
	struct dt_store_str s;
	struct entry *e;

	if (frame[8] == DT_STORE_INVALIDATE) {
		/* The copy goes, then the server hears so: the write it
		 * holds back may then be answered and seen. */
		s = take_str(&cur, DT_STORE_KEY_MAX);
		if (cur.bad)
			return -1;
		e = table_find(&r->copies, s, false);
		if (e && e->present) {
			e->present = false;
			free(e->val);
			e->val = NULL;
		}
		return send_str(l, r->up, id, DT_STORE_DROPPED, s.p, s.len);
	}
	pp = pend_slot(r, id);
	if (!(p = *pp))
		return -1;
	*pp = p->next;
	if (!(e = p->read)) {
		int rc = send_frame(l, conn_of(l, p->fd, p->gen), p->id,
				    frame[8], frame + DT_STORE_HEADER,
				    len - DT_STORE_HEADER, NULL, 0);
		free(p);
		return rc;
	}
	free(p);
	e->asked = false;
	if (frame[8] == DT_STORE_VALUE) {
		s = take_str(&cur, DT_STORE_FRAME_MAX);
		if (cur.bad || set_value(e, s.p, s.len, false) < 0)
			return -1;
		e->present = true;
	}
	for (w = e->waiters, e->waiters = NULL; w; w = next) {
		next = w->next;
		send_frame(l, conn_of(l, w->fd, w->gen), w->id, frame[8],
			   frame + DT_STORE_HEADER, len - DT_STORE_HEADER,
			   NULL, 0);
		free(w);
	}
	return 0;
}

/* ---- the loop ---- */

/* The whole frames in B, from C. */
static int handle_frames(struct dt_store_loop *l, struct conn *c,
			 struct buf *b)
{
	while (b->len - b->off >= 4) {
		uint8_t *f = b->p + b->off;
		uint32_t n = get_u32(f);
		int rc;

		if (n < DT_STORE_HEADER - 4 || n > DT_STORE_FRAME_MAX)
			return -1;
		if (b->len - b->off < (size_t)n + 4)
			break;
		b->off += (size_t)n + 4;
		if (c->kind == SERVER_CONN)
			rc = serve(l, c, f, (size_t)n + 4);
		else if (c->kind == RELAY_CLIENT)
			rc = relay_request(l, c, f, (size_t)n + 4);
		else
			rc = relay_answer(l, c->relay, f, (size_t)n + 4);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/*
 * Read what C has: into the loop's one buffer, and only a frame's part
 * that has not come whole is kept with C (thousands of connections, each
 * idle but for a few small frames, need no buffer of their own).
 */
static int conn_read(struct dt_store_loop *l, struct conn *c)
{
	for (;;) {
		struct buf *b = &c->in, scratch = { l->scratch, 0, 0, 0 };
		ssize_t got;

		if (c->in.off == c->in.len) {
			c->in.off = c->in.len = 0;
			b = &scratch;
		} else if (buf_reserve(&c->in, READ_CHUNK) < 0) {
			return -1;
		}
		got = read(c->fd, b->p + b->len, READ_CHUNK);
		if (got == 0)
			return -1;
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		}
		b->len += (size_t)got;
		if (handle_frames(l, c, b) < 0)
			return -1;
		if (b == &scratch && scratch.off < scratch.len) {
			if (buf_reserve(&c->in, scratch.len - scratch.off) < 0)
				return -1;
			memcpy(c->in.p, scratch.p + scratch.off,
			       scratch.len - scratch.off);
			c->in.len = scratch.len - scratch.off;
		}
		if (c->in.len == 0 && c->in.cap > READ_CHUNK) {
			free(c->in.p);	/* a large frame's, done */
			memset(&c->in, 0, sizeof(c->in));
		}
	}
}

static int conn_flush(struct dt_store_loop *l, struct conn *c)
{
	struct epoll_event ev = { .data.fd = c->fd };

	while (c->out.off < c->out.len) {
		ssize_t put = send(c->fd, c->out.p + c->out.off,
				   c->out.len - c->out.off, MSG_NOSIGNAL);

		if (put > 0) {
			c->out.off += (size_t)put;
			continue;
		}
		if (put < 0 && errno == EINTR)
			continue;
		if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		return -1;
	}
	if (c->out.off == c->out.len)
		c->out.off = c->out.len = 0;
	if (c->writing != (c->out.len > 0)) {
		c->writing = c->out.len > 0;
		ev.events = EPOLLIN | (c->writing ? EPOLLOUT : 0);
		if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
			return -1;
	}
	return 0;
}

static void relay_fail(struct dt_store_loop *l, struct relay *r);

static void conn_close(struct dt_store_loop *l, struct conn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	if (c->kind == SERVER_CONN) {
		struct fence *f;
		bool down;

		drop_waiters(l, c);
		/* A relay gone holds no copy. A fence that comes down serves
		 * what waited for it, which may change the list: start over
		 * (this relay is off every fence it has passed). */
		for (f = l->fences; f; f = down ? l->fences : f->next)
			fence_told(l, f, c->fd, c->gen, &down);
	}
	if (c->kind == RELAY_UP)
		relay_fail(l, c->relay);
	/* Freed once off the dirty list (dt_store_loop_run). */
	if (!c->dirty) {
		c->dirty = true;
		c->next_dirty = l->dirty;
		l->dirty = c;
	}
}

/* Without the server, a relay's ranks are told so by their sockets
 * closing: each one's store call then fails with the hook's message. */
static void relay_fail(struct dt_store_loop *l, struct relay *r)
{
	size_t i;

	r->up = NULL;	/* freed by the loop */
	for (i = 0; i < l->nconns; i++)
		if (l->conns[i] && l->conns[i]->relay == r &&
		    l->conns[i]->kind != RELAY_UP)
			conn_close(l, l->conns[i]);
	snprintf(l->err, sizeof(l->err), "%s",
		 "the connection to the step's store was lost");
}

static int accept_all(struct dt_store_loop *l, struct conn *lc)
{
	for (;;) {
		int fd = accept4(lc->fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct conn *c;

		if (fd < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ||
			       errno == ECONNABORTED || errno == EINTR ||
			       errno == EMFILE || errno == ENFILE ? 0 : -1;
		if (lc->kind == RELAY_LISTEN) {
			struct ucred cred;
			socklen_t len = sizeof(cred);

			/* An abstract socket has no folder to lock: the
			 * kernel's word on the peer is the lock. */
			if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred,
				       &len) < 0 || cred.uid != geteuid()) {
				close(fd);
				continue;
			}
		}
		c = conn_add(l, fd, lc->kind == RELAY_LISTEN ? RELAY_CLIENT :
			     SERVER_CONN, lc->relay);
		if (!c)
			close(fd);
	}
}

struct dt_store_loop *dt_store_loop_new(void)
{
	struct dt_store_loop *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		free(l);
		return NULL;
	}
	return l;
}

static int set_nonblocking(int fd)
{
	int one = 1, flags = fcntl(fd, F_GETFL);

	/* Answers are small and wanted now (fails on a Unix socket). */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

int dt_store_loop_serve(struct dt_store_loop *loop, int listen_fd)
{
	if (set_nonblocking(listen_fd) < 0 ||
	    (listen(listen_fd, 16384) < 0 && errno != EINVAL) ||
	    !conn_add(loop, listen_fd, SERVER_LISTEN, NULL)) {
		close(listen_fd);
		return -1;
	}
	return 0;
}

int dt_store_loop_relay(struct dt_store_loop *loop, int unix_fd,
			int upstream_fd)
{
	struct relay *r = calloc(1, sizeof(*r)), **rs;

	if (!r || !(r->pend = calloc(256, sizeof(*r->pend))))
		goto fail;
	r->npend_buckets = 256;
	rs = realloc(loop->relays, (loop->nrelays + 1) * sizeof(*rs));
	if (!rs)
		goto fail;
	loop->relays = rs;
	if (set_nonblocking(unix_fd) < 0 || set_nonblocking(upstream_fd) < 0 ||
	    !(r->up = conn_add(loop, upstream_fd, RELAY_UP, r)))
		goto fail;
	loop->relays[loop->nrelays++] = r;
	if (!conn_add(loop, unix_fd, RELAY_LISTEN, r)) {
		close(unix_fd);
		return -1;	/* the relay stays, unreachable: freed with all */
	}
	return 0;
fail:
	if (r)
		free(r->pend);
	free(r);
	close(unix_fd);
	close(upstream_fd);
	return -1;
}

int dt_store_loop_run(struct dt_store_loop *l, volatile int *stop, char *err,
		      size_t errlen)
{
	struct epoll_event events[EVENTS];
	int rc = 0;

	while (!*stop) {
		int n = epoll_wait(l->epfd, events, EVENTS, TICK_MS), i;
		uint64_t now;
		struct conn *c, *next;

		if (n < 0 && errno != EINTR) {
			/* message: the caller names the fix (helper/store_node.c) */
			snprintf(l->err, sizeof(l->err), "epoll: %s",
				 strerror(errno));
			rc = -1;
			break;
		}
		for (i = 0; i < n; i++) {
			c = l->conns[events[i].data.fd];
			if (!c || c->dead)
				continue;
			if (c->kind == SERVER_LISTEN || c->kind == RELAY_LISTEN) {
				if (accept_all(l, c) < 0) {
					/* message: the caller names the fix
					 * (helper/store_node.c) */
					snprintf(l->err, sizeof(l->err),
						 "accept: %s", strerror(errno));
					rc = -1;
				}
				continue;
			}
			if ((events[i].events & EPOLLOUT) &&
			    conn_flush(l, c) < 0)
				conn_close(l, c);
			else if ((events[i].events & (EPOLLIN | EPOLLERR |
						       EPOLLHUP)) &&
				 conn_read(l, c) < 0)
				conn_close(l, c);
		}
		now = clock_ms();
		if (now >= l->next_tick) {
			expire(l, now);
			l->next_tick = now + TICK_MS;
		}
		/* Everything queued this round goes out in one write each. */
		for (c = l->dirty, l->dirty = NULL; c; c = next) {
			next = c->next_dirty;
			c->dirty = false;
			if (!c->dead && conn_flush(l, c) < 0)
				conn_close(l, c);
			if (c->dead && !c->dirty) {
				l->conns[c->fd] = NULL;
				close(c->fd);
				free(c->in.p);
				free(c->out.p);
				free(c);
			}
		}
		if (rc < 0)
			break;
	}
	if (rc < 0 || l->err[0])
		snprintf(err, errlen, "%s", l->err);
	return rc;
}

void dt_store_loop_free(struct dt_store_loop *l)
{
	struct waiter *w, *next;
	size_t i, j;

	if (!l)
		return;
	for (i = 0; i < l->nconns; i++)
		if (l->conns[i]) {
			close(l->conns[i]->fd);
			free(l->conns[i]->in.p);
			free(l->conns[i]->out.p);
			free(l->conns[i]);
		}
	for (w = l->timers; w; w = next) {
		next = w->all_next;
		waiter_free(w);
	}
	while (l->fences) {
		struct fence *f = l->fences;

		l->fences = f->next;
		free(f->body);
		free(f->waiting);
		free(f);
	}
	for (i = 0; i < l->nrelays; i++) {
		struct relay *r = l->relays[i];

		for (j = 0; j < r->copies.nbuckets; j++) {
			struct entry *e;

			for (e = r->copies.buckets[j]; e; e = e->next)
				for (w = e->waiters; w; w = next) {
					next = w->next;
					free(w);
				}
		}
		table_free(&r->copies);
		for (j = 0; j < r->npend_buckets; j++) {
			struct pending *p, *pn;

			for (p = r->pend[j]; p; p = pn) {
				pn = p->next;
				free(p);
			}
		}
		free(r->pend);
		free(r);
	}
	table_free(&l->keys);
	free(l->relays);
	free(l->conns);
	close(l->epfd);
	free(l);
}
