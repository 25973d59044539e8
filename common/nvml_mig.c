#include "config.h"

#include "nvml_mig.h"
#include "topology.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* NVML's own name for success (nvmlReturn_t). */
#define NVML_OK 0

static void *symbol(void *lib, const char *name, bool *missing)
{
	void *p = dlsym(lib, name);

	if (!p)
		*missing = true;
	return p;
}

/* NVML loaded and initialised, once: false with NVML->why when it is not
 * to be had. */
static bool nvml_open(struct dt_nvml *nvml)
{
	const char *library = nvml->library ? nvml->library : DT_NVML_LIBRARY;
	int (*init)(void);
	bool missing = false;
	int rc;

	if (nvml->tried)
		return nvml->lib != NULL;
	nvml->tried = true;
	nvml->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
	if (!nvml->lib) {
		/* message: not a problem (a verbose note: bound by NUMA) */
		snprintf(nvml->why, sizeof(nvml->why), "%s is not installed "
			 "here", library);
		return false;
	}
	*(void **)&init = symbol(nvml->lib, "nvmlInit_v2", &missing);
	*(void **)&nvml->shutdown = symbol(nvml->lib, "nvmlShutdown", &missing);
	*(void **)&nvml->by_uuid = symbol(nvml->lib,
					  "nvmlDeviceGetHandleByUUID",
					  &missing);
	*(void **)&nvml->parent = symbol(nvml->lib,
		"nvmlDeviceGetDeviceHandleFromMigDeviceHandle", &missing);
	*(void **)&nvml->minor = symbol(nvml->lib, "nvmlDeviceGetMinorNumber",
					&missing);
	*(void **)&nvml->describe = symbol(nvml->lib, "nvmlErrorString",
					   &missing);
	if (missing) {
		/* message: not a problem (a verbose note: bound by NUMA) */
		snprintf(nvml->why, sizeof(nvml->why), "%s predates MIG",
			 library);
		goto fail;
	}
	rc = init();
	if (rc != NVML_OK) {
		/* message: not a problem (a verbose note: bound by NUMA) */
		snprintf(nvml->why, sizeof(nvml->why), "NVML did not start: "
			 "%s", nvml->describe(rc));
		goto fail;
	}
	return true;
fail:
	dlclose(nvml->lib);
	nvml->lib = NULL;
	return false;
}

int dt_nvml_mig_parent(void *arg, const char *uuid, int *minor, char *why,
		       size_t whylen)
{
	struct dt_nvml *nvml = arg;
	void *mig, *gpu;
	unsigned m;
	int rc;

	if (!nvml_open(nvml)) {
		snprintf(why, whylen, "%s", nvml->why);
		return -1;
	}
	rc = nvml->by_uuid(uuid, &mig);
	if (rc == NVML_OK)
		rc = nvml->parent(mig, &gpu);
	if (rc == NVML_OK)
		rc = nvml->minor(gpu, &m);
	if (rc != NVML_OK) {
		snprintf(why, whylen, "%s: %s", uuid, nvml->describe(rc));
		return -1;
	}
	*minor = (int)m;
	return 0;
}

void dt_nvml_close(struct dt_nvml *nvml)
{
	if (nvml->lib) {
		nvml->shutdown();
		dlclose(nvml->lib);
	}
	nvml->lib = NULL;
}

int dt_task_step_gpus(const struct dt_machine *m, const char *step_gpus,
		      const char *job_gpus, const char *visible,
		      unsigned **out, char *err, size_t errlen)
{
	struct dt_nvml nvml = { 0 };
	int n = dt_step_gpus_placing_mig(m, step_gpus, job_gpus, visible,
					 dt_nvml_mig_parent, &nvml, out, err,
					 errlen);

	dt_nvml_close(&nvml);
	return n;
}
