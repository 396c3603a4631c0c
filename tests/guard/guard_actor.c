// SPDX-License-Identifier: GPL-2.0
/*
 * The process a guard scenario runs in a sandbox: makes exactly one access
 * (or one small, fixed sequence for the controls) and reports on stdout:
 *
 *   ok            the access succeeded (exit status 0)
 *   errno N       it failed with errno N (exit status 1)
 *
 * A process killed by the signal enforcer reports nothing: its parent sees
 * SIGKILL. Plain C and raw system calls, so that what the kernel sees is
 * exactly what the scenario names.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static int report(long rc)
{
	if (rc < 0) {
		printf("errno %d\n", errno);
		fflush(stdout);
		return 1;
	}
	printf("ok\n");
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
	(void)!read(fd, &c, 1);
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
 * openat() through io_uring (IORING_OP_OPENAT): no open system call at all.
 * Raw system calls, one submission, one completion.
 */
static long uring_open(const char *path)
{
	struct io_uring_params p;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	unsigned int *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	size_t sq_size, cq_size;
	char *sq, *cq;
	int ring, res;

	memset(&p, 0, sizeof(p));
	ring = (int)syscall(SYS_io_uring_setup, 1, &p);
	if (ring < 0)
		return -1;
	sq_size = p.sq_off.array + p.sq_entries * sizeof(unsigned int);
	cq_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP && cq_size > sq_size)
		sq_size = cq_size;
	sq = mmap(NULL, sq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		  ring, IORING_OFF_SQ_RING);
	cq = p.features & IORING_FEAT_SINGLE_MMAP ?
		     sq :
		     mmap(NULL, cq_size, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_CQ_RING);
	sqe = mmap(NULL, p.sq_entries * sizeof(*sqe), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || sqe == MAP_FAILED)
		return -1;
	sq_tail = (unsigned int *)(sq + p.sq_off.tail);
	sq_mask = (unsigned int *)(sq + p.sq_off.ring_mask);
	sq_array = (unsigned int *)(sq + p.sq_off.array);
	cq_head = (unsigned int *)(cq + p.cq_off.head);
	cq_tail = (unsigned int *)(cq + p.cq_off.tail);
	cq_mask = (unsigned int *)(cq + p.cq_off.ring_mask);

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_OPENAT;
	sqe->fd = AT_FDCWD;
	sqe->addr = (uint64_t)(uintptr_t)path;
	sqe->open_flags = O_RDONLY | O_CLOEXEC;
	sq_array[*sq_tail & *sq_mask] = 0;
	__atomic_store_n(sq_tail, *sq_tail + 1, __ATOMIC_RELEASE);
	if (syscall(SYS_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS,
		    NULL, 0) < 0)
		return -1;
	if (__atomic_load_n(cq_head, __ATOMIC_ACQUIRE) ==
	    __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE)) {
		errno = EAGAIN;
		return -1;
	}
	cqe = (struct io_uring_cqe *)(cq + p.cq_off.cqes) + (*cq_head & *cq_mask);
	res = cqe->res;
	close(ring);
	if (res < 0) {
		errno = -res;
		return -1;
	}
	close(res);
	return 0;
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
		/* data (esi) too: PTRACE_SEIZE takes its options from it, and
		 * whatever the register held made 6.12 refuse with EIO. */
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
	return usage();
}
