/*
 * A one-float NCCL all-reduce across the step, for --dist-train=check.
 * NCCL (libnccl.so.2) and the CUDA driver (libcuda.so.1) are loaded at run
 * time: on nodes without them, or without a GPU, the check is skipped and
 * the reason reported.
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
 * with ERR.
 */
int nccl_allreduce_check(uint32_t world, uint32_t rank, uint32_t local_rank,
			 uint32_t local_size, char *err, size_t errlen);

#endif
