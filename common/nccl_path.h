/*
 * Which NCCL (or RCCL) a Python program loads: PyTorch from pip brings its
 * own, in the program's Python environment (below site-packages at
 * nvidia/nccl/lib/libnccl.so.2, or torch/lib/librccl.so for ROCm: the
 * vendor table's pip_path), and the check of --dist-train=check should
 * use that one rather than the system's.
 */
#ifndef DIST_TRAIN_NCCL_PATH_H
#define DIST_TRAIN_NCCL_PATH_H

#include <stdbool.h>
#include <stddef.h>

#define DT_NCCL_PATH_MAX 1024
#define DT_NCCL_CANDIDATES_MAX 8

/* Whether PROGRAM (a path or a name) is a Python interpreter. */
bool dt_is_python(const char *program);

/*
 * The glob patterns (in "python3*") where a Python environment's
 * PIP_PATH (relative to site-packages) may be, best first: beside
 * INTERPRETER (as run, then REAL, its resolved
 * path; either may be NULL), then under VIRTUAL_ENV and CONDA_PREFIX
 * (NULL when unset). Only absolute paths are used; a pattern is listed
 * once. Writes up to MAX into OUT; returns how many.
 */
int dt_nccl_candidates(const char *pip_path, const char *interpreter,
		       const char *real,
		       const char *virtual_env, const char *conda_prefix,
		       char out[][DT_NCCL_PATH_MAX], int max);

#endif
