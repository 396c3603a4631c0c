// SPDX-License-Identifier: GPL-2.0
/*
 * sf_escape_actor: what an agent inside a sandbox tries in order to get out
 * of it or at its enforcer, one attempt per run, reported on stdout:
 *
 *   ok            the attempt succeeded (exit status 0)
 *   errno N       it failed with errno N (exit status 1)
 *
 * and, for some actions, one more line saying what the attempt left
 * (its cgroup, its user namespace, whether a mount appeared), so that a
 * test checks the effect as well as the errno. Raw system calls: what the
 * kernel sees is exactly what the action names. The process-guard tests of
 * `sandfence run` and `sandfence enter` (tests/run, tests/daemon, tests/oci)
 * run it; tests/guard has its own actor for the BPF guards.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/statfs.h>
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
	fprintf(stderr, "usage: sf_escape_actor ACTION ARGS...\n");
	return 2;
}

/* The cgroup v2 line of /proc/self/cgroup ("0::/x/y"), printed as
 * "cgroup /x/y". */
static void print_cgroup(void)
{
	char buf[4096];
	int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	ssize_t n;
	char *line;

	if (fd < 0) {
		printf("cgroup ? (errno %d)\n", errno);
		return;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		n = 0;
	buf[n] = '\0';
	for (line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		if (!strncmp(line, "0::", 3))
			printf("cgroup %s\n", line + 3);
	}
}

static void print_link(const char *what, const char *path)
{
	char target[256];
	ssize_t n = readlink(path, target, sizeof(target) - 1);

	if (n < 0) {
		printf("%s ? (errno %d)\n", what, errno);
		return;
	}
	target[n] = '\0';
	printf("%s %s\n", what, target);
}

static long open_read(const char *path)
{
	char c;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, &c, 1);
	close(fd);
	return n < 0 ? -1 : 0;
}

static long write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, data, strlen(data));
	close(fd);
	return n < 0 ? -1 : 0;
}

/* Moves this process into DIR (cgroup.procs), as an escape would. */
static long join_cgroup(const char *dir)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	return write_file(path, "0");
}

/* A /proc/<pid> directory fd is a pidfd for pidfd_send_signal. */
static long procdir_kill(const char *dir, int sig)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long rc;

	if (fd < 0)
		return -1;
	rc = syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
	close(fd);
	return rc;
}

/* The pid, in the procfs at HOSTPROC, of this process's N-th ancestor
 * (0: itself), read from status files (which any process may read): how
 * an agent that sees the host's procfs finds `sandfence run`. */
static long ancestor(const char *hostproc, int n)
{
	char path[4096], buf[4096], *p;
	long pid;
	int fd;
	ssize_t got;

	snprintf(path, sizeof(path), "%s/self", hostproc);
	got = readlink(path, buf, sizeof(buf) - 1);
	if (got < 0)
		return -1;
	buf[got] = '\0';
	pid = atol(buf);
	while (n-- > 0) {
		snprintf(path, sizeof(path), "%s/%ld/status", hostproc, pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -1;
		got = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (got < 0)
			return -1;
		buf[got] = '\0';
		p = strstr(buf, "\nPPid:");
		if (!p) {
			errno = ENOENT;
			return -1;
		}
		pid = atol(p + 6);
	}
	return pid;
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

static int ns_flag(const char *name)
{
	if (!strcmp(name, "user"))
		return CLONE_NEWUSER;
	if (!strcmp(name, "mnt"))
		return CLONE_NEWNS;
	if (!strcmp(name, "net"))
		return CLONE_NEWNET;
	if (!strcmp(name, "pid"))
		return CLONE_NEWPID;
	if (!strcmp(name, "cgroup"))
		return CLONE_NEWCGROUP;
	if (!strcmp(name, "uts"))
		return CLONE_NEWUTS;
	if (!strcmp(name, "ipc"))
		return CLONE_NEWIPC;
	return 0;
}

/* unshare(NS), then which user namespace this process is in. */
static int unshare_ns(const char *name)
{
	int flag = ns_flag(name);
	int rc;

	if (!flag)
		return usage();
	rc = report(unshare(flag));
	print_link("userns", "/proc/self/ns/user");
	return rc;
}

/* clone(CLONE_NEWUSER): the child exits at once. */
static long clone_newuser(void)
{
	int status;
	long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);

	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return -1;
	waitpid((pid_t)pid, &status, 0);
	return 0;
}

/* clone3(CLONE_INTO_CGROUP) into DIR: the child exits at once. */
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
	if (pid == 0)
		_exit(0);
	close(cgfd);
	if (pid < 0)
		return -1;
	waitpid((pid_t)pid, &status, 0);
	return 0;
}

/* Whether PATH is a mount point now ("mountpoint yes|no"). */
static void print_mountpoint(const char *path)
{
	char parent[4096];
	struct stat a, b;

	snprintf(parent, sizeof(parent), "%s/..", path);
	if (stat(path, &a) != 0 || stat(parent, &b) != 0) {
		printf("mountpoint ? (errno %d)\n", errno);
		return;
	}
	printf("mountpoint %s\n",
	       a.st_dev != b.st_dev || a.st_ino == b.st_ino ? "yes" : "no");
}

/* Whether /proc is still a procfs showing this process. */
static void print_proc(void)
{
	struct statfs fs;

	if (statfs("/proc", &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC ||
	    access("/proc/self/status", R_OK) != 0) {
		printf("proc gone\n");
		return;
	}
	printf("proc mounted\n");
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

static long bpf_obj_get(const char *path)
{
	union bpf_attr attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.pathname = (uint64_t)(uintptr_t)path;
	fd = syscall(SYS_bpf, BPF_OBJ_GET, &attr, sizeof(attr));
	if (fd >= 0)
		close((int)fd);
	return fd < 0 ? -1 : 0;
}

/* What a sandboxed command does all day, each step checked: fork and exec
 * (a child runs /bin/true), a file in DIR written, read back, removed, and
 * its own /proc files read. */
static long normal_work(const char *dir)
{
	char path[4096], buf[8];
	int status, fd;
	pid_t pid = fork();

	if (pid == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		errno = ECHILD;
		return -1;
	}
	snprintf(path, sizeof(path), "%s/sf-escape-actor-%d", dir, getpid());
	fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (write(fd, "work", 4) != 4 || pread(fd, buf, 4, 0) != 4 ||
	    memcmp(buf, "work", 4) != 0) {
		close(fd);
		unlink(path);
		errno = EIO;
		return -1;
	}
	close(fd);
	if (unlink(path) != 0)
		return -1;
	if (open_read("/proc/self/status") != 0 ||
	    open_read("/proc/self/environ") != 0 ||
	    open_read("/proc/self/maps") != 0)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	const char *a;

	if (argc < 2)
		return usage();
	a = argv[1];
	/* Signals and processes */
	if (!strcmp(a, "kill") && argc == 4)
		return report(kill(atoi(argv[2]), atoi(argv[3])));
	if (!strcmp(a, "pidfd-kill") && argc == 4) /* an inherited pidfd */
		return report(syscall(SYS_pidfd_send_signal, atoi(argv[2]),
				      atoi(argv[3]), NULL, 0));
	if (!strcmp(a, "pidfd-getfd") && argc == 4) {
		long fd = syscall(SYS_pidfd_getfd, atoi(argv[2]), atoi(argv[3]),
				  0);

		if (fd >= 0)
			close((int)fd);
		return report(fd);
	}
	if (!strcmp(a, "procdir-kill") && argc == 4)
		return report(procdir_kill(argv[2], atoi(argv[3])));
	if (!strcmp(a, "ancestor-kill") && argc == 5) {
		/* HOSTPROC N SIG: "target PID", then the outcome */
		char dir[4096];
		long pid = ancestor(argv[2], atoi(argv[3]));

		if (pid < 0)
			return report(-1);
		printf("target %ld\n", pid);
		snprintf(dir, sizeof(dir), "%s/%ld", argv[2], pid);
		return report(procdir_kill(dir, atoi(argv[4])));
	}
	if (!strcmp(a, "ancestor-open") && argc == 5) {
		/* HOSTPROC N FILE: "target PID", then reads its FILE */
		char path[4096];
		long pid = ancestor(argv[2], atoi(argv[3]));

		if (pid < 0)
			return report(-1);
		printf("target %ld\n", pid);
		snprintf(path, sizeof(path), "%s/%ld/%s", argv[2], pid, argv[4]);
		return report(open_read(path));
	}
	if (!strcmp(a, "ptrace-attach") && argc == 3)
		return report(ptrace_attach(atoi(argv[2]), PTRACE_ATTACH));
	if (!strcmp(a, "ptrace-seize") && argc == 3)
		return report(ptrace_attach(atoi(argv[2]), PTRACE_SEIZE));
	if (!strcmp(a, "vm-readv") && argc == 3) {
		char buf[16];
		struct iovec local = { buf, sizeof(buf) };
		/* Any address: the permission check comes first. */
		struct iovec remote = { (void *)0x400000, sizeof(buf) };

		return report(process_vm_readv(atoi(argv[2]), &local, 1,
					       &remote, 1, 0));
	}
	/* Cgroups */
	if (!strcmp(a, "join-cgroup") && argc == 3) {
		int rc = report(join_cgroup(argv[2]));

		print_cgroup();
		return rc;
	}
	if (!strcmp(a, "clone-into-cgroup") && argc == 3)
		return report(clone_into_cgroup(argv[2]));
	if (!strcmp(a, "cgroup") && argc == 2) {
		print_cgroup();
		return 0;
	}
	/* Namespaces and mounts */
	if (!strcmp(a, "unshare") && argc == 3)
		return unshare_ns(argv[2]);
	if (!strcmp(a, "clone-newuser") && argc == 2) {
		int rc = report(clone_newuser());

		print_link("userns", "/proc/self/ns/user");
		return rc;
	}
	if (!strcmp(a, "mount-tmpfs") && argc == 3) {
		int rc = report(mount("sf", argv[2], "tmpfs", 0, "size=64k"));

		print_mountpoint(argv[2]);
		if (rc == 0)
			umount2(argv[2], MNT_DETACH);
		return rc;
	}
	if (!strcmp(a, "mount-bind") && argc == 4) {
		int rc = report(mount(argv[2], argv[3], NULL, MS_BIND, NULL));

		print_mountpoint(argv[3]);
		if (rc == 0)
			umount2(argv[3], MNT_DETACH);
		return rc;
	}
	if (!strcmp(a, "fsopen") && argc == 3) {
		long fd = syscall(SYS_fsopen, argv[2], 0);

		if (fd >= 0)
			close((int)fd);
		return report(fd);
	}
	if (!strcmp(a, "umount") && argc == 3) {
		int rc = report(umount2(argv[2], MNT_DETACH));

		print_mountpoint(argv[2]);
		return rc;
	}
	if (!strcmp(a, "umount-proc") && argc == 2) {
		int rc = report(umount2("/proc", MNT_DETACH));

		print_proc();
		return rc;
	}
	if (!strcmp(a, "uring-setup") && argc == 2) {
		char params[120]; /* struct io_uring_params */
		long fd;

		memset(params, 0, sizeof(params));
		fd = syscall(SYS_io_uring_setup, 1, params);
		if (fd >= 0)
			close((int)fd);
		return report(fd);
	}
	/* bpf */
	if (!strcmp(a, "bpf-map-create") && argc == 2)
		return report(bpf_map_create());
	if (!strcmp(a, "bpf-obj-get") && argc == 3)
		return report(bpf_obj_get(argv[2]));
	/* Files */
	if (!strcmp(a, "open") && argc == 3)
		return report(open_read(argv[2]));
	if (!strcmp(a, "open-only") && argc == 3) { /* /proc/<pid>/mem */
		int fd = open(argv[2], O_RDONLY | O_CLOEXEC);

		if (fd >= 0)
			close(fd);
		return report(fd);
	}
	if (!strcmp(a, "write") && argc == 4)
		return report(write_file(argv[2], argv[3]));
	if (!strcmp(a, "unlink") && argc == 3)
		return report(unlink(argv[2]));
	if (!strcmp(a, "rmdir") && argc == 3)
		return report(rmdir(argv[2]));
	if (!strcmp(a, "rename") && argc == 4)
		return report(rename(argv[2], argv[3]));
	if (!strcmp(a, "mv") && argc == 4) /* as mv(1) renames */
		return report(syscall(SYS_renameat2, AT_FDCWD, argv[2],
				      AT_FDCWD, argv[3], RENAME_NOREPLACE));
	if (!strcmp(a, "mkdir") && argc == 3) {
		int rc = report(mkdir(argv[2], 0700));

		if (rc == 0)
			rmdir(argv[2]);
		return rc;
	}
	if (!strcmp(a, "list") && argc == 3) {
		int fd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd >= 0)
			close(fd);
		return report(fd);
	}
	/* The control: what a sandboxed command must still be able to do. */
	if (!strcmp(a, "normal-work") && argc == 3)
		return report(normal_work(argv[2]));
	return usage();
}
