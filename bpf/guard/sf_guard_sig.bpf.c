// SPDX-License-Identifier: GPL-2.0
/*
 * The process guard's signal enforcer, for kernels that refuse BPF LSM
 * programs. tp_btf programs at system call entry and exit send SIGKILL to
 * an offender in a guarded sandbox; the kill is delivered before the call
 * returns to user space, but the call itself has run (see docs/guard.md).
 *
 *   sys_enter  ptrace(ATTACH|SEIZE|TRACEME), process_vm_readv/writev and
 *              pidfd_getfd, judged from their arguments: the target task is
 *              resolved with the bpf_task_from_vpid kfunc (the caller's pid
 *              namespace), a pidfd through the caller's fd table.
 *   sys_exit   open/openat/openat2, judged on the file actually opened (the
 *              fd table entry the call returned), never on the path string:
 *              a procfs inode names its task; a cgroup.procs/threads file
 *              opened for writing names its cgroup; a protected object
 *              opened for writing is refused. The /proc/<pid> magic links
 *              (exe, cwd, root, fd/<n>, ns/<x>) open a file elsewhere, so
 *              for them the path is walked again (sig_walk.bpf.h) and the
 *              result confirmed against the target's own exe, cwd, root,
 *              fd or namespace.
 *   io_uring_complete  io_uring's OPENAT/OPENAT2, judged like sys_exit's
 *              opens, on the fd they installed.
 *   sched_process_fork  a child placed outside the sandbox
 *              (clone3 CLONE_INTO_CGROUP) is killed with its parent before
 *              it first runs; so is a process sharing its fd table with
 *              its creator (sf_sig_cfiles: CLONE_FILES without
 *              CLONE_THREAD).
 *
 *   signal_deliver  undoes the SIGSTOP a killed PTRACE_ATTACH leaves queued.
 *
 * Signals, bpf(), io_uring_setup, perf_event_open, kcmp, symlinks into
 * procfs, protected objects, chdir, creat, open_tree and name_to_handle_at:
 * sig_reach.bpf.h (from the default cases of sys_enter and sys_exit).
 *
 * Requires bpf_task_from_vpid and bpf_send_signal_task (Linux 6.13+).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "guard/guard.bpf.h"

extern struct task_struct *bpf_task_from_vpid(s32 vpid) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;
extern int bpf_send_signal_task(struct task_struct *task, int sig,
				enum pid_type type, u64 value) __ksym;

/*
 * PTRACE_ATTACH completes before its killed caller dies, and queues a
 * SIGSTOP that would leave the target stopped after its tracer is gone. The
 * attacher's thread id -> its target's, from entry to a successful exit;
 * then the target's thread id, until that SIGSTOP is delivered and undone.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} sf_gattach SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} sf_gunstop SEC(".maps");

#define SF_SIGCONT 18
#define SF_SIGSTOP 19

struct sf_args {
	long nr; /* x86-64 numbering */
	unsigned long a[4];
};

static __always_inline void sf_read_args(struct pt_regs *regs, bool compat,
					 struct sf_args *args)
{
	if (compat) {
		args->a[0] = (__u32)BPF_CORE_READ(regs, bx);
		args->a[1] = (__u32)BPF_CORE_READ(regs, cx);
		args->a[2] = (__u32)BPF_CORE_READ(regs, dx);
		args->a[3] = (__u32)BPF_CORE_READ(regs, si);
	} else {
		args->a[0] = BPF_CORE_READ(regs, di);
		args->a[1] = BPF_CORE_READ(regs, si);
		args->a[2] = BPF_CORE_READ(regs, dx);
		args->a[3] = BPF_CORE_READ(regs, r10);
	}
}

/* The file behind fd in the current task's table, or NULL. */
static __always_inline struct file *sf_current_fd_file(struct task_struct *t,
						       long fd)
{
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	struct file **fds;
	struct file *f = NULL;

	if (!fdt || fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	bpf_core_read(&f, sizeof(f), &fds[fd]);
	return f;
}

/*
 * Kill (or, for an audited sandbox, only record) an offender. The signal
 * goes first; the event after, so that recording can never change it.
 */
static __always_inline __u32 sf_kill_action(const struct sf_sandbox_ref *sb)
{
	if (sb->mode != SF_GUARD_ENFORCE)
		return SF_ACTION_AUDITED;
	bpf_send_signal(SF_SIGKILL);
	return SF_ACTION_KILLED;
}

/*
 * ptrace-family calls: the target named by a pid or by the parent link.
 * v is scratch (struct sf_scratch), not stack.
 */
static __always_inline int sf_judge_task_call(struct task_struct *cur,
					      const struct sf_sandbox_ref *sb,
					      struct sf_verdict *v,
					      struct task_struct *target,
					      __u32 what, long nr)
{
	if (!target || sf_same_process(cur, target))
		return 0;
	__builtin_memset(v, 0, sizeof(*v));
	v->why = sf_foreign(cur, target, sb);
	if (!v->why)
		return 0;
	v->enforcer = SF_ENFORCER_SIGNAL;
	v->action = sf_kill_action(sb);
	if (v->action == SF_ACTION_KILLED && what == SF_WHAT_PTRACE_ATTACH) {
		__u32 tid = BPF_CORE_READ(cur, pid);
		__u32 ttid = BPF_CORE_READ(target, pid);

		bpf_map_update_elem(&sf_gattach, &tid, &ttid, BPF_ANY);
	}
	v->what = what;
	v->syscall_nr = nr;
	v->target_cgroup = sf_cgroup_id(sf_task_cgroup(target));
	sf_emit(sb, v, cur, target, NULL, 0);
	return 0;
}

static __always_inline struct task_struct *sf_pidfd_task(struct task_struct *cur,
							 long pidfd)
{
	struct file *f = sf_current_fd_file(cur, pidfd);
	struct inode *inode;

	if (!f)
		return NULL;
	inode = BPF_CORE_READ(f, f_inode);
	/* pidfs (6.9+) keeps the struct pid in the inode. */
	if (sf_sb_magic(inode) != SF_PID_FS_MAGIC)
		return NULL;
	return sf_pid_task(BPF_CORE_READ(inode, i_private));
}

/* Signals, refused primitives, protected objects, path walks. */
#include "guard/sig_reach.bpf.h"

SEC("tp_btf/sys_enter")
int BPF_PROG(sf_sig_enter, struct pt_regs *regs, long id)
{
	struct task_struct *cur, *target;
	struct sf_sandbox_ref sb;
	struct sf_scratch *s;
	struct sf_args *args;
	__u32 what;
	long nr;

	SF_MUTANT_ALLOWS(sf_sig_enter);
	/* The fast path: one compare chain for every other system call. */
	switch (id) {
	case SF_NR_PTRACE:
	case SF_NR_VM_READV:
	case SF_NR_VM_WRITEV:
	case SF_NR_PIDFD_GETFD:
	case SF_NR32_PTRACE:
	case SF_NR32_VM_READV:
	case SF_NR32_VM_WRITEV:
		break;
	default:
		return sf_enter_more(regs, id);
	}
	cur = bpf_get_current_task_btf();
	if (sf_compat_syscall(cur)) {
		nr = sf_nr32_to_64(id);
		/* An ia32 number that is none of ours (ioperm, unshare, ...). */
		if (nr < 0)
			return 0;
	} else {
		/* 26, 347, 348 are other calls in the x86-64 table. */
		if (id == SF_NR32_PTRACE || id == SF_NR32_VM_READV ||
		    id == SF_NR32_VM_WRITEV)
			return 0;
		nr = id;
	}
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	s = sf_scratch_of(SF_SLOT_ENTER);
	if (!s)
		return 0;
	args = &s->args;
	sf_read_args(regs, sf_compat_syscall(cur), args);
	args->nr = nr;

	if (nr == SF_NR_PTRACE) {
		if (args->a[0] == SF_PTRACE_TRACEME)
			return sf_judge_task_call(cur, &sb, &s->v,
						  BPF_CORE_READ(cur, real_parent),
						  SF_WHAT_PTRACE_TRACEME, nr);
		if (args->a[0] == SF_PTRACE_ATTACH)
			what = SF_WHAT_PTRACE_ATTACH;
		else if (args->a[0] == SF_PTRACE_SEIZE)
			what = SF_WHAT_PTRACE_SEIZE;
		else
			return 0; /* needs an attach first */
		target = bpf_task_from_vpid((s32)args->a[1]);
	} else if (nr == SF_NR_PIDFD_GETFD) {
		return sf_judge_task_call(cur, &sb, &s->v,
					  sf_pidfd_task(cur, (int)args->a[0]),
					  SF_WHAT_PIDFD_GETFD, nr);
	} else {
		what = nr == SF_NR_VM_READV ? SF_WHAT_VM_READV :
					      SF_WHAT_VM_WRITEV;
		target = bpf_task_from_vpid((s32)args->a[0]);
	}
	if (!target)
		return 0; /* no such process: the call fails with ESRCH */
	sf_judge_task_call(cur, &sb, &s->v, target, what, nr);
	bpf_task_release(target);
	return 0;
}

/* A /proc/<pid>/ file was opened: judge its task and its class. */
static __always_inline void sf_judge_proc_open(struct task_struct *cur,
					       struct sf_scratch *s,
					       const struct sf_sandbox_ref *sb,
					       struct file *f, struct inode *inode,
					       long nr)
{
	struct task_struct *target = sf_proc_inode_task(inode);
	struct sf_proc_entry *e = &s->proc;
	struct sf_verdict *v = &s->v;

	if (!target || sf_same_process(cur, target))
		return;
	sf_classify_proc(BPF_CORE_READ(f, f_path.dentry), e);
	if (e->flags & SF_PROCNAME_F_IGNORE)
		return;
	__builtin_memset(v, 0, sizeof(*v));
	v->why = sf_foreign(cur, target, sb);
	if (!v->why)
		return;
	v->enforcer = SF_ENFORCER_SIGNAL;
	if ((e->flags & SF_PROCNAME_F_READABLE) &&
	    !(sb->flags & SF_GUARD_F_KILL_READABLE))
		v->action = SF_ACTION_AUDITED;
	else
		v->action = sf_kill_action(sb);
	v->what = SF_WHAT_PROC_OPEN;
	v->proc_class = e->proc_class;
	v->syscall_nr = nr;
	v->target_cgroup = sf_cgroup_id(sf_task_cgroup(target));
	sf_emit(sb, v, cur, target, e->name.name, sizeof(e->name.name));
}

/* A cgroup.procs/threads file was opened for writing: inside the sandbox? */
static __always_inline void sf_judge_cgroup_open(struct task_struct *cur,
						 struct sf_scratch *s,
						 const struct sf_sandbox_ref *sb,
						 struct file *f,
						 struct inode *inode, long nr)
{
	struct kernfs_node *kn = BPF_CORE_READ(inode, i_private);
	union sf_name32 *name = &s->name.n32;
	struct sf_verdict *v = &s->v;
	struct cgroup *cg;

	if (!kn)
		return;
	__builtin_memset(name, 0, sizeof(*name));
	bpf_probe_read_kernel_str(name->c, sizeof(name->c),
				  BPF_CORE_READ(kn, name));
	if (!sf_is_procs_file(name))
		return;
	cg = sf_kernfs_file_cgroup(kn);
	if (sf_cgroup_within(cg, sb))
		return;
	__builtin_memset(v, 0, sizeof(*v));
	v->enforcer = SF_ENFORCER_SIGNAL;
	v->action = sf_kill_action(sb);
	v->what = SF_WHAT_CGROUP_WRITE;
	v->why = SF_WHY_OUTSIDE;
	v->syscall_nr = nr;
	v->target_cgroup = cg ? sf_cgroup_id(cg) : 0;
	sf_emit(sb, v, cur, NULL, name->c, sizeof(name->c));
}

/* A protected object opened for writing (or truncated, or created in). */
static __always_inline void sf_judge_prot_open(struct task_struct *cur,
					       struct sf_scratch *s,
					       const struct sf_sandbox_ref *sb,
					       struct file *f, long nr)
{
	struct dentry *d;

	if (!(BPF_CORE_READ(f, f_mode) & SF_FMODE_WRITE) &&
	    !(BPF_CORE_READ(f, f_flags) & SF_O_TRUNC))
		return;
	d = BPF_CORE_READ(f, f_path.dentry);
	if (!sf_dentry_protected(d))
		return;
	sf_refuse(s, sb, SF_WHAT_PROT_WRITE, SF_WHY_PROTECTED, NULL, nr,
		  (const char *)BPF_CORE_READ(d, d_name.name), SF_GUARD_NAME_LEN);
}

/*
 * The judgments of an opened file (in s: file, inode, magic, sb, args.nr):
 * a /proc/<pid>/ file, a cgroup.procs or cgroup.threads file opened for
 * writing, a protected object opened for writing. Returns 1 for a file
 * elsewhere, whose path may have gone through a magic link: walked next,
 * by the program (sf_judge_link_open()). Global: verified once.
 */
__noinline int sf_gf_opened(struct sf_scratch *s)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct inode *inode;
	struct file *f;
	long nr;

	if (!s)
		return 0;
	f = (void *)s->file;
	inode = (void *)s->inode;
	nr = s->args.nr;
	if (s->magic == SF_PROC_SUPER_MAGIC) {
		sf_judge_proc_open(cur, s, &s->sb, f, inode, nr);
		return 0;
	}
	if (s->magic == SF_CGROUP2_SUPER_MAGIC) {
		sf_judge_cgroup_open(cur, s, &s->sb, f, inode, nr);
		return 0;
	}
	sf_judge_prot_open(cur, s, &s->sb, f, nr);
	return 1;
}

/*
 * A file opened elsewhere than procfs: did the path go through another
 * process's /proc/<pid> magic link (exe, cwd, root, fd/<n>, ns/<x>)? The
 * path is walked again from its base (sig_walk.bpf.h) and the opened file
 * must confirm it: a path that merely looks like one kills nobody.
 */
static __always_inline void sf_judge_link_open(struct task_struct *cur,
					       struct sf_scratch *s,
					       struct pt_regs *regs, long nr,
					       struct file *f)
{
	struct sf_args *args = &s->args;
	bool one_path = nr == SF_NR_OPEN || nr == SF_NR_CREAT;

	sf_read_args(regs, sf_compat_syscall(cur), args);
	args->nr = nr;
	sf_walk_fill(&s->walk, &s->sb, nr,
		     one_path ? SF_AT_FDCWD : (int)args->a[0],
		     (void *)(one_path ? args->a[0] : args->a[1]), true,
		     (__u64)BPF_CORE_READ(f, f_path.mnt),
		     (__u64)BPF_CORE_READ(f, f_path.dentry),
		     BPF_CORE_READ(f, f_inode));
	sf_walk_run(&s->walk);
}

/*
 * A file was just opened as fd: a /proc/<pid>/ file, a cgroup.procs or
 * cgroup.threads file opened for writing, or (given the system call's
 * registers, to read its path) a /proc/<pid> magic link followed. slot:
 * the calling program's scratch (enum sf_slot), looked up only once the
 * open is one to judge (every open on the host comes here).
 */
static __always_inline void sf_judge_opened(struct task_struct *cur, long fd,
					    long nr, struct pt_regs *regs,
					    __u32 slot)
{
	struct sf_sandbox_ref sb;
	struct sf_scratch *s;
	struct inode *inode;
	struct file *f;
	__u64 magic;

	f = sf_current_fd_file(cur, fd);
	if (!f)
		return;
	inode = BPF_CORE_READ(f, f_inode);
	magic = sf_sb_magic(inode);
	if (magic == SF_CGROUP2_SUPER_MAGIC &&
	    !(BPF_CORE_READ(f, f_mode) & SF_FMODE_WRITE))
		return;
	if (!sf_find_sandbox(cur, &sb))
		return;
	s = sf_scratch_of(slot);
	if (!s)
		return;
	s->sb = sb;
	s->args.nr = nr;
	s->file = (__u64)f;
	s->inode = (__u64)inode;
	s->magic = magic;
	if (sf_gf_opened(s) && regs)
		sf_judge_link_open(cur, s, regs, nr, f);
}

/* A killed PTRACE_ATTACH succeeded: its target's SIGSTOP is to be undone. */
static __always_inline void sf_attach_done(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 *ttid = bpf_map_lookup_elem(&sf_gattach, &tid);
	__u32 one = 1;

	if (!ttid)
		return;
	bpf_map_update_elem(&sf_gunstop, ttid, &one, BPF_ANY);
	bpf_map_delete_elem(&sf_gattach, &tid);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sf_sig_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *cur;
	long id;

	SF_MUTANT_ALLOWS(sf_sig_exit);
	if (ret < 0)
		return 0;
	/* A direct (BTF) load, not a probe-read helper: the fast path. */
	id = regs->orig_ax;
	switch (id) {
	case SF_NR_PTRACE:
	case SF_NR32_PTRACE:
		sf_attach_done();
		return 0;
	case SF_NR_OPEN:
	case SF_NR_OPENAT:
		cur = bpf_get_current_task_btf();
		if (sf_compat_syscall(cur))
			return 0; /* 2 and 257 are other calls for ia32 */
		break;
	case SF_NR_OPENAT2:
		/* 437 is openat2 in the ia32 table too: judge both. */
		cur = bpf_get_current_task_btf();
		break;
	case SF_NR32_OPEN:
	case SF_NR32_OPENAT:
		/* 5 and 295 are fstat and preadv for x86-64: most often. */
		cur = bpf_get_current_task_btf();
		if (!sf_compat_syscall(cur))
			return 0;
		id = sf_nr32_to_64(id);
		break;
	default:
		/* creat (85, ia32 8) comes back here: judged as an open. */
		id = sf_exit_more(regs, id, ret);
		if (id < 0)
			return 0;
		cur = bpf_get_current_task_btf();
		break;
	}

	sf_judge_opened(cur, ret, id, regs, SF_SLOT_EXIT);
	return 0;
}

/*
 * io_uring opens files without an open system call: its OPENAT and OPENAT2
 * requests are judged when they complete, like sys_exit judges an open,
 * on the fd they installed (in the submitter's or an io-wq worker's
 * context; both are threads of the submitting process). The path is gone
 * by then, so the magic links are not judged here, and a "direct
 * descriptor" (a fixed-file slot instead of an fd) escapes: docs/guard.md.
 */
SEC("tp_btf/io_uring_complete")
int BPF_PROG(sf_sig_uring, void *ring, void *req, struct io_uring_cqe *cqe)
{
	struct io_kiocb *r = req;
	__u8 op = BPF_CORE_READ(r, opcode);
	__s32 res;

	SF_MUTANT_ALLOWS(sf_sig_uring);
	if (op != bpf_core_enum_value(enum io_uring_op, IORING_OP_OPENAT) &&
	    op != bpf_core_enum_value(enum io_uring_op, IORING_OP_OPENAT2))
		return 0;
	res = BPF_CORE_READ(cqe, res);
	if (res < 0)
		return 0;
	sf_judge_opened(bpf_get_current_task_btf(), res, SF_NR_IO_URING_ENTER,
			NULL, SF_SLOT_URING);
	return 0;
}

/*
 * A new task whose cgroup differs from its parent's: clone3 with
 * CLONE_INTO_CGROUP. The child has not run yet (it is woken after this
 * tracepoint), so killing it here means it never executes a user
 * instruction outside the sandbox.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(sf_sig_fork, struct task_struct *parent, struct task_struct *child)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct sf_verdict v = {};
	struct sf_sandbox_ref sb;
	struct cgroup *cg;

	SF_MUTANT_ALLOWS(sf_sig_fork);
	if (!child || BPF_CORE_READ(child, cgroups) == BPF_CORE_READ(cur, cgroups))
		return 0;
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	cg = sf_task_cgroup(child);
	if (sf_cgroup_within(cg, &sb))
		return 0;
	v.enforcer = SF_ENFORCER_SIGNAL;
	v.action = sf_kill_action(&sb);
	if (v.action == SF_ACTION_KILLED)
		bpf_send_signal_task(child, SF_SIGKILL, PIDTYPE_TGID, 0);
	v.what = SF_WHAT_CGROUP_CLONE;
	v.why = SF_WHY_OUTSIDE;
	v.syscall_nr = SF_NR_CLONE3;
	v.target_cgroup = sf_cgroup_id(cg);
	sf_emit(&sb, &v, cur, child, NULL, 0);
	return 0;
}

/*
 * A new process sharing its creator's fd table (clone CLONE_FILES without
 * CLONE_THREAD): a file the guard kills one of them for opening would stay
 * open in the other, which the kill does not reach. Refused: both die
 * before the child runs. Threads (same thread group) die together.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(sf_sig_cfiles, struct task_struct *parent,
	     struct task_struct *child)
{
	struct task_struct *cur;
	struct sf_verdict v = {};
	struct sf_sandbox_ref sb;
	struct pt_regs *regs;

	SF_MUTANT_ALLOWS(sf_sig_cfiles);
	if (!child || child->files != parent->files ||
	    child->tgid == parent->tgid)
		return 0;
	cur = bpf_get_current_task_btf();
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	v.enforcer = SF_ENFORCER_SIGNAL;
	v.action = sf_kill_action(&sb);
	if (v.action == SF_ACTION_KILLED)
		bpf_send_signal_task(child, SF_SIGKILL, PIDTYPE_TGID, 0);
	v.what = SF_WHAT_CLONE_FILES;
	v.why = SF_WHY_REFUSED;
	regs = (struct pt_regs *)bpf_task_pt_regs(cur);
	v.syscall_nr = regs ? BPF_CORE_READ(regs, orig_ax) : -1;
	sf_emit(&sb, &v, cur, child, NULL, 0);
	return 0;
}

/*
 * The target of a killed PTRACE_ATTACH takes the attach's SIGSTOP (after
 * its tracer died, or on the way through ptrace_stop()): a SIGCONT to its
 * own process now makes the kernel abandon the stop (it clears
 * JOBCTL_STOP_DEQUEUED), or wakes it right after if the send is deferred
 * (siglock is held here, so bpf_send_signal goes through irq_work).
 */
SEC("tp_btf/signal_deliver")
int BPF_PROG(sf_sig_unstop, int sig, struct kernel_siginfo *info,
	     struct k_sigaction *ka)
{
	__u32 tid;

	SF_MUTANT_ALLOWS(sf_sig_unstop);
	if (sig != SF_SIGSTOP)
		return 0;
	tid = (__u32)bpf_get_current_pid_tgid();
	if (!bpf_map_lookup_elem(&sf_gunstop, &tid))
		return 0;
	bpf_map_delete_elem(&sf_gunstop, &tid);
	bpf_send_signal(SF_SIGCONT);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
