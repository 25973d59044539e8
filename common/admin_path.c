#include "config.h"

#include "admin_path.h"
#include "error.h"
#include "settings.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIX "put it where only root can write: every folder above it " \
	"root's, mode 755, such as /usr/local/bin or /etc/dist-train"

/* 0 when ST, of NAME (a prefix of SETTING's PATH), is only root's to
 * change; -1 with the reason otherwise. */
static int only_root(const struct stat *st, const char *name,
		     const char *setting, const char *path, char *err,
		     size_t errlen)
{
	if (st->st_uid != 0) {
		dt_errf(err, errlen, "%s=%s: %s belongs to uid %u, not root: "
			FIX, setting, path, name, (unsigned)st->st_uid);
		return -1;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		dt_errf(err, errlen, "%s=%s: %s can be written by others than "
			"root (mode %04o): " FIX, setting, path, name,
			(unsigned)(st->st_mode & 07777));
		return -1;
	}
	return 0;
}

/*
 * Each existing prefix of PATH ("/", "/a", "/a/b", ...) only root's;
 * links are followed by the prefixes after them, and *LINKED says one
 * was seen (their targets' own folders are checked by the caller).
 */
static int check_chain(const char *setting, const char *path,
		       const char *shown, bool *linked, char *err,
		       size_t errlen)
{
	char prefix[PATH_MAX];
	size_t len = strlen(path), end = 1;
	struct stat st;

	if (len >= sizeof(prefix)) {
		dt_errf(err, errlen, "%s=%s: the path is too long: give a shorter "
			"one", setting, shown);
		return -1;
	}
	for (;;) {
		memcpy(prefix, path, end);
		prefix[end] = '\0';
		if (lstat(prefix, &st) < 0) {
			if (errno == ENOENT)
				return 0;
			dt_errf(err, errlen, "%s=%s: cannot check %s (%s): "
				FIX, setting, shown, prefix, strerror(errno));
			return -1;
		}
		if (S_ISLNK(st.st_mode))
			*linked = true;
		else if (only_root(&st, prefix, setting, shown, err,
				   errlen) < 0)
			return -1;
		if (end >= len)
			return 0;
		while (end < len && path[end] == '/')
			end++;
		while (end < len && path[end] != '/')
			end++;
	}
}

/* How many links in a row a path may go through, as the kernel allows. */
#define LINKS_MAX 40

/* PATH, SETTING's value SHOWN or a folder of it, as dt_admin_path_check
 * says; DEPTH: the links followed to get here. */
static int check_as(const char *setting, const char *path, const char *shown,
		    int depth, char *err, size_t errlen)
{
	char resolved[PATH_MAX], existing[PATH_MAX], next[PATH_MAX];
	char target[PATH_MAX], leads[PATH_MAX];
	bool linked = false, ignored = false;
	const char *rest;
	size_t first;
	ssize_t n;

	if (path[0] != '/') {
		dt_errf(err, errlen, "%s=%s: not an absolute path: give one that "
			"starts with /", setting, shown);
		return -1;
	}
	if (check_chain(setting, path, shown, &linked, err, errlen) < 0)
		return -1;
	if (!linked)
		return 0;
	/* Where the links lead: the longest prefix that exists. */
	snprintf(existing, sizeof(existing), "%s", path);
	while (!realpath(existing, resolved)) {
		char *slash = strrchr(existing, '/');

		if (errno != ENOENT && errno != ENOTDIR) {
			dt_errf(err, errlen, "%s=%s: cannot check %s (%s): "
				FIX, setting, shown, existing,
				strerror(errno));
			return -1;
		}
		if (!slash || slash == existing)
			return 0;
		*slash = '\0';
	}
	if (check_chain(setting, resolved, shown, &ignored, err, errlen) < 0)
		return -1;
	/* The first missing component may be a link that leads nowhere yet:
	 * whoever may write where it leads could make the file later, so
	 * the folders there are checked too. */
	rest = path + strlen(existing);
	if (rest[0] != '/')
		return 0;
	first = strcspn(rest + 1, "/");
	if (snprintf(next, sizeof(next), "%s/%.*s", strcmp(resolved, "/") ?
		     resolved : "", (int)first, rest + 1) >= (int)sizeof(next))
		return 0;
	n = readlink(next, target, sizeof(target) - 1);
	if (n <= 0)
		return 0;	/* missing, and under root's folders */
	target[n] = '\0';
	if (depth >= LINKS_MAX) {
		dt_errf(err, errlen, "%s=%s: too many links in a row at %s: "
			FIX, setting, shown, next);
		return -1;
	}
	if (snprintf(leads, sizeof(leads), "%s%s%s%s",
		     target[0] == '/' ? "" : resolved,
		     target[0] == '/' || !strcmp(resolved, "/") ? "" : "/",
		     target, rest + 1 + first) >= (int)sizeof(leads)) {
		dt_errf(err, errlen, "%s=%s: the path is too long: give a "
			"shorter one", setting, shown);
		return -1;
	}
	return check_as(setting, leads, shown, depth + 1, err, errlen);
}

int dt_admin_path_check(const char *setting, const char *path, char *err,
			size_t errlen)
{
	return check_as(setting, path, path, 0, err, errlen);
}

int dt_admin_paths_check(const struct dt_config *cfg, char *err,
			 size_t errlen)
{
	char hook[DT_HELPER_PATH_MAX + 32], cache_dir[DT_HELPER_PATH_MAX];
	const char *slash = strrchr(cfg->worker_lib, '/');

	if (cfg->helper[0] &&
	    dt_admin_path_check("helper", cfg->helper, err, errlen) < 0)
		return -1;
	if (cfg->worker_lib[0] &&
	    dt_admin_path_check("worker-lib", cfg->worker_lib, err,
				errlen) < 0)
		return -1;
	/* The Python hook that tasks import, beside the worker library. */
	if (slash) {
		snprintf(hook, sizeof(hook), "%.*s/python/sitecustomize.py",
			 (int)(slash - cfg->worker_lib), cfg->worker_lib);
		if (check_as("worker-lib", hook, cfg->worker_lib, 0, err,
			     errlen) < 0)
			return -1;
	}
	/* With a node's name still to come (srun, sbatch), it is checked
	 * on each node, where dt_config_for_node has put it in. */
	if (cfg->topology[0] && !strstr(cfg->topology, DT_NODE_PLACEHOLDER) &&
	    dt_admin_path_check("topology", cfg->topology, err, errlen) < 0)
		return -1;
	/* The cache's folders; the file itself, rewritten by the plugin, is
	 * ignored when it is not root's alone (common/machine_cache_file.c). */
	snprintf(cache_dir, sizeof(cache_dir), "%s", cfg->topology_cache);
	if (strrchr(cache_dir, '/'))
		*strrchr(cache_dir, '/') = '\0';
	if (cache_dir[0] &&
	    check_as("topology-cache", cache_dir, cfg->topology_cache, 0,
		     err, errlen) < 0)
		return -1;
	return 0;
}

int dt_admin_dir_open(const char *setting, const char *dir, bool make,
		      char *err, size_t errlen)
{
	char resolved[PATH_MAX], parent[PATH_MAX];
	const char *last = NULL;
	char *component, *save = NULL;
	int fd = -1, next;
	struct stat st;

	if (dt_admin_path_check(setting, dir, err, errlen) < 0)
		return -1;
	if (!realpath(dir, resolved)) {
		char *slash;

		if (errno != ENOENT)
			goto unreadable;
		/* Missing: its parent's resolved path, and its name. */
		snprintf(parent, sizeof(parent), "%s", dir);
		slash = strrchr(parent, '/');
		if (!make)
			return -2;
		if (!slash || !slash[1])
			goto unreadable;
		*slash = '\0';
		last = slash + 1;
		if (!realpath(parent[0] ? parent : "/", resolved))
			goto unreadable;
	}
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (component = strtok_r(resolved, "/", &save); fd >= 0;
	     component = strtok_r(NULL, "/", &save)) {
		if (!component) {
			if (!last)
				break;
			if (mkdirat(fd, last, 0755) < 0 && errno != EEXIST)
				goto unreadable;
			component = (char *)last;
			last = NULL;
		}
		next = openat(fd, component, O_RDONLY | O_DIRECTORY |
			      O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
		if (fd < 0 || fstat(fd, &st) < 0)
			goto unreadable;
		if (only_root(&st, component, setting, dir, err, errlen) < 0)
			goto fail;
	}
	if (fd < 0)
		goto unreadable;
	return fd;
unreadable:
	dt_errf(err, errlen, "%s=%s: cannot open the folder %s (%s): make "
		"it, root's, mode 755, or set %s= in plugstack.conf to another "
		"folder", setting, dir, dir, strerror(errno), setting);
fail:
	if (fd >= 0)
		close(fd);
	return -1;
}
