/*
 * A stand-in for ROCm's HIP runtime (libamdhip64), for the tests of
 * --dist-train=check on AMD nodes (tests/integration/helper.sh): the calls
 * the helper makes (common/gpu_vendor.c), on host memory. DT_MOCK_GPUS
 * GPUs (default 1); each call to hipSetDevice says which on stderr, so
 * that a test sees the ordinal a rank chose.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hipInit(unsigned flags);
int hipGetDeviceCount(int *count);
int hipSetDevice(int ordinal);
int hipMalloc(void **ptr, size_t size);
int hipFree(void *ptr);
int hipMemcpyHtoD(void *dst, const void *src, size_t size);
int hipMemcpyDtoH(void *dst, const void *src, size_t size);
int hipStreamCreateWithFlags(void **stream, unsigned flags);
int hipStreamSynchronize(void *stream);
int hipStreamDestroy(void *stream);

/* hipErrorInvalidDevice, hipErrorOutOfMemory */
enum { MOCK_NO_DEVICE = 101, MOCK_NO_MEMORY = 2 };

static int gpus(void)
{
	const char *n = getenv("DT_MOCK_GPUS");

	return n && *n ? atoi(n) : 1;
}

int hipInit(unsigned flags)
{
	(void)flags;
	return 0;
}

int hipGetDeviceCount(int *count)
{
	*count = gpus();
	return *count > 0 ? 0 : MOCK_NO_DEVICE;
}

int hipSetDevice(int ordinal)
{
	if (ordinal < 0 || ordinal >= gpus())
		return MOCK_NO_DEVICE;
	fprintf(stderr, "mock-hip: rank %s uses GPU %d of %d\n",
		getenv("SLURM_PROCID") ? getenv("SLURM_PROCID") : "?",
		ordinal, gpus());
	return 0;
}

int hipMalloc(void **ptr, size_t size)
{
	*ptr = calloc(1, size);
	return *ptr ? 0 : MOCK_NO_MEMORY;
}

int hipFree(void *ptr)
{
	free(ptr);
	return 0;
}

int hipMemcpyHtoD(void *dst, const void *src, size_t size)
{
	memcpy(dst, src, size);
	return 0;
}

int hipMemcpyDtoH(void *dst, const void *src, size_t size)
{
	memcpy(dst, src, size);
	return 0;
}

int hipStreamCreateWithFlags(void **stream, unsigned flags)
{
	static char one;

	(void)flags;
	*stream = &one;
	return 0;
}

int hipStreamSynchronize(void *stream)
{
	(void)stream;
	return 0;
}

int hipStreamDestroy(void *stream)
{
	(void)stream;
	return 0;
}
