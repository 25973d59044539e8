#include "config.h"

#include "python_hook.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int dt_python_hook(const char *worker_lib, const char *hook_dir_override,
		   const char *pythonpath, struct dt_env *env)
{
	const char *slash = strrchr(worker_lib, '/');
	char dir[PATH_MAX], file[PATH_MAX + 32];
	char *value;
	int rc;

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
	if (!pythonpath || !*pythonpath)
		return dt_env_put(env, "PYTHONPATH", dir, DT_ENV_SET);
	value = malloc(strlen(dir) + strlen(pythonpath) + 2);
	if (!value)
		return -1;
	sprintf(value, "%s:%s", dir, pythonpath);
	rc = dt_env_put(env, "PYTHONPATH", value, DT_ENV_SET);
	free(value);
	return rc;
}
