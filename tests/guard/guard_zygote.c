// SPDX-License-Identifier: GPL-2.0
/*
 * The confined "zygote" of the landlock scenario suite: one process that
 * applied a prepared confinement once (Landlock + seccomp + no_new_privs,
 * in the test's fork before it exec'd this), then starts whatever the test
 * asks, so that every process it starts shares its one Landlock domain, as
 * the processes of one `sandfence run` sandbox do.
 *
 * fd 3 is a SOCK_SEQPACKET socket to the test. Each request is one message:
 * the argv (NUL-separated strings; argv[0] an absolute path) with two fds
 * in SCM_RIGHTS: the new process's stdout, and a "go" pipe it waits on.
 * The new process is made with clone(CLONE_PARENT): the test is its parent
 * (it waits for it and sees its exit status) while its credentials, and so
 * its Landlock domain and seccomp filter, are the zygote's. Before exec it
 * blocks on the go pipe, so that the test (unconfined: a confined process
 * can write no cgroup.procs) can move it into its cgroup first; EOF without
 * a byte means "give up" (exit 126). The zygote answers with the pid (an
 * int), or -errno when it could not clone. EOF on fd 3: it exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_ARGS 64

int main(void)
{
	static char buf[16384];

	/* Not for the processes it starts. */
	if (fcntl(3, F_SETFD, FD_CLOEXEC) != 0)
		return 1;
	for (;;) {
		char control[CMSG_SPACE(2 * sizeof(int))];
		struct iovec iov = { buf, sizeof(buf) - 1 };
		struct msghdr msg = { 0 };
		struct cmsghdr *c;
		char *argv[MAX_ARGS + 1];
		int fds[2] = { -1, -1 };
		int argc = 0, answer;
		ssize_t n;
		long pid;

		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = control;
		msg.msg_controllen = sizeof(control);
		n = recvmsg(3, &msg, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		buf[n] = '\0';
		for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level == SOL_SOCKET &&
			    c->cmsg_type == SCM_RIGHTS &&
			    c->cmsg_len == CMSG_LEN(2 * sizeof(int)))
				memcpy(fds, CMSG_DATA(c), sizeof(fds));
		}
		for (char *p = buf; p < buf + n && argc < MAX_ARGS;
		     p += strlen(p) + 1)
			argv[argc++] = p;
		argv[argc] = NULL;
		if (fds[0] < 0 || fds[1] < 0 || argc == 0) {
			answer = -EINVAL;
		} else {
			/* clone(), not fork(): CLONE_PARENT. The exit signal is
			 * the zygote's own (SIGCHLD) with CLONE_PARENT. */
			pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0,
				      0);
			if (pid == 0) {
				char go;

				if (dup2(fds[0], 1) != 1)
					_exit(126);
				if (read(fds[1], &go, 1) != 1)
					_exit(126);
				/* fd 3 and both fds are close-on-exec. */
				execv(argv[0], argv);
				_exit(127);
			}
			answer = pid < 0 ? -errno : (int)pid;
		}
		if (fds[0] >= 0)
			close(fds[0]);
		if (fds[1] >= 0)
			close(fds[1]);
		if (send(3, &answer, sizeof(answer), MSG_NOSIGNAL) !=
		    (ssize_t)sizeof(answer))
			return 1;
	}
}
