// SPDX-License-Identifier: GPL-2.0
/*
 * Proves that this kernel runs BPF LSM programs: denies ptrace access (and
 * with it the /proc/<pid> files guarded by ptrace_may_access, such as
 * environ and mem) to one thread group chosen by user space.
 *
 * The target lives in .bss, not .rodata, so a test can load and attach once
 * and then aim the program at processes it creates afterwards.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define SF_EPERM 1

/* tgid (user-space pid) of the process to protect; 0 protects nothing. */
__u32 sf_target_tgid = 0;
/* Accesses denied so far: lets a test tell "denied by us" from "denied". */
__u64 sf_denials = 0;

SEC("lsm/ptrace_access_check")
int BPF_PROG(sf_lsm_probe, struct task_struct *child, unsigned int mode,
	     int ret)
{
	__u32 target = sf_target_tgid;

	/* A previous LSM already refused: never turn a denial into a grant. */
	if (ret != 0)
		return ret;
	if (target == 0)
		return 0;
	/*
	 * CO-RE read: vmlinux.h comes from the build host's kernel, the
	 * program may run on another (the VM's 6.1); libbpf relocates the
	 * field offset against the running kernel's BTF.
	 */
	if ((__u32)BPF_CORE_READ(child, tgid) != target)
		return 0;
	__sync_fetch_and_add(&sf_denials, 1);
	return -SF_EPERM;
}

char LICENSE[] SEC("license") = "GPL";
