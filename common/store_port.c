#include "config.h"

#include "store_port.h"

#include <stdlib.h>
#include <string.h>

/* A port in TEXT (all digits, 1-65535), or 0. */
static uint16_t port_of(const char *text)
{
	char *end;
	unsigned long port;

	if (!text || *text < '0' || *text > '9')
		return 0;
	port = strtoul(text, &end, 10);
	return *end == '\0' && port >= 1 && port <= 65535 ? (uint16_t)port : 0;
}

uint16_t dt_store_port(const struct dt_env *env)
{
	const char *endpoint = dt_env_get(env, "PET_RDZV_ENDPOINT");
	const char *colon;

	/* torchrun mode: the agents', whatever MASTER_PORT the user has. */
	if (endpoint)
		return (colon = strrchr(endpoint, ':')) ? port_of(colon + 1) : 0;
	return port_of(dt_env_get(env, "MASTER_PORT"));
}

/* Whether NAME (LEN bytes), a path, names python, python3, python3.11... */
static bool python_name(const char *name, size_t len)
{
	const char *base = name;

	for (size_t i = 0; i < len; i++)
		if (name[i] == '/')
			base = name + i + 1;
	len -= (size_t)(base - name);
	if (len < 6 || strncmp(base, "python", 6))
		return false;
	for (size_t i = 6; i < len; i++)
		if ((base[i] < '0' || base[i] > '9') && base[i] != '.')
			return false;
	return true;
}

/* Python's options in ARGS (N of them), up to the script: false when one
 * makes it ignore PYTHONPATH (-E, -I) or the site module (-S). */
static bool keeps_hook(int n, const char *const args[])
{
	for (int i = 0; i < n; i++) {
		const char *a = args[i];

		if (a[0] != '-' || !a[1] || !strcmp(a, "--"))
			return true;
		if (a[1] == '-')	/* --help, --version, ... */
			continue;
		for (const char *c = a + 1; *c; c++) {
			if (strchr("EIS", *c))
				return false;
			/* The rest of the command line is the program's. */
			if (*c == 'c' || *c == 'm')
				return true;
			/* The option's value: attached, or the next word. */
			if (*c == 'W' || *c == 'X') {
				if (!c[1])
					i++;
				break;
			}
		}
	}
	return true;
}

#define SHEBANG_WORDS 8

bool dt_runs_python(int argc, char *const argv[], const char *head,
		    size_t len)
{
	const char *words[SHEBANG_WORDS];
	char line[256];
	int n = 0, prog = 0;
	char *p, *save = NULL;

	if (argc < 1 || !argv || !argv[0])
		return false;
	if (python_name(argv[0], strlen(argv[0])))
		return keeps_hook(argc - 1, (const char *const *)argv + 1);
	if (!head || len < 3 || head[0] != '#' || head[1] != '!')
		return false;
	/* The first line, in words: interpreter, then its arguments. */
	if (len > sizeof(line) - 1)
		len = sizeof(line) - 1;
	memcpy(line, head + 2, len - 2);
	line[len - 2] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	for (p = strtok_r(line, " \t", &save); p && n < SHEBANG_WORDS;
	     p = strtok_r(NULL, " \t", &save))
		words[n++] = p;
	if (n == 0)
		return false;
	/* #!/usr/bin/env [-S] [NAME=VALUE...] python3 ... */
	if (!strcmp(words[0], "/usr/bin/env") || !strcmp(words[0], "/bin/env")) {
		for (prog = 1; prog < n; prog++) {
			/* An emptied environment has no PYTHONPATH. */
			if (!strcmp(words[prog], "-i") ||
			    !strcmp(words[prog], "-") ||
			    !strcmp(words[prog], "--ignore-environment"))
				return false;
			if (words[prog][0] != '-' && !strchr(words[prog], '='))
				break;
		}
		if (prog == n)
			return false;
	}
	return python_name(words[prog], strlen(words[prog])) &&
	       keeps_hook(n - prog - 1, words + prog + 1);
}
