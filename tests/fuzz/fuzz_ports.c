/* SLURM_STEP_RESV_PORTS, and the port rule. */
#include "config.h"

#include "fuzz.h"
#include "../../common/port.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_string(data, size);
	struct dt_step_ports p;
	uint32_t job = size ? data[0] * 1000u : 7;

	if (dt_step_ports(text, job, (uint32_t)size, job % 3, 20000, 28999, &p,
			  NULL, 0) == 0) {
		FUZZ_ASSERT(p.count >= 2 && p.count <= DT_PORTS_PER_STEP);
		for (unsigned i = 0; i < p.count; i++)
			FUZZ_ASSERT(p.port[i] > 0);
	}
	(void)dt_is_port(text);
	free(text);
	return 0;
}
