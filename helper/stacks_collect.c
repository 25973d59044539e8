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
 *   C PID TEXT                   PID's newest NCCL collective, from the
 *                                flight recorder dump it wrote when asked
 *   F PATH                       an NCCL flight recorder dump of the step
 *
 * The hook (helper/python/sitecustomize.py) registers faulthandler for
 * SIGURG, writing into a memory file named "dist-train-stacks"; its
 * descriptor, opened here through /proc, shows what was written. Where
 * torch's flight recorder runs, torch watches a named pipe of the rank's
 * own (made where TORCH_NCCL_DEBUG_INFO_PIPE_FILE says, which the hook
 * sets): a byte written into it, through /proc too, makes torch write a
 * dump of the rank's collectives.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "../common/fr_dump.h"
#include "../common/net.h"
#include "stacks.h"

#define MEMFD_LINK "/memfd:dist-train-stacks"
/* The hook's folder for torch's dump pipes, and the pipes' ending. */
#define PIPE_FOLDER "/dist-train-nccl-"
#define PIPE_END ".pipe"
/* torch's monitor thread looks at the pipe now and then: 7 s was seen. */
#define FR_WAIT_MS 15000
/* 2,000 entries (the hook's buffer), each with its frames. */
#define FR_DUMP_MAX (64u << 20)
/* Bounds on what one process can make this read. */
#define ENVIRON_MAX (4u << 20)
#define DUMP_MAX (4u << 20)
#define PROCS_MAX 65536
/* A dump is complete once its file stops growing for this long. */
#define SETTLE_MS 150

struct step_proc {
	pid_t pid, ppid;
	uid_t uid;		/* its owner */
	long rank, world;	/* -1: none */
	int memfd;		/* its descriptor number; -1: none */
	int dump_pipe;		/* torch's dump pipe's; -1: none */
	char *dump;		/* where torch writes its dump; NULL: none */
	struct timespec dump_mtime;	/* the dump's, before it was asked */
	off_t dump_seen;
	long long dump_changed_ms;	/* 0: not since it was asked */
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

static bool is_control(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

static bool has_control(const char *text)
{
	for (; *text; text++)
		if (is_control((unsigned char)*text))
			return true;
	return false;
}

void stacks_printable(char *text)
{
	for (; *text; text++)
		if (is_control((unsigned char)*text))
			*text = '?';
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

/* Whether LINK is the dump pipe of torch's flight recorder: in the
 * hook's folder, or where the program's own PIPE_PREFIX says. */
static bool is_dump_pipe(const char *link, const char *pipe_prefix)
{
	size_t n = strlen(link), end = strlen(PIPE_END);

	if (n < end || strcmp(link + n - end, PIPE_END))
		return false;
	if (pipe_prefix && *pipe_prefix &&
	    !strncmp(link, pipe_prefix, strlen(pipe_prefix)))
		return true;
	return strstr(link, PIPE_FOLDER) != NULL;
}

/* P's memory file for stacks, and torch's dump pipe. */
static void find_descriptors(struct step_proc *p, const char *pipe_prefix)
{
	char path[64], link[4096];
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
		if (p->dump_pipe < 0 && is_dump_pipe(link, pipe_prefix))
			p->dump_pipe = atoi(d->d_name);
		if (p->memfd >= 0 ||
		    strncmp(link, MEMFD_LINK, strlen(MEMFD_LINK)) ||
		    stat(fdpath, &st) < 0)
			continue;
		p->memfd = atoi(d->d_name);
		p->ino = st.st_ino;
	}
	closedir(dir);
}

/* The first of NAMES set in the NUL-separated ENV (LEN bytes), or NULL. */
static const char *env_first(const char *env, size_t len,
			     const char *const *names)
{
	const char *v = NULL;

	for (; !v && *names; names++)
		v = env_value(env, len, *names);
	return v && *v ? v : NULL;
}

/* Where P's torch writes the dump it is asked for: PREFIX (the
 * program's own setting, else the hook's name in the record folder)
 * followed by the rank, as torch names it. */
static void find_dump(struct step_proc *p, const char *prefix,
		      const char *record_dir, const char *step)
{
	char *path = NULL;
	int n;

	if (p->dump_pipe < 0 || p->rank < 0)
		return;
	if (prefix && prefix[0] == '/')
		n = asprintf(&path, "%s%ld", prefix, p->rank);
	else if (prefix)
		n = asprintf(&path, "/proc/%d/cwd/%s%ld", (int)p->pid, prefix,
			     p->rank);
	else if (record_dir[0])
		n = asprintf(&path, "%s/dist-train-%s.nccl-rank-%ld",
			     record_dir, step, p->rank);
	else
		return;
	p->dump = n < 0 ? NULL : path;
}

/* Whether PID is a process of STEP, this user's; fills P. */
static bool step_process(pid_t pid, const char *step, struct step_proc *p,
			 char *record_dir, size_t record_len)
{
	static const char *const pipe_names[] = {
		"TORCH_NCCL_DEBUG_INFO_PIPE_FILE",
		"TORCH_FR_DEBUG_INFO_PIPE_FILE", NULL
	};
	/* torch 2.11 takes the newer name first. */
	static const char *const dump_names[] = {
		"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
		NULL
	};
	const char *v, *node;
	char path[64], *comm;
	struct stat st;
	size_t len, comm_len;
	char *env;
	bool ours = false;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) < 0 || st.st_uid != getuid())
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
	p->uid = st.st_uid;
	p->memfd = p->fd = p->dump_pipe = -1;
	v = env_value(env, len, "RANK");
	p->rank = v && *v ? strtol(v, NULL, 10) : -1;
	v = env_value(env, len, "WORLD_SIZE");
	p->world = v && *v ? strtol(v, NULL, 10) : -1;
	v = env_value(env, len, "SLURM_DIST_TRAIN_RECORD_DIR");
	if (v && !record_dir[0] && strlen(v) < record_len &&
	    !has_control(v))
		strcpy(record_dir, v);
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	comm = read_bounded(path, sizeof(p->comm) - 1, &comm_len);
	if (comm) {
		comm[strcspn(comm, "\n")] = '\0';
		stacks_printable(comm);
		strcpy(p->comm, comm);
		free(comm);
	}
	p->ppid = parent_of(pid);
	find_descriptors(p, env_first(env, len, pipe_names));
	find_dump(p, env_first(env, len, dump_names), record_dir, step);
out:
	free(env);
	return ours;
}

/* Ask P's torch for a dump through its pipe; 0 once asked. */
static int ask_dump(struct step_proc *p)
{
	char path[96];
	struct stat st, opened;
	int fd, rc = -1;

	if (!p->dump)
		return -1;
	if (stat(p->dump, &st) == 0) {
		p->dump_mtime = st.st_mtim;
		p->dump_seen = st.st_size;
	} else {
		p->dump_seen = -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)p->pid,
		 p->dump_pipe);
	/* Only a pipe of the user's is opened, and written once it is still
	 * the one looked at. Non-blocking: a pipe nobody reads any more
	 * fails, never waits. */
	if (stat(path, &st) < 0 || !S_ISFIFO(st.st_mode) ||
	    st.st_uid != getuid())
		return -1;
	fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &opened) == 0 && S_ISFIFO(opened.st_mode) &&
	    opened.st_dev == st.st_dev && opened.st_ino == st.st_ino &&
	    write(fd, "1", 1) == 1)
		rc = 0;
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Whether P's dump is new since it was asked and has stopped growing;
 * NOW: the time. */
static bool dump_ready(struct step_proc *p, long long now)
{
	struct stat st;

	if (stat(p->dump, &st) < 0)
		return false;
	if (st.st_size != p->dump_seen ||
	    (!p->dump_changed_ms &&
	     (st.st_mtim.tv_sec != p->dump_mtime.tv_sec ||
	      st.st_mtim.tv_nsec != p->dump_mtime.tv_nsec))) {
		p->dump_seen = st.st_size;
		p->dump_changed_ms = now;
		return false;
	}
	return p->dump_changed_ms && now - p->dump_changed_ms >= SETTLE_MS;
}

/* P's dump (malloc'd, LEN bytes), where it is a regular file of P's
 * owner, not a link, of at most FR_DUMP_MAX bytes; NULL with errno
 * otherwise. */
static unsigned char *read_dump(const struct step_proc *p, size_t *len)
{
	int fd = open(p->dump, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	unsigned char *buf = NULL;
	size_t size, used = 0;
	struct stat st;
	ssize_t n;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0)
		goto out;
	errno = EPERM;
	if (!S_ISREG(st.st_mode) || st.st_uid != p->uid ||
	    st.st_size > (off_t)FR_DUMP_MAX)
		goto out;
	size = (size_t)st.st_size;
	buf = malloc(size + 1);
	while (buf && used < size && (n = read(fd, buf + used, size - used))) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			buf = NULL;
			break;
		}
		used += (size_t)n;
	}
	*len = used;
out:
	close(fd);
	return buf;
}

/* "C PID TEXT": what P's dump says of its newest collective. */
static void print_collective(const struct step_proc *p, bool ready)
{
	char newest[DT_FR_NEWEST_MAX] = "";
	unsigned char *dump;
	size_t len = 0;

	if (!ready) {
		printf("C %d <no flight recorder dump within %d s of asking "
		       "torch for one>\n", (int)p->pid, FR_WAIT_MS / 1000);
		return;
	}
	dump = read_dump(p, &len);
	if (!dump)
		snprintf(newest, sizeof(newest), "cannot read its dump: %s",
			 errno == EPERM ? "not a file of the rank's user, "
			 "or over 64 MiB" : strerror(errno));
	else
		dt_fr_newest(dump, len, newest, sizeof(newest));
	printf("C %d %s%s%s\n", (int)p->pid, dump ? "" : "<", newest,
	       dump ? "" : ">");
	free(dump);
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
			putchar(p[i] == '\r' ? ' ' :
				is_control((unsigned char)p[i]) ? '?' : p[i]);
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
		if (!strncmp(d->d_name, prefix, strlen(prefix)) &&
		    !has_control(d->d_name))
			printf("F %s/%s\n", dir, d->d_name);
	closedir(folder);
}

int stacks_become_user(const char *uid_text)
{
	struct passwd *pw;
	char *end;
	unsigned long uid;

	if (getuid() != 0 && geteuid() != 0)
		return 0;	/* the user's own: the kernel checks the rest */
	errno = 0;
	uid = uid_text ? strtoul(uid_text, &end, 10) : 0;
	if (!uid_text || errno || *end || end == uid_text ||
	    uid > 0x7fffffffUL) {
		helper_error("run as root, this needs the step's user from "
			     "slurmctld; run '" DT_NAME " stacks JOB.STEP' "
			     "itself, not its --collect part");
		return -1;
	}
	if (uid == 0)
		return 0;	/* root's own job */
	pw = getpwuid((uid_t)uid);
	if (!pw || setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 ||
	    setuid((uid_t)uid) < 0 || getuid() != (uid_t)uid ||
	    geteuid() != (uid_t)uid) {
		helper_error("cannot become user %lu, the step's, on this "
			     "node (%s): check that the user exists here as "
			     "on the login node", uid,
			     pw ? strerror(errno) : "no such user");
		return -1;
	}
	return 0;
}

int stacks_collect(const char *step, const char *step_uid, unsigned wait_ms)
{
	struct step_proc *procs = calloc(PROCS_MAX, sizeof(*procs));
	char host[256] = "", record_dir[4096] = "";
	size_t n = 0, pending = 0, dumps_pending = 0;
	long long deadline, dumps_deadline;
	bool *dump_ready_seen = NULL;
	struct dirent *d;
	DIR *proc = NULL;
	int rc = 1;

	if (stacks_become_user(step_uid) < 0)
		goto out;
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
	dumps_deadline = (long long)now_ms() + FR_WAIT_MS;
	dump_ready_seen = calloc(n ? n : 1, sizeof(*dump_ready_seen));
	if (!dump_ready_seen) {
		helper_error("out of memory");
		goto out;
	}
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
		/* Only of the process that answers for its rank: a forked
		 * child shares its parent's pipe. */
		if (p->target && ask_dump(p) == 0)
			dumps_pending++;
		else if (p->dump) {
			free(p->dump);
			p->dump = NULL;
		}
		if (p->target || p->rank >= 0)
			printf("P %d %ld %ld %d %s\n", (int)p->pid,
			       p->rank, p->world, p->target ? 1 : 0,
			       p->comm[0] ? p->comm : "?");
	}
	/* faulthandler writes from the signal handler, at once: wait until
	 * each file has grown and then stayed still. */
	while ((pending && (long long)now_ms() < deadline) ||
	       (dumps_pending && (long long)now_ms() < dumps_deadline)) {
		struct timespec tick = { 0, 20 * 1000000L };
		long long now;

		nanosleep(&tick, NULL);
		now = (long long)now_ms();
		pending = dumps_pending = 0;
		for (size_t i = 0; i < n; i++) {
			struct step_proc *p = &procs[i];
			struct stat st;

			if (p->dump && !dump_ready_seen[i]) {
				dump_ready_seen[i] = dump_ready(p, now);
				dumps_pending += !dump_ready_seen[i];
			}
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
	for (size_t i = 0; i < n; i++)
		if (procs[i].dump)
			print_collective(&procs[i], dump_ready_seen[i]);
	print_flight_recorder(record_dir, step);
	rc = fflush(stdout) == 0 ? 0 : 1;
out:
	for (size_t i = 0; i < n; i++) {
		if (procs[i].fd >= 0)
			close(procs[i].fd);
		free(procs[i].dump);
	}
	free(dump_ready_seen);
	if (proc)
		closedir(proc);
	free(procs);
	return rc;
}
