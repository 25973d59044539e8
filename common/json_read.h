/*
 * A small JSON reader for the step's record (doc/record.schema.json), as
 * `dist-train why` reads it back: the whole text into a tree, strictly
 * (RFC 8259), bounded in depth. Pure.
 */
#ifndef DIST_TRAIN_JSON_READ_H
#define DIST_TRAIN_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>

/* Containers nested deeper are refused: the record nests three. */
#define DT_JSON_DEPTH_MAX 32

enum dt_json_type {
	DT_JSON_NULL, DT_JSON_BOOL, DT_JSON_NUMBER, DT_JSON_STRING,
	DT_JSON_ARRAY, DT_JSON_OBJECT
};

struct dt_json {
	enum dt_json_type type;
	char *key;		/* a member's name in its object, else NULL */
	bool boolean;
	double number;
	char *string;		/* UTF-8, NUL-terminated; no NUL inside */
	struct dt_json *items;	/* an array's items, an object's members */
	size_t count;
};

/* TEXT (LEN bytes) as a tree (freed with dt_json_free), or NULL with why
 * into ERR ("at byte N: ..."; "out of memory"). */
struct dt_json *dt_json_parse(const char *text, size_t len, char *err,
			      size_t errlen);
void dt_json_free(struct dt_json *v);

/* OBJ's member NAME (the last one of that name), or NULL. */
const struct dt_json *dt_json_get(const struct dt_json *obj,
				  const char *name);
/* Its string, or NULL where it is none (missing, null, another type). */
const char *dt_json_string(const struct dt_json *obj, const char *name);
/* Its number, or FALLBACK. */
double dt_json_number(const struct dt_json *obj, const char *name,
		      double fallback);

#endif
