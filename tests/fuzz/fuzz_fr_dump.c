/* An NCCL flight recorder dump, as dist-train stacks reads it. */
#include "config.h"

#include <string.h>

#include "fuzz.h"
#include "../../common/fr_dump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[DT_FR_NEWEST_MAX];

	if (dt_fr_newest(data, size, out, sizeof(out)) < 0)
		FUZZ_ASSERT(!strncmp(out, "not a flight recorder dump: ", 28));
	FUZZ_ASSERT(strlen(out) < sizeof(out));
	return 0;
}
