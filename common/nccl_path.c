#include "config.h"

#include "nccl_path.h"

#include <stdio.h>
#include <string.h>

bool dt_is_python(const char *program)
{
	const char *base;

	if (!program || !*program)
		return false;
	base = strrchr(program, '/');
	base = base ? base + 1 : program;
	return !strncmp(base, "python", 6);
}

/* PREFIX's patterns, once each, into OUT at *N. */
static void add_prefix(const char *pip_path, const char *prefix, size_t len,
		       char out[][DT_NCCL_PATH_MAX], int max, int *n)
{
	static const char *const dirs[] = { "site-packages", "dist-packages" };

	if (!len || prefix[0] != '/')
		return;
	/* "/" itself becomes "", so that paths start "/lib". */
	while (len > 0 && prefix[len - 1] == '/')
		len--;
	for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
		char path[DT_NCCL_PATH_MAX];
		int w = snprintf(path, sizeof(path), "%.*s/lib/python3*/%s/%s",
				 (int)len, prefix, dirs[d], pip_path);
		bool seen = false;

		if (w < 0 || (size_t)w >= sizeof(path))
			continue;
		for (int i = 0; i < *n && !seen; i++)
			seen = !strcmp(out[i], path);
		if (!seen && *n < max)
			memcpy(out[(*n)++], path, (size_t)w + 1);
	}
}

/* The environment of an interpreter at PREFIX/bin/NAME: PREFIX. */
static void add_interpreter(const char *pip_path, const char *path,
			    char out[][DT_NCCL_PATH_MAX], int max, int *n)
{
	const char *slash;
	size_t len;

	if (!path || path[0] != '/')
		return;
	slash = strrchr(path, '/');
	len = (size_t)(slash - path);
	/* Up from the interpreter's folder (bin). */
	while (len > 0 && path[len - 1] != '/')
		len--;
	if (len > 0)
		add_prefix(pip_path, path, len, out, max, n);
}

int dt_nccl_candidates(const char *pip_path, const char *interpreter,
		       const char *real, const char *virtual_env,
		       const char *conda_prefix, char out[][DT_NCCL_PATH_MAX],
		       int max)
{
	int n = 0;

	if (!pip_path || !*pip_path)
		return 0;
	add_interpreter(pip_path, interpreter, out, max, &n);
	add_interpreter(pip_path, real, out, max, &n);
	if (virtual_env)
		add_prefix(pip_path, virtual_env, strlen(virtual_env), out,
			   max, &n);
	if (conda_prefix)
		add_prefix(pip_path, conda_prefix, strlen(conda_prefix), out,
			   max, &n);
	return n;
}
