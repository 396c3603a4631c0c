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
 *              opened for writing names its cgroup. The /proc/<pid> magic
 *              links (exe, cwd, root, fd/<n>) open a file elsewhere, so for
 *              them the path's tail is parsed and the result confirmed
 *              against the target's own exe, cwd, root or fd.
 *   io_uring_complete  io_uring's OPENAT/OPENAT2, judged like sys_exit's
 *              opens, on the fd they installed.
 *   sched_process_fork  a child placed outside the sandbox
 *              (clone3 CLONE_INTO_CGROUP) is killed with its parent before
 *              it first runs.
 *
 *   signal_deliver  undoes the SIGSTOP a killed PTRACE_ATTACH leaves queued.
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

/* ptrace-family calls: the target named by a pid or by the parent link. */
static __always_inline int sf_judge_task_call(struct task_struct *cur,
					      const struct sf_sandbox_ref *sb,
					      struct task_struct *target,
					      __u32 what, long nr)
{
	struct sf_verdict v = {};

	if (!target || sf_same_process(cur, target))
		return 0;
	v.why = sf_foreign(cur, target, sb);
	if (!v.why)
		return 0;
	v.enforcer = SF_ENFORCER_SIGNAL;
	v.action = sf_kill_action(sb);
	if (v.action == SF_ACTION_KILLED && what == SF_WHAT_PTRACE_ATTACH) {
		__u32 tid = BPF_CORE_READ(cur, pid);
		__u32 ttid = BPF_CORE_READ(target, pid);

		bpf_map_update_elem(&sf_gattach, &tid, &ttid, BPF_ANY);
	}
	v.what = what;
	v.syscall_nr = nr;
	v.target_cgroup = sf_cgroup_id(sf_task_cgroup(target));
	sf_emit(sb, &v, cur, target, NULL, 0);
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

SEC("tp_btf/sys_enter")
int BPF_PROG(sf_sig_enter, struct pt_regs *regs, long id)
{
	struct task_struct *cur, *target;
	struct sf_sandbox_ref sb;
	struct sf_args args;
	__u32 what;

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
		return 0;
	}
	cur = bpf_get_current_task_btf();
	if (sf_compat_syscall(cur)) {
		args.nr = sf_nr32_to_64(id);
		/* An ia32 number that is none of ours (ioperm, unshare, ...). */
		if (args.nr < 0)
			return 0;
	} else {
		/* 26, 347, 348 are other calls in the x86-64 table. */
		if (id == SF_NR32_PTRACE || id == SF_NR32_VM_READV ||
		    id == SF_NR32_VM_WRITEV)
			return 0;
		args.nr = id;
	}
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	sf_read_args(regs, sf_compat_syscall(cur), &args);

	if (args.nr == SF_NR_PTRACE) {
		if (args.a[0] == SF_PTRACE_TRACEME)
			return sf_judge_task_call(cur, &sb,
						  BPF_CORE_READ(cur, real_parent),
						  SF_WHAT_PTRACE_TRACEME, args.nr);
		if (args.a[0] == SF_PTRACE_ATTACH)
			what = SF_WHAT_PTRACE_ATTACH;
		else if (args.a[0] == SF_PTRACE_SEIZE)
			what = SF_WHAT_PTRACE_SEIZE;
		else
			return 0; /* needs an attach first */
		target = bpf_task_from_vpid((s32)args.a[1]);
	} else if (args.nr == SF_NR_PIDFD_GETFD) {
		return sf_judge_task_call(cur, &sb, sf_pidfd_task(cur, (int)args.a[0]),
					  SF_WHAT_PIDFD_GETFD, args.nr);
	} else {
		what = args.nr == SF_NR_VM_READV ? SF_WHAT_VM_READV :
						   SF_WHAT_VM_WRITEV;
		target = bpf_task_from_vpid((s32)args.a[0]);
	}
	if (!target)
		return 0; /* no such process: the call fails with ESRCH */
	sf_judge_task_call(cur, &sb, target, what, args.nr);
	bpf_task_release(target);
	return 0;
}

/* A /proc/<pid>/ file was opened: judge its task and its class. */
static __always_inline void sf_judge_proc_open(struct task_struct *cur,
					       const struct sf_sandbox_ref *sb,
					       struct file *f, struct inode *inode,
					       long nr)
{
	struct task_struct *target = sf_proc_inode_task(inode);
	struct sf_proc_entry e;
	struct sf_verdict v = {};

	if (!target || sf_same_process(cur, target))
		return;
	sf_classify_proc(BPF_CORE_READ(f, f_path.dentry), &e);
	if (e.flags & SF_PROCNAME_F_IGNORE)
		return;
	v.why = sf_foreign(cur, target, sb);
	if (!v.why)
		return;
	v.enforcer = SF_ENFORCER_SIGNAL;
	if ((e.flags & SF_PROCNAME_F_READABLE) &&
	    !(sb->flags & SF_GUARD_F_KILL_READABLE))
		v.action = SF_ACTION_AUDITED;
	else
		v.action = sf_kill_action(sb);
	v.what = SF_WHAT_PROC_OPEN;
	v.proc_class = e.proc_class;
	v.syscall_nr = nr;
	v.target_cgroup = sf_cgroup_id(sf_task_cgroup(target));
	sf_emit(sb, &v, cur, target, e.name.name, sizeof(e.name.name));
}

/* A cgroup.procs/threads file was opened for writing: inside the sandbox? */
static __always_inline void sf_judge_cgroup_open(struct task_struct *cur,
						 struct file *f,
						 struct inode *inode, long nr)
{
	struct kernfs_node *kn = BPF_CORE_READ(inode, i_private);
	struct sf_verdict v = {};
	struct sf_sandbox_ref sb;
	union sf_name32 name = {};
	struct cgroup *cg;

	if (!kn)
		return;
	bpf_probe_read_kernel_str(name.c, sizeof(name.c), BPF_CORE_READ(kn, name));
	if (!sf_is_procs_file(&name))
		return;
	if (!sf_find_sandbox(cur, &sb))
		return;
	cg = sf_kernfs_file_cgroup(kn);
	if (sf_cgroup_within(cg, &sb))
		return;
	v.enforcer = SF_ENFORCER_SIGNAL;
	v.action = sf_kill_action(&sb);
	v.what = SF_WHAT_CGROUP_WRITE;
	v.why = SF_WHY_OUTSIDE;
	v.syscall_nr = nr;
	v.target_cgroup = cg ? sf_cgroup_id(cg) : 0;
	sf_emit(&sb, &v, cur, NULL, name.c, sizeof(name.c));
}

/*
 * The /proc/<pid> magic links. Opening /proc/<pid>/exe, cwd, root or
 * fd/<n> follows the link: the file opened is the target's binary,
 * directory or open file, on its own file system, so nothing about it says
 * "procfs". For these the path's tail is parsed (after the call, from the
 * caller's memory) into up to three components, ".", ".." and empty ones
 * resolved, and a match is confirmed against the target's own exe, cwd,
 * root or fd table before anyone is killed: a path that merely looks like
 * one kills nobody. The string can be raced by another thread of the
 * caller; docs/guard.md says so.
 */
#define SF_PATH_MAX 4096
#define SF_PATH_MASK (SF_PATH_MAX - 1)
#define SF_AT_FDCWD -100

struct sf_path_buf {
	char buf[SF_PATH_MAX];
};

/* Per task, not per CPU: a task may be preempted in its system call exit. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sf_path_buf);
} sf_gpath SEC(".maps");

struct sf_parse {
	char *buf;
	int last; /* index of the last byte; step i looks at last - i */
	int end;  /* end (exclusive) of the component being walked */
	int skip; /* ".." components still to apply */
	int n;
	int off0, len0, off1, len1, off2, len2; /* last, second, third */
};

static __always_inline void sf_parse_flush(struct sf_parse *p, int start)
{
	int len = p->end - start;
	char *b = p->buf;

	if (len <= 0)
		return;
	if (len == 1 && b[start & SF_PATH_MASK] == '.')
		return;
	if (len == 2 && b[start & SF_PATH_MASK] == '.' &&
	    b[(start + 1) & SF_PATH_MASK] == '.') {
		p->skip++;
		return;
	}
	if (p->skip > 0) {
		p->skip--;
		return;
	}
	if (p->n == 0) {
		p->off0 = start;
		p->len0 = len;
	} else if (p->n == 1) {
		p->off1 = start;
		p->len1 = len;
	} else if (p->n == 2) {
		p->off2 = start;
		p->len2 = len;
	}
	p->n++;
}

/*
 * One byte per step, the position derived from the step number and a
 * constant (never from a field the step updates), so that the verifier sees
 * every step's state as the same one and verifies the callback once.
 */
static long sf_parse_step(__u32 i, void *ctx)
{
	struct sf_parse *p = ctx;
	int pos = p->last - (int)i;

	if (pos < 0) {
		sf_parse_flush(p, 0);
		return 1;
	}
	if (p->buf[pos & SF_PATH_MASK] == '/') {
		sf_parse_flush(p, pos + 1);
		p->end = pos;
	}
	return p->n >= 3 ? 1 : 0;
}

static __always_inline bool sf_comp_is(const char *b, int off, int len,
				       const char *lit, int lit_len)
{
	if (len != lit_len)
		return false;
	for (int i = 0; i < lit_len; i++)
		if (b[(off + i) & SF_PATH_MASK] != lit[i])
			return false;
	return true;
}

/* A component as a decimal number (pid, fd), or -1. */
static __always_inline long sf_comp_num(const char *b, int off, int len)
{
	long v = 0;

	if (len <= 0 || len > 10)
		return -1;
	for (int i = 0; i < 10; i++) {
		char c;

		if (i >= len)
			break;
		c = b[(off + i) & SF_PATH_MASK];
		if (c < '0' || c > '9')
			return -1;
		v = v * 10 + (c - '0');
	}
	return v;
}

/* Is f the object the target's magic link of this class points at? */
static __always_inline bool sf_link_matches(struct task_struct *t, __u32 cls,
					    long fdnum, struct file *f)
{
	struct fdtable *fdt;
	struct file **fds;
	struct file *tf = NULL;

	switch (cls) {
	case SF_PROC_EXE:
		return BPF_CORE_READ(t, mm, exe_file, f_inode) ==
		       BPF_CORE_READ(f, f_inode);
	case SF_PROC_CWD:
		return BPF_CORE_READ(t, fs, pwd.dentry) ==
		       BPF_CORE_READ(f, f_path.dentry);
	case SF_PROC_ROOT:
		return BPF_CORE_READ(t, fs, root.dentry) ==
		       BPF_CORE_READ(f, f_path.dentry);
	case SF_PROC_FD_LINK:
		fdt = BPF_CORE_READ(t, files, fdt);
		if (!fdt || fdnum < 0 || fdnum >= BPF_CORE_READ(fdt, max_fds))
			return false;
		fds = BPF_CORE_READ(fdt, fd);
		bpf_core_read(&tf, sizeof(tf), &fds[fdnum]);
		return tf && BPF_CORE_READ(tf, f_inode) == BPF_CORE_READ(f, f_inode);
	}
	return false;
}

static __always_inline void sf_judge_link(struct task_struct *cur,
					  const struct sf_sandbox_ref *sb,
					  struct task_struct *target, __u32 cls,
					  long fdnum, struct file *f, long nr,
					  const char *tail)
{
	struct sf_verdict v = {};

	if (sf_same_process(cur, target))
		return;
	if (!sf_link_matches(target, cls, fdnum, f))
		return;
	v.why = sf_foreign(cur, target, sb);
	if (!v.why)
		return;
	v.enforcer = SF_ENFORCER_SIGNAL;
	v.action = sf_kill_action(sb);
	v.what = SF_WHAT_PROC_LINK;
	v.proc_class = cls;
	v.syscall_nr = nr;
	v.target_cgroup = sf_cgroup_id(sf_task_cgroup(target));
	sf_emit(sb, &v, cur, target, tail, SF_GUARD_NAME_LEN);
}

static __always_inline void sf_judge_link_open(struct task_struct *cur,
					       const struct sf_sandbox_ref *sb,
					       struct pt_regs *regs, long nr,
					       struct file *f)
{
	struct sf_parse p = {};
	struct sf_path_buf *pb;
	struct task_struct *t;
	struct dentry *base;
	struct sf_args args;
	long fdnum = -1;
	int pid_comp, dirfd, len, tail;
	__u32 cls;
	char *b;

	pb = bpf_task_storage_get(&sf_gpath, cur, 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!pb)
		return;
	b = pb->buf;
	sf_read_args(regs, sf_compat_syscall(cur), &args);
	dirfd = nr == SF_NR_OPEN ? SF_AT_FDCWD : (int)args.a[0];
	len = bpf_probe_read_user_str(b, SF_PATH_MAX,
				      (void *)(nr == SF_NR_OPEN ? args.a[0] :
								  args.a[1]));
	if (len <= 1)
		return;
	p.buf = b;
	p.last = len - 2; /* the byte before the NUL */
	p.end = len - 1;
	bpf_loop(len + 1, sf_parse_step, &p, 0);
	if (p.n == 0)
		return;

	if (sf_comp_is(b, p.off0, p.len0, "exe", 3)) {
		cls = SF_PROC_EXE;
	} else if (sf_comp_is(b, p.off0, p.len0, "cwd", 3)) {
		cls = SF_PROC_CWD;
	} else if (sf_comp_is(b, p.off0, p.len0, "root", 4)) {
		cls = SF_PROC_ROOT;
	} else {
		fdnum = sf_comp_num(b, p.off0, p.len0);
		if (fdnum < 0)
			return;
		cls = SF_PROC_FD_LINK;
	}
	pid_comp = 1;
	if (cls == SF_PROC_FD_LINK) {
		/* ".../<pid>/fd/<n>", or "<n>" relative to a .../fd directory */
		if (p.n >= 2) {
			if (!sf_comp_is(b, p.off1, p.len1, "fd", 2))
				return;
			pid_comp = 2;
		} else {
			pid_comp = 1;
		}
	}
	tail = len - 1 - SF_GUARD_NAME_LEN + 1;
	if (tail < 0)
		tail = 0;

	if (pid_comp < p.n) {
		int off = pid_comp == 1 ? p.off1 : p.off2;
		int clen = pid_comp == 1 ? p.len1 : p.len2;
		long pid = sf_comp_num(b, off, clen);

		/* "self" and "thread-self" are the caller: never foreign. */
		if (pid <= 0)
			return;
		t = bpf_task_from_vpid((s32)pid);
		if (!t)
			return;
		sf_judge_link(cur, sb, t, cls, fdnum, f, nr,
			      b + (tail & SF_PATH_MASK));
		bpf_task_release(t);
		return;
	}
	/* The pid is the directory the path is relative to. */
	if (b[0] == '/' || p.skip)
		return;
	if (dirfd == SF_AT_FDCWD) {
		base = BPF_CORE_READ(cur, fs, pwd.dentry);
	} else {
		struct file *df = sf_current_fd_file(cur, dirfd);

		if (!df)
			return;
		base = BPF_CORE_READ(df, f_path.dentry);
	}
	if (!base || sf_sb_magic(BPF_CORE_READ(base, d_inode)) !=
			     SF_PROC_SUPER_MAGIC)
		return;
	t = sf_proc_inode_task(BPF_CORE_READ(base, d_inode));
	if (!t)
		return;
	sf_judge_link(cur, sb, t, cls, fdnum, f, nr, b + (tail & SF_PATH_MASK));
}

/*
 * A file was just opened as fd: a /proc/<pid>/ file, a cgroup.procs or
 * cgroup.threads file opened for writing, or (given the system call's
 * registers, to read its path) a /proc/<pid> magic link followed.
 */
static __always_inline void sf_judge_opened(struct task_struct *cur, long fd,
					    long nr, struct pt_regs *regs)
{
	struct sf_sandbox_ref sb;
	struct inode *inode;
	struct file *f;
	__u64 magic;

	f = sf_current_fd_file(cur, fd);
	if (!f)
		return;
	inode = BPF_CORE_READ(f, f_inode);
	magic = sf_sb_magic(inode);
	if (magic == SF_PROC_SUPER_MAGIC) {
		if (sf_find_sandbox(cur, &sb))
			sf_judge_proc_open(cur, &sb, f, inode, nr);
	} else if (magic == SF_CGROUP2_SUPER_MAGIC) {
		if (BPF_CORE_READ(f, f_mode) & SF_FMODE_WRITE)
			sf_judge_cgroup_open(cur, f, inode, nr);
	} else if (regs && sf_find_sandbox(cur, &sb)) {
		sf_judge_link_open(cur, &sb, regs, nr, f);
	}
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
		return 0;
	}

	sf_judge_opened(cur, ret, id, regs);
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

	if (op != bpf_core_enum_value(enum io_uring_op, IORING_OP_OPENAT) &&
	    op != bpf_core_enum_value(enum io_uring_op, IORING_OP_OPENAT2))
		return 0;
	res = BPF_CORE_READ(cqe, res);
	if (res < 0)
		return 0;
	sf_judge_opened(bpf_get_current_task_btf(), res, SF_NR_IO_URING_ENTER,
			NULL);
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
