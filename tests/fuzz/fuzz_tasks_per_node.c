/* SLURM_STEP_TASKS_PER_NODE. */
#include "config.h"

#include "fuzz.h"
#include "../../common/tasks_per_node.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_string(data, size), err[256];
	struct dt_tasks_per_node t;

	if (dt_tpn_parse(text, &t, err, sizeof(err)) == 0) {
		uint64_t sum = 0;

		FUZZ_ASSERT(t.nodes > 0);
		for (size_t i = 0; i < t.nruns; i++)
			sum += (uint64_t)t.runs[i].count * t.runs[i].reps;
		FUZZ_ASSERT(sum == t.tasks);
		FUZZ_ASSERT(dt_tpn_tasks_before(&t, t.nodes) == t.tasks);
		FUZZ_ASSERT(dt_tpn_at(&t, t.nodes - 1) > 0);
		FUZZ_ASSERT(dt_tpn_at(&t, t.nodes) == 0);
		dt_tpn_free(&t);
	}
	free(text);
	return 0;
}
