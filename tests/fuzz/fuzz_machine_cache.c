/* The node's cached machine: read back, restricted, written again. */
#include "config.h"

#include <stdbool.h>

#include "fuzz.h"
#include "../../common/machine_cache.h"

#define FP "fp"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dt_machine m, r;
	bool allowed[64];
	char err[256];
	size_t len;
	char *text;

	if (dt_machine_parse((const char *)data, size, FP, &m, err,
			     sizeof(err)) != 0)
		return 0;
	/* What was read is written back as the same machine. */
	len = dt_machine_format(&m, FP, NULL, 0);
	text = malloc(len + 1);
	FUZZ_ASSERT(text && dt_machine_format(&m, FP, text, len + 1) == len);
	FUZZ_ASSERT(dt_machine_parse(text, len, FP, &r, err, sizeof(err)) ==
		    0);
	FUZZ_ASSERT(r.ncores == m.ncores && r.npus == m.npus &&
		    r.ngpus == m.ngpus && r.nnics == m.nnics);
	dt_machine_free(&r);
	free(text);
	for (unsigned i = 0; i < 64; i++)
		allowed[i] = size > i % 8 && (data[i % 8] >> (i / 8)) & 1;
	if (dt_machine_restrict(&m, allowed, 64, size > 1 ? "0-2" : NULL, &r,
				err, sizeof(err)) == 0) {
		FUZZ_ASSERT(r.ncores <= m.ncores && r.npus <= m.npus);
		for (unsigned i = 0; i < r.npus; i++)
			FUZZ_ASSERT(r.pus[i] < 64 && allowed[r.pus[i]]);
		dt_machine_free(&r);
	}
	dt_machine_free(&m);
	return 0;
}
