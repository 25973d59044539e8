/*
 * The Python hook: a sitecustomize, in the folder "python" beside the
 * worker library, that has a torch store's client wait for rank 0's store
 * to listen, and lets PyTorch built without libuv make its store (see
 * helper/python/sitecustomize.py). The plugin and dist-train exec put it
 * first on a task's PYTHONPATH.
 */
#ifndef DIST_TRAIN_PYTHON_HOOK_H
#define DIST_TRAIN_PYTHON_HOOK_H

#include "train_env.h"

/*
 * Add PYTHONPATH=HOOK_DIR[:PYTHONPATH] to ENV, where HOOK_DIR is the
 * "python" folder beside WORKER_LIB, or HOOK_DIR_OVERRIDE when given, and
 * holds a readable sitecustomize.py; nothing otherwise. PYTHONPATH is the
 * task's current value, or NULL. With it, DIST_TRAIN_STORE=tree or torch:
 * the store= setting, which the hook reads. Returns 1 when added, 0 when
 * not, or -1 when out of memory.
 */
int dt_python_hook(const char *worker_lib, const char *hook_dir_override,
		   const char *pythonpath, bool store_tree,
		   struct dt_env *env);

#endif
