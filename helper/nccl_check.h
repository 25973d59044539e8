/*
 * A one-float NCCL all-reduce across the step, for --dist-train=check:
 * NCCL over the CUDA driver on NVIDIA GPUs, RCCL over HIP on AMD's (the
 * vendor table, common/gpu_vendor.h). Both are loaded at run time: on
 * nodes without them, or without a GPU, the check is skipped and the
 * reason reported.
 */
#ifndef DIST_TRAIN_HELPER_NCCL_CHECK_H
#define DIST_TRAIN_HELPER_NCCL_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Whether this rank, one of LOCAL_SIZE on its node, can run the check; if
 * not, WHY says what is missing. NCCL refuses two ranks of one
 * communicator on one GPU, so ranks sharing GPUs (share-gpus, or bind=
 * numa/off with more tasks than GPUs) cannot.
 */
bool nccl_usable(uint32_t local_size, char *why, size_t len);

/*
 * Every rank calls it at once, with NCCL_COMM_ID set in the environment.
 * The rank uses GPU LOCAL_RANK modulo the visible GPUs. Returns 0, or -1
 * with ERR, which names the rank and its HOST.
 */
int nccl_allreduce_check(uint32_t world, uint32_t rank, uint32_t local_rank,
			 uint32_t local_size, const char *host, char *err,
			 size_t errlen);

/*
 * The program the check is for (its argv[0]; else DIST_TRAIN_PROGRAM in
 * the environment, which the plugin sets for the helper): where it is
 * Python, the NCCL (or RCCL) of its own Python environment is loaded, as
 * PyTorch from pip would (common/nccl_path.h), else the system's.
 */
void nccl_set_program(const char *program);

/* Which library was loaded, "libnccl VERSION from PATH"; NULL before. */
const char *nccl_describe(void);

/* "NCCL" or "RCCL": the loaded library's name; "NCCL" before. */
const char *nccl_collective_name(void);

#endif
