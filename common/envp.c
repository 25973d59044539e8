#include "config.h"

#include "envp.h"

#include <string.h>

const char *dt_envp_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

const char *dt_envp_getenv(const char *name, void *arg)
{
	return dt_envp_get(arg, name);
}
