#include "config.h"

#include "machine_cache_file.h"
#include "admin_path.h"
#include "error.h"
#include "fd_io.h"
#include "hwloc_machine.h"
#include "machine_cache.h"
#include "settings.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The first line of FILE, at most LEN - 1 bytes; "" when unreadable. */
static void first_line(const char *file, char *buf, size_t len)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* The names in DIR: how many, and a hash that ignores their order. */
static void names_of(const char *dir, unsigned *count, uint32_t *hash)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	*count = 0;
	*hash = 0;
	while (d && (e = readdir(d))) {
		uint32_t h = 2166136261u;	/* FNV-1a */

		if (e->d_name[0] == '.')
			continue;
		for (const char *c = e->d_name; *c; c++)
			h = (h ^ (uint8_t)*c) * 16777619u;
		*hash += h;
		(*count)++;
	}
	if (d)
		closedir(d);
}

int dt_node_fingerprint(char *buf, size_t len)
{
	char boot[64], cpus[256], nodes[256];
	unsigned npci, nnet, nkfd;
	uint32_t hpci, hnet, hkfd;
	int n;

	first_line("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
	first_line("/sys/devices/system/cpu/online", cpus, sizeof(cpus));
	first_line("/sys/devices/system/node/online", nodes, sizeof(nodes));
	names_of("/sys/bus/pci/devices", &npci, &hpci);
	names_of("/sys/class/net", &nnet, &hnet);
	/* An MI300's partitions change amdkfd's nodes, not its PCI. */
	names_of("/sys/class/kfd/kfd/topology/nodes", &nkfd, &hkfd);
	if (!boot[0] || !cpus[0])
		return -1;
	n = snprintf(buf, len, "v=%s boot=%s cpus=%s nodes=%s pci=%u:%08x "
		     "net=%u:%08x kfd=%u", PACKAGE_VERSION, boot, cpus,
		     nodes[0] ? nodes : "-", npci, hpci, nnet, hnet, nkfd);
	return n > 0 && (size_t)n < len && n < DT_FINGERPRINT_MAX ? 0 : -1;
}

/* PATH's folder, opened as common/admin_path.h says, and its last
 * name: see dt_admin_dir_open for what is returned. */
static int open_folder(const char *path, bool make, const char **name,
		       char *err, size_t errlen)
{
	char dir[DT_HELPER_PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (!slash || slash == path || !slash[1] ||
	    (size_t)(slash - path) >= sizeof(dir)) {
		dt_errf(err, errlen, "topology-cache=%s is not a path in a "
			"folder: set topology-cache= in plugstack.conf to a "
			"file such as /run/dist-train/machine, or to off",
			path);
		return -1;
	}
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	*name = slash + 1;
	return dt_admin_dir_open("topology-cache", dir, make, err, errlen);
}

int dt_machine_cache_read(const char *path, const char *fingerprint,
			  struct dt_machine *whole, char *err, size_t errlen)
{
	const char *name;
	int dir = open_folder(path, false, &name, err, errlen);
	int fd = -1;
	struct stat st;
	char *text = NULL;
	size_t got = 0;
	int rc = -1;

	if (dir == -2)
		return 1;
	if (dir < 0)
		return -1;
	fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
		    O_NONBLOCK);
	if (fd < 0) {
		rc = 1;
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 022)) {
		dt_errf(err, errlen, "%s is not a file only root can write, "
			"so it is ignored: remove it, or set topology-cache= "
			"in plugstack.conf to a folder only root can write",
			path);
		goto out;
	}
	if (st.st_size > DT_MACHINE_TEXT_MAX) {
		dt_errf(err, errlen, "%s is over %u bytes, so it is ignored: "
			"remove it, and the next step writes it again", path,
			DT_MACHINE_TEXT_MAX);
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		dt_errf(err, errlen, "out of memory");
		goto out;
	}
	got = dt_read_up_to(fd, text, (size_t)st.st_size);
	rc = dt_machine_parse(text, got, fingerprint, whole, err, errlen);
out:
	free(text);
	if (fd >= 0)
		close(fd);
	close(dir);
	return rc;
}

int dt_machine_cache_write(const char *path, const char *fingerprint,
			   struct dt_machine *whole, char *err, size_t errlen)
{
	char tmp[DT_HELPER_PATH_MAX + 32];
	const char *name;
	char *text = NULL;
	size_t len;
	int dir = -1, fd = -1, rc = 1;

	if (geteuid() != 0) {
		dt_errf(err, errlen, "only root writes %s: run slurmd as root, "
			"or set topology-cache=off in plugstack.conf", path);
		return -1;
	}
	if (dt_machine_discover_whole(whole, err, errlen) < 0)
		return -1;
	/* From here on the discovery stands, saved or not. The folder is
	 * opened once and checked: nothing below can be swapped. */
	dir = open_folder(path, true, &name, err, errlen);
	if (dir < 0)
		return 1;
	len = dt_machine_format(whole, fingerprint, NULL, 0);
	text = malloc(len + 1);
	snprintf(tmp, sizeof(tmp), ".%s.%ld", name, (long)getpid());
	if (!text || dt_machine_format(whole, fingerprint, text, len + 1) !=
	    len || ((fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_TRUNC |
				 O_NOFOLLOW | O_CLOEXEC, 0644)) < 0)) {
		dt_errf(err, errlen, "cannot write %s (%s): free space there, "
			"or set topology-cache= in plugstack.conf to another "
			"folder or to off", path,
			text ? strerror(errno) : "out of memory");
		goto out;
	}
	/* Written through before it takes the name: a crash leaves the old
	 * file or the new one, never an empty one. */
	if (fchmod(fd, 0644) < 0 || !dt_write_all(fd, text, len) ||
	    fsync(fd) < 0 || renameat(dir, tmp, dir, name) < 0) {
		dt_errf(err, errlen, "cannot write %s (%s): free space there, "
			"or set topology-cache= in plugstack.conf to another "
			"folder or to off", path, strerror(errno));
		unlinkat(dir, tmp, 0);
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	close(dir);
	free(text);
	return rc;
}

int dt_allowed_pus(bool **allowed, unsigned *n)
{
	unsigned max = 8192;
	cpu_set_t *set = CPU_ALLOC(max);
	size_t size = CPU_ALLOC_SIZE(max);

	*allowed = NULL;
	*n = 0;
	if (!set)
		return -1;
	if (sched_getaffinity(0, size, set) < 0 ||
	    !(*allowed = calloc(max, sizeof(**allowed)))) {
		CPU_FREE(set);
		return -1;
	}
	for (unsigned pu = 0; pu < max; pu++)
		(*allowed)[pu] = CPU_ISSET_S(pu, size, set);
	*n = max;
	CPU_FREE(set);
	return 0;
}
