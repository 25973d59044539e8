/*
 * A reader of the plain-value subset of Python's pickle, enough for
 * PyTorch's flight recorder dumps: dicts, lists, tuples, strings, bytes,
 * integers, floats, booleans and None, with the memo. Anything else
 * (classes, calls, extensions) ends the read. Every value, container
 * item and memo slot comes from at least one byte of the dump, so what
 * it holds grows with the dump's size, but not within a few times of it:
 * a value takes 56 bytes, and a dump of one-byte values costs about 65
 * times its size (4.1 GB for the 64 MiB that dist-train stacks reads at
 * most, as the job's user).
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fr_dump.h"

enum kind { K_NONE, K_BOOL, K_INT, K_FLOAT, K_STR, K_BYTES, K_LIST, K_DICT,
	    K_TUPLE };

struct value {
	enum kind kind;
	int64_t i;
	const unsigned char *s;	/* K_STR, K_BYTES: into the dump */
	size_t n;
	size_t *items;		/* K_LIST, K_TUPLE; K_DICT: key, value, ... */
	size_t count, cap;
};

#define MARK SIZE_MAX		/* on the stack: where a MARK was */

struct reader {
	const unsigned char *p, *end;
	struct value *vals;
	size_t nvals, vals_cap;
	size_t *stack;
	size_t depth, stack_cap;
	size_t *memo;		/* value + 1; 0: empty */
	size_t memo_len;
	size_t memo_used;	/* slots written: MEMOIZE's next one */
	size_t len;		/* of the dump: no memo index reaches it */
	const char *why;
};

static bool grow(void **array, size_t *cap, size_t need, size_t size)
{
	size_t want = *cap ? *cap : 16;
	void *grown;

	if (need <= *cap)
		return true;
	while (want < need)
		want *= 2;
	grown = realloc(*array, want * size);
	if (!grown)
		return false;
	*array = grown;
	*cap = want;
	return true;
}

static bool fail(struct reader *r, const char *why)
{
	if (!r->why)
		r->why = why;
	return false;
}

/* The next N bytes of the dump, or NULL at its end. */
static const unsigned char *take(struct reader *r, size_t n)
{
	const unsigned char *at = r->p;

	if ((size_t)(r->end - r->p) < n) {
		fail(r, "it ends in the middle of a value");
		return NULL;
	}
	r->p += n;
	return at;
}

static uint64_t little_endian(const unsigned char *b, size_t n)
{
	uint64_t v = 0;

	for (size_t i = n; i-- > 0;)
		v = v << 8 | b[i];
	return v;
}

static bool push(struct reader *r, size_t id)
{
	if (!grow((void **)&r->stack, &r->stack_cap, r->depth + 1,
		  sizeof(*r->stack)))
		return fail(r, "out of memory");
	r->stack[r->depth++] = id;
	return true;
}

/* A new value of KIND on the stack; NULL without memory. */
static struct value *push_new(struct reader *r, enum kind kind)
{
	struct value *v;

	if (!grow((void **)&r->vals, &r->vals_cap, r->nvals + 1,
		  sizeof(*r->vals))) {
		fail(r, "out of memory");
		return NULL;
	}
	v = &r->vals[r->nvals];
	memset(v, 0, sizeof(*v));
	v->kind = kind;
	if (!push(r, r->nvals))
		return NULL;
	r->nvals++;
	return v;
}

static bool push_int(struct reader *r, int64_t i)
{
	struct value *v = push_new(r, K_INT);

	if (v)
		v->i = i;
	return v != NULL;
}

static bool push_text(struct reader *r, enum kind kind, size_t len_bytes)
{
	const unsigned char *lenp = take(r, len_bytes), *s;
	uint64_t n = lenp ? little_endian(lenp, len_bytes) : 0;
	struct value *v;

	if (!lenp || n > (uint64_t)(r->end - r->p) || !(s = take(r, n)))
		return fail(r, "a string runs past its end");
	v = push_new(r, kind);
	if (v) {
		v->s = s;
		v->n = (size_t)n;
	}
	return v != NULL;
}

/* The stack's items above its topmost mark: where they start. */
static bool above_mark(struct reader *r, size_t *from)
{
	for (size_t i = r->depth; i-- > 0;)
		if (r->stack[i] == MARK) {
			*from = i + 1;
			return true;
		}
	return fail(r, "a MARK is missing");
}

/* Move the stack's items from FROM up into container TARGET. */
static bool fill(struct reader *r, size_t target, size_t from)
{
	struct value *c;
	size_t n = r->depth - from;

	if (target == MARK || target >= r->nvals)
		return fail(r, "items go into no container");
	c = &r->vals[target];
	if ((c->kind == K_DICT && n % 2) ||
	    (c->kind != K_DICT && c->kind != K_LIST))
		return fail(r, "items go into something that is not a list "
			    "or dict");
	for (size_t i = from; i < r->depth; i++)
		if (r->stack[i] == MARK)
			return fail(r, "a MARK inside a container's items");
	if (n == 0)
		return true;
	if (!grow((void **)&c->items, &c->cap, c->count + n,
		  sizeof(*c->items)))
		return fail(r, "out of memory");
	memcpy(c->items + c->count, r->stack + from, n * sizeof(*c->items));
	c->count += n;
	r->depth = from;
	return true;
}

static bool make_tuple(struct reader *r, size_t from)
{
	size_t n = r->depth - from, *items = NULL;
	struct value *t;

	for (size_t i = from; i < r->depth; i++)
		if (r->stack[i] == MARK)
			return fail(r, "a MARK inside a tuple");
	if (n && !(items = malloc(n * sizeof(*items))))
		return fail(r, "out of memory");
	if (n)
		memcpy(items, r->stack + from, n * sizeof(*items));
	r->depth = from;
	t = push_new(r, K_TUPLE);
	if (!t) {
		free(items);
		return false;
	}
	t->items = items;
	t->count = t->cap = n;
	return true;
}

static bool memo_put(struct reader *r, uint64_t index)
{
	size_t cap = r->memo_len;

	if (r->depth == 0 || r->stack[r->depth - 1] == MARK)
		return fail(r, "nothing to remember");
	if (index >= r->len)
		return fail(r, "a memo index out of range");
	if (index >= r->memo_len) {
		if (!grow((void **)&r->memo, &cap, (size_t)index + 1,
			  sizeof(*r->memo)))
			return fail(r, "out of memory");
		memset(r->memo + r->memo_len, 0,
		       (cap - r->memo_len) * sizeof(*r->memo));
		r->memo_len = cap;
	}
	if (r->memo[index] == 0)
		r->memo_used++;
	r->memo[index] = r->stack[r->depth - 1] + 1;
	return true;
}

static bool memo_get(struct reader *r, uint64_t index)
{
	if (index >= r->memo_len || r->memo[index] == 0)
		return fail(r, "it reads a memo slot it never wrote");
	return push(r, r->memo[index] - 1);
}

/* One opcode; *DONE at STOP. */
static bool step(struct reader *r, bool *done)
{
	const unsigned char *op = take(r, 1), *arg;
	size_t from;

	if (!op)
		return false;
	switch (*op) {
	case 0x80:		/* PROTO */
		return take(r, 1) != NULL;
	case 0x95:		/* FRAME */
		return take(r, 8) != NULL;
	case '.':		/* STOP */
		*done = true;
		return true;
	case '(':		/* MARK */
		return push(r, MARK);
	case '}':		/* EMPTY_DICT */
		return push_new(r, K_DICT) != NULL;
	case ']':		/* EMPTY_LIST */
		return push_new(r, K_LIST) != NULL;
	case ')':		/* EMPTY_TUPLE */
		return make_tuple(r, r->depth);
	case 't':		/* TUPLE */
		if (!above_mark(r, &from) || !make_tuple(r, from))
			return false;
		/* The mark goes too: the tuple sits where it was. */
		r->stack[from - 1] = r->stack[from];
		r->depth--;
		return true;
	case 0x85:		/* TUPLE1 */
	case 0x86:		/* TUPLE2 */
	case 0x87:		/* TUPLE3 */
		if (r->depth < (size_t)(*op - 0x84))
			return fail(r, "a tuple of items that are not there");
		return make_tuple(r, r->depth - (size_t)(*op - 0x84));
	case 'X':		/* BINUNICODE */
		return push_text(r, K_STR, 4);
	case 0x8c:		/* SHORT_BINUNICODE */
		return push_text(r, K_STR, 1);
	case 0x8d:		/* BINUNICODE8 */
		return push_text(r, K_STR, 8);
	case 'B':		/* BINBYTES */
		return push_text(r, K_BYTES, 4);
	case 'C':		/* SHORT_BINBYTES */
		return push_text(r, K_BYTES, 1);
	case 'J':		/* BININT */
		arg = take(r, 4);
		return arg && push_int(r, (int32_t)little_endian(arg, 4));
	case 'K':		/* BININT1 */
		arg = take(r, 1);
		return arg && push_int(r, arg[0]);
	case 'M':		/* BININT2 */
		arg = take(r, 2);
		return arg && push_int(r, (int64_t)little_endian(arg, 2));
	case 0x8a: {		/* LONG1: little-endian two's complement */
		uint64_t v;
		size_t n;

		if (!(arg = take(r, 1)))
			return false;
		n = arg[0];
		if (n > 8)
			return fail(r, "an integer wider than 64 bits");
		if (!(arg = take(r, n)))
			return false;
		v = little_endian(arg, n);
		if (n && n < 8 && (arg[n - 1] & 0x80))
			v |= ~(uint64_t)0 << (8 * n);
		return push_int(r, (int64_t)v);
	}
	case 'G':		/* BINFLOAT: nothing here reads its value */
		return take(r, 8) && push_new(r, K_FLOAT) != NULL;
	case 'N':		/* NONE */
		return push_new(r, K_NONE) != NULL;
	case 0x88:		/* NEWTRUE */
	case 0x89: {		/* NEWFALSE */
		struct value *v = push_new(r, K_BOOL);

		if (v)
			v->i = *op == 0x88;
		return v != NULL;
	}
	case 'q':		/* BINPUT */
		arg = take(r, 1);
		return arg && memo_put(r, arg[0]);
	case 'r':		/* LONG_BINPUT */
		arg = take(r, 4);
		return arg && memo_put(r, little_endian(arg, 4));
	case 0x94:		/* MEMOIZE: as many slots as are used */
		return memo_put(r, r->memo_used);
	case 'h':		/* BINGET */
		arg = take(r, 1);
		return arg && memo_get(r, arg[0]);
	case 'j':		/* LONG_BINGET */
		arg = take(r, 4);
		return arg && memo_get(r, little_endian(arg, 4));
	case 'a':		/* APPEND */
	case 's':		/* SETITEM */
		if (r->depth < (*op == 'a' ? 2u : 3u))
			return fail(r, "items go into no container");
		from = r->depth - (*op == 'a' ? 1 : 2);
		return fill(r, r->stack[from - 1], from);
	case 'e':		/* APPENDS */
	case 'u':		/* SETITEMS */
		if (!above_mark(r, &from) || from < 2)
			return fail(r, "items go into no container");
		if (!fill(r, r->stack[from - 2], from))
			return false;
		r->depth = from - 1;	/* the mark */
		return true;
	}
	return fail(r, "it holds something other than plain values (a "
		    "class, a call or an extension)");
}

static bool is_text(const struct value *v, const char *s)
{
	return v->kind == K_STR && v->n == strlen(s) && !memcmp(v->s, s, v->n);
}

/* The value under KEY in dict D, or NULL. */
static const struct value *get(const struct reader *r, const struct value *d,
			       const char *key)
{
	if (!d || d->kind != K_DICT)
		return NULL;
	for (size_t i = 0; i + 1 < d->count; i += 2)
		if (is_text(&r->vals[d->items[i]], key))
			return &r->vals[d->items[i + 1]];
	return NULL;
}

/* A string of the dump, printable ASCII only, cut at 64 bytes. */
static void text_of(const struct value *v, char *buf, size_t len)
{
	size_t n = 0;

	if (!v || v->kind != K_STR) {
		snprintf(buf, len, "?");
		return;
	}
	for (size_t i = 0; i < v->n && i < 64 && n + 1 < len; i++)
		buf[n++] = v->s[i] >= 0x20 && v->s[i] < 0x7f ? (char)v->s[i] :
			   '?';
	buf[n] = '\0';
}

static void describe(const struct reader *r, const struct value *e,
		     char *out, size_t out_len)
{
	const struct value *seq = get(r, e, "collective_seq_id");
	const struct value *p2p = get(r, e, "p2p_seq_id");
	const struct value *pg = get(r, e, "process_group");
	char name[80], state[80], pg_id[80] = "", pg_name[80] = "";
	const char *which = "#";
	int64_t number = -1;

	text_of(get(r, e, "profiling_name"), name, sizeof(name));
	text_of(get(r, e, "state"), state, sizeof(state));
	if ((strstr(name, "send") || strstr(name, "recv")) && p2p &&
	    p2p->kind == K_INT) {
		which = "p2p #";
		number = p2p->i;
	} else if (seq && seq->kind == K_INT) {
		number = seq->i;
	}
	if (pg && pg->kind == K_TUPLE && pg->count == 2) {
		text_of(&r->vals[pg->items[0]], pg_id, sizeof(pg_id));
		text_of(&r->vals[pg->items[1]], pg_name, sizeof(pg_name));
	}
	if (number >= 0)
		snprintf(out, out_len, "%s%lld %s %s", which, (long long)number,
			 name, state);
	else
		snprintf(out, out_len, "%s %s", name, state);
	if (pg_id[0]) {
		size_t used = strlen(out);

		snprintf(out + used, out_len - used, ", process group %s (%s)",
			 pg_id, pg_name);
	}
}

int dt_fr_newest(const unsigned char *dump, size_t len, char *out,
		 size_t out_len)
{
	struct reader r = { .p = dump, .end = dump + len, .len = len };
	const struct value *entries = NULL;
	bool done = false;
	int rc = -1;

	while (!done && step(&r, &done))
		;
	if (!done)
		goto out;
	if (r.depth == 1 && r.stack[0] != MARK)
		entries = get(&r, &r.vals[r.stack[0]], "entries");
	if (r.depth != 1 || r.stack[0] == MARK)
		fail(&r, "it does not end with one value");
	else if (!entries || entries->kind != K_LIST)
		fail(&r, "it has no list of entries");
	else if (entries->count == 0)
		snprintf(out, out_len, "no collective yet");
	else
		describe(&r, &r.vals[entries->items[entries->count - 1]], out,
			 out_len);
	rc = r.why ? -1 : 0;
out:
	if (rc < 0)
		snprintf(out, out_len, "not a flight recorder dump: %s",
			 r.why ? r.why : "it does not end");
	for (size_t i = 0; i < r.nvals; i++)
		free(r.vals[i].items);
	free(r.vals);
	free(r.stack);
	free(r.memo);
	return rc;
}
