/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The signal enforcer, out of reach: the system calls it judges besides
 * the ptrace family and opens. Where the kernel gives no hook at the access
 * itself (no LSM, no kprobes), the primitive is refused in a guarded
 * sandbox instead of parsed around:
 *
 *   at entry (sf_enter_more, from sf_sig_enter's default case)
 *     kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo,
 *     pidfd_send_signal   a signal to a process outside the sandbox; kill(0)
 *                         and kill(-pgrp) when a member of the group is
 *                         outside; kill(-1) always. The signal still lands:
 *                         the call runs after entry.
 *     io_uring_setup      unless the sandbox allows io_uring
 *     perf_event_open     on another process, a CPU (pid -1) or a cgroup
 *     kcmp                when either process is foreign
 *     bpf                 always
 *     symlink, symlinkat  a target with a component proc, fd, stdin,
 *                         stdout or stderr (see docs/guard.md)
 *     unlink, unlinkat, rmdir, rename*, mkdir*, mknod*, link*, symlink*,
 *     truncate, chmod*, chown*, connect and bind (AF_UNIX)   a protected
 *                         object, by path; ftruncate, fchmod, fchown by fd
 *     chdir               remembers the old working directory for its exit
 *   at exit (sf_exit_more, from sf_sig_exit's default case)
 *     creat               like open
 *     chdir               into another process's magic link (the new
 *                         working directory confirms the walk)
 *     open_tree           of anything on procfs, or through a magic link
 *     name_to_handle_at   through another process's magic link
 *
 * clone(CLONE_FILES) without CLONE_THREAD is judged at sched_process_fork
 * (sf_sig_cfiles), where the shared table can be read.
 *
 * Included by sf_guard_sig.bpf.c after sig_walk.bpf.h and sf_pidfd_task().
 */
#ifndef SANDFENCE_BPF_GUARD_SIG_REACH_BPF_H_
#define SANDFENCE_BPF_GUARD_SIG_REACH_BPF_H_

#include "guard/sig_walk.bpf.h"

#define SF_AF_UNIX 1
#define SF_SYS_BIND 2 /* socketcall() */
#define SF_SYS_CONNECT 3
#define SF_PERF_FLAG_PID_CGROUP (1UL << 2)
#define SF_PIDFD_SIGNAL_PROCESS_GROUP (1U << 2)
#define SF_AT_EMPTY_PATH 0x1000
/* Members of a process group looked at before it counts as outside. */
#define SF_GROUP_MAX 256

/* Entry or exit numbers of the calls above in the running task's table. */
static __always_inline long sf_more_nr(bool compat, long id)
{
	if (compat) {
		switch (id) {
		case SF_NR32_KILL: return SF_NR_KILL;
		case SF_NR32_TKILL: return SF_NR_TKILL;
		case SF_NR32_TGKILL: return SF_NR_TGKILL;
		case SF_NR32_RT_SIGQUEUEINFO: return SF_NR_RT_SIGQUEUEINFO;
		case SF_NR32_RT_TGSIGQUEUEINFO: return SF_NR_RT_TGSIGQUEUEINFO;
		case SF_NR32_PERF_EVENT_OPEN: return SF_NR_PERF_EVENT_OPEN;
		case SF_NR32_KCMP: return SF_NR_KCMP;
		case SF_NR32_BPF: return SF_NR_BPF;
		case SF_NR32_SYMLINK: return SF_NR_SYMLINK;
		case SF_NR32_SYMLINKAT: return SF_NR_SYMLINKAT;
		case SF_NR32_UNLINK: return SF_NR_UNLINK;
		case SF_NR32_UNLINKAT: return SF_NR_UNLINKAT;
		case SF_NR32_RMDIR: return SF_NR_RMDIR;
		case SF_NR32_RENAME: return SF_NR_RENAME;
		case SF_NR32_RENAMEAT: return SF_NR_RENAMEAT;
		case SF_NR32_RENAMEAT2: return SF_NR_RENAMEAT2;
		case SF_NR32_TRUNCATE:
		case SF_NR32_TRUNCATE64: return SF_NR_TRUNCATE;
		case SF_NR32_FTRUNCATE:
		case SF_NR32_FTRUNCATE64: return SF_NR_FTRUNCATE;
		case SF_NR32_MKDIR: return SF_NR_MKDIR;
		case SF_NR32_MKDIRAT: return SF_NR_MKDIRAT;
		case SF_NR32_MKNOD: return SF_NR_MKNOD;
		case SF_NR32_MKNODAT: return SF_NR_MKNODAT;
		case SF_NR32_LINK: return SF_NR_LINK;
		case SF_NR32_LINKAT: return SF_NR_LINKAT;
		case SF_NR32_CHMOD: return SF_NR_CHMOD;
		case SF_NR32_FCHMOD: return SF_NR_FCHMOD;
		case SF_NR32_FCHMODAT: return SF_NR_FCHMODAT;
		case SF_NR32_CHOWN16:
		case SF_NR32_CHOWN: return SF_NR_CHOWN;
		case SF_NR32_LCHOWN16:
		case SF_NR32_LCHOWN: return SF_NR_LCHOWN;
		case SF_NR32_FCHOWN16:
		case SF_NR32_FCHOWN: return SF_NR_FCHOWN;
		case SF_NR32_FCHOWNAT: return SF_NR_FCHOWNAT;
		case SF_NR32_SOCKETCALL: return SF_NR32_SOCKETCALL;
		case SF_NR32_CONNECT: return SF_NR_CONNECT;
		case SF_NR32_BIND: return SF_NR_BIND;
		case SF_NR32_CHDIR: return SF_NR_CHDIR;
		case SF_NR32_NAME_TO_HANDLE_AT: return SF_NR_NAME_TO_HANDLE_AT;
		case SF_NR32_CREAT: return SF_NR_CREAT;
		case SF_NR_PIDFD_SEND_SIGNAL:
		case SF_NR_IO_URING_SETUP:
		case SF_NR_OPEN_TREE:
		case SF_NR_FCHMODAT2:
			return id; /* the same in both tables */
		}
		return -1;
	}
	switch (id) {
	case SF_NR_KILL:
	case SF_NR_TKILL:
	case SF_NR_TGKILL:
	case SF_NR_RT_SIGQUEUEINFO:
	case SF_NR_RT_TGSIGQUEUEINFO:
	case SF_NR_PIDFD_SEND_SIGNAL:
	case SF_NR_IO_URING_SETUP:
	case SF_NR_PERF_EVENT_OPEN:
	case SF_NR_KCMP:
	case SF_NR_BPF:
	case SF_NR_SYMLINK:
	case SF_NR_SYMLINKAT:
	case SF_NR_UNLINK:
	case SF_NR_UNLINKAT:
	case SF_NR_RMDIR:
	case SF_NR_RENAME:
	case SF_NR_RENAMEAT:
	case SF_NR_RENAMEAT2:
	case SF_NR_TRUNCATE:
	case SF_NR_FTRUNCATE:
	case SF_NR_MKDIR:
	case SF_NR_MKDIRAT:
	case SF_NR_MKNOD:
	case SF_NR_MKNODAT:
	case SF_NR_LINK:
	case SF_NR_LINKAT:
	case SF_NR_CHMOD:
	case SF_NR_FCHMOD:
	case SF_NR_FCHMODAT:
	case SF_NR_FCHMODAT2:
	case SF_NR_CHOWN:
	case SF_NR_LCHOWN:
	case SF_NR_FCHOWN:
	case SF_NR_FCHOWNAT:
	case SF_NR_CONNECT:
	case SF_NR_BIND:
	case SF_NR_CHDIR:
	case SF_NR_OPEN_TREE:
	case SF_NR_NAME_TO_HANDLE_AT:
	case SF_NR_CREAT:
		return id;
	}
	return -1;
}

/*
 * The thread_info status word by a direct (BTF) load: these numbers include
 * hot x86-64 calls (mmap, brk, ioctl, getpid are ia32 link, chdir, lchown,
 * mkdir), which pay only this load and a compare.
 */
static __always_inline bool sf_compat_fast(struct task_struct *t)
{
	return t->thread_info.status & SF_TS_COMPAT;
}

/* The fifth argument (perf_event_open's flags). */
static __always_inline unsigned long sf_arg5(struct pt_regs *regs, bool compat)
{
	return compat ? (__u32)BPF_CORE_READ(regs, di) : BPF_CORE_READ(regs, r8);
}

/* What sf_gf_refuse() records. */
struct sf_refusal {
	struct sf_sandbox_ref sb;
	__u32 what;
	__u32 why;
	__s64 nr;
	__u64 target; /* struct task_struct *, or 0 */
	__u64 name;   /* kernel or map memory, or 0 */
	__u32 name_len;
	__u32 pad;
	struct sf_verdict v; /* sf_gf_refuse's own */
};

/*
 * A signal program's scratch: the system call being judged, what the
 * judgments made in line record, and the request (with its working state)
 * each global function is handed. Kept off the BPF stack, whose 512 bytes
 * every call chain shares (and whose accounting differs between builds of
 * one kernel).
 *
 * A per-CPU array with one slot per program (enum sf_slot): tp_btf
 * programs run with preemption disabled and the kernel never runs a
 * program inside itself on one CPU (prog->active), but one program may
 * interrupt another (io_uring_complete from an interrupt while sys_exit
 * runs), so no two programs share a slot. Not in the per-task sf_gwalk:
 * the interrupting program runs with the same current and would find the
 * same buffer. A request is filled right before its function is called,
 * and each function writes only its own request (and, for sf_gf_enter,
 * sf_gf_exit and sf_gf_opened, the one they hand back).
 *
 * The global functions do not call the path walks themselves: sf_gf_enter,
 * sf_gf_exit and sf_gf_opened fill the walk's request and return 1, and
 * the program calls the walk (sf_gf_prot_path, sf_walk_run). A walk's
 * frames then stack on the program's frame alone, never on another global
 * function's: no program is more than four frames deep.
 */
enum sf_slot {
	SF_SLOT_ENTER = 0, /* sf_sig_enter */
	SF_SLOT_EXIT,      /* sf_sig_exit */
	SF_SLOT_URING,     /* sf_sig_uring */
	SF_SLOTS,
};

struct sf_scratch {
	/* The call (sf_gf_enter's and sf_gf_exit's input). */
	struct sf_sandbox_ref sb;
	struct sf_args args; /* x86-64 numbers; ia32 arguments zero-extended */
	__u64 arg5;          /* the fifth argument (at entry) */
	__s64 ret;           /* at exit */
	/* An open's result (sf_gf_opened's input). */
	__u64 file;  /* struct file * */
	__u64 inode; /* its struct inode * */
	__u64 magic; /* its file system's */
	/* Judgments made in line. */
	struct sf_verdict v;
	struct sf_proc_entry proc;
	union {
		union sf_name16 n16;
		union sf_name32 n32;
	} name;
	/* The global functions' requests. */
	struct sf_refusal ref;    /* sf_gf_refuse */
	struct sf_prot_req prot;  /* sf_gf_prot_path */
	struct sf_walk_req walk;  /* sf_gf_walk */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SF_SLOTS);
	__type(key, __u32);
	__type(value, struct sf_scratch);
} sf_gscratch SEC(".maps");

/* This CPU's scratch for the program of slot (enum sf_slot). */
static __always_inline struct sf_scratch *sf_scratch_of(__u32 slot)
{
	return bpf_map_lookup_elem(&sf_gscratch, &slot);
}

/* --- Signals ---------------------------------------------------------------- */

static __always_inline void sf_signal_kill(struct task_struct *cur,
					   struct sf_scratch *s,
					   const struct sf_sandbox_ref *sb,
					   struct task_struct *target, int sig,
					   bool group, long nr)
{
	struct sf_verdict *v = &s->v;

	__builtin_memset(v, 0, sizeof(*v));
	v->enforcer = SF_ENFORCER_SIGNAL;
	v->action = sf_kill_action(sb);
	v->what = SF_WHAT_SIGNAL;
	v->why = target ? sf_foreign(cur, target, sb) | SF_WHY_OUTSIDE :
			  SF_WHY_OUTSIDE;
	v->syscall_nr = nr;
	v->target_cgroup = target ? sf_cgroup_id(sf_task_cgroup(target)) : 0;
	sf_signal_name(&s->name.n16, sig, group);
	sf_emit(sb, v, cur, target, s->name.n16.c, sizeof(s->name.n16.c));
}

/* One process (or thread): outside the sandbox? */
static __always_inline void sf_signal_task(struct task_struct *cur,
					   struct sf_scratch *s,
					   const struct sf_sandbox_ref *sb,
					   struct task_struct *t, int sig, long nr)
{
	if (!t || sf_cgroup_within(sf_task_cgroup(t), sb))
		return;
	sf_signal_kill(cur, s, sb, t, sig, false, nr);
}

static __always_inline void sf_signal_vpid(struct task_struct *cur,
					   struct sf_scratch *s,
					   const struct sf_sandbox_ref *sb,
					   int vpid, int sig, long nr)
{
	struct task_struct *t;

	if (vpid <= 0)
		return;
	t = bpf_task_from_vpid(vpid);
	if (!t)
		return; /* ESRCH */
	sf_signal_task(cur, s, sb, t, sig, nr);
	bpf_task_release(t);
}

struct sf_group_walk {
	__u64 node;   /* struct hlist_node of the next member */
	__u64 sb_id;
	__u32 sb_level;
	__u32 outside;
	__u64 first_out; /* the first member outside */
};

static long sf_group_step(__u32 i, void *ctx)
{
	struct sf_group_walk *g = ctx;
	struct sf_sandbox_ref sb = { .id = g->sb_id, .level = g->sb_level };
	struct task_struct *t;
	struct hlist_node *node = (void *)g->node;

	if (!node)
		return 1;
	t = (void *)node - (bpf_core_field_offset(struct task_struct, pid_links) +
			    PIDTYPE_PGID * sizeof(struct hlist_node));
	if (!sf_cgroup_within(sf_task_cgroup(t), &sb)) {
		g->outside = 1;
		g->first_out = (__u64)t;
		return 1;
	}
	g->node = (__u64)BPF_CORE_READ(node, next);
	return 0;
}

/* A process group (its struct pid): is a member outside the sandbox? */
static __always_inline void sf_signal_group(struct task_struct *cur,
					    struct sf_scratch *s,
					    const struct sf_sandbox_ref *sb,
					    struct pid *grp, int sig, long nr)
{
	struct sf_group_walk g = { .sb_id = sb->id, .sb_level = sb->level };

	if (!grp)
		return;
	g.node = (__u64)BPF_CORE_READ(grp, tasks[PIDTYPE_PGID].first);
	bpf_loop(SF_GROUP_MAX, sf_group_step, &g, 0);
	/* A group larger than we look at counts as outside. */
	if (g.node && !g.outside)
		g.outside = 1;
	if (g.outside)
		sf_signal_kill(cur, s, sb, (struct task_struct *)g.first_out,
			       sig, true, nr);
}

static __always_inline void sf_judge_signal(struct task_struct *cur,
					    struct sf_scratch *s,
					    const struct sf_sandbox_ref *sb,
					    long nr, const struct sf_args *a)
{
	struct task_struct *t;
	int pid, sig;

	switch (nr) {
	case SF_NR_KILL:
		pid = (int)a->a[0];
		sig = (int)a->a[1];
		if (sig == 0)
			return;
		if (pid > 0) {
			sf_signal_vpid(cur, s, sb, pid, sig, nr);
		} else if (pid == -1) {
			sf_signal_kill(cur, s, sb, NULL, sig, true, nr);
		} else if (pid == 0) {
			sf_signal_group(cur, s, sb,
					BPF_CORE_READ(cur, signal, pids[PIDTYPE_PGID]),
					sig, nr);
		} else {
			t = bpf_task_from_vpid(-pid);
			if (!t) {
				/*
				 * No process has the group's number (its leader
				 * may have exited while the group lives on): we
				 * cannot see who is in it, so it counts as outside.
				 */
				sf_signal_kill(cur, s, sb, NULL, sig, true, nr);
				return;
			}
			sf_signal_group(cur, s, sb, BPF_CORE_READ(t, thread_pid),
					sig, nr);
			bpf_task_release(t);
		}
		return;
	case SF_NR_TKILL:
	case SF_NR_RT_SIGQUEUEINFO:
		sig = (int)a->a[1];
		if (sig != 0)
			sf_signal_vpid(cur, s, sb, (int)a->a[0], sig, nr);
		return;
	case SF_NR_TGKILL:
	case SF_NR_RT_TGSIGQUEUEINFO:
		sig = (int)a->a[2];
		if (sig != 0)
			sf_signal_vpid(cur, s, sb, (int)a->a[1], sig, nr);
		return;
	case SF_NR_PIDFD_SEND_SIGNAL: {
		struct file *f = sf_current_fd_file(cur, (int)a->a[0]);
		struct inode *inode;

		sig = (int)a->a[1];
		if (sig == 0 || !f)
			return;
		inode = BPF_CORE_READ(f, f_inode);
		/* A pidfd, or a /proc/<pid> directory (the kernel takes both). */
		if (sf_sb_magic(inode) == SF_PROC_SUPER_MAGIC)
			t = sf_proc_inode_task(inode);
		else
			t = sf_pidfd_task(cur, (int)a->a[0]);
		if (!t)
			return;
		if (a->a[3] & SF_PIDFD_SIGNAL_PROCESS_GROUP)
			sf_signal_group(cur, s, sb,
					BPF_CORE_READ(t, signal, pids[PIDTYPE_PGID]),
					sig, nr);
		else
			sf_signal_task(cur, s, sb, t, sig, nr);
		return;
	}
	}
}

/* --- Refused primitives ------------------------------------------------------ */

/*
 * Kill (or audit) and record. Global: one copy, verified once. r is in the
 * calling program's scratch (struct sf_scratch).
 */
__noinline int sf_gf_refuse(struct sf_refusal *r)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct task_struct *target;
	struct sf_verdict *v;

	if (!r)
		return 0;
	v = &r->v;
	target = (void *)r->target;
	__builtin_memset(v, 0, sizeof(*v));
	v->enforcer = SF_ENFORCER_SIGNAL;
	v->action = sf_kill_action(&r->sb);
	v->what = r->what;
	v->why = r->why;
	v->syscall_nr = r->nr;
	if (target)
		v->target_cgroup = sf_cgroup_id(sf_task_cgroup(target));
	sf_emit(&r->sb, v, cur, target, (const char *)r->name, r->name_len);
	return 0;
}

/* Fills the scratch's refusal and records it. */
static __always_inline void sf_refuse(struct sf_scratch *s,
				      const struct sf_sandbox_ref *sb,
				      __u32 what, __u32 why,
				      struct task_struct *target, long nr,
				      const char *name, __u32 name_len)
{
	struct sf_refusal *r = &s->ref;

	r->sb = *sb;
	r->what = what;
	r->why = why;
	r->nr = nr;
	r->target = (__u64)target;
	r->name = (__u64)name;
	r->name_len = name_len;
	r->pad = 0;
	sf_gf_refuse(r);
}

/* perf_event_open(attr, pid, cpu, group_fd, flags). */
static __always_inline void sf_judge_perf(struct task_struct *cur,
					  struct sf_scratch *s,
					  const struct sf_sandbox_ref *sb,
					  long nr, const struct sf_args *a,
					  unsigned long flags)
{
	struct task_struct *t;
	int pid = (int)a->a[1];

	if (flags & SF_PERF_FLAG_PID_CGROUP) {
		sf_refuse(s, sb, SF_WHAT_PERF_OPEN, SF_WHY_REFUSED, NULL, nr,
			  "cgroup", 7);
		return;
	}
	if (pid == -1) {
		sf_refuse(s, sb, SF_WHAT_PERF_OPEN, SF_WHY_REFUSED, NULL, nr,
			  "cpu", 4);
		return;
	}
	if (pid == 0)
		return;
	t = bpf_task_from_vpid(pid);
	if (!t)
		return;
	/* Any process but our own: it may drop its guard (exec) meanwhile. */
	if (!sf_same_process(cur, t))
		sf_refuse(s, sb, SF_WHAT_PERF_OPEN,
			  sf_foreign(cur, t, sb) | SF_WHY_REFUSED, t, nr, NULL, 0);
	bpf_task_release(t);
}

static __always_inline bool sf_kcmp_one(struct task_struct *cur,
					struct sf_scratch *s,
					const struct sf_sandbox_ref *sb,
					int pid, long nr)
{
	struct task_struct *t;
	__u32 why;

	if (pid <= 0)
		return false;
	t = bpf_task_from_vpid(pid);
	if (!t)
		return false;
	why = sf_same_process(cur, t) ? 0 : sf_foreign(cur, t, sb);
	if (why)
		sf_refuse(s, sb, SF_WHAT_KCMP, why, t, nr, NULL, 0);
	bpf_task_release(t);
	return why != 0;
}

/* A symlink target with a component that leads into procfs. */
struct sf_sym_walk {
	char *buf;
	__s32 len;
	__s32 start;
	__u32 hit;
};

static long sf_sym_step(__u32 i, void *ctx)
{
	struct sf_sym_walk *s = ctx;
	int pos = (int)i;
	char c;

	if (pos > s->len)
		return 1;
	c = pos < s->len ? s->buf[pos & SF_PATH_MASK] : '/';
	if (c == '/') {
		if (s->start >= 0) {
			long num = 0;
			int cls = sf_comp_class(s->buf, s->start, pos - s->start,
						&num);

			s->start = -1;
			if (cls == SF_C_PROC || cls == SF_C_FD ||
			    cls == SF_C_STDIO) {
				s->hit = 1;
				return 1;
			}
		}
		return 0;
	}
	if (s->start < 0)
		s->start = pos;
	return 0;
}

/*
 * symlink(target, ...): refused when a component of the target is proc
 * (any procfs under a directory of that name), or fd, stdin, stdout,
 * stderr (/dev's links into /proc/self/fd): such a link lets a later path
 * string reach /proc/<pid> without spelling it.
 */
static __always_inline void sf_judge_symlink_target(struct task_struct *cur,
						    struct sf_scratch *s,
						    const struct sf_sandbox_ref *sb,
						    long nr, const void *utarget)
{
	struct sf_sym_walk sw = {};
	struct sf_walk_buf *wb;
	int len;

	wb = bpf_task_storage_get(&sf_gwalk, cur, 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!wb)
		return;
	len = bpf_probe_read_user_str(wb->buf, SF_PATH_MAX, utarget);
	if (len <= 1)
		return;
	sw.buf = wb->buf;
	sw.len = len - 1;
	sw.start = -1;
	bpf_loop(len, sf_sym_step, &sw, 0);
	if (sw.hit)
		sf_refuse(s, sb, SF_WHAT_SYMLINK_PROC, SF_WHY_REFUSED, NULL,
			  nr, wb->buf, SF_GUARD_NAME_LEN);
}

/* --- Protected objects ---------------------------------------------------------- */

static __always_inline void sf_judge_prot_fd(struct task_struct *cur,
					     struct sf_scratch *s,
					     const struct sf_sandbox_ref *sb,
					     long nr, int fd)
{
	struct file *f = sf_current_fd_file(cur, fd);
	struct dentry *d;

	if (!f)
		return;
	d = BPF_CORE_READ(f, f_path.dentry);
	if (!sf_dentry_protected(d))
		return;
	sf_refuse(s, sb, SF_WHAT_PROT_SETATTR, SF_WHY_PROTECTED, NULL, nr,
		  (const char *)BPF_CORE_READ(d, d_name.name), SF_GUARD_NAME_LEN);
}

/*
 * connect() or bind() of a Unix socket at a path: the path to judge
 * (sun_path), or 0 for anything else (an abstract name starts with a NUL).
 */
static __always_inline __u64 sf_unix_path(__u64 uaddr, unsigned long addrlen)
{
	__u16 family = 0;
	char first = 0;

	if (addrlen <= 2 || bpf_probe_read_user(&family, 2, (void *)uaddr) != 0 ||
	    family != SF_AF_UNIX)
		return 0;
	if (bpf_probe_read_user(&first, 1, (void *)(uaddr + 2)) != 0 ||
	    first == 0)
		return 0;
	return uaddr + 2;
}

/*
 * The calls that change a name or an object: which paths they name (one or
 * two: rename and link name both ends), for sf_gf_prot_path() to judge
 * with one walk each. Returns 1 with s->prot filled when there is a path
 * to judge; an object named by an fd is judged here.
 */
static __always_inline int sf_judge_prot(struct task_struct *cur,
					 struct sf_scratch *s,
					 const struct sf_sandbox_ref *sb,
					 long nr, const struct sf_args *a)
{
	__u64 p1 = 0, p2 = 0;
	int d1 = SF_AT_FDCWD, d2 = SF_AT_FDCWD;
	__u32 what;

	switch (nr) {
	case SF_NR_UNLINK:
	case SF_NR_RMDIR:
		what = SF_WHAT_PROT_UNLINK;
		p1 = a->a[0];
		break;
	case SF_NR_UNLINKAT:
		what = SF_WHAT_PROT_UNLINK;
		d1 = (int)a->a[0];
		p1 = a->a[1];
		break;
	case SF_NR_RENAME:
	case SF_NR_LINK:
		what = nr == SF_NR_RENAME ? SF_WHAT_PROT_RENAME : SF_WHAT_PROT_CREATE;
		p1 = a->a[0];
		p2 = a->a[1];
		break;
	case SF_NR_RENAMEAT:
	case SF_NR_RENAMEAT2:
	case SF_NR_LINKAT:
		what = nr == SF_NR_LINKAT ? SF_WHAT_PROT_CREATE : SF_WHAT_PROT_RENAME;
		d1 = (int)a->a[0];
		p1 = a->a[1];
		d2 = (int)a->a[2];
		p2 = a->a[3];
		break;
	case SF_NR_MKDIR:
	case SF_NR_MKNOD:
		what = SF_WHAT_PROT_CREATE;
		p1 = a->a[0];
		break;
	case SF_NR_MKDIRAT:
	case SF_NR_MKNODAT:
		what = SF_WHAT_PROT_CREATE;
		d1 = (int)a->a[0];
		p1 = a->a[1];
		break;
	case SF_NR_SYMLINK:
		what = SF_WHAT_PROT_CREATE;
		p1 = a->a[1];
		break;
	case SF_NR_SYMLINKAT:
		what = SF_WHAT_PROT_CREATE;
		d1 = (int)a->a[1];
		p1 = a->a[2];
		break;
	case SF_NR_TRUNCATE:
	case SF_NR_CHMOD:
	case SF_NR_CHOWN:
	case SF_NR_LCHOWN:
		what = SF_WHAT_PROT_SETATTR;
		p1 = a->a[0];
		break;
	case SF_NR_FCHMODAT:
	case SF_NR_FCHMODAT2:
	case SF_NR_FCHOWNAT:
		what = SF_WHAT_PROT_SETATTR;
		d1 = (int)a->a[0];
		p1 = a->a[1];
		break;
	case SF_NR_FTRUNCATE:
	case SF_NR_FCHMOD:
	case SF_NR_FCHOWN:
		sf_judge_prot_fd(cur, s, sb, nr, (int)a->a[0]);
		return 0;
	case SF_NR_CONNECT:
		what = SF_WHAT_PROT_CONNECT;
		p1 = sf_unix_path(a->a[1], a->a[2]);
		break;
	case SF_NR_BIND:
		/* A socket file is a new name, like mknod's. */
		what = SF_WHAT_PROT_CREATE;
		p1 = sf_unix_path(a->a[1], a->a[2]);
		break;
	case SF_NR32_SOCKETCALL: {
		/* ia32 socketcall(SYS_*, args): fd, addr, len as words. */
		__u32 args[3] = {};

		if ((a->a[0] != SF_SYS_CONNECT && a->a[0] != SF_SYS_BIND) ||
		    bpf_probe_read_user(args, sizeof(args), (void *)a->a[1]) != 0)
			return 0;
		if (a->a[0] == SF_SYS_CONNECT) {
			what = SF_WHAT_PROT_CONNECT;
			nr = SF_NR_CONNECT;
		} else {
			what = SF_WHAT_PROT_CREATE;
			nr = SF_NR_BIND;
		}
		p1 = sf_unix_path(args[1], args[2]);
		break;
	}
	default:
		return 0;
	}
	if (!p1 && !p2)
		return 0;
	sf_prot_fill(&s->prot, sb, nr, what, d1, p1, d2, p2);
	return 1;
}

/* chdir: remember where a relative path starts, for the exit's walk. */
static __always_inline void sf_chdir_enter(struct task_struct *cur)
{
	struct sf_walk_buf *wb;

	wb = bpf_task_storage_get(&sf_gwalk, cur, 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!wb)
		return;
	wb->chdir_mnt = (__u64)BPF_CORE_READ(cur, fs, pwd.mnt);
	wb->chdir_dentry = (__u64)BPF_CORE_READ(cur, fs, pwd.dentry);
	wb->chdir_valid = 1;
}

/*
 * Entry: everything judged besides the ptrace family. Returns 1 when the
 * call names paths of possibly protected objects (in s->prot), for the
 * program to walk next (sf_gf_prot_path(): the walk's frames then stack on
 * the program's alone, see struct sf_scratch). Global: verified once. The
 * call is in s (sb, args, arg5), this program's scratch.
 */
__noinline int sf_gf_enter(struct sf_scratch *s)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	const struct sf_sandbox_ref *sb;
	const struct sf_args *a;
	long nr;

	if (!s)
		return 0;
	sb = &s->sb;
	a = &s->args;
	nr = a->nr;
	switch (nr) {
	case SF_NR_KILL:
	case SF_NR_TKILL:
	case SF_NR_TGKILL:
	case SF_NR_RT_SIGQUEUEINFO:
	case SF_NR_RT_TGSIGQUEUEINFO:
	case SF_NR_PIDFD_SEND_SIGNAL:
		sf_judge_signal(cur, s, sb, nr, a);
		return 0;
	case SF_NR_IO_URING_SETUP:
		if (!(sb->flags & SF_GUARD_F_IO_URING))
			sf_refuse(s, sb, SF_WHAT_IO_URING, SF_WHY_REFUSED, NULL, nr,
				  NULL, 0);
		return 0;
	case SF_NR_PERF_EVENT_OPEN:
		sf_judge_perf(cur, s, sb, nr, a, s->arg5);
		return 0;
	case SF_NR_KCMP:
		if (!sf_kcmp_one(cur, s, sb, (int)a->a[0], nr))
			sf_kcmp_one(cur, s, sb, (int)a->a[1], nr);
		return 0;
	case SF_NR_BPF:
		sf_refuse(s, sb, SF_WHAT_BPF, SF_WHY_REFUSED, NULL, nr, NULL, 0);
		return 0;
	case SF_NR_SYMLINK:
	case SF_NR_SYMLINKAT:
		sf_judge_symlink_target(cur, s, sb, nr, (void *)a->a[0]);
		break;
	case SF_NR_CHDIR:
		sf_chdir_enter(cur);
		return 0;
	}
	return sf_judge_prot(cur, s, sb, nr, a);
}

/*
 * From sf_sig_enter's default case: the rest of the calls judged at entry.
 * Every system call on the host comes here; all but these return at the
 * first switch. The scratch is looked up only for a task in a sandbox.
 */
static __always_inline int sf_enter_more(struct pt_regs *regs, long id)
{
	struct task_struct *cur;
	struct sf_sandbox_ref sb;
	struct sf_scratch *s;
	bool compat;
	long nr;

	switch (id) {
	/* x86-64 */
	case SF_NR_KILL: case SF_NR_TKILL: case SF_NR_TGKILL:
	case SF_NR_RT_SIGQUEUEINFO: case SF_NR_RT_TGSIGQUEUEINFO:
	case SF_NR_PIDFD_SEND_SIGNAL: case SF_NR_IO_URING_SETUP:
	case SF_NR_PERF_EVENT_OPEN: case SF_NR_KCMP: case SF_NR_BPF:
	case SF_NR_SYMLINK: case SF_NR_SYMLINKAT: case SF_NR_UNLINK:
	case SF_NR_UNLINKAT: case SF_NR_RMDIR: case SF_NR_RENAME:
	case SF_NR_RENAMEAT: case SF_NR_RENAMEAT2: case SF_NR_TRUNCATE:
	case SF_NR_FTRUNCATE: case SF_NR_MKDIR: case SF_NR_MKDIRAT:
	case SF_NR_MKNOD: case SF_NR_MKNODAT: case SF_NR_LINK:
	case SF_NR_LINKAT: case SF_NR_CHMOD: case SF_NR_FCHMOD:
	case SF_NR_FCHMODAT: case SF_NR_FCHMODAT2: case SF_NR_CHOWN:
	case SF_NR_LCHOWN: case SF_NR_FCHOWN: case SF_NR_FCHOWNAT:
	case SF_NR_CONNECT: case SF_NR_BIND: case SF_NR_CHDIR:
	/* ia32, where not the same as an x86-64 number above */
	case SF_NR32_KILL: case SF_NR32_TKILL: case SF_NR32_TGKILL:
	case SF_NR32_RT_SIGQUEUEINFO: case SF_NR32_RT_TGSIGQUEUEINFO:
	case SF_NR32_PERF_EVENT_OPEN: case SF_NR32_KCMP: case SF_NR32_BPF:
	case SF_NR32_SYMLINKAT: case SF_NR32_UNLINK:
	case SF_NR32_UNLINKAT: case SF_NR32_RMDIR: case SF_NR32_RENAME:
	case SF_NR32_RENAMEAT: case SF_NR32_RENAMEAT2: case SF_NR32_TRUNCATE64:
	case SF_NR32_FTRUNCATE64: case SF_NR32_MKDIR:
	case SF_NR32_MKDIRAT: case SF_NR32_MKNOD:
	case SF_NR32_LINK: case SF_NR32_LINKAT: case SF_NR32_CHMOD:
	case SF_NR32_FCHMODAT: case SF_NR32_CHOWN16: case SF_NR32_CHOWN:
	case SF_NR32_LCHOWN16: case SF_NR32_LCHOWN: case SF_NR32_FCHOWN16:
	case SF_NR32_FCHOWN: case SF_NR32_SOCKETCALL:
	case SF_NR32_CONNECT: case SF_NR32_BIND: case SF_NR32_CHDIR:
	/*
	 * Not listed, being x86-64 numbers above: ia32 symlink (83, mkdir),
	 * truncate (92), ftruncate (93), fchmod (94), mknodat (297),
	 * fchownat (298).
	 */
		break;
	default:
		return 0;
	}
	cur = bpf_get_current_task_btf();
	compat = sf_compat_fast(cur);
	nr = sf_more_nr(compat, id);
	if (nr < 0)
		return 0;
	if (!sf_find_sandbox(cur, &sb))
		return 0;
	s = sf_scratch_of(SF_SLOT_ENTER);
	if (!s)
		return 0;
	s->sb = sb;
	sf_read_args(regs, compat, &s->args);
	s->args.nr = nr;
	s->arg5 = sf_arg5(regs, compat);
	s->ret = 0;
	if (sf_gf_enter(s))
		sf_gf_prot_path(&s->prot);
	return 0;
}

/*
 * open_tree(dfd, path, flags): of procfs (refused here), or through a
 * magic link (returns 1 with s->walk filled).
 */
static __always_inline int sf_judge_open_tree(struct task_struct *cur,
					      struct sf_scratch *s,
					      const struct sf_sandbox_ref *sb,
					      long fd, long nr, __u64 dfd,
					      __u64 upath)
{
	struct file *f = sf_current_fd_file(cur, fd);
	struct inode *inode;

	if (!f)
		return 0;
	inode = BPF_CORE_READ(f, f_inode);
	if (sf_sb_magic(inode) == SF_PROC_SUPER_MAGIC) {
		sf_refuse(s, sb, SF_WHAT_PROC_HANDLE, SF_WHY_REFUSED, NULL, nr,
			  (const char *)BPF_CORE_READ(f, f_path.dentry, d_name.name),
			  SF_GUARD_NAME_LEN);
		return 0;
	}
	sf_walk_fill(&s->walk, sb, nr, (int)dfd, (void *)upath, true,
		     (__u64)BPF_CORE_READ(f, f_path.mnt),
		     (__u64)BPF_CORE_READ(f, f_path.dentry), inode);
	return 1;
}

/*
 * Exit: chdir, open_tree, name_to_handle_at. Returns 1 with s->walk filled
 * when the call's path is to be walked next (sf_walk_run(), by the
 * program). Global: verified once. The call is in s (sb, args, ret), this
 * program's scratch.
 */
__noinline int sf_gf_exit(struct sf_scratch *s)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	const struct sf_sandbox_ref *sb;
	const struct sf_args *a;

	if (!s)
		return 0;
	sb = &s->sb;
	a = &s->args;
	switch (a->nr) {
	case SF_NR_CHDIR:
		sf_walk_fill(&s->walk, sb, a->nr, SF_AT_FDCWD, (void *)a->a[0],
			     true, (__u64)BPF_CORE_READ(cur, fs, pwd.mnt),
			     (__u64)BPF_CORE_READ(cur, fs, pwd.dentry),
			     BPF_CORE_READ(cur, fs, pwd.dentry, d_inode));
		return 1;
	case SF_NR_OPEN_TREE:
		return sf_judge_open_tree(cur, s, sb, s->ret, a->nr, a->a[0],
					  a->a[1]);
	case SF_NR_NAME_TO_HANDLE_AT:
		sf_walk_fill(&s->walk, sb, a->nr, (int)a->a[0], (void *)a->a[1],
			     false, 0, 0, NULL);
		return 1;
	}
	return 0;
}

/*
 * From sf_sig_exit's default case (ret >= 0). Returns SF_NR_CREAT for a
 * creat, which the caller judges like an open (one copy of that code in
 * the program), else -1.
 */
static __always_inline long sf_exit_more(struct pt_regs *regs, long id,
					 long ret)
{
	struct task_struct *cur;
	struct sf_sandbox_ref sb;
	struct sf_scratch *s;
	bool compat;
	long nr;

	switch (id) {
	case SF_NR_CHDIR: case SF_NR_OPEN_TREE: case SF_NR_NAME_TO_HANDLE_AT:
	case SF_NR_CREAT:
	case SF_NR32_CHDIR: case SF_NR32_NAME_TO_HANDLE_AT: case SF_NR32_CREAT:
		break;
	default:
		return -1;
	}
	cur = bpf_get_current_task_btf();
	compat = sf_compat_fast(cur);
	nr = sf_more_nr(compat, id);
	if (nr < 0)
		return -1;
	if (nr == SF_NR_CREAT)
		return nr;
	if (!sf_find_sandbox(cur, &sb))
		return -1;
	s = sf_scratch_of(SF_SLOT_EXIT);
	if (!s)
		return -1;
	s->sb = sb;
	sf_read_args(regs, compat, &s->args);
	s->args.nr = nr;
	s->args.a[2] = 0;
	s->args.a[3] = 0;
	s->arg5 = 0;
	s->ret = ret;
	if (sf_gf_exit(s))
		sf_walk_run(&s->walk);
	return -1;
}

#endif /* SANDFENCE_BPF_GUARD_SIG_REACH_BPF_H_ */
