// SPDX-License-Identifier: GPL-2.0
/*
 * The process guard's LSM enforcer: refuses with EPERM before anything
 * happens.
 *
 *   ptrace_access_check  every ptrace_may_access() caller: PTRACE_ATTACH and
 *                        SEIZE, process_vm_readv/writev, pidfd_getfd, and
 *                        the path walks through /proc/<pid> that the kernel
 *                        checks so (the magic links exe, cwd, root, fd/<n>,
 *                        and fdinfo/): the walk fails with EACCES.
 *   ptrace_traceme       PTRACE_TRACEME towards a foreign parent.
 *   file_open            any /proc/<pid>/ file, recognised by the procfs
 *                        superblock magic and its inode's struct pid, so
 *                        the path's spelling does not matter.
 *   inode_permission     write permission on a cgroup.procs/threads file
 *                        outside the sandbox: the kernel asks it both for
 *                        an open for writing and for clone3's
 *                        CLONE_INTO_CGROUP (on the common ancestor).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "guard/guard.bpf.h"

/* The x86-64 number of the current system call, -1 if unknown. */
static __always_inline long sf_current_nr(struct task_struct *cur)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(cur);
	long nr;

	if (!regs)
		return -1;
	nr = BPF_CORE_READ(regs, orig_ax);
	if (sf_compat_syscall(cur))
		return sf_nr32_to_64(nr);
	return nr;
}

static __always_inline int sf_deny_action(const struct sf_sandbox_ref *sb,
					  __u32 *action)
{
	if (sb->mode != SF_GUARD_ENFORCE) {
		*action = SF_ACTION_AUDITED;
		return 0;
	}
	*action = SF_ACTION_DENIED;
	return -SF_EPERM;
}

/* What a ptrace_may_access() check is for, from the system call. */
static __always_inline __u32 sf_ptrace_check_what(struct task_struct *cur,
						  long nr)
{
	struct pt_regs *regs;
	unsigned long req;

	switch (nr) {
	case SF_NR_PTRACE:
		regs = (struct pt_regs *)bpf_task_pt_regs(cur);
		if (!regs)
			return SF_WHAT_PTRACE_ACCESS;
		req = sf_compat_syscall(cur) ? BPF_CORE_READ(regs, bx) :
					       BPF_CORE_READ(regs, di);
		if (req == SF_PTRACE_SEIZE)
			return SF_WHAT_PTRACE_SEIZE;
		return SF_WHAT_PTRACE_ATTACH;
	case SF_NR_VM_READV:
		return SF_WHAT_VM_READV;
	case SF_NR_VM_WRITEV:
		return SF_WHAT_VM_WRITEV;
	case SF_NR_PIDFD_GETFD:
		return SF_WHAT_PIDFD_GETFD;
	case SF_NR_OPEN:
	case SF_NR_OPENAT:
	case SF_NR_OPENAT2:
	case SF_NR_READLINK:
	case SF_NR_READLINKAT:
		return SF_WHAT_PROC_WALK;
	}
	return SF_WHAT_PTRACE_ACCESS;
}

SEC("lsm/ptrace_access_check")
int BPF_PROG(sf_lsm_ptrace, struct task_struct *child, unsigned int mode,
	     int ret)
{
	struct task_struct *cur;
	struct sf_verdict v = {};
	struct sf_sandbox_ref sb;
	int verdict;

	if (ret != 0)
		return ret; /* never turn another LSM's denial into a grant */
	cur = bpf_get_current_task_btf();
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	if (sf_same_process(cur, child))
		return 0;
	v.why = sf_foreign(cur, child, &sb);
	if (!v.why)
		return 0;
	verdict = sf_deny_action(&sb, &v.action);
	/*
	 * NOAUDIT checks only decide what a readable file shows (the
	 * kernel hides fields of /proc/<pid>/stat): refuse, record nothing.
	 */
	if (mode & SF_PTRACE_MODE_NOAUDIT)
		return verdict;
	v.enforcer = SF_ENFORCER_LSM;
	v.syscall_nr = sf_current_nr(cur);
	v.what = sf_ptrace_check_what(cur, v.syscall_nr);
	v.target_cgroup = sf_cgroup_id(sf_task_cgroup(child));
	sf_emit(&sb, &v, cur, child, NULL, 0);
	return verdict;
}

SEC("lsm/ptrace_traceme")
int BPF_PROG(sf_lsm_traceme, struct task_struct *parent, int ret)
{
	struct task_struct *cur;
	struct sf_verdict v = {};
	struct sf_sandbox_ref sb;
	int verdict;

	if (ret != 0)
		return ret;
	cur = bpf_get_current_task_btf();
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	v.why = sf_foreign(cur, parent, &sb);
	if (!v.why)
		return 0;
	verdict = sf_deny_action(&sb, &v.action);
	v.enforcer = SF_ENFORCER_LSM;
	v.what = SF_WHAT_PTRACE_TRACEME;
	v.syscall_nr = SF_NR_PTRACE;
	v.target_cgroup = sf_cgroup_id(sf_task_cgroup(parent));
	sf_emit(&sb, &v, cur, parent, NULL, 0);
	return verdict;
}

SEC("lsm/file_open")
int BPF_PROG(sf_lsm_open, struct file *file, int ret)
{
	struct task_struct *cur, *target;
	struct sf_verdict v = {};
	struct sf_sandbox_ref sb;
	struct sf_proc_entry e;
	struct inode *inode;
	int verdict;

	if (ret != 0)
		return ret;
	inode = BPF_CORE_READ(file, f_inode);
	if (sf_sb_magic(inode) != SF_PROC_SUPER_MAGIC)
		return 0;
	target = sf_proc_inode_task(inode);
	if (!target)
		return 0; /* not a per-process file (/proc/meminfo, ...) */
	cur = bpf_get_current_task_btf();
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	if (sf_same_process(cur, target))
		return 0;
	sf_classify_proc(BPF_CORE_READ(file, f_path.dentry), &e);
	if (e.flags & SF_PROCNAME_F_IGNORE)
		return 0;
	v.why = sf_foreign(cur, target, &sb);
	if (!v.why)
		return 0;
	verdict = sf_deny_action(&sb, &v.action);
	v.enforcer = SF_ENFORCER_LSM;
	v.what = SF_WHAT_PROC_OPEN;
	v.proc_class = e.proc_class;
	v.syscall_nr = sf_current_nr(cur);
	v.target_cgroup = sf_cgroup_id(sf_task_cgroup(target));
	sf_emit(&sb, &v, cur, target, e.name.name, sizeof(e.name.name));
	return verdict;
}

SEC("lsm/inode_permission")
int BPF_PROG(sf_lsm_perm, struct inode *inode, int mask, int ret)
{
	struct task_struct *cur;
	struct sf_verdict v = {};
	struct sf_sandbox_ref sb;
	struct kernfs_node *kn;
	union sf_name32 name = {};
	struct cgroup *cg;
	int verdict;
	long nr;

	if (ret != 0)
		return ret;
	/* Called for every path component: the cheap tests first. */
	if (!(mask & SF_MAY_WRITE))
		return 0;
	if (sf_sb_magic(inode) != SF_CGROUP2_SUPER_MAGIC)
		return 0;
	kn = BPF_CORE_READ(inode, i_private);
	if (!kn)
		return 0;
	bpf_probe_read_kernel_str(name.c, sizeof(name.c), BPF_CORE_READ(kn, name));
	if (!sf_is_procs_file(&name))
		return 0;
	cur = bpf_get_current_task_btf();
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	cg = sf_kernfs_file_cgroup(kn);
	if (sf_cgroup_within(cg, &sb))
		return 0;
	verdict = sf_deny_action(&sb, &v.action);
	nr = sf_current_nr(cur);
	v.enforcer = SF_ENFORCER_LSM;
	v.what = nr == SF_NR_CLONE3 ? SF_WHAT_CGROUP_CLONE : SF_WHAT_CGROUP_WRITE;
	v.why = SF_WHY_OUTSIDE;
	v.syscall_nr = nr;
	v.target_cgroup = cg ? sf_cgroup_id(cg) : 0;
	sf_emit(&sb, &v, cur, NULL, name.c, sizeof(name.c));
	return verdict;
}

char LICENSE[] SEC("license") = "GPL";
