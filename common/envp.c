#include "config.h"

#include "envp.h"

#include <string.h>

const char *dt_envp_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++) {
		/* The first byte before the call: a task's setup looks up
		 * some 60 names in slurmstepd's hundred and more. */
		if (n && (*envp)[0] != name[0])
			continue;
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	}
	return NULL;
}

const char *dt_envp_getenv(const char *name, void *arg)
{
	return dt_envp_get(arg, name);
}
