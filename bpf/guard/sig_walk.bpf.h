/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The signal enforcer's path walkers. Signal mode has no hook inside the
 * kernel's path walk, so where a system call's result does not say where
 * the walk went, the path string is walked again here, component by
 * component, from the directory the kernel started at (the caller's root,
 * its working directory, or a dirfd), and the answer is confirmed against
 * the object the call produced wherever there is one:
 *
 *   sf_pw_*   /proc/<pid> magic links (exe, cwd, root, fd/<n>, ns/<x>) of
 *             another process, however reached: "/proc/<pid>/...", a pid
 *             directory given as dirfd or working directory, the caller's
 *             own links into one (/proc/self/fd/<n>, /proc/self/cwd,
 *             /dev/fd/<n>, /dev/stdin, ... where fd <n> is a /proc/<pid>
 *             directory), paths that continue past the link
 *             (/proc/<pid>/root/etc/shadow, /proc/<pid>/cwd/x);
 *   sf_prw_*  protected objects, for the calls that change a name (unlink,
 *             rename, mkdir, ...): the path is followed through the
 *             directory entries user space registered (sf_gprotn).
 *
 * What a string walk cannot see (symbolic links that existed before, a
 * string rewritten by another thread) is listed in docs/guard.md.
 *
 * Included by sf_guard_sig.bpf.c after sf_current_fd_file(), sf_read_args()
 * and sf_kill_action().
 */
#ifndef SANDFENCE_BPF_GUARD_SIG_WALK_BPF_H_
#define SANDFENCE_BPF_GUARD_SIG_WALK_BPF_H_

#include "guard/guard_reach.bpf.h"

/*
 * x86-64 numbers of the system calls sig_walk.bpf.h and sig_reach.bpf.h
 * judge, and their ia32 (int $0x80) counterparts where they differ.
 */
#define SF_NR_CONNECT 42
#define SF_NR_BIND 49
#define SF_NR_KILL 62
#define SF_NR_TRUNCATE 76
#define SF_NR_FTRUNCATE 77
#define SF_NR_CHDIR 80
#define SF_NR_RENAME 82
#define SF_NR_MKDIR 83
#define SF_NR_RMDIR 84
#define SF_NR_CREAT 85
#define SF_NR_LINK 86
#define SF_NR_UNLINK 87
#define SF_NR_SYMLINK 88
#define SF_NR_CHMOD 90
#define SF_NR_FCHMOD 91
#define SF_NR_CHOWN 92
#define SF_NR_FCHOWN 93
#define SF_NR_LCHOWN 94
#define SF_NR_RT_SIGQUEUEINFO 129
#define SF_NR_MKNOD 133
#define SF_NR_TKILL 200
#define SF_NR_TGKILL 234
#define SF_NR_MKDIRAT 258
#define SF_NR_MKNODAT 259
#define SF_NR_FCHOWNAT 260
#define SF_NR_UNLINKAT 263
#define SF_NR_RENAMEAT 264
#define SF_NR_LINKAT 265
#define SF_NR_SYMLINKAT 266
#define SF_NR_FCHMODAT 268
#define SF_NR_RT_TGSIGQUEUEINFO 297
#define SF_NR_PERF_EVENT_OPEN 298
#define SF_NR_NAME_TO_HANDLE_AT 303
#define SF_NR_KCMP 312
#define SF_NR_RENAMEAT2 316
#define SF_NR_BPF 321
#define SF_NR_PIDFD_SEND_SIGNAL 424 /* these four: the same for ia32 */
#define SF_NR_IO_URING_SETUP 425
#define SF_NR_OPEN_TREE 428
#define SF_NR_FCHMODAT2 452

#define SF_NR32_CREAT 8
#define SF_NR32_LINK 9
#define SF_NR32_UNLINK 10
#define SF_NR32_CHDIR 12
#define SF_NR32_MKNOD 14
#define SF_NR32_CHMOD 15
#define SF_NR32_LCHOWN16 16
#define SF_NR32_KILL 37
#define SF_NR32_RENAME 38
#define SF_NR32_MKDIR 39
#define SF_NR32_RMDIR 40
#define SF_NR32_SYMLINK 83
#define SF_NR32_TRUNCATE 92
#define SF_NR32_FTRUNCATE 93
#define SF_NR32_FCHMOD 94
#define SF_NR32_FCHOWN16 95
#define SF_NR32_SOCKETCALL 102
#define SF_NR32_RT_SIGQUEUEINFO 178
#define SF_NR32_CHOWN16 182
#define SF_NR32_TRUNCATE64 193
#define SF_NR32_FTRUNCATE64 194
#define SF_NR32_LCHOWN 198
#define SF_NR32_FCHOWN 207
#define SF_NR32_CHOWN 212
#define SF_NR32_TKILL 238
#define SF_NR32_TGKILL 270
#define SF_NR32_MKDIRAT 296
#define SF_NR32_MKNODAT 297
#define SF_NR32_FCHOWNAT 298
#define SF_NR32_UNLINKAT 301
#define SF_NR32_RENAMEAT 302
#define SF_NR32_LINKAT 303
#define SF_NR32_SYMLINKAT 304
#define SF_NR32_FCHMODAT 306
#define SF_NR32_RT_TGSIGQUEUEINFO 335
#define SF_NR32_PERF_EVENT_OPEN 336
#define SF_NR32_NAME_TO_HANDLE_AT 341
#define SF_NR32_KCMP 349
#define SF_NR32_RENAMEAT2 353
#define SF_NR32_BPF 357
#define SF_NR32_BIND 361
#define SF_NR32_CONNECT 362

#define SF_PATH_MAX 4096
#define SF_PATH_MASK (SF_PATH_MAX - 1)
#define SF_AT_FDCWD -100
#define SF_NSFS_MAGIC 0x6e736673
#define SF_PRW_DEPTH 16
/* Steps of an ancestor walk (dentries and mount crossings). */
#define SF_UNDER_STEPS 64

struct sf_prw_ent {
	struct sf_guard_inode k; /* the directory entry's child */
	__u32 lost;              /* not a registered entry: k is unknown */
	__u32 prot;              /* it, or one above it, is protected */
};

/* Per task (a task may sleep in a system call): the path and walk state. */
struct sf_walk_buf {
	char buf[SF_PATH_MAX];
	struct sf_prw_ent stk[SF_PRW_DEPTH];
	/* The working directory before a chdir, for its exit to start at. */
	__u64 chdir_mnt;
	__u64 chdir_dentry;
	__u32 chdir_valid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sf_walk_buf);
} sf_gwalk SEC(".maps");

/* --- Path components ------------------------------------------------------ */

enum sf_comp_class {
	SF_C_OTHER = 0,
	SF_C_DOT,
	SF_C_DOTDOT,
	SF_C_NUM, /* a decimal number: a pid, tid or fd */
	SF_C_SELF, /* self, thread-self */
	SF_C_FD,
	SF_C_TASK,
	SF_C_NS,
	SF_C_CWD,
	SF_C_ROOT,
	SF_C_EXE,
	SF_C_STDIO, /* stdin, stdout, stderr (/dev's links to /proc/self/fd) */
	SF_C_PROC,
};

/* The class of a name already read into n (len bytes, zero-padded). */
static __always_inline int sf_name_class(const union sf_name16 *n, int len,
					 long *num)
{
	long v = 0;
	bool digits = len <= 10;

	for (int i = 0; i < 10; i++) {
		char c = n->c[i];

		if (i >= len)
			break;
		if (c < '0' || c > '9') {
			digits = false;
			break;
		}
		v = v * 10 + (c - '0');
	}
	if (digits && len > 0 && v <= 0x7fffffff) {
		*num = v;
		return SF_C_NUM;
	}
	switch (len) {
	case 1:
		return n->c[0] == '.' ? SF_C_DOT : SF_C_OTHER;
	case 2:
		if (n->w[0] == SF_C8('.', '.', 0, 0, 0, 0, 0, 0))
			return SF_C_DOTDOT;
		if (n->w[0] == SF_C8('f', 'd', 0, 0, 0, 0, 0, 0))
			return SF_C_FD;
		if (n->w[0] == SF_C8('n', 's', 0, 0, 0, 0, 0, 0))
			return SF_C_NS;
		return SF_C_OTHER;
	case 3:
		if (n->w[0] == SF_C8('c', 'w', 'd', 0, 0, 0, 0, 0))
			return SF_C_CWD;
		if (n->w[0] == SF_C8('e', 'x', 'e', 0, 0, 0, 0, 0))
			return SF_C_EXE;
		return SF_C_OTHER;
	case 4:
		if (n->w[0] == SF_C8('s', 'e', 'l', 'f', 0, 0, 0, 0))
			return SF_C_SELF;
		if (n->w[0] == SF_C8('t', 'a', 's', 'k', 0, 0, 0, 0))
			return SF_C_TASK;
		if (n->w[0] == SF_C8('r', 'o', 'o', 't', 0, 0, 0, 0))
			return SF_C_ROOT;
		if (n->w[0] == SF_C8('p', 'r', 'o', 'c', 0, 0, 0, 0))
			return SF_C_PROC;
		return SF_C_OTHER;
	case 5:
		if (n->w[0] == SF_C8('s', 't', 'd', 'i', 'n', 0, 0, 0)) {
			*num = 0;
			return SF_C_STDIO;
		}
		return SF_C_OTHER;
	case 6:
		if (n->w[0] == SF_C8('s', 't', 'd', 'o', 'u', 't', 0, 0)) {
			*num = 1;
			return SF_C_STDIO;
		}
		if (n->w[0] == SF_C8('s', 't', 'd', 'e', 'r', 'r', 0, 0)) {
			*num = 2;
			return SF_C_STDIO;
		}
		return SF_C_OTHER;
	case 11:
		if (n->w[0] == SF_C8('t', 'h', 'r', 'e', 'a', 'd', '-', 's') &&
		    n->w[1] == SF_C8('e', 'l', 'f', 0, 0, 0, 0, 0))
			return SF_C_SELF;
		return SF_C_OTHER;
	}
	return SF_C_OTHER;
}

/* The class of a component of the path buffer. */
static __always_inline int sf_comp_class(const char *b, int off, int len,
					 long *num)
{
	union sf_name16 n = {};

	if (len <= 0 || len > 15)
		return SF_C_OTHER;
	for (int i = 0; i < 15; i++) {
		if (i >= len)
			break;
		n.c[i] = b[(off + i) & SF_PATH_MASK];
	}
	return sf_name_class(&n, len, num);
}

/* The class of a dentry's own name (a procfs directory). */
static __always_inline int sf_dentry_class(struct dentry *d, long *num)
{
	union sf_name16 n = {};
	int len;

	len = bpf_probe_read_kernel_str(n.c, sizeof(n.c),
					BPF_CORE_READ(d, d_name.name));
	if (len <= 1)
		return SF_C_OTHER;
	if (len == sizeof(n.c) && n.c[15] != 0)
		return SF_C_OTHER;
	return sf_name_class(&n, len - 1, num);
}

/* --- Mount-aware ancestry --------------------------------------------------- */

static __always_inline struct mount *sf_real_mount(__u64 mnt)
{
	return (void *)mnt - bpf_core_field_offset(struct mount, mnt);
}

static __always_inline __u64 sf_vfsmount_of(struct mount *m)
{
	return (__u64)m + bpf_core_field_offset(struct mount, mnt);
}

/*
 * One ".." as the kernel takes it: at the caller's root, stay; at the root
 * of a mount, go to where it is mounted (repeatedly); then to the parent.
 */
static __always_inline void sf_path_parent(__u64 *mnt, __u64 *d, __u64 rmnt,
					   __u64 rd)
{
	struct dentry *dp;

	for (int i = 0; i < 4; i++) {
		struct vfsmount *vm = (void *)*mnt;
		struct mount *m, *p;

		if (*d == rd && *mnt == rmnt)
			return;
		if (*d != (__u64)BPF_CORE_READ(vm, mnt_root))
			break;
		m = sf_real_mount(*mnt);
		p = BPF_CORE_READ(m, mnt_parent);
		if (!p || p == m)
			return;
		*d = (__u64)BPF_CORE_READ(m, mnt_mountpoint);
		*mnt = sf_vfsmount_of(p);
	}
	dp = (void *)*d;
	*d = (__u64)BPF_CORE_READ(dp, d_parent);
}

struct sf_under {
	__u64 mnt, d;   /* walked up */
	__u64 amnt, ad; /* looked for */
	__u32 found;
};

/*
 * bpf_loop's context (on the stack): the state itself is in the walk's
 * request (struct sf_walk_req), in the program's scratch.
 */
struct sf_under_ctx {
	struct sf_under *u;
};

static long sf_under_step(__u32 i, void *ctx)
{
	struct sf_under *u = ((struct sf_under_ctx *)ctx)->u;
	struct vfsmount *vm = (void *)u->mnt;
	struct dentry *d = (void *)u->d;
	struct dentry *up;

	if (u->d == u->ad && u->mnt == u->amnt) {
		u->found = 1;
		return 1;
	}
	if (u->d == (__u64)BPF_CORE_READ(vm, mnt_root)) {
		struct mount *m = sf_real_mount(u->mnt);
		struct mount *p = BPF_CORE_READ(m, mnt_parent);

		if (!p || p == m)
			return 1;
		u->d = (__u64)BPF_CORE_READ(m, mnt_mountpoint);
		u->mnt = sf_vfsmount_of(p);
		return 0;
	}
	up = BPF_CORE_READ(d, d_parent);
	if (!up || up == d)
		return 1;
	u->d = (__u64)up;
	return 0;
}

/* Is (mnt, d) at or below (amnt, ad), mounts crossed? u: scratch. */
static __always_inline bool sf_path_under(struct sf_under *u, __u64 mnt,
					  __u64 d, __u64 amnt, __u64 ad)
{
	struct sf_under_ctx c = { .u = u };

	if (!mnt || !d || !amnt || !ad)
		return false;
	u->mnt = mnt;
	u->d = d;
	u->amnt = amnt;
	u->ad = ad;
	u->found = 0;
	bpf_loop(SF_UNDER_STEPS, sf_under_step, &c, 0);
	return u->found;
}

/* --- /proc/<pid> magic links ------------------------------------------------- */

enum sf_pw_state {
	SF_PW_NONE = 0,
	SF_PW_SELF,   /* the caller's own pid directory (self, thread-self) */
	SF_PW_FDW,    /* "fd" outside a pid directory: /dev/fd/<n> */
	SF_PW_SELFFD, /* the caller's own fd directory */
	SF_PW_PID,    /* a pid directory: pid, or task */
	SF_PW_TASK,   /* its task/ */
	SF_PW_FDDIR,  /* its fd/ */
	SF_PW_NSDIR,  /* its ns/ */
	SF_PW_LINK,   /* through another process's magic link: judged */
};

/*
 * A walk's state. Handed to a global function, so no pointers in it (they
 * would come back as plain numbers): the path buffer stays in struct
 * sf_scan, around it. It lives in the program's scratch (struct
 * sf_walk_req), off the stack.
 */
struct sf_pw {
	__u32 st;
	__s32 pid;   /* of the pid directory (caller's namespace) ... */
	__u64 task;  /* ... or its task, when known from a procfs inode */
	__s32 name_off; /* where the pid directory's component starts */
	/* The first magic link of another process walked through. */
	__u32 cls;   /* SF_PROC_EXE, _CWD, _ROOT, _FD_LINK, _NS */
	__s64 fd;
	__s32 depth; /* below the link, after it */
	__s32 min_depth;
	__u32 rest;  /* components after the link */
};

/*
 * The byte scan around a walk (bpf_loop's context, so on the stack: small,
 * with the walk's state behind a pointer).
 */
struct sf_scan {
	char *buf;
	__s32 len;   /* bytes before the NUL */
	__s32 start; /* of the component being read; -1 between them */
	struct sf_pw *pw;
};

/*
 * The state a procfs directory starts or continues a walk in. Inline: a
 * function of its own here was the seventh frame of sys_exit's deepest
 * call chain; each of its two callers has one copy.
 */
static __always_inline void sf_pw_dentry(struct sf_pw *w, __u64 dentry)
{
	struct dentry *d = (void *)dentry;
	struct task_struct *t;
	struct inode *inode;
	long num = 0;

	w->st = SF_PW_NONE;
	if (!d)
		return;
	inode = BPF_CORE_READ(d, d_inode);
	if (!inode || sf_sb_magic(inode) != SF_PROC_SUPER_MAGIC)
		return;
	t = sf_proc_inode_task(inode);
	if (!t)
		return; /* /proc itself, /proc/sys, ...: a pid may follow */
	switch (sf_dentry_class(d, &num)) {
	case SF_C_NUM:
		w->st = SF_PW_PID;
		break;
	case SF_C_FD:
		w->st = SF_PW_FDDIR;
		break;
	case SF_C_TASK:
		w->st = SF_PW_TASK;
		break;
	case SF_C_NS:
		w->st = SF_PW_NSDIR;
		break;
	default:
		return;
	}
	w->task = (__u64)t;
	w->pid = 0;
}

/* Where a component leads the walk besides a new state (sf_gf_pw_comp). */
enum sf_pw_follow {
	SF_PWF_NONE = 0,
	SF_PWF_FD,   /* through one of the caller's own fds */
	SF_PWF_CWD,  /* its working directory */
	SF_PWF_ROOT, /* its root */
};

static __always_inline void sf_pw_pid(struct sf_pw *w, long num, int off)
{
	w->st = SF_PW_PID;
	w->pid = (__s32)num;
	w->task = 0;
	w->name_off = off;
}

/*
 * One component of a walk (global: verified once, not at every call). The
 * path is read from the caller's walk buffer again: a pointer in *w would
 * be a plain number here.
 *
 * The switch only decides: a new state, or a magic link of the pid
 * directory in w (link), or one of the caller's own fds, its cwd or its
 * root to go on from (follow). Both are taken after it, each in one
 * place: a link of the caller's own is followed (it may lead into another
 * process's pid directory), another process's is recorded for the end of
 * the walk.
 */
__noinline int sf_gf_pw_comp(struct sf_pw *w, int off, int len)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	__u32 link = 0, follow = SF_PWF_NONE;
	/* After following an fd: <n> may be a pid; the name starts here. */
	bool pid_if_none = false, name_here = false;
	struct sf_walk_buf *wb;
	struct file *f;
	long num = 0, fd = -1;
	__u64 d;
	int cls;

	if (!w)
		return 0;
	wb = bpf_task_storage_get(&sf_gwalk, cur, 0, 0);
	if (!wb)
		return 0;
	cls = sf_comp_class(wb->buf, off, len, &num);

	if (w->st == SF_PW_LINK) {
		if (cls == SF_C_DOT)
			return 0;
		if (cls == SF_C_DOTDOT) {
			w->depth--;
			if (w->depth < w->min_depth)
				w->min_depth = w->depth;
			return 0;
		}
		w->depth++;
		w->rest++;
		return 0;
	}
	switch (cls) {
	case SF_C_DOT:
		return 0;
	case SF_C_DOTDOT:
		if (w->st == SF_PW_TASK || w->st == SF_PW_FDDIR ||
		    w->st == SF_PW_NSDIR)
			w->st = SF_PW_PID;
		else if (w->st == SF_PW_SELFFD)
			w->st = SF_PW_SELF;
		else
			w->st = SF_PW_NONE;
		return 0;
	case SF_C_NUM:
		if (w->st == SF_PW_FDW || w->st == SF_PW_SELFFD) {
			/* /x/fd/<n>: not a directory fd of ours; <n> may be a pid */
			follow = SF_PWF_FD;
			fd = num;
			pid_if_none = w->st == SF_PW_FDW;
			name_here = true;
		} else if (w->st == SF_PW_FDDIR) {
			link = SF_PROC_FD_LINK;
			fd = num;
		} else if (w->st == SF_PW_NSDIR) {
			link = SF_PROC_NS;
		} else {
			sf_pw_pid(w, num, off);
			return 0;
		}
		break;
	case SF_C_SELF:
		w->st = SF_PW_SELF;
		w->name_off = off;
		return 0;
	case SF_C_FD:
		if (w->st == SF_PW_PID)
			w->st = SF_PW_FDDIR;
		else if (w->st == SF_PW_SELF)
			w->st = SF_PW_SELFFD;
		else if (w->st == SF_PW_NSDIR)
			link = SF_PROC_NS;
		else
			w->st = SF_PW_FDW;
		break;
	case SF_C_TASK:
		w->st = (w->st == SF_PW_PID || w->st == SF_PW_SELF) ? SF_PW_TASK :
								      SF_PW_NONE;
		return 0;
	case SF_C_NS:
		if (w->st == SF_PW_PID)
			w->st = SF_PW_NSDIR;
		else if (w->st == SF_PW_NSDIR)
			link = SF_PROC_NS;
		else
			w->st = SF_PW_NONE;
		break;
	case SF_C_CWD:
	case SF_C_ROOT:
	case SF_C_EXE:
		if (w->st == SF_PW_PID) {
			link = cls == SF_C_CWD ? SF_PROC_CWD :
			       cls == SF_C_ROOT ? SF_PROC_ROOT : SF_PROC_EXE;
		} else if (w->st == SF_PW_SELF) {
			if (cls == SF_C_CWD)
				follow = SF_PWF_CWD;
			else if (cls == SF_C_ROOT)
				follow = SF_PWF_ROOT;
			else
				w->st = SF_PW_NONE;
		} else if (w->st == SF_PW_NSDIR) {
			link = SF_PROC_NS;
		} else {
			w->st = SF_PW_NONE;
		}
		break;
	case SF_C_STDIO:
		if (w->st == SF_PW_NSDIR) {
			link = SF_PROC_NS;
		} else {
			follow = SF_PWF_FD;
			fd = num;
			name_here = true;
		}
		break;
	default:
		if (w->st == SF_PW_NSDIR)
			link = SF_PROC_NS;
		else
			w->st = SF_PW_NONE;
		break;
	}

	if (link) {
		bool own;

		if (w->task) {
			own = sf_same_process(cur, (struct task_struct *)w->task);
		} else {
			struct task_struct *t = bpf_task_from_vpid(w->pid);

			if (!t) {
				w->st = SF_PW_NONE; /* no such process: ENOENT */
				return 0;
			}
			own = sf_same_process(cur, t);
			bpf_task_release(t);
		}
		if (!own) {
			w->st = SF_PW_LINK;
			w->cls = link;
			w->fd = fd;
			w->depth = 0;
			w->min_depth = 0;
			w->rest = 0;
			return 0;
		}
		if (link == SF_PROC_FD_LINK)
			follow = SF_PWF_FD;
		else if (link == SF_PROC_CWD)
			follow = SF_PWF_CWD;
		else if (link == SF_PROC_ROOT)
			follow = SF_PWF_ROOT;
		else
			w->st = SF_PW_NONE;
	}
	switch (follow) {
	case SF_PWF_FD:
		f = sf_current_fd_file(cur, fd);
		d = f ? (__u64)BPF_CORE_READ(f, f_path.dentry) : 0;
		break;
	case SF_PWF_CWD:
		d = (__u64)BPF_CORE_READ(cur, fs, pwd.dentry);
		break;
	case SF_PWF_ROOT:
		d = (__u64)BPF_CORE_READ(cur, fs, root.dentry);
		break;
	default:
		return 0;
	}
	sf_pw_dentry(w, d);
	if (w->st == SF_PW_NONE) {
		if (pid_if_none)
			sf_pw_pid(w, num, off);
	} else if (name_here) {
		w->name_off = off;
	}
	return 0;
}

static long sf_pw_step(__u32 i, void *ctx)
{
	struct sf_scan *sc = ctx;
	int pos = (int)i;
	char c;

	if (pos > sc->len)
		return 1;
	c = pos < sc->len ? sc->buf[pos & SF_PATH_MASK] : '/';
	if (c == '/') {
		if (sc->start >= 0) {
			sf_gf_pw_comp(sc->pw, sc->start, pos - sc->start);
			sc->start = -1;
		}
		return 0;
	}
	if (sc->start < 0)
		sc->start = pos;
	return 0;
}

/*
 * Reads a system call's path (into the caller's walk buffer) and the
 * directory a relative one starts at. Returns the length, or -1.
 */
static __always_inline int sf_read_path(struct task_struct *cur,
					struct sf_walk_buf *wb, int dirfd,
					const void *upath, __u64 *base_mnt,
					__u64 *base_d)
{
	int len = bpf_probe_read_user_str(wb->buf, SF_PATH_MAX, upath);

	if (len <= 0)
		return -1;
	len -= 1;
	if (len > 0 && wb->buf[0] == '/') {
		*base_mnt = (__u64)BPF_CORE_READ(cur, fs, root.mnt);
		*base_d = (__u64)BPF_CORE_READ(cur, fs, root.dentry);
	} else if (dirfd == SF_AT_FDCWD) {
		*base_mnt = (__u64)BPF_CORE_READ(cur, fs, pwd.mnt);
		*base_d = (__u64)BPF_CORE_READ(cur, fs, pwd.dentry);
	} else {
		struct file *f = sf_current_fd_file(cur, dirfd);

		if (!f)
			return -1;
		*base_mnt = (__u64)BPF_CORE_READ(f, f_path.mnt);
		*base_d = (__u64)BPF_CORE_READ(f, f_path.dentry);
	}
	return len;
}

/* Walks wb->buf (len bytes) from base_d; *w says what was found. */
static __always_inline void sf_pw_walk(struct sf_scan *sc, struct sf_pw *w,
				       struct sf_walk_buf *wb, int len,
				       __u64 base_d)
{
	/* Scratch holds the last walk's state: every field starts at zero. */
	__builtin_memset(w, 0, sizeof(*w));
	sc->buf = wb->buf;
	sc->len = len;
	sc->start = -1;
	sc->pw = w;
	w->st = SF_PW_NONE;
	if (len == 0 || wb->buf[0] != '/') {
		sf_pw_dentry(w, base_d);
		w->name_off = 0;
	}
	bpf_loop(len + 1, sf_pw_step, sc, 0);
}

/* Does the object (o_mnt, o_d, o_inode) confirm the link the walk found? */
static __always_inline bool sf_pw_confirms(struct task_struct *cur,
					   struct task_struct *t,
					   const struct sf_pw *w,
					   struct sf_under *u, __u64 o_mnt,
					   __u64 o_d, struct inode *o_inode)
{
	__u64 lmnt = 0, ld = 0, rmnt, rd;
	struct file *tf = NULL;
	struct fdtable *fdt;
	struct file **fds;

	if (w->cls == SF_PROC_FD_LINK) {
		long fdn = w->fd;

		fdt = BPF_CORE_READ(t, files, fdt);
		if (!fdt || fdn < 0 || fdn >= BPF_CORE_READ(fdt, max_fds))
			return false;
		fds = BPF_CORE_READ(fdt, fd);
		bpf_core_read(&tf, sizeof(tf), &fds[fdn]);
		if (!tf)
			return false;
	}
	if (w->rest == 0 && w->min_depth == 0) {
		switch (w->cls) {
		case SF_PROC_EXE:
			return BPF_CORE_READ(t, mm, exe_file, f_inode) == o_inode;
		case SF_PROC_CWD:
			return (__u64)BPF_CORE_READ(t, fs, pwd.dentry) == o_d;
		case SF_PROC_ROOT:
			return (__u64)BPF_CORE_READ(t, fs, root.dentry) == o_d;
		case SF_PROC_FD_LINK:
			return BPF_CORE_READ(tf, f_inode) == o_inode;
		case SF_PROC_NS:
			return o_inode && sf_sb_magic(o_inode) == SF_NSFS_MAGIC;
		}
		return false;
	}
	/* The walk went on past the link: where it went must lie below. */
	switch (w->cls) {
	case SF_PROC_CWD:
		lmnt = (__u64)BPF_CORE_READ(t, fs, pwd.mnt);
		ld = (__u64)BPF_CORE_READ(t, fs, pwd.dentry);
		break;
	case SF_PROC_ROOT:
		lmnt = (__u64)BPF_CORE_READ(t, fs, root.mnt);
		ld = (__u64)BPF_CORE_READ(t, fs, root.dentry);
		break;
	case SF_PROC_FD_LINK:
		lmnt = (__u64)BPF_CORE_READ(tf, f_path.mnt);
		ld = (__u64)BPF_CORE_READ(tf, f_path.dentry);
		break;
	default:
		return false; /* exe and ns/ entries are not directories */
	}
	rmnt = (__u64)BPF_CORE_READ(cur, fs, root.mnt);
	rd = (__u64)BPF_CORE_READ(cur, fs, root.dentry);
	for (int i = 0; i < 8; i++) {
		if (i >= -w->min_depth)
			break;
		sf_path_parent(&lmnt, &ld, rmnt, rd);
	}
	if (!sf_path_under(u, o_mnt, o_d, lmnt, ld))
		return false;
	/*
	 * Everything the caller can reach lies under a link at or above its
	 * own root, so "under" proves nothing there: such a walk is judged
	 * only when it left the caller's root (a chrooted caller through a
	 * process outside). Below the caller's root, the walk names a file
	 * the caller can open by its own path only when the link is its
	 * root: /proc/<pid>/root/etc/x of a process sharing our root is
	 * /etc/x.
	 */
	if (sf_path_under(u, rmnt, rd, lmnt, ld))
		return !sf_path_under(u, o_mnt, o_d, rmnt, rd);
	return true;
}

/* What sf_gf_walk() judges: a system call's path and what it produced. */
struct sf_walk_req {
	struct sf_sandbox_ref sb;
	__s64 nr;
	__s32 dirfd;
	__u32 have_obj; /* o_*: an opened file, a new cwd, an O_PATH fd */
	__u64 upath;
	__u64 o_mnt, o_d, o_inode;
	/* sf_gf_walk's and sf_gf_pw_judge's own. */
	__u64 base_mnt, base_d; /* where the path starts */
	struct sf_pw pw;
	struct sf_under under;
	struct sf_verdict v;
};

/*
 * Judges the link the walk found against process t: kill when t is
 * foreign and (with an object) the object confirms the walk.
 */
static __always_inline void sf_pw_judge_task(struct task_struct *cur,
					     struct sf_walk_req *r,
					     struct task_struct *t,
					     const char *buf)
{
	const struct sf_pw *w = &r->pw;
	struct sf_verdict *v = &r->v;

	if (sf_same_process(cur, t))
		return;
	__builtin_memset(v, 0, sizeof(*v));
	v->why = sf_foreign(cur, t, &r->sb);
	if (!v->why)
		return;
	if (r->have_obj &&
	    !sf_pw_confirms(cur, t, w, &r->under, r->o_mnt, r->o_d,
			    (struct inode *)r->o_inode))
		return;
	v->enforcer = SF_ENFORCER_SIGNAL;
	v->action = sf_kill_action(&r->sb);
	v->what = r->have_obj ? SF_WHAT_PROC_LINK : SF_WHAT_PROC_HANDLE;
	v->proc_class = w->cls;
	v->syscall_nr = r->nr;
	v->target_cgroup = sf_cgroup_id(sf_task_cgroup(t));
	sf_emit(&r->sb, v, cur, t, buf + (w->name_off & SF_PATH_MASK),
		SF_GUARD_NAME_LEN);
}

static __always_inline void sf_pw_judge(struct task_struct *cur,
					struct sf_walk_req *r, const char *buf)
{
	struct task_struct *t;

	if (r->pw.st != SF_PW_LINK)
		return;
	if (r->pw.task) {
		sf_pw_judge_task(cur, r, (struct task_struct *)r->pw.task, buf);
		return;
	}
	t = bpf_task_from_vpid(r->pw.pid);
	if (!t)
		return;
	sf_pw_judge_task(cur, r, t, buf);
	bpf_task_release(t);
}

/*
 * The walk of a path a system call took. Returns 1 when it went through
 * another process's magic link, for sf_gf_pw_judge(). Global: verified
 * once. r is in the calling program's scratch (struct sf_scratch).
 */
__noinline int sf_gf_walk(struct sf_walk_req *r)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct sf_walk_buf *wb;
	struct sf_scan sc;
	int len;

	if (!r)
		return 0;
	r->pw.st = SF_PW_NONE;
	r->base_mnt = 0;
	r->base_d = 0;
	wb = bpf_task_storage_get(&sf_gwalk, cur, 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!wb)
		return 0;
	len = sf_read_path(cur, wb, r->dirfd, (void *)r->upath, &r->base_mnt,
			   &r->base_d);
	if (len < 0)
		return 0;
	if (r->nr == SF_NR_CHDIR && wb->chdir_valid) {
		/* A relative chdir started at the old working directory. */
		if (len == 0 || wb->buf[0] != '/')
			r->base_d = wb->chdir_dentry;
		wb->chdir_valid = 0;
	}
	sf_pw_walk(&sc, &r->pw, wb, len, r->base_d);
	return r->pw.st == SF_PW_LINK;
}

/*
 * The link sf_gf_walk() found, judged against what the call produced, or
 * (name_to_handle_at) with nothing to compare. Global, and called after
 * the walk, not from it: the walk's frames and the judgment's are never
 * on the stack together. The path is still in the task's walk buffer.
 */
__noinline int sf_gf_pw_judge(struct sf_walk_req *r)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct sf_walk_buf *wb;

	if (!r)
		return 0;
	wb = bpf_task_storage_get(&sf_gwalk, cur, 0, 0);
	if (!wb)
		return 0;
	sf_pw_judge(cur, r, wb->buf);
	return 0;
}

/* Fills r (in the program's scratch) for sf_walk_run(). */
static __always_inline void sf_walk_fill(struct sf_walk_req *r,
					 const struct sf_sandbox_ref *sb,
					 long nr, int dirfd, const void *upath,
					 bool have_obj, __u64 o_mnt, __u64 o_d,
					 struct inode *o_inode)
{
	r->sb = *sb;
	r->nr = nr;
	r->dirfd = dirfd;
	r->have_obj = have_obj;
	r->upath = (__u64)upath;
	r->o_mnt = o_mnt;
	r->o_d = o_d;
	r->o_inode = (__u64)o_inode;
}

/*
 * Walks r's path and judges what it found. Called from the program itself
 * (never from a global function) so that the walk's frames stack on the
 * program's frame alone: see struct sf_scratch.
 */
static __always_inline void sf_walk_run(struct sf_walk_req *r)
{
	if (sf_gf_walk(r))
		sf_gf_pw_judge(r);
}

/* --- Protected objects by path ------------------------------------------------ */

/* A protected-object walk's state (no pointers: see struct sf_pw). */
struct sf_prw {
	__u64 mnt, d;   /* the base, moved up by leading ".." */
	__u64 rmnt, rd; /* the caller's root */
	__s32 top;      /* entries in wb->stk */
	__s32 over;     /* deeper than the stack: unknown, as protected as above */
};

/* What sf_gf_prot_path() judges: one or two paths (0: none) of a call. */
struct sf_prot_req {
	struct sf_sandbox_ref sb;
	__s64 nr;
	__u32 what; /* SF_WHAT_PROT_* */
	__s32 dirfd[2];
	__u32 pad;
	__u64 upath[2];
	/* sf_gf_prot_path's own: the walk, its lookup key, the verdict. */
	struct sf_prw prw;
	struct sf_guard_dirent key;
	struct sf_verdict v;
};

/* bpf_loop's context (on the stack): the walk's state is in the request. */
struct sf_pscan {
	char *buf;
	__s32 len;
	__s32 start;
	struct sf_prot_req *r;
};

/* One component of a protected-object walk (global: verified once). */
__noinline int sf_gf_prw_comp(struct sf_prot_req *r, int off, int len)
{
	struct sf_guard_inode *child;
	struct sf_walk_buf *wb;
	struct sf_prw_ent *e;
	struct inode *inode;
	__u32 prev_lost = 0, prev_prot = 0;
	struct sf_prw *w;
	long num = 0;
	int cls;

	if (!r)
		return 0;
	w = &r->prw;
	wb = bpf_task_storage_get(&sf_gwalk, bpf_get_current_task_btf(), 0, 0);
	if (!wb)
		return 0;
	cls = sf_comp_class(wb->buf, off, len, &num);

	if (cls == SF_C_DOT)
		return 0;
	if (cls == SF_C_DOTDOT) {
		if (w->over > 0)
			w->over--;
		else if (w->top > 0)
			w->top--;
		else
			sf_path_parent(&w->mnt, &w->d, w->rmnt, w->rd);
		return 0;
	}
	if (w->over > 0 || w->top >= SF_PRW_DEPTH) {
		w->over++;
		return 0;
	}
	/* The key's name is compared whole: zero past the component. */
	__builtin_memset(&r->key, 0, sizeof(r->key));
	if (w->top > 0) {
		e = &wb->stk[(w->top - 1) & (SF_PRW_DEPTH - 1)];
		prev_lost = e->lost;
		prev_prot = e->prot;
		r->key.parent = e->k;
	} else {
		struct dentry *base = (void *)w->d;

		inode = BPF_CORE_READ(base, d_inode);
		if (inode)
			sf_inode_key(inode, &r->key.parent);
		else
			prev_lost = 1;
	}
	e = &wb->stk[w->top & (SF_PRW_DEPTH - 1)];
	e->lost = 1;
	e->prot = prev_prot;
	if (!prev_lost && len < SF_GUARD_PROTNAME_LEN) {
		for (int i = 0; i < SF_GUARD_PROTNAME_LEN - 1; i++) {
			if (i >= len)
				break;
			r->key.name[i] = wb->buf[(off + i) & SF_PATH_MASK];
		}
		child = bpf_map_lookup_elem(&sf_gprotn, &r->key);
		if (child) {
			e->k = *child;
			e->lost = 0;
			if (bpf_map_lookup_elem(&sf_gprot, child))
				e->prot = 1;
		}
	}
	w->top++;
	return 0;
}

static long sf_prw_step(__u32 i, void *ctx)
{
	struct sf_pscan *sc = ctx;
	int pos = (int)i;
	char c;

	if (pos > sc->len)
		return 1;
	c = pos < sc->len ? sc->buf[pos & SF_PATH_MASK] : '/';
	if (c == '/') {
		if (sc->start >= 0) {
			sf_gf_prw_comp(sc->r, sc->start, pos - sc->start);
			sc->start = -1;
		}
		return 0;
	}
	if (sc->start < 0)
		sc->start = pos;
	return 0;
}

/*
 * Does the path (dirfd, upath) name a protected object, or something in
 * one? Followed lexically from its base through the registered directory
 * entries (a symbolic link on the way is not followed: docs/guard.md).
 * Kills (or audits) and returns 1 if so.
 */
static __always_inline int sf_prot_path_one(struct task_struct *cur,
					    struct sf_prot_req *r, int dirfd,
					    __u64 upath)
{
	struct sf_walk_buf *wb;
	struct sf_pscan sc;
	struct sf_prw *w;
	bool prot = false;
	int len, tail;

	w = &r->prw;
	/* Scratch holds the last walk's state: every field starts at zero. */
	__builtin_memset(w, 0, sizeof(*w));
	wb = bpf_task_storage_get(&sf_gwalk, cur, 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!wb)
		return 0;
	len = sf_read_path(cur, wb, dirfd, (void *)upath, &w->mnt, &w->d);
	if (len < 0)
		return 0;
	sc.buf = wb->buf;
	sc.len = len;
	sc.start = -1;
	sc.r = r;
	w->rmnt = (__u64)BPF_CORE_READ(cur, fs, root.mnt);
	w->rd = (__u64)BPF_CORE_READ(cur, fs, root.dentry);
	bpf_loop(len + 1, sf_prw_step, &sc, 0);
	if (w->top > 0)
		prot = wb->stk[(w->top - 1) & (SF_PRW_DEPTH - 1)].prot;
	if (!prot && !sf_dentry_protected((struct dentry *)w->d))
		return 0;
	/* The event names the path's last SF_GUARD_NAME_LEN - 1 bytes. */
	tail = len > SF_GUARD_NAME_LEN - 1 ? len - (SF_GUARD_NAME_LEN - 1) : 0;
	__builtin_memset(&r->v, 0, sizeof(r->v));
	r->v.enforcer = SF_ENFORCER_SIGNAL;
	r->v.action = sf_kill_action(&r->sb);
	r->v.what = r->what;
	r->v.why = SF_WHY_PROTECTED;
	r->v.syscall_nr = r->nr;
	sf_emit(&r->sb, &r->v, cur, NULL, wb->buf + (tail & SF_PATH_MASK),
		SF_GUARD_NAME_LEN);
	return 1;
}

/*
 * The paths of r, one walk each: the second only when the first killed
 * nobody. Global: verified once. r is in the calling program's scratch
 * (struct sf_scratch).
 */
__noinline int sf_gf_prot_path(struct sf_prot_req *r)
{
	struct task_struct *cur = bpf_get_current_task_btf();

	if (!r)
		return 0;
	if (r->upath[0] && sf_prot_path_one(cur, r, r->dirfd[0], r->upath[0]))
		return 1;
	if (r->upath[1])
		return sf_prot_path_one(cur, r, r->dirfd[1], r->upath[1]);
	return 0;
}

/* Fills r (in the program's scratch) for sf_gf_prot_path(). */
static __always_inline void sf_prot_fill(struct sf_prot_req *r,
					 const struct sf_sandbox_ref *sb,
					 long nr, __u32 what, int dirfd1,
					 __u64 upath1, int dirfd2, __u64 upath2)
{
	r->sb = *sb;
	r->nr = nr;
	r->what = what;
	r->dirfd[0] = dirfd1;
	r->upath[0] = upath1;
	r->dirfd[1] = dirfd2;
	r->upath[1] = upath2;
	r->pad = 0;
}

#endif /* SANDFENCE_BPF_GUARD_SIG_WALK_BPF_H_ */
