/* What rank 0 and the other ranks read from the network. */
#include "config.h"

#include "fuzz.h"
#include "../../common/rendezvous.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_string(data, size), line[DT_RDV_LINE_MAX];
	struct dt_rdv_hello h, h2;
	struct dt_rdv_reply r, r2;
	bool arrived[64];

	if (dt_rdv_parse_hello(text, &h) == 0) {
		FUZZ_ASSERT(h.rank < h.world);
		/* A hello read is a hello that can be written, and reread. */
		FUZZ_ASSERT(dt_rdv_format_hello(line, sizeof(line), &h) > 0);
		line[strlen(line) - 1] = '\0';
		FUZZ_ASSERT(dt_rdv_parse_hello(line, &h2) == 0);
		FUZZ_ASSERT(h2.rank == h.rank && h2.world == h.world &&
			    !strcmp(h2.host, h.host));
	}
	if (dt_rdv_parse_reply(text, &r) == 0 && r.ok) {
		FUZZ_ASSERT(dt_rdv_format_reply(line, sizeof(line), &r) > 0);
		line[strlen(line) - 1] = '\0';
		FUZZ_ASSERT(dt_rdv_parse_reply(line, &r2) == 0 && r2.ok &&
			    r2.nccl_port == r.nccl_port);
	}
	for (size_t i = 0; i < 64; i++)
		arrived[i] = i < size ? data[i] & 1 : 1;
	dt_rdv_describe_missing(arrived, 64, NULL, NULL, line,
				size % sizeof(line));
	free(text);
	return 0;
}
