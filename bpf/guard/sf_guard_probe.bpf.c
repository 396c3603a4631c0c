// SPDX-License-Identifier: GPL-2.0
/*
 * Can this kernel run BPF LSM programs? Loading is not enough (kernels
 * without bpf on their lsm= list refuse the attach, and some accept it and
 * never call the program), so the guard loads and attaches this program,
 * opens a file, and sees whether it ran for the probing process.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* Set by user space: the tgid of the probing process. */
__u32 sf_probe_tgid = 0;
/* How often the hook ran for that process. */
__u64 sf_probe_hits = 0;

SEC("lsm/file_open")
int BPF_PROG(sf_guard_probe, struct file *file, int ret)
{
	if ((__u32)(bpf_get_current_pid_tgid() >> 32) == sf_probe_tgid)
		__sync_fetch_and_add(&sf_probe_hits, 1);
	return ret;
}

char LICENSE[] SEC("license") = "GPL";
