#include "config.h"

#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t dt_escape(const char *in, char *out, size_t outlen)
{
	size_t o = 0;

	if (!outlen)
		return 0;
	for (; *in; in++) {
		unsigned char c = (unsigned char)*in;
		char esc[5];
		size_t n;

		if (c >= 0x20 && c != 0x7f) {
			esc[0] = (char)c;
			n = 1;
		} else {
			snprintf(esc, sizeof(esc), "\\x%02x", c);
			n = 4;
		}
		if (o + n >= outlen)
			break;
		memcpy(out + o, esc, n);
		o += n;
	}
	out[o] = '\0';
	return o;
}

void dt_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	char *raw;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	/* Values from the environment are quoted into messages that reach
	 * slurmd's log and terminals: no line breaks or escape sequences. */
	for (const char *c = err; *c; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f) {
			raw = strdup(err);
			if (raw)
				dt_escape(raw, err, errlen);
			else
				err[c - err] = '\0';
			free(raw);
			break;
		}
	}
}
