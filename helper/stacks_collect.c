/*
 * dist-train stacks, on each node of the step (started there by srun as
 * the job's owner, helper/cmd_stacks.c): find the step's processes, ask
 * each Python one for its stacks and print them, one record a line, for
 * the command that started it:
 *
 *   H HOST                       this node
 *   P PID RANK WORLD PY COMM     a process of the step (RANK, WORLD: -1
 *                                for none; PY 1: it was asked, 0: not
 *                                Python with the dist-train hook)
 *   S PID TEXT                   a line of what PID wrote (none: it did
 *                                not answer in time)
 *   F PATH                       an NCCL flight recorder dump of the step
 *
 * The hook (helper/python/sitecustomize.py) registers faulthandler for
 * SIGURG, writing into a memory file named "dist-train-stacks"; its
 * descriptor, opened here through /proc, shows what was written.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "../common/net.h"
#include "stacks.h"

#define MEMFD_LINK "/memfd:dist-train-stacks"
/* Bounds on what one process can make this read. */
#define ENVIRON_MAX (4u << 20)
#define DUMP_MAX (4u << 20)
#define PROCS_MAX 65536
/* A dump is complete once its file stops growing for this long. */
#define SETTLE_MS 150

struct step_proc {
	pid_t pid, ppid;
	long rank, world;	/* -1: none */
	int memfd;		/* its descriptor number; -1: none */
	ino_t ino;
	char comm[32];
	int fd;			/* ours on its memory file; -1: none */
	off_t before;		/* its size before the signal */
	off_t seen;		/* and as last seen */
	long long changed_ms;	/* when it last changed */
	bool target;
};

/* Up to MAX bytes of PATH, NUL-terminated (malloc'd); NULL on error. */
static char *read_bounded(const char *path, size_t max, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t used = 0;
	ssize_t n;

	if (fd < 0)
		return NULL;
	buf = malloc(max + 1);
	if (!buf)
		goto out;
	while (used < max && (n = read(fd, buf + used, max - used)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			free(buf);
			buf = NULL;
			goto out;
		}
		used += (size_t)n;
	}
	buf[used] = '\0';
	*len = used;
out:
	close(fd);
	return buf;
}

/* NAME's value in the NUL-separated ENV (LEN bytes), or NULL. */
static const char *env_value(const char *env, size_t len, const char *name)
{
	size_t nlen = strlen(name);

	for (const char *p = env; p < env + len; p += strlen(p) + 1)
		if (!strncmp(p, name, nlen) && p[nlen] == '=')
			return p + nlen + 1;
	return NULL;
}

static pid_t parent_of(pid_t pid)
{
	char path[64], *stat, *close_paren;
	size_t len;
	int ppid = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	stat = read_bounded(path, 4096, &len);
	if (!stat)
		return 0;
	/* The command name may hold anything, ")" included. */
	close_paren = strrchr(stat, ')');
	if (close_paren)
		sscanf(close_paren + 1, " %*c %d", &ppid);
	free(stat);
	return (pid_t)ppid;
}

static void find_memfd(struct step_proc *p)
{
	char path[64], link[128];
	struct dirent *d;
	struct stat st;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)p->pid);
	dir = opendir(path);
	if (!dir)
		return;
	while ((d = readdir(dir))) {
		char fdpath[320];
		ssize_t n;

		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, d->d_name);
		n = readlink(fdpath, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = '\0';
		if (strncmp(link, MEMFD_LINK, strlen(MEMFD_LINK)) ||
		    stat(fdpath, &st) < 0)
			continue;
		p->memfd = atoi(d->d_name);
		p->ino = st.st_ino;
		break;
	}
	closedir(dir);
}

/* Whether PID is a process of STEP, this user's; fills P. */
static bool step_process(pid_t pid, const char *step, struct step_proc *p,
			 char *record_dir, size_t record_len)
{
	const char *v, *node;
	char path[64];
	struct stat st;
	size_t len;
	char *env;
	bool ours = false;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) < 0 || (getuid() != 0 && st.st_uid != getuid()))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	env = read_bounded(path, ENVIRON_MAX, &len);
	if (!env)
		return false;
	v = env_value(env, len, "DIST_TRAIN_STEP");
	if (!v || strcmp(v, step))
		goto out;
	/* Where several slurmd share a host (multiple-slurmd, the test
	 * cluster), each node answers for its own tasks only. */
	node = getenv("SLURMD_NODENAME");
	v = env_value(env, len, "SLURMD_NODENAME");
	if (node && v && strcmp(v, node))
		goto out;
	ours = true;
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->memfd = p->fd = -1;
	v = env_value(env, len, "RANK");
	p->rank = v && *v ? strtol(v, NULL, 10) : -1;
	v = env_value(env, len, "WORLD_SIZE");
	p->world = v && *v ? strtol(v, NULL, 10) : -1;
	v = env_value(env, len, "SLURM_DIST_TRAIN_RECORD_DIR");
	if (v && !record_dir[0] && strlen(v) < record_len)
		strcpy(record_dir, v);
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	free(env);
	env = read_bounded(path, sizeof(p->comm) - 1, &len);
	if (env) {
		env[strcspn(env, "\n")] = '\0';
		strcpy(p->comm, env);
	}
	p->ppid = parent_of(pid);
	find_memfd(p);
out:
	free(env);
	return ours;
}

/* Each line of TEXT (LEN bytes) as "S PID line". */
static void print_lines(pid_t pid, const char *text, size_t len)
{
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		printf("S %d ", (int)pid);
		for (size_t i = 0; i < n; i++)
			putchar(p[i] == '\r' ? ' ' : p[i]);
		putchar('\n');
		p += n + 1;
	}
}

/* The dumps the flight recorder left in the step's record folder. */
static void print_flight_recorder(const char *dir, const char *step)
{
	char prefix[128];
	struct dirent *d;
	DIR *folder;

	if (!dir[0] || !(folder = opendir(dir)))
		return;
	snprintf(prefix, sizeof(prefix), "dist-train-%s.nccl-rank-", step);
	while ((d = readdir(folder)))
		if (!strncmp(d->d_name, prefix, strlen(prefix)))
			printf("F %s/%s\n", dir, d->d_name);
	closedir(folder);
}

int stacks_collect(const char *step, unsigned wait_ms)
{
	struct step_proc *procs = calloc(PROCS_MAX, sizeof(*procs));
	char host[256] = "", record_dir[4096] = "";
	size_t n = 0, pending = 0;
	long long deadline;
	struct dirent *d;
	DIR *proc = NULL;
	int rc = 1;

	if (!procs) {
		helper_error("out of memory");
		goto out;
	}
	proc = opendir("/proc");
	if (!proc) {
		helper_error("cannot read /proc (%s): ask your administrator to "
			     "mount it on this node", strerror(errno));
		goto out;
	}
	while ((d = readdir(proc)) && n < PROCS_MAX) {
		pid_t pid = (pid_t)atoi(d->d_name);

		if (pid > 0 && pid != getpid() &&
		    step_process(pid, step, &procs[n], record_dir,
				 sizeof(record_dir)))
			n++;
	}
	/* A forked child shares its parent's memory file, and answers for
	 * it: only the process that made it is asked. */
	for (size_t i = 0; i < n; i++) {
		procs[i].target = procs[i].memfd >= 0;
		for (size_t j = 0; j < n && procs[i].target; j++)
			if (procs[j].pid == procs[i].ppid &&
			    procs[j].memfd >= 0 && procs[j].ino == procs[i].ino)
				procs[i].target = false;
	}
	/* Slurm's name for this node, as squeue shows it. */
	if (getenv("SLURMD_NODENAME"))
		snprintf(host, sizeof(host), "%s", getenv("SLURMD_NODENAME"));
	else
		gethostname(host, sizeof(host) - 1);
	host[strcspn(host, ". \n")] = '\0';
	printf("H %s\n", host);
	deadline = (long long)now_ms() + wait_ms;
	for (size_t i = 0; i < n; i++) {
		struct step_proc *p = &procs[i];
		char path[96];
		struct stat st;

		if (p->target) {
			snprintf(path, sizeof(path), "/proc/%d/fd/%d",
				 (int)p->pid, p->memfd);
			p->fd = open(path, O_RDONLY | O_CLOEXEC);
			if (p->fd >= 0 && fstat(p->fd, &st) == 0 &&
			    kill(p->pid, SIGURG) == 0) {
				p->before = p->seen = st.st_size;
				pending++;
			} else if (p->fd >= 0) {
				close(p->fd);
				p->fd = -1;
			}
		}
		if (p->target || p->rank >= 0)
			printf("P %d %ld %ld %d %s\n", (int)p->pid,
			       p->rank, p->world, p->target ? 1 : 0,
			       p->comm[0] ? p->comm : "?");
	}
	/* faulthandler writes from the signal handler, at once: wait until
	 * each file has grown and then stayed still. */
	while (pending && (long long)now_ms() < deadline) {
		struct timespec tick = { 0, 20 * 1000000L };
		long long now;

		nanosleep(&tick, NULL);
		now = (long long)now_ms();
		pending = 0;
		for (size_t i = 0; i < n; i++) {
			struct step_proc *p = &procs[i];
			struct stat st;

			if (p->fd < 0)
				continue;
			if (fstat(p->fd, &st) == 0 && st.st_size != p->seen) {
				p->seen = st.st_size;
				p->changed_ms = now;
			}
			if (p->seen <= p->before ||
			    now - p->changed_ms < SETTLE_MS)
				pending++;
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct step_proc *p = &procs[i];
		size_t len = p->seen > p->before ?
			     (size_t)(p->seen - p->before) : 0;
		char *text;
		ssize_t got;

		if (p->fd < 0 || len == 0)
			continue;
		/* The newest dump only, up to DUMP_MAX of its end. */
		if (len > DUMP_MAX) {
			p->before = p->seen - DUMP_MAX;
			len = DUMP_MAX;
		}
		text = malloc(len);
		got = text ? pread(p->fd, text, len, p->before) : -1;
		if (got > 0)
			print_lines(p->pid, text, (size_t)got);
		free(text);
	}
	print_flight_recorder(record_dir, step);
	rc = fflush(stdout) == 0 ? 0 : 1;
out:
	for (size_t i = 0; i < n; i++)
		if (procs[i].fd >= 0)
			close(procs[i].fd);
	if (proc)
		closedir(proc);
	free(procs);
	return rc;
}
