#include "config.h"

#include "python_hook.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int dt_python_hook(const char *worker_lib, const char *hook_dir_override,
		   const char *pythonpath, bool store_tree,
		   struct dt_env *env)
{
	const char *slash = strrchr(worker_lib, '/');
	char dir[PATH_MAX], file[PATH_MAX + 32];

	if (hook_dir_override && *hook_dir_override)
		snprintf(dir, sizeof(dir), "%s", hook_dir_override);
	else if (slash)
		snprintf(dir, sizeof(dir), "%.*s/python",
			 (int)(slash - worker_lib), worker_lib);
	else
		return 0;
	snprintf(file, sizeof(file), "%s/sitecustomize.py", dir);
	if (access(file, R_OK) < 0)
		return 0;
	if (dt_env_prepend(env, "PYTHONPATH", dir, pythonpath) < 0 ||
	    dt_env_put(env, "DIST_TRAIN_STORE", store_tree ? "tree" : "torch",
		       DT_ENV_SET) < 0)
		return -1;
	return 1;
}
