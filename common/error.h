/*
 * Error text for the pure cores: each failing call writes one sentence,
 * without a trailing period or prefix, into a caller-provided buffer; the
 * caller adds the context (plugin name, option) when it reports it.
 */
#ifndef DIST_TRAIN_ERROR_H
#define DIST_TRAIN_ERROR_H

#include <stddef.h>

/* Control characters (line breaks, escape sequences) in the result are
 * written as \xHH. */
void dt_errf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* IN into OUT (of OUTLEN, > 0), control characters as \xHH, cut where it
 * does not fit; returns the length written. */
size_t dt_escape(const char *in, char *out, size_t outlen);

#endif
