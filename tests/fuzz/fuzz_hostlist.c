/* Host lists: SLURM_STEP_NODELIST, dist-train hostnames. */
#include "config.h"

#include "fuzz.h"
#include "../../common/hostlist.h"

static int stop_after(const char *name, size_t len, void *arg)
{
	size_t *left = arg;

	FUZZ_ASSERT(strlen(name) == len);
	return --*left == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_string(data, size), err[256], name[512];
	struct dt_hostlist *hl;
	size_t n, left = 4096;

	if (dt_hostlist_parse(text, &hl, err, sizeof(err)) == 0) {
		n = dt_hostlist_count(hl);
		/* Whatever names it makes, nth and foreach agree in length. */
		if (n) {
			int len = dt_hostlist_nth(hl, n - 1, name, sizeof(name));

			FUZZ_ASSERT(len >= 0);
			FUZZ_ASSERT((size_t)len <= dt_hostlist_max_name_len(hl));
			FUZZ_ASSERT(dt_hostlist_nth(hl, n, name, sizeof(name)) == -1);
		}
		dt_hostlist_foreach(hl, stop_after, &left);
		dt_hostlist_free(hl);
	} else {
		FUZZ_ASSERT(err[0] != '\0');
	}
	free(text);
	return 0;
}
