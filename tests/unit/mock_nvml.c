/*
 * A stand-in for NVIDIA's libnvidia-ml.so.1, for common/nvml_mig.c's unit
 * test (unit/test_binding.c): two GPUs, /dev/nvidia0 and /dev/nvidia2,
 * with a MIG device each, MIG-on-gpu0 and MIG-on-gpu2. Only the calls
 * the plugin makes, with NVML's return codes.
 */
#include <string.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_NOT_FOUND 6

struct device {
	unsigned minor;
	struct device *parent;	/* a MIG device's GPU; NULL for a GPU */
};

static struct device gpus[] = { { 0, NULL }, { 2, NULL } };
static struct device migs[] = { { 0, &gpus[0] }, { 0, &gpus[1] } };
static int started;

int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetHandleByUUID(const char *uuid, struct device **device);
int nvmlDeviceGetDeviceHandleFromMigDeviceHandle(struct device *mig,
						 struct device **device);
int nvmlDeviceGetMinorNumber(struct device *device, unsigned *minor);
const char *nvmlErrorString(int rc);

int nvmlInit_v2(void)
{
	started++;
	return NVML_SUCCESS;
}

int nvmlShutdown(void)
{
	if (!started)
		return NVML_ERROR_UNINITIALIZED;
	started--;
	return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByUUID(const char *uuid, struct device **device)
{
	if (!started)
		return NVML_ERROR_UNINITIALIZED;
	if (!strcmp(uuid, "MIG-on-gpu0"))
		*device = &migs[0];
	else if (!strcmp(uuid, "MIG-on-gpu2"))
		*device = &migs[1];
	else
		return NVML_ERROR_NOT_FOUND;
	return NVML_SUCCESS;
}

int nvmlDeviceGetDeviceHandleFromMigDeviceHandle(struct device *mig,
						 struct device **device)
{
	if (!started)
		return NVML_ERROR_UNINITIALIZED;
	*device = mig->parent;
	return NVML_SUCCESS;
}

int nvmlDeviceGetMinorNumber(struct device *device, unsigned *minor)
{
	if (!started)
		return NVML_ERROR_UNINITIALIZED;
	*minor = device->minor;
	return NVML_SUCCESS;
}

const char *nvmlErrorString(int rc)
{
	switch (rc) {
	case NVML_ERROR_UNINITIALIZED:
		return "Uninitialized";
	case NVML_ERROR_NOT_FOUND:
		return "Not Found";
	default:
		return "Unknown Error";
	}
}
