// SPDX-License-Identifier: GPL-2.0
/*
 * The process a guard scenario runs in a sandbox: makes exactly one access
 * (or one small, fixed sequence for the controls) and reports on stdout:
 *
 *   ok            the access succeeded (exit status 0)
 *   errno N       it failed with errno N (exit status 1)
 *
 * and, after "ok", "read-failed N" when an open succeeded but reading its
 * first byte failed with errno N (some /proc files check access at read
 * time, not at open: the landlock suite tells the two apart).
 *
 * A process killed by the signal enforcer reports nothing: its parent sees
 * SIGKILL. Plain C and raw system calls, so that what the kernel sees is
 * exactly what the scenario names.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/kcmp.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

/* The errno of the last failed read in open_read (0: none). */
static int read_errno;

static int report(long rc)
{
	if (rc < 0) {
		printf("errno %d\n", errno);
		fflush(stdout);
		return 1;
	}
	printf("ok\n");
	if (read_errno)
		printf("read-failed %d\n", read_errno);
	fflush(stdout);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: sf_guard_actor ACTION ARGS...\n");
	return 2;
}

static long open_read(const char *path)
{
	char c;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (read(fd, &c, 1) < 0)
		read_errno = errno;
	close(fd);
	return 0;
}

static long write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	long n;

	if (fd < 0)
		return -1;
	n = write(fd, data, strlen(data));
	close(fd);
	return n < 0 ? -1 : 0;
}

/* A 32-bit system call (int $0x80) from this 64-bit process. */
static long syscall32(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("int $0x80"
			 : "=a"(ret)
			 : "a"(nr), "b"(a), "c"(b), "d"(c)
			 : "memory", "r8", "r9", "r10", "r11");
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/* The same with a fourth argument (esi). */
static long syscall32_4(long nr, long a, long b, long c, long d)
{
	long ret;

	__asm__ volatile("int $0x80"
			 : "=a"(ret)
			 : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d)
			 : "memory", "r8", "r9", "r10", "r11");
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/* Memory a 32-bit call can point at (below 4 GiB). */
static char *low_string(const char *s)
{
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	strncpy(p, s, 4095);
	return p;
}

static long ptrace_attach(pid_t pid, long request)
{
	if (ptrace(request, pid, NULL, NULL) < 0)
		return -1;
	if (request == PTRACE_ATTACH)
		waitpid(pid, NULL, __WALL);
	ptrace(PTRACE_DETACH, pid, NULL, NULL);
	return 0;
}

static long vm_readv(pid_t pid, uintptr_t addr, size_t len)
{
	char buf[256];
	struct iovec local = { buf, len < sizeof(buf) ? len : sizeof(buf) };
	struct iovec remote = { (void *)addr, local.iov_len };

	return process_vm_readv(pid, &local, 1, &remote, 1, 0) < 0 ? -1 : 0;
}

static long vm_writev(pid_t pid, uintptr_t addr, const char *text)
{
	struct iovec local = { (void *)text, strlen(text) + 1 };
	struct iovec remote = { (void *)addr, local.iov_len };

	return process_vm_writev(pid, &local, 1, &remote, 1, 0) < 0 ? -1 : 0;
}

static long pidfd_getfd(pid_t pid, int fd)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	long got;

	if (pidfd < 0)
		return -1;
	got = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	if (got >= 0)
		close((int)got);
	return got < 0 ? -1 : 0;
}

static long clone_into_cgroup(const char *dir)
{
	struct clone_args args;
	int cgfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int status;
	long pid;

	if (cgfd < 0)
		return -1;
	memset(&args, 0, sizeof(args));
	args.flags = CLONE_INTO_CGROUP;
	args.exit_signal = SIGCHLD;
	args.cgroup = (uint64_t)cgfd;
	pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid == 0) {
		static const char ran[] = "child-ran\n";

		(void)!write(1, ran, sizeof(ran) - 1);
		_exit(0);
	}
	if (pid < 0)
		return -1;
	waitpid((pid_t)pid, &status, 0);
	return 0;
}

static pid_t sleeping_child(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		for (;;)
			pause();
	}
	return pid;
}

static void end_child(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* A debugger's first steps on its own child: attach, read, detach. */
static long own_child_trace(void)
{
	char path[64];
	pid_t pid = sleeping_child();
	long rc = -1;

	if (pid < 0)
		return -1;
	if (ptrace(PTRACE_ATTACH, pid, NULL, NULL) == 0) {
		waitpid(pid, NULL, __WALL);
		snprintf(path, sizeof(path), "/proc/%d/mem", pid);
		if (open_read(path) == 0 &&
		    ptrace(PTRACE_PEEKDATA, pid, (void *)&path, NULL) != -1)
			rc = 0;
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
	}
	end_child(pid);
	return rc;
}

/* A child that asks its own parent (us) to trace it. */
static long own_child_traceme(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
			_exit(3);
		raise(SIGSTOP);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return -1;
	if (!WIFSTOPPED(status)) {
		errno = ECHILD;
		return -1;
	}
	ptrace(PTRACE_CONT, pid, NULL, NULL);
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		errno = ECHILD;
		return -1;
	}
	return 0;
}

/* What ps and a debugger read of one's own processes. */
static long own_proc_reads(void)
{
	static const char *const files[] = {
		"environ", "maps", "smaps", "mem", "stat", "status", "cmdline",
		"auxv", "fd", "fdinfo/10", "exe", "cwd", "root", "fd/10", "task",
	};
	char path[64];
	int null = open("/dev/null", O_RDONLY);
	pid_t pid;
	long rc = 0;

	/* A file the child holds that we may open again (not the console). */
	if (null < 0 || dup2(null, 10) != 10)
		return -1;
	pid = sleeping_child();
	if (pid < 0)
		return -1;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", pid, files[i]);
		if (open_read(path) != 0) {
			fprintf(stderr, "%s: %s\n", path, strerror(errno));
			rc = -1;
			break;
		}
	}
	end_child(pid);
	return rc;
}

/*
 * A minimal io_uring: raw system calls, one submission at a time, waiting
 * for its completion. No liburing, so that what the kernel sees is exactly
 * what the scenario names.
 */
struct ring {
	int fd;
	char *sq, *cq;
	struct io_uring_sqe *sqes;
	struct io_uring_params p;
};

static int ring_setup(struct ring *r)
{
	size_t sq_size, cq_size;

	memset(r, 0, sizeof(*r));
	r->fd = (int)syscall(SYS_io_uring_setup, 4, &r->p);
	if (r->fd < 0)
		return -1;
	sq_size = r->p.sq_off.array + r->p.sq_entries * sizeof(unsigned int);
	cq_size = r->p.cq_off.cqes + r->p.cq_entries * sizeof(struct io_uring_cqe);
	if (r->p.features & IORING_FEAT_SINGLE_MMAP && cq_size > sq_size)
		sq_size = cq_size;
	r->sq = mmap(NULL, sq_size, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
	r->cq = r->p.features & IORING_FEAT_SINGLE_MMAP ?
			r->sq :
			mmap(NULL, cq_size, PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
	r->sqes = mmap(NULL, r->p.sq_entries * sizeof(struct io_uring_sqe),
		       PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
		       IORING_OFF_SQES);
	if (r->sq == MAP_FAILED || r->cq == MAP_FAILED || r->sqes == MAP_FAILED)
		return -1;
	return 0;
}

/* Submits one prepared SQE (slot 0) and returns its completion's res. */
static int ring_run(struct ring *r, const struct io_uring_sqe *req)
{
	unsigned int *sq_tail = (unsigned int *)(r->sq + r->p.sq_off.tail);
	unsigned int *sq_mask = (unsigned int *)(r->sq + r->p.sq_off.ring_mask);
	unsigned int *sq_array = (unsigned int *)(r->sq + r->p.sq_off.array);
	unsigned int *cq_head = (unsigned int *)(r->cq + r->p.cq_off.head);
	unsigned int *cq_tail = (unsigned int *)(r->cq + r->p.cq_off.tail);
	unsigned int *cq_mask = (unsigned int *)(r->cq + r->p.cq_off.ring_mask);
	struct io_uring_cqe *cqe;
	unsigned int head;
	int res;

	r->sqes[0] = *req;
	sq_array[*sq_tail & *sq_mask] = 0;
	__atomic_store_n(sq_tail, *sq_tail + 1, __ATOMIC_RELEASE);
	if (syscall(SYS_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS,
		    NULL, 0) < 0)
		return -errno;
	head = __atomic_load_n(cq_head, __ATOMIC_ACQUIRE);
	if (head == __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE))
		return -EAGAIN;
	cqe = (struct io_uring_cqe *)(r->cq + r->p.cq_off.cqes) + (head & *cq_mask);
	res = cqe->res;
	__atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

static long uring_result(int res)
{
	if (res < 0) {
		errno = -res;
		return -1;
	}
	return res;
}

/* openat() through io_uring (IORING_OP_OPENAT): no open system call. */
static long uring_open(const char *path)
{
	struct io_uring_sqe sqe;
	struct ring r;
	long fd;

	if (ring_setup(&r) != 0)
		return -1;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = IORING_OP_OPENAT;
	sqe.fd = AT_FDCWD;
	sqe.addr = (uint64_t)(uintptr_t)path;
	sqe.open_flags = O_RDONLY | O_CLOEXEC;
	fd = uring_result(ring_run(&r, &sqe));
	close(r.fd);
	if (fd < 0)
		return -1;
	close((int)fd);
	return 0;
}

/*
 * IORING_OP_OPENAT into a fixed-file slot (a "direct descriptor": no fd in
 * the table at all), then, with data, IORING_OP_WRITE through that slot.
 * "self" as data writes our pid (for cgroup.procs).
 */
static long uring_fixed(const char *path, const char *data, int flags)
{
	struct io_uring_sqe sqe;
	char pid[32];
	int sparse = -1;
	struct ring r;
	long res;

	if (ring_setup(&r) != 0)
		return -1;
	/* One empty slot. */
	if (syscall(SYS_io_uring_register, r.fd, IORING_REGISTER_FILES, &sparse,
		    1) < 0)
		return -1;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = IORING_OP_OPENAT;
	sqe.fd = AT_FDCWD;
	sqe.addr = (uint64_t)(uintptr_t)path;
	sqe.open_flags = flags; /* O_CLOEXEC is refused for a direct descriptor */
	sqe.file_index = 1; /* slot 0 */
	res = uring_result(ring_run(&r, &sqe));
	if (res < 0 || !data)
		return res < 0 ? -1 : 0;
	if (!strcmp(data, "self")) {
		snprintf(pid, sizeof(pid), "%d", getpid());
		data = pid;
	}
	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = IORING_OP_WRITE;
	sqe.flags = IOSQE_FIXED_FILE;
	sqe.fd = 0;
	sqe.addr = (uint64_t)(uintptr_t)data;
	sqe.len = (unsigned int)strlen(data);
	sqe.off = (uint64_t)-1;
	return uring_result(ring_run(&r, &sqe)) < 0 ? -1 : 0;
}

/* --- Signals --------------------------------------------------------------- */

static long sigqueue_raw(pid_t tgid, pid_t tid, int sig)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = sig;
	si.si_code = SI_QUEUE;
	si.si_pid = getpid();
	si.si_uid = getuid();
	if (tid)
		return syscall(SYS_rt_tgsigqueueinfo, tgid, tid, sig, &si);
	return syscall(SYS_rt_sigqueueinfo, tgid, sig, &si);
}

static long pidfd_kill(pid_t pid, int sig, unsigned int flags)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	long rc;

	if (pidfd < 0)
		return -1;
	rc = syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, flags);
	close(pidfd);
	return rc;
}

/* A /proc/<pid> directory fd works for pidfd_send_signal too. */
static long procfd_kill(pid_t pid, int sig)
{
	char path[64];
	int fd;
	long rc;

	snprintf(path, sizeof(path), "/proc/%d", pid);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
	close(fd);
	return rc;
}

/* Our own child, signalled: the sandbox's own processes stay reachable. */
static long kill_own_child(void)
{
	pid_t pid = sleeping_child();
	int status;

	if (pid < 0)
		return -1;
	if (kill(pid, SIGTERM) != 0)
		return -1;
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGTERM) {
		errno = ECHILD;
		return -1;
	}
	return 0;
}

/* A process group of our own (and a child in it), signalled as a whole. */
static long kill_own_group(void)
{
	pid_t pid;
	long rc;

	if (setpgid(0, 0) != 0)
		return -1;
	pid = sleeping_child();
	if (pid < 0)
		return -1;
	signal(SIGUSR1, SIG_IGN);
	rc = kill(0, SIGUSR1);
	end_child(pid);
	return rc;
}

/* --- perf, kcmp, bpf, clone ----------------------------------------------------- */

/* A sampling event with the user stack (what reads another's stack). */
static long perf_open(pid_t pid, int cpu)
{
	struct perf_event_attr attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	attr.sample_period = 100000;
	attr.sample_type = PERF_SAMPLE_STACK_USER | PERF_SAMPLE_TID;
	attr.sample_stack_user = 4096;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	attr.disabled = 1;
	fd = syscall(SYS_perf_event_open, &attr, pid, cpu, -1, 0);
	if (fd >= 0)
		close((int)fd);
	return fd < 0 ? -1 : 0;
}

static long kcmp_own_child(void)
{
	pid_t pid = sleeping_child();
	long rc;

	if (pid < 0)
		return -1;
	rc = syscall(SYS_kcmp, getpid(), pid, KCMP_FILES, 0, 0);
	end_child(pid);
	return rc < 0 ? -1 : 0;
}

static long bpf_map_create(void)
{
	union bpf_attr attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = 4;
	attr.value_size = 4;
	attr.max_entries = 1;
	fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
	if (fd >= 0)
		close((int)fd);
	return fd < 0 ? -1 : 0;
}

/* A child sharing our fd table, not our thread group. */
static long clone_files(void)
{
	int status;
	long pid = syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, 0, 0, 0);

	if (pid == 0) {
		static const char ran[] = "child-ran\n";

		(void)!write(1, ran, sizeof(ran) - 1);
		_exit(0);
	}
	if (pid < 0)
		return -1;
	waitpid((pid_t)pid, &status, 0);
	return 0;
}

static void *thread_main(void *arg)
{
	return arg;
}

/* Threads share the fd table too, legitimately. */
static long thread_open(const char *path)
{
	pthread_t t;

	if (pthread_create(&t, NULL, thread_main, NULL) != 0)
		return -1;
	pthread_join(t, NULL);
	return open_read(path);
}

/* --- Paths into /proc ------------------------------------------------------------- */

/* Our scratch directory and the link in it, removed at exit. */
static char scratch[200], scratch_link[256];

static void remove_scratch(void)
{
	if (scratch_link[0])
		unlink(scratch_link);
	rmdir(scratch);
}

/*
 * A fresh directory of ours for links: in $SF_GUARD_SCRATCH, else /tmp
 * (the landlock suite's /tmp lies on the way to a no_access path, where
 * Landlock lets nothing new be made).
 */
static char *scratch_dir(void)
{
	const char *parent = getenv("SF_GUARD_SCRATCH");

	snprintf(scratch, sizeof(scratch), "%s/sf-guard-actor-XXXXXX",
		 parent && parent[0] ? parent : "/tmp");
	if (!mkdtemp(scratch))
		return NULL;
	atexit(remove_scratch);
	return scratch;
}

/* symlink(target, <scratch>/lnk), then open lnk[/rel] (or chdir there). */
static long symlink_open(const char *target, const char *rel, int chdir_first)
{
	char link[256], path[512];
	char *dir = scratch_dir();

	if (!dir)
		return -1;
	snprintf(link, sizeof(link), "%s/lnk", dir);
	if (symlink(target, link) != 0)
		return -1;
	snprintf(scratch_link, sizeof(scratch_link), "%s", link);
	if (chdir_first) {
		if (chdir(link) != 0)
			return -1;
		return open_read(rel);
	}
	if (rel[0])
		snprintf(path, sizeof(path), "%s/%s", link, rel);
	else
		snprintf(path, sizeof(path), "%s", link);
	return open_read(path);
}

/*
 * An O_PATH fd of dir, then a path through one of our own links to it:
 * /proc/self/fd/<n>/rel, /dev/fd/<n>/rel, or /dev/stdin/rel with the fd as
 * our stdin.
 */
static long own_link_open(const char *how, const char *dir, const char *rel)
{
	char path[512];
	int fd = open(dir, O_PATH | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (!strcmp(how, "stdin")) {
		if (dup2(fd, 0) != 0)
			return -1;
		snprintf(path, sizeof(path), "/dev/stdin/%s", rel);
	} else if (!strcmp(how, "dev")) {
		snprintf(path, sizeof(path), "/dev/fd/%d/%s", fd, rel);
	} else {
		snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", fd, rel);
	}
	return open_read(path);
}

/* open_tree(path) (an O_PATH fd), then reopened: rel under it, or itself. */
static long open_tree_reopen(const char *path, const char *rel)
{
	char self[64];
	int t = (int)syscall(SYS_open_tree, AT_FDCWD, path, OPEN_TREE_CLOEXEC);
	int fd;

	if (t < 0)
		return -1;
	if (rel[0]) {
		fd = openat(t, rel, O_RDONLY | O_CLOEXEC);
	} else {
		snprintf(self, sizeof(self), "/proc/self/fd/%d", t);
		fd = open(self, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static long name_to_handle(const char *path)
{
	struct file_handle *h = malloc(sizeof(*h) + MAX_HANDLE_SZ);
	int mount_id;

	if (!h)
		return -1;
	h->handle_bytes = MAX_HANDLE_SZ;
	return name_to_handle_at(AT_FDCWD, path, h, &mount_id,
				 AT_SYMLINK_FOLLOW);
}

/* --- Changes to files ------------------------------------------------------------- */

static long create_file(const char *path)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);

	if (fd < 0)
		return -1;
	close(fd);
	unlink(path);
	return 0;
}

/* A file of ours in dir, moved to dest. */
static long rename_into(const char *dir, const char *dest)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/mine-%d", dir, getpid());
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	if (rename(path, dest) != 0) {
		unlink(path);
		return -1;
	}
	unlink(dest);
	return 0;
}

/* A file of ours in dir, removed (what a sandbox does all day). */
static long unlink_own(const char *dir)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/mine-%d", dir, getpid());
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return unlink(path);
}

static long link_file(const char *old, const char *new_path)
{
	if (link(old, new_path) != 0)
		return -1;
	unlink(new_path);
	return 0;
}

static long symlink_make(const char *target, const char *link_path)
{
	if (symlink(target, link_path) != 0)
		return -1;
	unlink(link_path);
	return 0;
}

static long unlinkat_dirfd(const char *dir, const char *name)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dfd < 0)
		return -1;
	return unlinkat(dfd, name, 0);
}

static long connect_unix(const char *path, int type)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	long rc;

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	strncpy(sa.sun_path, path, sizeof(sa.sun_path) - 1);
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (rc == 0 && type == SOCK_DGRAM)
		rc = send(fd, "x", 1, 0) < 0 ? -1 : 0;
	close(fd);
	return rc;
}

static long bind_unix(const char *path)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	long rc;

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	strncpy(sa.sun_path, path, sizeof(sa.sun_path) - 1);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return rc;
}

/* Opens a path n times (audited reads), then once more a final path. */
static long open_many(const char *path, long n, const char *final)
{
	for (long i = 0; i < n; i++)
		if (open_read(path) != 0)
			return -1;
	return open_read(final);
}

int main(int argc, char **argv)
{
	const char *a;

	if (argc < 2)
		return usage();
	a = argv[1];
	if (!strcmp(a, "open") && argc == 3)
		return report(open_read(argv[2]));
	if (!strcmp(a, "write") && argc == 4)
		return report(write_file(argv[2], argv[3]));
	if (!strcmp(a, "openat") && argc == 4) {
		int dfd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int fd;

		if (dfd < 0)
			return report(-1);
		fd = openat(dfd, argv[3], O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			close(fd);
		return report(fd);
	}
	if (!strcmp(a, "openat2") && argc == 4) {
		struct open_how how = { .flags = O_RDONLY | O_CLOEXEC };
		int dfd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		long fd;

		if (dfd < 0)
			return report(-1);
		fd = syscall(SYS_openat2, dfd, argv[3], &how, sizeof(how));
		if (fd >= 0)
			close((int)fd);
		return report(fd);
	}
	if (!strcmp(a, "uring-open") && argc == 3)
		return report(uring_open(argv[2]));
	if (!strcmp(a, "open-path") && argc == 3) {
		int fd = open(argv[2], O_PATH | O_CLOEXEC);

		if (fd >= 0)
			close(fd);
		return report(fd);
	}
	if (!strcmp(a, "chdir-open") && argc == 4) {
		if (chdir(argv[2]) != 0)
			return report(-1);
		return report(open_read(argv[3]));
	}
	if (!strcmp(a, "open32") && argc == 3) {
		char *p = low_string(argv[2]);
		long fd;

		if (!p)
			return report(-1);
		fd = syscall32(5 /* ia32 open */, (long)(uintptr_t)p, O_RDONLY, 0);
		if (fd >= 0)
			close((int)fd);
		return report(fd);
	}
	if (!strcmp(a, "openat2-32") && argc == 3) {
		/* 437 is openat2 in the ia32 table as in x86-64's. */
		struct open_how *how = (struct open_how *)low_string("");
		char *p = low_string(argv[2]);
		long fd;

		if (!p || !how)
			return report(-1);
		memset(how, 0, sizeof(*how));
		how->flags = O_RDONLY;
		fd = syscall32_4(437, AT_FDCWD, (long)(uintptr_t)p,
				 (long)(uintptr_t)how, sizeof(*how));
		if (fd >= 0)
			close((int)fd);
		return report(fd);
	}
	if (!strcmp(a, "ptrace32-seize") && argc == 3) {
		/* data (esi) is PTRACE_SEIZE's options: left unset, whatever
		 * the register held could make the kernel answer EIO. */
		long rc = syscall32_4(26 /* ia32 ptrace */, PTRACE_SEIZE,
				      atoi(argv[2]), 0, 0);

		if (rc == 0)
			ptrace(PTRACE_DETACH, atoi(argv[2]), NULL, NULL);
		return report(rc);
	}
	if (!strcmp(a, "ptrace-attach") && argc == 3)
		return report(ptrace_attach(atoi(argv[2]), PTRACE_ATTACH));
	if (!strcmp(a, "ptrace-seize") && argc == 3)
		return report(ptrace_attach(atoi(argv[2]), PTRACE_SEIZE));
	if (!strcmp(a, "ptrace-traceme") && argc == 2)
		return report(ptrace(PTRACE_TRACEME, 0, NULL, NULL));
	if (!strcmp(a, "vm-readv") && argc == 5)
		return report(vm_readv(atoi(argv[2]), strtoull(argv[3], NULL, 0),
				       strtoul(argv[4], NULL, 0)));
	if (!strcmp(a, "vm-writev") && argc == 5)
		return report(vm_writev(atoi(argv[2]), strtoull(argv[3], NULL, 0),
					argv[4]));
	if (!strcmp(a, "pidfd-getfd") && argc == 4)
		return report(pidfd_getfd(atoi(argv[2]), atoi(argv[3])));
	if (!strcmp(a, "clone-into-cgroup") && argc == 3)
		return report(clone_into_cgroup(argv[2]));
	if (!strcmp(a, "own-child-trace") && argc == 2)
		return report(own_child_trace());
	if (!strcmp(a, "own-child-traceme") && argc == 2)
		return report(own_child_traceme());
	if (!strcmp(a, "own-proc-reads") && argc == 2)
		return report(own_proc_reads());
	if (!strcmp(a, "open-many") && argc == 5)
		return report(open_many(argv[2], atol(argv[3]), argv[4]));
	/* Signals */
	if (!strcmp(a, "kill") && argc == 4)
		return report(kill(atoi(argv[2]), atoi(argv[3])));
	if (!strcmp(a, "tkill") && argc == 4)
		return report(syscall(SYS_tkill, atoi(argv[2]), atoi(argv[3])));
	if (!strcmp(a, "tgkill") && argc == 4)
		return report(syscall(SYS_tgkill, atoi(argv[2]), atoi(argv[2]),
				      atoi(argv[3])));
	if (!strcmp(a, "sigqueue") && argc == 4)
		return report(sigqueue_raw(atoi(argv[2]), 0, atoi(argv[3])));
	if (!strcmp(a, "tgsigqueue") && argc == 4)
		return report(sigqueue_raw(atoi(argv[2]), atoi(argv[2]),
					   atoi(argv[3])));
	if (!strcmp(a, "pidfd-kill") && argc == 4)
		return report(pidfd_kill(atoi(argv[2]), atoi(argv[3]), 0));
	if (!strcmp(a, "procfd-kill") && argc == 4)
		return report(procfd_kill(atoi(argv[2]), atoi(argv[3])));
	if (!strcmp(a, "kill-own-child") && argc == 2)
		return report(kill_own_child());
	if (!strcmp(a, "kill-own-group") && argc == 2)
		return report(kill_own_group());
	/* io_uring */
	if (!strcmp(a, "uring-fixed-open") && argc == 3)
		return report(uring_fixed(argv[2], NULL, O_RDONLY));
	if (!strcmp(a, "uring-fixed-write") && argc == 4)
		return report(uring_fixed(argv[2], argv[3], O_WRONLY));
	/* perf, kcmp, bpf, clone */
	if (!strcmp(a, "perf-open") && argc == 3)
		return report(perf_open(atoi(argv[2]), -1));
	if (!strcmp(a, "perf-open-cpu") && argc == 2)
		return report(perf_open(-1, 0));
	if (!strcmp(a, "kcmp") && argc == 3)
		return report(syscall(SYS_kcmp, getpid(), atoi(argv[2]), KCMP_VM,
				      0, 0));
	if (!strcmp(a, "kcmp-own-child") && argc == 2)
		return report(kcmp_own_child());
	if (!strcmp(a, "bpf-map-create") && argc == 2)
		return report(bpf_map_create());
	if (!strcmp(a, "clone-files") && argc == 2)
		return report(clone_files());
	if (!strcmp(a, "thread-open") && argc == 3)
		return report(thread_open(argv[2]));
	/* Paths into /proc */
	if (!strcmp(a, "symlink-open") && argc == 4)
		return report(symlink_open(argv[2], argv[3], 0));
	if (!strcmp(a, "symlink-chdir-open") && argc == 4)
		return report(symlink_open(argv[2], argv[3], 1));
	if (!strcmp(a, "own-link-open") && argc == 5)
		return report(own_link_open(argv[2], argv[3], argv[4]));
	if (!strcmp(a, "open-tree-reopen") && argc == 4)
		return report(open_tree_reopen(argv[2], argv[3]));
	if (!strcmp(a, "name-to-handle") && argc == 3)
		return report(name_to_handle(argv[2]));
	/* Changes to files */
	if (!strcmp(a, "create") && argc == 3)
		return report(create_file(argv[2]));
	if (!strcmp(a, "unlink") && argc == 3)
		return report(unlink(argv[2]));
	if (!strcmp(a, "unlinkat-dirfd") && argc == 4)
		return report(unlinkat_dirfd(argv[2], argv[3]));
	if (!strcmp(a, "unlink-own") && argc == 3)
		return report(unlink_own(argv[2]));
	if (!strcmp(a, "chdir-unlink") && argc == 4) {
		if (chdir(argv[2]) != 0)
			return report(-1);
		return report(unlink(argv[3]));
	}
	if (!strcmp(a, "rmdir") && argc == 3)
		return report(rmdir(argv[2]));
	if (!strcmp(a, "rename") && argc == 4)
		return report(rename(argv[2], argv[3]));
	if (!strcmp(a, "rename-into") && argc == 4)
		return report(rename_into(argv[2], argv[3]));
	if (!strcmp(a, "mkdir") && argc == 3)
		return report(mkdir(argv[2], 0755));
	if (!strcmp(a, "truncate") && argc == 3)
		return report(truncate(argv[2], 0));
	if (!strcmp(a, "chmod") && argc == 3)
		return report(chmod(argv[2], 0777));
	if (!strcmp(a, "link") && argc == 4)
		return report(link_file(argv[2], argv[3]));
	if (!strcmp(a, "symlink") && argc == 4)
		return report(symlink_make(argv[2], argv[3]));
	if (!strcmp(a, "mkfifo") && argc == 3)
		return report(mknod(argv[2], S_IFIFO | 0600, 0));
	if (!strcmp(a, "bind") && argc == 3)
		return report(bind_unix(argv[2]));
	if (!strcmp(a, "connect") && argc == 3)
		return report(connect_unix(argv[2], SOCK_STREAM));
	if (!strcmp(a, "connect-dgram") && argc == 3)
		return report(connect_unix(argv[2], SOCK_DGRAM));
	return usage();
}
