#include "config.h"

#include "gpu_vendor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct dt_gpu_vendor dt_gpu_vendors[DT_GPU_VENDORS] = {
	[DT_GPU_NVIDIA] = {
		.name = "NVIDIA",
		.pci_vendor = 0x10de,
		/* VGA, 3D (data centre GPUs, GH200: 0x0302), other display */
		.classes = { { 0x0300, 0xff00 } },
		.visible = "CUDA_VISIBLE_DEVICES",
		.order_name = "CUDA_DEVICE_ORDER",
		.order_value = "PCI_BUS_ID",
		.driver = "the NVIDIA driver (nvidia-smi -L lists the GPUs)",
		.collective = {
			.name = "NCCL",
			.label = "libnccl",
			/* pip's nvidia-nccl-cu*, which torch depends on */
			.pip_path = "nvidia/nccl/lib/libnccl.so.2",
			.libs = { "libnccl.so.2" },
			.install = "PyTorch with its NCCL (pip install torch), "
				   "or NCCL itself",
		},
		.runtime = {
			.name = "CUDA driver",
			.libs = { "libcuda.so.1" },
			.device_node = "/dev/nvidiactl",
			.tool = "nvidia-smi",
			.install = "the NVIDIA driver",
			.init = "cuInit",
			.device_count = "cuDeviceGetCount",
			.device_get = "cuDeviceGet",
			.ctx_retain = "cuDevicePrimaryCtxRetain",
			.ctx_release = "cuDevicePrimaryCtxRelease_v2",
			.ctx_set = "cuCtxSetCurrent",
			.mem_alloc = "cuMemAlloc_v2",
			.mem_free = "cuMemFree_v2",
			.htod = "cuMemcpyHtoD_v2",
			.dtoh = "cuMemcpyDtoH_v2",
			.stream_create = "cuStreamCreate",
			.stream_sync = "cuStreamSynchronize",
			.stream_destroy = "cuStreamDestroy_v2",
		},
	},
	[DT_GPU_AMD] = {
		.name = "AMD",
		.pci_vendor = 0x1002,
		/* MI250X: display controller 0x0380; MI300A/X and later:
		 * processing accelerator 0x1200. Not VGA 0x0300. */
		.classes = { { 0x0380, 0xffff }, { 0x1200, 0xffff } },
		.visible = "ROCR_VISIBLE_DEVICES",
		/* HIP numbers what ROCr shows, and narrows it again with
		 * these (ROCm's environment variables reference). */
		.refilter = { "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
			      "GPU_DEVICE_ORDINAL" },
		.driver = "the amdgpu driver and ROCm (amd-smi list lists "
			  "the GPUs)",
		.collective = {
			.name = "RCCL",
			.label = "librccl",
			/* PyTorch's ROCm wheels bundle RCCL and HIP in
			 * torch/lib; loading RCCL brings that HIP. */
			.pip_path = "torch/lib/librccl.so",
			.libs = { "librccl.so.1", "/opt/rocm/lib/librccl.so.1" },
			.install = "PyTorch for ROCm (its wheels bring RCCL), "
				   "or RCCL itself",
		},
		.runtime = {
			.name = "HIP runtime",
			/* ROCm 7, 6 and 5 sonames; /opt/rocm where ROCm's
			 * own folder is not on the loader's path. */
			.libs = { "libamdhip64.so.7", "libamdhip64.so.6",
				  "libamdhip64.so.5",
				  "/opt/rocm/lib/libamdhip64.so" },
			.device_node = "/dev/kfd",
			.tool = "amd-smi",
			.install = "ROCm",
			/* hipMalloc takes a void **, hipFree a void *: the
			 * same registers as CUDA's 64-bit device pointers. */
			.init = "hipInit",
			.device_count = "hipGetDeviceCount",
			.set_device = "hipSetDevice",
			.mem_alloc = "hipMalloc",
			.mem_free = "hipFree",
			.htod = "hipMemcpyHtoD",
			.dtoh = "hipMemcpyDtoH",
			.stream_create = "hipStreamCreateWithFlags",
			.stream_sync = "hipStreamSynchronize",
			.stream_destroy = "hipStreamDestroy",
		},
	},
};

int dt_gpu_vendor_of(uint16_t pci_vendor, uint16_t pci_class)
{
	for (int v = 0; v < DT_GPU_VENDORS; v++) {
		const struct dt_gpu_vendor *gv = &dt_gpu_vendors[v];

		if (gv->pci_vendor != pci_vendor)
			continue;
		for (unsigned c = 0; c < 2; c++)
			if (gv->classes[c].mask &&
			    (pci_class & gv->classes[c].mask) ==
			    gv->classes[c].want)
				return v;
	}
	return -1;
}

/* "NAME VALUE" lines, one per property, as amdkfd writes them; a line
 * of another shape (a later kernel's) is passed over. */
int dt_kfd_node_parse(const char *text, char *busid, unsigned busid_len)
{
	unsigned long long simds = 0, location = 0, domain = 0, v;
	bool have_location = false, any = false;

	for (const char *p = text; *p; ) {
		const char *end = strchr(p, '\n');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char line[256], name[64];

		snprintf(line, sizeof(line), "%.*s",
			 (int)(len < sizeof(line) ? len : sizeof(line) - 1), p);
		if (sscanf(line, "%63s %llu", name, &v) == 2) {
			any = true;
			if (!strcmp(name, "simd_count"))
				simds = v;
			else if (!strcmp(name, "location_id")) {
				location = v;
				have_location = true;
			} else if (!strcmp(name, "domain"))
				domain = v;
		}
		if (!end)
			break;
		p = end + 1;
	}
	if (!any)
		return -1;
	if (!simds || !have_location)
		return 0;
	/* location_id: bus << 8 | device << 3 | function. */
	if (domain > 0xffff || location > 0xffff)
		return -1;
	snprintf(busid, busid_len, "%04llx:%02llx:%02llx.%01llx", domain,
		 location >> 8, (location >> 3) & 0x1f, location & 0x7);
	return 1;
}
