/*
 * A reader of the plain-value subset of Python's pickle, enough for
 * PyTorch's flight recorder dumps: dicts, lists, tuples, strings, bytes,
 * integers, floats, booleans and None, with the memo. Anything else
 * (classes, calls, extensions) ends the read.
 *
 * Only what dt_fr_newest asks for is kept, so that memory stays within a
 * few times the dump's size whatever the dump holds (a dump comes from
 * the job's process, so from anyone): a value is a 32-bit handle, and a
 * plain value's handle is where it sits in the dump, read again when
 * asked for; a list keeps its last item only, a dict the items under
 * the six keys read below, a tuple its two items only when both are
 * strings (the process group's id and name). Each byte of a dump costs
 * at most about 4 bytes (tests/unit/test_stacks.c measures it); the
 * memo must be numbered in order, as Python's and torch's picklers do,
 * and at most DT_FR_DEPTH_MAX values wait outside a container at once.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fr_dump.h"

/*
 * A handle: a tag in its top 3 bits, then where the value is: the dump
 * offset of a plain value's opcode (and of a tuple other than a pair of
 * strings, which nothing here reads), the box of a list or dict, the
 * node of a pair.
 */
#define TAG_SHIFT 29
#define PLACE_MASK ((UINT32_C(1) << TAG_SHIFT) - 1)
enum tag { T_PLAIN, T_LIST, T_DICT, T_PAIR };
#define HANDLE(tag, place) ((uint32_t)(tag) << TAG_SHIFT | (uint32_t)(place))
#define TAG(h) ((enum tag)((h) >> TAG_SHIFT))
#define PLACE(h) ((h) & PLACE_MASK)

#define MARK UINT32_MAX		/* on the stack: where a MARK was */
#define NOTHING UINT32_MAX	/* in a box: an empty list; a dict's end */

/* The keys read; a dict keeps the items under these only. */
static const char *const keys[] = {
	"entries", "collective_seq_id", "p2p_seq_id", "process_group",
	"profiling_name", "state",
};
enum key { KEY_ENTRIES, KEY_SEQ, KEY_P2P_SEQ, KEY_PG, KEY_NAME, KEY_STATE };

/* A dict's item (KEY, VALUE, the dict's NEXT node), or a pair's items
 * (VALUE and, in NEXT's place, the second). */
struct node {
	uint32_t value;
	uint32_t next;		/* node index, or NOTHING */
	uint32_t key;
};

struct reader {
	const unsigned char *dump, *p, *end;
	uint32_t *stack;
	size_t depth, stack_cap;
	uint32_t *memo;
	size_t memo_len, memo_cap;
	uint32_t *boxes;	/* a list's last item; a dict's first node */
	size_t nboxes, boxes_cap;
	struct node *nodes;
	size_t nnodes, nodes_cap;
	const char *why;
};

static bool fail(struct reader *r, const char *why)
{
	if (!r->why)
		r->why = why;
	return false;
}

/* Room for NEED items of SIZE bytes in *ARRAY; false without memory. */
static bool grow(struct reader *r, void **array, size_t *cap, size_t need,
		 size_t size)
{
	size_t want = *cap ? *cap : 64;
	void *grown;

	if (need <= *cap)
		return true;
	while (want < need)
		want *= 2;
	grown = realloc(*array, want * size);
	if (!grown)
		return fail(r, "out of memory");
	*array = grown;
	*cap = want;
	return true;
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

static bool push(struct reader *r, uint32_t h)
{
	if (r->depth == DT_FR_DEPTH_MAX)
		return fail(r, "it holds too many values outside a container");
	if (!grow(r, (void **)&r->stack, &r->stack_cap, r->depth + 1,
		  sizeof(*r->stack)))
		return false;
	r->stack[r->depth++] = h;
	return true;
}

/* The plain value whose opcode is at AT. */
static bool push_plain(struct reader *r, const unsigned char *at)
{
	return push(r, HANDLE(T_PLAIN, at - r->dump));
}

static bool push_box(struct reader *r, enum tag tag)
{
	if (!grow(r, (void **)&r->boxes, &r->boxes_cap, r->nboxes + 1,
		  sizeof(*r->boxes)))
		return false;
	r->boxes[r->nboxes] = NOTHING;
	return push(r, HANDLE(tag, r->nboxes++));
}

static bool new_node(struct reader *r, uint32_t value, uint32_t next,
		     uint32_t key, size_t *at)
{
	if (!grow(r, (void **)&r->nodes, &r->nodes_cap, r->nnodes + 1,
		  sizeof(*r->nodes)))
		return false;
	r->nodes[r->nnodes] = (struct node){ value, next, key };
	*at = r->nnodes++;
	return true;
}

/* A string opcode at AT, whose length takes LEN_BYTES; its data. */
static bool skip_text(struct reader *r, size_t len_bytes)
{
	const unsigned char *lenp = take(r, len_bytes);
	uint64_t n = lenp ? little_endian(lenp, len_bytes) : 0;

	if (!lenp || n > (uint64_t)(r->end - r->p) || !take(r, (size_t)n))
		return fail(r, "a string runs past its end");
	return true;
}

/* The string H is, or false. The dump was read whole before, so the
 * lengths are known to be inside it. */
static bool string_of(const struct reader *r, uint32_t h,
		      const unsigned char **s, size_t *n)
{
	const unsigned char *at = r->dump + PLACE(h);
	size_t len_bytes;

	if (h == MARK || TAG(h) != T_PLAIN)
		return false;
	switch (*at) {
	case 'X':		/* BINUNICODE */
		len_bytes = 4;
		break;
	case 0x8c:		/* SHORT_BINUNICODE */
		len_bytes = 1;
		break;
	case 0x8d:		/* BINUNICODE8 */
		len_bytes = 8;
		break;
	default:
		return false;
	}
	*n = (size_t)little_endian(at + 1, len_bytes);
	*s = at + 1 + len_bytes;
	return true;
}

static bool int_of(const struct reader *r, uint32_t h, int64_t *i)
{
	const unsigned char *at = r->dump + PLACE(h);
	uint64_t v;
	size_t n;

	if (h == MARK || TAG(h) != T_PLAIN)
		return false;
	switch (*at) {
	case 'J':		/* BININT */
		*i = (int32_t)little_endian(at + 1, 4);
		return true;
	case 'K':		/* BININT1 */
		*i = at[1];
		return true;
	case 'M':		/* BININT2 */
		*i = (int64_t)little_endian(at + 1, 2);
		return true;
	case 0x8a:		/* LONG1: little-endian two's complement */
		n = at[1];
		v = little_endian(at + 2, n);
		if (n && n < 8 && (at[1 + n] & 0x80))
			v |= ~(uint64_t)0 << (8 * n);
		*i = (int64_t)v;
		return true;
	}
	return false;
}

/* Which of keys[] H is, or -1. */
static int key_of(const struct reader *r, uint32_t h)
{
	const unsigned char *s;
	size_t n;

	if (!string_of(r, h, &s, &n))
		return -1;
	for (size_t k = 0; k < sizeof(keys) / sizeof(*keys); k++)
		if (n == strlen(keys[k]) && !memcmp(s, keys[k], n))
			return (int)k;
	return -1;
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

/* The stack's items from FROM on, made a tuple in their place. */
static bool make_tuple(struct reader *r, size_t from, const unsigned char *op)
{
	const unsigned char *s;
	size_t n, node;
	uint32_t tuple;

	for (size_t i = from; i < r->depth; i++)
		if (r->stack[i] == MARK)
			return fail(r, "a MARK inside a tuple");
	if (r->depth - from == 2 && string_of(r, r->stack[from], &s, &n) &&
	    string_of(r, r->stack[from + 1], &s, &n)) {
		if (!new_node(r, r->stack[from], r->stack[from + 1], 0, &node))
			return false;
		tuple = HANDLE(T_PAIR, node);
	} else {
		tuple = HANDLE(T_PLAIN, op - r->dump);
	}
	r->depth = from;
	return push(r, tuple);
}

/* The item of dict DICT under KEY: its node, or NOTHING. */
static uint32_t find(const struct reader *r, uint32_t dict, int key)
{
	uint32_t at = r->boxes[PLACE(dict)];

	while (at != NOTHING && r->nodes[at].key != (uint32_t)key)
		at = r->nodes[at].next;
	return at;
}

/* Move the stack's items from FROM up into container TARGET. */
static bool fill(struct reader *r, uint32_t target, size_t from)
{
	size_t n = r->depth - from, node;
	uint32_t at;
	int key;

	if (target == MARK || (TAG(target) != T_LIST &&
			       TAG(target) != T_DICT) ||
	    (TAG(target) == T_DICT && n % 2))
		return fail(r, "items go into something that is not a list "
			    "or dict");
	for (size_t i = from; i < r->depth; i++)
		if (r->stack[i] == MARK)
			return fail(r, "a MARK inside a container's items");
	if (TAG(target) == T_LIST && n)
		r->boxes[PLACE(target)] = r->stack[r->depth - 1];
	for (size_t i = from; TAG(target) == T_DICT && i < r->depth; i += 2) {
		if ((key = key_of(r, r->stack[i])) < 0)
			continue;
		if ((at = find(r, target, key)) != NOTHING) {
			r->nodes[at].value = r->stack[i + 1];
			continue;
		}
		if (!new_node(r, r->stack[i + 1], r->boxes[PLACE(target)],
			      (uint32_t)key, &node))
			return false;
		r->boxes[PLACE(target)] = (uint32_t)node;
	}
	r->depth = from;
	return true;
}

/* The memo is numbered from 0 in order, as picklers write it, so it is
 * an array no longer than the PUTs that made it. */
static bool memo_put(struct reader *r, uint64_t index)
{
	if (r->depth == 0 || r->stack[r->depth - 1] == MARK)
		return fail(r, "nothing to remember");
	if (index > r->memo_len)
		return fail(r, "a memo index out of order");
	if (index == r->memo_len) {
		if (!grow(r, (void **)&r->memo, &r->memo_cap, r->memo_len + 1,
			  sizeof(*r->memo)))
			return false;
		r->memo_len++;
	}
	r->memo[index] = r->stack[r->depth - 1];
	return true;
}

static bool memo_get(struct reader *r, uint64_t index)
{
	if (index >= r->memo_len)
		return fail(r, "it reads a memo slot it never wrote");
	return push(r, r->memo[index]);
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
		return push_box(r, T_DICT);
	case ']':		/* EMPTY_LIST */
		return push_box(r, T_LIST);
	case ')':		/* EMPTY_TUPLE */
		return make_tuple(r, r->depth, op);
	case 't':		/* TUPLE */
		if (!above_mark(r, &from) || !make_tuple(r, from, op))
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
		return make_tuple(r, r->depth - (size_t)(*op - 0x84), op);
	case 'X':		/* BINUNICODE */
	case 'B':		/* BINBYTES */
		return skip_text(r, 4) && push_plain(r, op);
	case 0x8c:		/* SHORT_BINUNICODE */
	case 'C':		/* SHORT_BINBYTES */
		return skip_text(r, 1) && push_plain(r, op);
	case 0x8d:		/* BINUNICODE8 */
		return skip_text(r, 8) && push_plain(r, op);
	case 'J':		/* BININT */
		return take(r, 4) && push_plain(r, op);
	case 'K':		/* BININT1 */
		return take(r, 1) && push_plain(r, op);
	case 'M':		/* BININT2 */
		return take(r, 2) && push_plain(r, op);
	case 0x8a:		/* LONG1 */
		if (!(arg = take(r, 1)))
			return false;
		if (arg[0] > 8)
			return fail(r, "an integer wider than 64 bits");
		return take(r, arg[0]) && push_plain(r, op);
	case 'G':		/* BINFLOAT */
		return take(r, 8) && push_plain(r, op);
	case 'N':		/* NONE */
	case 0x88:		/* NEWTRUE */
	case 0x89:		/* NEWFALSE */
		return push_plain(r, op);
	case 'q':		/* BINPUT */
		arg = take(r, 1);
		return arg && memo_put(r, arg[0]);
	case 'r':		/* LONG_BINPUT */
		arg = take(r, 4);
		return arg && memo_put(r, little_endian(arg, 4));
	case 0x94:		/* MEMOIZE */
		return memo_put(r, r->memo_len);
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

/* The value under KEY in dict DICT, or NOTHING. */
static uint32_t get(const struct reader *r, uint32_t dict, enum key key)
{
	uint32_t at;

	if (dict == NOTHING || TAG(dict) != T_DICT)
		return NOTHING;
	at = find(r, dict, (int)key);
	return at == NOTHING ? NOTHING : r->nodes[at].value;
}

/* A string of the dump, printable ASCII only, cut at 64 bytes. */
static void text_of(const struct reader *r, uint32_t h, char *buf, size_t len)
{
	const unsigned char *s;
	size_t n, used = 0;

	if (!string_of(r, h, &s, &n)) {
		snprintf(buf, len, "?");
		return;
	}
	for (size_t i = 0; i < n && i < 64 && used + 1 < len; i++)
		buf[used++] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
	buf[used] = '\0';
}

static void describe(const struct reader *r, uint32_t entry, char *out,
		     size_t out_len)
{
	uint32_t pg = get(r, entry, KEY_PG);
	char name[80], state[80], pg_id[80] = "", pg_name[80] = "";
	const char *which = "#";
	int64_t number = -1, seq;

	text_of(r, get(r, entry, KEY_NAME), name, sizeof(name));
	text_of(r, get(r, entry, KEY_STATE), state, sizeof(state));
	if ((strstr(name, "send") || strstr(name, "recv")) &&
	    int_of(r, get(r, entry, KEY_P2P_SEQ), &seq)) {
		which = "p2p #";
		number = seq;
	} else if (int_of(r, get(r, entry, KEY_SEQ), &seq)) {
		number = seq;
	}
	if (pg != NOTHING && TAG(pg) == T_PAIR) {
		text_of(r, r->nodes[PLACE(pg)].value, pg_id, sizeof(pg_id));
		text_of(r, r->nodes[PLACE(pg)].next, pg_name, sizeof(pg_name));
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
	struct reader r = { .dump = dump, .p = dump, .end = dump + len };
	uint32_t entries = NOTHING;
	bool done = false;
	int rc = -1;

	if (len > DT_FR_DUMP_MAX)
		fail(&r, "it is over " DT_FR_DUMP_MAX_TEXT);
	while (!r.why && !done && step(&r, &done))
		;
	if (!done)
		goto out;
	if (r.depth == 1 && r.stack[0] != MARK)
		entries = get(&r, r.stack[0], KEY_ENTRIES);
	if (r.depth != 1 || r.stack[0] == MARK)
		fail(&r, "it does not end with one value");
	else if (entries == NOTHING || TAG(entries) != T_LIST)
		fail(&r, "it has no list of entries");
	else if (r.boxes[PLACE(entries)] == NOTHING)
		snprintf(out, out_len, "no collective yet");
	else
		describe(&r, r.boxes[PLACE(entries)], out, out_len);
	rc = r.why ? -1 : 0;
out:
	if (rc < 0)
		snprintf(out, out_len, "not a flight recorder dump: %s",
			 r.why ? r.why : "it does not end");
	free(r.stack);
	free(r.memo);
	free(r.boxes);
	free(r.nodes);
	return rc;
}
