/* GPU and CPU lists from the environment (SLURM_STEP_GPUS, ...), on an
 * NVIDIA or an AMD node, and amdkfd's node properties. */
#include "config.h"

#include "fuzz.h"
#include "../../common/gpu_vendor.h"
#include "../../common/topology.h"

/* NVML's answer, as a task would get it: a minor from the UUID's last
 * character, or none for a UUID ending in 'x'. */
static int fake_parent(void *arg, const char *uuid, int *minor, char *why,
		       size_t whylen)
{
	size_t len = strlen(uuid);

	(void)arg;
	FUZZ_ASSERT(!strncmp(uuid, "MIG-", 4) && !strchr(uuid, ','));
	if (uuid[len - 1] == 'x') {
		snprintf(why, whylen, "%s: Not Found", uuid);
		return -1;
	}
	*minor = (unsigned char)uuid[len - 1] % 4;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dt_gpu gpus[4] = {
		{ "0000:03:00.0", 0, 0 }, { "0000:04:00.0", 0, 2 },
		{ "0000:83:00.0", 1, 1 }, { "0000:84:00.0", 1, -1 },
	};
	struct dt_machine m = { .gpus = gpus, .ngpus = size % 5,
				.gpu_vendor = size % 2 ? DT_GPU_AMD :
					      DT_GPU_NVIDIA };
	char *text = fuzz_string(data, size), buf[64];
	unsigned *ids = NULL;
	int n;

	/* Sometimes one GPU holds MIG instances: a MIG list's devices are
	 * all on it, once each; any other list's GPUs are distinct. */
	gpus[size % 4].mig = size % 3;
	n = dt_step_gpus(&m, size % 3 == 0 ? text : NULL,
			 size % 3 == 1 ? text : NULL, text, &ids, buf,
			 sizeof(buf));
	for (int i = 0; i < n; i++)
		FUZZ_ASSERT(ids[i] < m.ngpus &&
			    (i == 0 || (strncmp(text, "MIG-", 4) ?
					ids[i] > ids[i - 1] :
					ids[i] == ids[0])));
	free(ids);
	/* In a task: MIG devices placed by NVML, each on a GPU the node
	 * has, or none placed. */
	n = dt_step_gpus_placing_mig(&m, NULL, NULL, text, fake_parent, NULL,
				     &ids, buf, sizeof(buf));
	for (int i = 0; i < n; i++)
		FUZZ_ASSERT(ids[i] < m.ngpus);
	free(ids);
	n = dt_intlist_parse(text, 4096, &ids);
	if (n > 0)
		dt_cpulist_format(ids, (unsigned)n, buf, sizeof(buf));
	free(ids);
	if (dt_kfd_node_parse(text, buf, 16) == 1)
		FUZZ_ASSERT(strlen(buf) == 12);
	free(text);
	return 0;
}
