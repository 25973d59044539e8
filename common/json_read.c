/*
 * A small JSON reader (common/json_read.h): recursive descent, bounded
 * by DT_JSON_DEPTH_MAX; every string checked as UTF-8.
 */
#include "config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_read.h"

struct reader {
	const char *p, *start, *end;
	char *err;
	size_t errlen;
	bool failed;
};

static void fail(struct reader *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void fail(struct reader *r, const char *fmt, ...)
{
	char why[160];
	va_list ap;

	if (r->failed)
		return;
	r->failed = true;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	/* message: not a problem (the reason inside cmd_why.c's message) */
	snprintf(r->err, r->errlen, "at byte %zu: %s",
		 (size_t)(r->p - r->start), why);
}

static void skip_space(struct reader *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' ||
				 *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static bool take(struct reader *r, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n))
		return false;
	r->p += n;
	return true;
}

static int hex4(struct reader *r, unsigned *out)
{
	unsigned v = 0;

	if (r->end - r->p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char c = *r->p++;

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(char *out, unsigned c)
{
	if (c < 0x80) {
		out[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		out[0] = (char)(0xc0 | (c >> 6));
		out[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		out[0] = (char)(0xe0 | (c >> 12));
		out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		out[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (c >> 18));
	out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
	out[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

/* The length of the UTF-8 sequence at P (LEFT bytes), or 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t left)
{
	unsigned c;
	size_t n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, c = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, c = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, c = p[0] & 0x07;
	else
		return 0;
	if (left < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (p[i] & 0x3f);
	}
	/* Overlong, a surrogate, past U+10FFFF. */
	if ((n == 3 && c < 0x800) || (n == 4 && c < 0x10000) ||
	    (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		return 0;
	return n;
}

/* A string at R->p (past its quote) into a malloc'd copy, or NULL. */
static char *string_value(struct reader *r)
{
	const char *from = r->p;
	char *out, *o;

	/* Unescaped, a string is never longer than its text. */
	while (r->p < r->end && *r->p != '"')
		r->p += *r->p == '\\' && r->p + 1 < r->end ? 2 : 1;
	if (r->p >= r->end) {
		fail(r, "a string does not end");
		return NULL;
	}
	out = o = malloc((size_t)(r->p - from) + 1);
	r->p = from;
	if (!out) {
		fail(r, "out of memory");
		return NULL;
	}
	while (*r->p != '"') {
		unsigned char c = (unsigned char)*r->p;
		unsigned u, low;
		size_t n;

		if (c < 0x20) {
			fail(r, "a control character in a string");
			goto bad;
		}
		if (c != '\\') {
			n = utf8_len((const unsigned char *)r->p,
				     (size_t)(r->end - r->p));
			if (n == 0) {
				fail(r, "a string that is not UTF-8");
				goto bad;
			}
			memcpy(o, r->p, n);
			o += n;
			r->p += n;
			continue;
		}
		r->p++;
		switch (*r->p++) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if (hex4(r, &u) < 0)
				goto bad_escape;
			if (u >= 0xd800 && u <= 0xdbff) {
				if (!take(r, "\\u") || hex4(r, &low) < 0 ||
				    low < 0xdc00 || low > 0xdfff)
					goto bad_escape;
				u = 0x10000 + ((u - 0xd800) << 10) +
				    (low - 0xdc00);
			} else if (u >= 0xdc00 && u <= 0xdfff) {
				goto bad_escape;
			}
			if (u == 0) {
				fail(r, "a NUL character in a string");
				goto bad;
			}
			o += put_utf8(o, u);
			break;
		default:
			goto bad_escape;
		}
	}
	r->p++;
	*o = '\0';
	return out;
bad_escape:
	fail(r, "a bad escape in a string");
bad:
	free(out);
	return NULL;
}

static bool number_value(struct reader *r, double *out)
{
	const char *from = r->p;
	char buf[64];

	if (r->p < r->end && *r->p == '-')
		r->p++;
	if (r->p < r->end && *r->p == '0')
		r->p++;
	else if (r->p < r->end && *r->p >= '1' && *r->p <= '9')
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
	else
		return false;
	if (r->p < r->end && *r->p == '.') {
		r->p++;
		if (r->p >= r->end || *r->p < '0' || *r->p > '9')
			return false;
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		r->p++;
		if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		if (r->p >= r->end || *r->p < '0' || *r->p > '9')
			return false;
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
	}
	if ((size_t)(r->p - from) >= sizeof(buf))
		return false;
	memcpy(buf, from, (size_t)(r->p - from));
	buf[r->p - from] = '\0';
	*out = strtod(buf, NULL);
	return true;
}

static void free_inside(struct dt_json *v)
{
	for (size_t i = 0; i < v->count; i++)
		free_inside(&v->items[i]);
	free(v->items);
	free(v->string);
	free(v->key);
}

static bool value(struct reader *r, struct dt_json *v, int depth);

/* The items or members of a container after its opening bracket. */
static bool container(struct reader *r, struct dt_json *v, int depth)
{
	bool object = v->type == DT_JSON_OBJECT;
	char close = object ? '}' : ']';
	size_t cap = 0;

	if (depth >= DT_JSON_DEPTH_MAX) {
		fail(r, "nested deeper than %d", DT_JSON_DEPTH_MAX);
		return false;
	}
	skip_space(r);
	if (r->p < r->end && *r->p == close) {
		r->p++;
		return true;
	}
	for (;;) {
		struct dt_json item = { 0 };

		skip_space(r);
		if (object) {
			if (r->p >= r->end || *r->p != '"') {
				fail(r, "a member's name expected");
				return false;
			}
			r->p++;
			item.key = string_value(r);
			if (!item.key)
				return false;
			skip_space(r);
			if (r->p >= r->end || *r->p != ':') {
				free(item.key);
				fail(r, "':' expected");
				return false;
			}
			r->p++;
		}
		if (!value(r, &item, depth + 1)) {
			free_inside(&item);
			return false;
		}
		if (v->count == cap) {
			size_t ncap = cap ? 2 * cap : 8;
			struct dt_json *grown =
				realloc(v->items, ncap * sizeof(*grown));

			if (!grown) {
				free_inside(&item);
				fail(r, "out of memory");
				return false;
			}
			v->items = grown;
			cap = ncap;
		}
		v->items[v->count++] = item;
		skip_space(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == close) {
			r->p++;
			return true;
		}
		fail(r, "',' or '%c' expected", close);
		return false;
	}
}

static bool value(struct reader *r, struct dt_json *v, int depth)
{
	skip_space(r);
	if (r->p >= r->end) {
		fail(r, "a value expected");
		return false;
	}
	switch (*r->p) {
	case '{':
	case '[':
		v->type = *r->p == '{' ? DT_JSON_OBJECT : DT_JSON_ARRAY;
		r->p++;
		return container(r, v, depth);
	case '"':
		r->p++;
		v->type = DT_JSON_STRING;
		v->string = string_value(r);
		return v->string != NULL;
	}
	if (take(r, "null")) {
		v->type = DT_JSON_NULL;
		return true;
	}
	if (take(r, "true") || take(r, "false")) {
		v->type = DT_JSON_BOOL;
		v->boolean = r->p[-1] == 'e' && r->p[-2] == 'u';
		return true;
	}
	v->type = DT_JSON_NUMBER;
	if (number_value(r, &v->number))
		return true;
	fail(r, "a value expected");
	return false;
}

struct dt_json *dt_json_parse(const char *text, size_t len, char *err,
			      size_t errlen)
{
	struct reader r = { text, text, text + len, err, errlen, false };
	struct dt_json *v = calloc(1, sizeof(*v));

	if (!v) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (value(&r, v, 0)) {
		skip_space(&r);
		if (r.p == r.end)
			return v;
		fail(&r, "more after the value");
	}
	dt_json_free(v);
	return NULL;
}

void dt_json_free(struct dt_json *v)
{
	if (!v)
		return;
	free_inside(v);
	free(v);
}

const struct dt_json *dt_json_get(const struct dt_json *obj,
				  const char *name)
{
	const struct dt_json *found = NULL;

	if (!obj || obj->type != DT_JSON_OBJECT)
		return NULL;
	for (size_t i = 0; i < obj->count; i++)
		if (!strcmp(obj->items[i].key, name))
			found = &obj->items[i];
	return found;
}

const char *dt_json_string(const struct dt_json *obj, const char *name)
{
	const struct dt_json *v = dt_json_get(obj, name);

	return v && v->type == DT_JSON_STRING ? v->string : NULL;
}

double dt_json_number(const struct dt_json *obj, const char *name,
		      double fallback)
{
	const struct dt_json *v = dt_json_get(obj, name);

	return v && v->type == DT_JSON_NUMBER ? v->number : fallback;
}
