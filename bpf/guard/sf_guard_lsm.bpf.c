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
 *
 * Out of reach (guard_reach.bpf.h):
 *
 *   task_kill            a signal to a process outside the sandbox.
 *   bpf                  any bpf() command.
 *   perf_event_open      CPU-wide and cgroup events.
 *   perf_event_alloc     an event on another process (perf skips the
 *                        ptrace check for CAP_PERFMON).
 *   inode_unlink, inode_rmdir, inode_rename, inode_setattr, inode_create,
 *   inode_mkdir, inode_mknod, inode_link, inode_symlink, file_open (for
 *   writing)             protected objects and everything under them.
 *   unix_stream_connect, unix_may_send   a protected socket.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "guard/guard.bpf.h"
#include "guard/guard_reach.bpf.h"

#define SF_NR_STAT 4
#define SF_NR_LSTAT 6
#define SF_NR_ACCESS 21
#define SF_NR_EXECVE 59
#define SF_NR_CHDIR 80
#define SF_NR_NEWFSTATAT 262
#define SF_NR_FACCESSAT 269
#define SF_NR_PERF_EVENT_OPEN 298
#define SF_NR_NAME_TO_HANDLE_AT 303
#define SF_NR_KCMP 312
#define SF_NR_EXECVEAT 322
#define SF_NR_STATX 332
#define SF_NR_OPEN_TREE 428
#define SF_NR_FACCESSAT2 439
#define SF_PERF_SECURITY_CPU 1

/*
 * Hooks whose arguments moved between kernels, by their count in the
 * running kernel's BTF (set by user space before load):
 *   inode_setattr    (dentry, attr) before 6.8; (idmap, dentry, attr) since
 *   perf_event_open  (attr, type) before 6.12; (type) since
 */
const volatile __u32 sf_setattr_nargs = 3;
const volatile __u32 sf_perf_nargs = 1;

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
	case SF_NR_PERF_EVENT_OPEN:
		return SF_WHAT_PERF_OPEN;
	case SF_NR_KCMP:
		return SF_WHAT_KCMP;
	case SF_NR_OPEN:
	case SF_NR_OPENAT:
	case SF_NR_OPENAT2:
	case SF_NR_READLINK:
	case SF_NR_READLINKAT:
	/* Other calls that walk a path (through a magic link). */
	case SF_NR_CHDIR:
	case SF_NR_OPEN_TREE:
	case SF_NR_NAME_TO_HANDLE_AT:
	case SF_NR_STAT:
	case SF_NR_LSTAT:
	case SF_NR_NEWFSTATAT:
	case SF_NR_STATX:
	case SF_NR_ACCESS:
	case SF_NR_FACCESSAT:
	case SF_NR_FACCESSAT2:
	case SF_NR_EXECVE:
	case SF_NR_EXECVEAT:
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

	SF_MUTANT_ALLOWS(sf_lsm_ptrace);
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

	SF_MUTANT_ALLOWS(sf_lsm_traceme);
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

	SF_MUTANT_ALLOWS(sf_lsm_open);
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

	SF_MUTANT_ALLOWS(sf_lsm_perm);
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

/* --- Out of reach: signals, bpf(), perf, protected objects ---------------- */

/*
 * A signal from the sandbox to a process outside it. Signal 0 is allowed:
 * it delivers nothing, and a refusal would still tell the caller that the
 * process exists (the kernel answers ESRCH before asking the LSM), which
 * /proc shows anyway. cred is set only for signals sent on another's
 * behalf (USB async I/O), never by the current task: not judged.
 *
 * cred is read as a number with bpf_get_func_arg, not as the typed
 * argument: 6.12's verifier (not 6.1's) types an LSM hook's pointer
 * arguments as trusted, and a trusted pointer as never NULL, so it took
 * "if (cred)" for always true and dropped the rest as dead code: every
 * signal went through unjudged. check_kill_permission passes NULL.
 */
SEC("lsm/task_kill")
int BPF_PROG(sf_lsm_kill, struct task_struct *p, struct kernel_siginfo *info,
	     int sig, const struct cred *cred_unused, int ret)
{
	struct task_struct *cur;
	struct sf_verdict v = {};
	struct sf_sandbox_ref sb;
	union sf_name16 name;
	__u64 cred = 0;
	int verdict;

	SF_MUTANT_ALLOWS(sf_lsm_kill);
	if (ret != 0)
		return ret;
	if (sig == 0)
		return 0;
	/* Argument 3; an error (never expected) leaves it 0: judged. */
	bpf_get_func_arg(ctx, 3, &cred);
	if (cred)
		return 0;
	cur = bpf_get_current_task_btf();
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	if (sf_cgroup_within(sf_task_cgroup(p), &sb))
		return 0;
	verdict = sf_deny_action(&sb, &v.action);
	v.enforcer = SF_ENFORCER_LSM;
	v.what = SF_WHAT_SIGNAL;
	v.why = sf_foreign(cur, p, &sb);
	v.syscall_nr = sf_current_nr(cur);
	v.target_cgroup = sf_cgroup_id(sf_task_cgroup(p));
	sf_signal_name(&name, sig, false);
	sf_emit(&sb, &v, cur, p, name.c, sizeof(name.c));
	return verdict;
}

/*
 * Any bpf() command from a guarded sandbox: an agent has no business with
 * BPF, and a map or program fd passed in must not become a way to rewrite
 * the guard. (The hook's fourth argument, 6.9+, is not read: the program
 * only runs when the programs before it allowed, so there is no earlier
 * denial to keep.)
 */
SEC("lsm/bpf")
int BPF_PROG(sf_lsm_bpf, int cmd, union bpf_attr *attr, unsigned int size)
{
	struct task_struct *cur;
	struct sf_verdict v = {};
	struct sf_sandbox_ref sb;
	union sf_name16 name = {};
	int verdict;

	SF_MUTANT_ALLOWS(sf_lsm_bpf);
	cur = bpf_get_current_task_btf();
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	verdict = sf_deny_action(&sb, &v.action);
	v.enforcer = SF_ENFORCER_LSM;
	v.what = SF_WHAT_BPF;
	v.why = SF_WHY_REFUSED;
	v.syscall_nr = sf_current_nr(cur);
	/* "cmd <n>", a word at a time (see sf_signal_name). */
	name.w[0] = SF_C8('c', 'm', 'd', ' ', '?', 0, 0, 0);
	if (cmd >= 0 && cmd < 10)
		name.w[0] = SF_C8('c', 'm', 'd', ' ', 0, 0, 0, 0) |
			    (__u64)('0' + cmd) << 32;
	else if (cmd >= 10 && cmd < 100)
		name.w[0] = SF_C8('c', 'm', 'd', ' ', 0, 0, 0, 0) |
			    (__u64)('0' + (__u32)cmd / 10) << 32 |
			    (__u64)('0' + (__u32)cmd % 10) << 40;
	sf_emit(&sb, &v, cur, NULL, name.c, sizeof(name.c));
	return verdict;
}

/*
 * CPU-wide (pid -1) and cgroup perf events sample every process on the
 * CPU: refused. An event on another task is refused by
 * ptrace_access_check (perf asks ptrace_may_access for it).
 */
SEC("lsm/perf_event_open")
int sf_lsm_perf(unsigned long long *ctx)
{
	struct task_struct *cur;
	struct sf_verdict v = {};
	struct sf_sandbox_ref sb;
	__u64 a0 = ctx[0], a1 = ctx[1], type;
	int verdict;

	SF_MUTANT_ALLOWS(sf_lsm_perf);
	/*
	 * Both slots read at constant offsets (the 6.1 verifier refuses a
	 * computed ctx offset), then compared whole, never cast: where a slot
	 * is the attr pointer, a cast would be pointer arithmetic.
	 */
	barrier_var(a0);
	barrier_var(a1);
	type = sf_perf_nargs == 2 ? a1 : a0;
	if (type != SF_PERF_SECURITY_CPU)
		return 0;
	cur = bpf_get_current_task_btf();
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	verdict = sf_deny_action(&sb, &v.action);
	v.enforcer = SF_ENFORCER_LSM;
	v.what = SF_WHAT_PERF_OPEN;
	v.why = SF_WHY_REFUSED;
	v.syscall_nr = SF_NR_PERF_EVENT_OPEN;
	sf_emit(&sb, &v, cur, NULL, "cpu", 4);
	return verdict;
}

/*
 * An event on another process. perf asks ptrace_may_access() only of
 * callers without CAP_PERFMON, so ptrace_access_check does not see root:
 * the event's target is judged here, before anything is installed. Events
 * inherited at fork (event->parent set) follow one the caller opened on
 * itself: not judged, or a self-profiling process could not fork.
 */
SEC("lsm/perf_event_alloc")
int BPF_PROG(sf_lsm_perf_task, struct perf_event *event, int ret)
{
	struct task_struct *cur, *target;
	struct sf_verdict v = {};
	struct sf_sandbox_ref sb;
	int verdict;

	SF_MUTANT_ALLOWS(sf_lsm_perf_task);
	if (ret != 0)
		return ret;
	target = BPF_CORE_READ(event, hw.target);
	if (!target || BPF_CORE_READ(event, parent))
		return 0;
	cur = bpf_get_current_task_btf();
	if (sf_same_process(cur, target))
		return 0;
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	verdict = sf_deny_action(&sb, &v.action);
	v.enforcer = SF_ENFORCER_LSM;
	v.what = SF_WHAT_PERF_OPEN;
	v.why = sf_foreign(cur, target, &sb) | SF_WHY_REFUSED;
	v.syscall_nr = SF_NR_PERF_EVENT_OPEN;
	v.target_cgroup = sf_cgroup_id(sf_task_cgroup(target));
	sf_emit(&sb, &v, cur, target, NULL, 0);
	return verdict;
}

/* A change to a protected object (or to anything under it): refused. */
static __always_inline int sf_lsm_protect(struct dentry *obj, __u32 what)
{
	struct task_struct *cur;
	struct sf_verdict v = {};
	struct sf_sandbox_ref sb;
	int verdict;

	cur = bpf_get_current_task_btf();
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	if (!sf_dentry_protected(obj))
		return 0;
	verdict = sf_deny_action(&sb, &v.action);
	v.enforcer = SF_ENFORCER_LSM;
	v.what = what;
	v.why = SF_WHY_PROTECTED;
	v.syscall_nr = sf_current_nr(cur);
	sf_emit(&sb, &v, cur, NULL,
		(const char *)BPF_CORE_READ(obj, d_name.name),
		SF_GUARD_NAME_LEN);
	return verdict;
}

SEC("lsm/inode_unlink")
int BPF_PROG(sf_lsm_unlink, struct inode *dir, struct dentry *dentry, int ret)
{
	SF_MUTANT_ALLOWS(sf_lsm_unlink);
	if (ret != 0)
		return ret;
	return sf_lsm_protect(dentry, SF_WHAT_PROT_UNLINK);
}

SEC("lsm/inode_rmdir")
int BPF_PROG(sf_lsm_rmdir, struct inode *dir, struct dentry *dentry, int ret)
{
	SF_MUTANT_ALLOWS(sf_lsm_rmdir);
	if (ret != 0)
		return ret;
	return sf_lsm_protect(dentry, SF_WHAT_PROT_UNLINK);
}

/* Out of a protected directory, or into one (over a protected object). */
SEC("lsm/inode_rename")
int BPF_PROG(sf_lsm_rename, struct inode *old_dir, struct dentry *old_dentry,
	     struct inode *new_dir, struct dentry *new_dentry, int ret)
{
	SF_MUTANT_ALLOWS(sf_lsm_rename);
	if (ret != 0)
		return ret;
	ret = sf_lsm_protect(old_dentry, SF_WHAT_PROT_RENAME);
	if (ret != 0)
		return ret;
	return sf_lsm_protect(new_dentry, SF_WHAT_PROT_RENAME);
}

/* chmod, chown, utimes, truncate (also O_TRUNC), of a protected object. */
SEC("lsm/inode_setattr")
int sf_lsm_setattr(unsigned long long *ctx)
{
	__u64 a0 = ctx[0], a1 = ctx[1];

	SF_MUTANT_ALLOWS(sf_lsm_setattr);
	/* Constant offsets only (see sf_lsm_perf). */
	barrier_var(a0);
	barrier_var(a1);
	return sf_lsm_protect((struct dentry *)(sf_setattr_nargs == 3 ? a1 : a0),
			      SF_WHAT_PROT_SETATTR);
}

/* New names in a protected directory: the new (negative) dentry's parents. */
SEC("lsm/inode_create")
int BPF_PROG(sf_lsm_create, struct inode *dir, struct dentry *dentry,
	     umode_t mode, int ret)
{
	SF_MUTANT_ALLOWS(sf_lsm_create);
	if (ret != 0)
		return ret;
	return sf_lsm_protect(dentry, SF_WHAT_PROT_CREATE);
}

SEC("lsm/inode_mkdir")
int BPF_PROG(sf_lsm_mkdir, struct inode *dir, struct dentry *dentry,
	     umode_t mode, int ret)
{
	SF_MUTANT_ALLOWS(sf_lsm_mkdir);
	if (ret != 0)
		return ret;
	return sf_lsm_protect(dentry, SF_WHAT_PROT_CREATE);
}

/* mknod, and bind() of a Unix socket, in a protected directory. */
SEC("lsm/inode_mknod")
int BPF_PROG(sf_lsm_mknod, struct inode *dir, struct dentry *dentry,
	     umode_t mode, dev_t dev, int ret)
{
	SF_MUTANT_ALLOWS(sf_lsm_mknod);
	if (ret != 0)
		return ret;
	return sf_lsm_protect(dentry, SF_WHAT_PROT_CREATE);
}

SEC("lsm/inode_symlink")
int BPF_PROG(sf_lsm_symlink, struct inode *dir, struct dentry *dentry,
	     const char *old_name, int ret)
{
	SF_MUTANT_ALLOWS(sf_lsm_symlink);
	if (ret != 0)
		return ret;
	return sf_lsm_protect(dentry, SF_WHAT_PROT_CREATE);
}

/* A hard link to a protected object (a second name outside), or into one. */
SEC("lsm/inode_link")
int BPF_PROG(sf_lsm_link, struct dentry *old_dentry, struct inode *dir,
	     struct dentry *new_dentry, int ret)
{
	SF_MUTANT_ALLOWS(sf_lsm_link);
	if (ret != 0)
		return ret;
	ret = sf_lsm_protect(old_dentry, SF_WHAT_PROT_CREATE);
	if (ret != 0)
		return ret;
	return sf_lsm_protect(new_dentry, SF_WHAT_PROT_CREATE);
}

/* An open for writing, or with O_TRUNC, of a protected object. */
SEC("lsm/file_open")
int BPF_PROG(sf_lsm_wopen, struct file *file, int ret)
{
	SF_MUTANT_ALLOWS(sf_lsm_wopen);
	if (ret != 0)
		return ret;
	if (!(BPF_CORE_READ(file, f_mode) & SF_FMODE_WRITE) &&
	    !(BPF_CORE_READ(file, f_flags) & SF_O_TRUNC))
		return 0;
	return sf_lsm_protect(BPF_CORE_READ(file, f_path.dentry),
			      SF_WHAT_PROT_WRITE);
}

/* connect() to a protected stream socket (the daemon's). */
SEC("lsm/unix_stream_connect")
int BPF_PROG(sf_lsm_uconnect, struct sock *sock, struct sock *other,
	     struct sock *newsk, int ret)
{
	struct dentry *d;

	SF_MUTANT_ALLOWS(sf_lsm_uconnect);
	if (ret != 0)
		return ret;
	d = sf_unix_dentry(other);
	if (!d)
		return 0;
	return sf_lsm_protect(d, SF_WHAT_PROT_CONNECT);
}

/* A datagram to a protected socket. */
SEC("lsm/unix_may_send")
int BPF_PROG(sf_lsm_usend, struct socket *sock, struct socket *other, int ret)
{
	struct dentry *d;

	SF_MUTANT_ALLOWS(sf_lsm_usend);
	if (ret != 0)
		return ret;
	d = sf_unix_dentry(BPF_CORE_READ(other, sk));
	if (!d)
		return 0;
	return sf_lsm_protect(d, SF_WHAT_PROT_CONNECT);
}

char LICENSE[] SEC("license") = "GPL";
