/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The host's shared state, as pinned under the pin root and read by every
 * sandfence process (user space only; the programs know only the number of
 * driver slots, which index their event rings). Included by the egress and
 * guard ABIs and by C++.
 */
#ifndef SANDFENCE_BPF_HOST_HOST_ABI_H
#define SANDFENCE_BPF_HOST_HOST_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#ifdef __cplusplus
#define SF_HOST_ASSERT static_assert
#else
#define SF_HOST_ASSERT _Static_assert
#endif

/*
 * The layout of everything pinned under the host's pin root. A process that
 * finds pinned state of another ABI refuses to touch it.
 */
#define SF_ABI_VERSION 3

/* Processes (drivers: the daemon, each `sandfence run`) that can use the
 * host's pinned programs at once; each has its own event ring slot. */
#define SF_MAX_DRIVERS 64

/* sf_host[0]: the host's shared state (written by user space only). */
struct sf_host {
	__u32 abi; /* SF_ABI_VERSION of whoever created the maps */
	__u32 next_generation;
};
SF_HOST_ASSERT(sizeof(struct sf_host) == 8, "sf_host layout");

enum sf_driver_kind {
	SF_DRIVER_FREE = 0,
	SF_DRIVER_DAEMON = 1, /* its sandboxes wait for the next daemon */
	SF_DRIVER_RUN = 2,    /* its sandboxes die with it (reaped) */
};

/* sf_drivers[slot]: the process using ring slot `slot`. */
struct sf_driver {
	__u32 pid;
	__u32 kind;        /* enum sf_driver_kind */
	__u64 start_ticks; /* /proc/<pid>/stat starttime: tells a reused pid */
};
SF_HOST_ASSERT(sizeof(struct sf_driver) == 16, "sf_driver layout");

#endif /* SANDFENCE_BPF_HOST_HOST_ABI_H */
