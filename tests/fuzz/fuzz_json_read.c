/* A step's record, as dist-train why reads it back. */
#include "config.h"

#include <string.h>

#include "fuzz.h"
#include "../../common/json_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[200];
	struct dt_json *v = dt_json_parse((const char *)data, size, err,
					  sizeof(err));

	if (!v)
		FUZZ_ASSERT(!strncmp(err, "at byte ", 8) ||
			    !strcmp(err, "out of memory"));
	else
		(void)dt_json_string(v, "step");
	dt_json_free(v);
	return 0;
}
