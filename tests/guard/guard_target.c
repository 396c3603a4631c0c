// SPDX-License-Identifier: GPL-2.0
/*
 * The process a guard scenario aims at. Holds a known string in memory and
 * a file open, prints where they are, then sleeps until killed:
 *
 *   ready pid=P addr=0xA len=N fd=F
 *
 * A test (outside every sandbox) reads the string back to see whether a
 * process_vm_writev landed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char secret[64] = "sf-guard-target-secret";

int main(int argc __attribute__((unused)), char **argv)
{
	int fd = open(argv[0], O_RDONLY | O_CLOEXEC);

	if (fd < 0 || chdir("/tmp") != 0)
		return 1;
	printf("ready pid=%d addr=%p len=%zu fd=%d\n", getpid(), (void *)secret,
	       sizeof(secret), fd);
	fflush(stdout);
	for (;;)
		pause();
}
