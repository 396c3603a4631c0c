// SPDX-License-Identifier: GPL-2.0
/*
 * The process a guard scenario aims at. Holds a known string in memory and
 * a file open, prints where they are, then sleeps until killed:
 *
 *   ready pid=P addr=0xA len=N fd=F
 *
 * and "signal 23 from S" each time a SIGURG from process S reaches it (the
 * signal the rows aim at groups and everyone: the landlock suite checks
 * that its actor's did not land; other tests' may).
 *
 * A test (outside every sandbox) reads the string back to see whether a
 * process_vm_writev landed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char secret[64] = "sf-guard-target-secret";

static void on_sigurg(int sig __attribute__((unused)), siginfo_t *info,
		      void *context __attribute__((unused)))
{
	char line[40] = "signal 23 from ";
	char digits[12];
	int n = 0, at = 15;
	unsigned int pid = (unsigned int)info->si_pid;

	do {
		digits[n++] = (char)('0' + pid % 10);
		pid /= 10;
	} while (pid && n < 11);
	while (n)
		line[at++] = digits[--n];
	line[at++] = '\n';
	(void)!write(1, line, (size_t)at);
}

int main(int argc __attribute__((unused)), char **argv)
{
	int fd = open(argv[0], O_RDONLY | O_CLOEXEC);
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigurg;
	sa.sa_flags = SA_RESTART | SA_SIGINFO;
	if (fd < 0 || chdir("/tmp") != 0 || sigaction(SIGURG, &sa, NULL) != 0)
		return 1;
	printf("ready pid=%d addr=%p len=%zu fd=%d\n", getpid(), (void *)secret,
	       sizeof(secret), fd);
	fflush(stdout);
	for (;;)
		pause();
}
