/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The process guard's decisions, shared by both enforcers (sf_guard_lsm and
 * sf_guard_sig): which sandbox governs a task, whether a target is foreign
 * to it, what a /proc/<pid>/ entry is, and how an event is recorded.
 *
 * Kernel structures are read with CO-RE (BPF_CORE_READ), never with a
 * hand-written copy of their layout: the objects are built against this
 * machine's vmlinux.h and also run on other kernels (the VM's 6.1).
 *
 * Include after vmlinux.h and the libbpf headers.
 */
#ifndef SANDFENCE_BPF_GUARD_GUARD_BPF_H_
#define SANDFENCE_BPF_GUARD_GUARD_BPF_H_

#include "guard/guard_abi.h"
#include "guard/guard_mutant.h"

#define SF_EPERM 1
#define SF_SIGKILL 9
#define SF_PROC_SUPER_MAGIC 0x9fa0
#define SF_CGROUP2_SUPER_MAGIC 0x63677270
#define SF_PID_FS_MAGIC 0x50494446
#define SF_FMODE_WRITE 0x2
#define SF_MAY_WRITE 0x2
#define SF_TS_COMPAT 0x0002 /* thread_info.status: a 32-bit system call */
#define SF_PTRACE_TRACEME 0
#define SF_PTRACE_ATTACH 16
#define SF_PTRACE_SEIZE 0x4206
#define SF_PTRACE_MODE_NOAUDIT 0x04

/* x86-64 system call numbers, and their ia32 (int $0x80) counterparts. */
#define SF_NR_OPEN 2
#define SF_NR_PTRACE 101
#define SF_NR_READLINK 89
#define SF_NR_OPENAT 257
#define SF_NR_READLINKAT 267
#define SF_NR_VM_READV 310
#define SF_NR_VM_WRITEV 311
#define SF_NR_IO_URING_ENTER 426
#define SF_NR_CLONE3 435
#define SF_NR_OPENAT2 437
#define SF_NR_PIDFD_GETFD 438
#define SF_NR32_OPEN 5
#define SF_NR32_PTRACE 26
#define SF_NR32_READLINK 85
#define SF_NR32_OPENAT 295
#define SF_NR32_READLINKAT 305
#define SF_NR32_VM_READV 347
#define SF_NR32_VM_WRITEV 348

/*
 * Sandboxes: cgroup id -> mode. Only the sandbox roots are keys. Not
 * preallocated: an update replaces the element, so a reader never sees a
 * mode of one value with the ring of another.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct sf_guard_sandbox);
} sf_guarded SEC(".maps");

/* Events lost to a full ring buffer, per sandbox (created by user space). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u64);
} sf_glost SEC(".maps");

/* /proc/<pid>/ entry names -> class (filled by user space at load). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 128);
	__type(key, struct sf_procname);
	__type(value, struct sf_procname_kind);
} sf_procnames SEC(".maps");

/*
 * One copy of the guard serves every sandfence process on the host; each
 * reads its events from its own ring (its driver slot, sf_guard_sandbox.
 * ring). A slot without a ring counts the event as lost.
 */
struct sf_gring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, SF_MAX_DRIVERS);
	__type(key, __u32);
	__array(values, struct sf_gring);
} sf_grings SEC(".maps");

/*
 * sf_glevels[0], bit L set: some guarded sandbox sits at cgroup level L. A
 * task's sandbox is looked up only at those levels of its ancestry, so a
 * task outside every sandbox costs one map miss per distinct level
 * (usually one). Written by user space.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sf_glevels SEC(".maps");

/* sf_glost_other[0]: lost events whose sandbox had no sf_glost entry. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sf_glost_other SEC(".maps");

/* kernfs_node::parent became __parent in 6.15; read whichever exists. */
struct kernfs_node___new {
	struct kernfs_node *__parent;
} __attribute__((preserve_access_index));

struct kernfs_node___old {
	struct kernfs_node *parent;
} __attribute__((preserve_access_index));

static __always_inline struct kernfs_node *sf_kn_parent(struct kernfs_node *kn)
{
	struct kernfs_node___new *n = (void *)kn;
	struct kernfs_node___old *o = (void *)kn;

	if (bpf_core_field_exists(n->__parent))
		return BPF_CORE_READ(n, __parent);
	return BPF_CORE_READ(o, parent);
}

/* The sandbox governing a task: its nearest guarded cgroup ancestor. */
struct sf_sandbox_ref {
	__u64 id;
	__u32 level;
	__u32 mode;
	__u32 flags;
	__u32 ring;
};

static __always_inline struct cgroup *sf_task_cgroup(struct task_struct *t)
{
	return BPF_CORE_READ(t, cgroups, dfl_cgrp);
}

static __always_inline __u64 sf_cgroup_id(struct cgroup *cg)
{
	return BPF_CORE_READ(cg, kn, id);
}

static __always_inline __u64 sf_cgroup_ancestor_id(struct cgroup *cg,
						   __u32 level)
{
	struct cgroup *anc = NULL;

	bpf_core_read(&anc, sizeof(anc), &cg->ancestors[level & SF_GUARD_MAX_LEVEL]);
	if (!anc)
		return 0;
	return BPF_CORE_READ(anc, kn, id);
}

static __always_inline bool sf_cgroup_within(struct cgroup *cg,
					     const struct sf_sandbox_ref *sb)
{
	__u32 level;

	if (!cg)
		return false;
	level = BPF_CORE_READ(cg, level);
	if (level < sb->level)
		return false;
	return sf_cgroup_ancestor_id(cg, sb->level) == sb->id;
}

static __always_inline bool sf_find_sandbox(struct task_struct *t,
					    struct sf_sandbox_ref *sb)
{
	struct sf_guard_sandbox *v;
	struct cgroup *cg;
	__u32 zero = 0;
	__u64 *levels, mask;
	int level;

	levels = bpf_map_lookup_elem(&sf_glevels, &zero);
	if (!levels)
		return false;
	mask = *levels;
	if (!mask)
		return false;
	cg = sf_task_cgroup(t);
	if (!cg)
		return false;
	level = BPF_CORE_READ(cg, level);
	/* Deepest first: a sandbox nested in another governs its own. */
	for (int j = 0; j <= SF_GUARD_MAX_LEVEL; j++) {
		int l = level - j;
		__u64 id;

		if (l < 0)
			break;
		if (!((mask >> l) & 1))
			continue;
		id = sf_cgroup_ancestor_id(cg, l);
		v = bpf_map_lookup_elem(&sf_guarded, &id);
		if (!v)
			continue;
		sb->id = id;
		sb->level = l;
		sb->mode = v->mode;
		sb->flags = v->flags;
		sb->ring = v->ring;
		return true;
	}
	return false;
}

/*
 * Why a target is foreign to the actor in sandbox sb (0: it is not). The
 * actor's subjective credentials (what it acts with) against the target's
 * objective ones; real and effective UIDs must all be one and the same.
 */
static __always_inline __u32 sf_foreign(struct task_struct *actor,
					struct task_struct *target,
					const struct sf_sandbox_ref *sb)
{
	__u32 au = BPF_CORE_READ(actor, cred, uid.val);
	__u32 ae = BPF_CORE_READ(actor, cred, euid.val);
	__u32 tu = BPF_CORE_READ(target, real_cred, uid.val);
	__u32 te = BPF_CORE_READ(target, real_cred, euid.val);
	__u32 why = 0;

	if (au != tu || ae != te || au != te || ae != tu)
		why |= SF_WHY_UID;
	if (!sf_cgroup_within(sf_task_cgroup(target), sb))
		why |= SF_WHY_OUTSIDE;
	return why;
}

static __always_inline bool sf_same_process(struct task_struct *a,
					    struct task_struct *b)
{
	return BPF_CORE_READ(a, tgid) == BPF_CORE_READ(b, tgid);
}

/* The task a struct pid names (thread), or NULL once it has gone. */
static __always_inline struct task_struct *sf_pid_task(struct pid *pid)
{
	struct hlist_node *first;

	if (!pid)
		return NULL;
	first = BPF_CORE_READ(pid, tasks[PIDTYPE_PID].first);
	if (!first)
		return NULL;
	return (void *)first - bpf_core_field_offset(struct task_struct, pid_links);
}

/* The task behind a procfs inode (/proc/<pid>/...), or NULL. */
static __always_inline struct task_struct *sf_proc_inode_task(struct inode *inode)
{
	struct proc_inode *pi;

	pi = (void *)inode - bpf_core_field_offset(struct proc_inode, vfs_inode);
	return sf_pid_task(BPF_CORE_READ(pi, pid));
}

static __always_inline __u64 sf_sb_magic(struct inode *inode)
{
	return BPF_CORE_READ(inode, i_sb, s_magic);
}

/* What a /proc/<pid>/ entry is, from its dentry name (and its parent's). */
struct sf_proc_entry {
	__u16 proc_class;
	__u16 flags;
	struct sf_procname name;
};

static __always_inline void sf_classify_proc(struct dentry *d,
					     struct sf_proc_entry *e)
{
	struct sf_procname parent = {};
	struct sf_procname_kind *k;
	const unsigned char *s;

	__builtin_memset(&e->name, 0, sizeof(e->name));
	s = BPF_CORE_READ(d, d_name.name);
	bpf_probe_read_kernel_str(e->name.name, sizeof(e->name.name), s);
	s = BPF_CORE_READ(d, d_parent, d_name.name);
	bpf_probe_read_kernel_str(parent.name, sizeof(parent.name), s);

	/* Entries of fd/, fdinfo/, map_files/ and task/ take the parent's. */
	k = bpf_map_lookup_elem(&sf_procnames, &parent);
	if (k && (k->flags & SF_PROCNAME_F_PARENT)) {
		e->proc_class = k->child_class;
		e->flags = k->child_flags;
		return;
	}
	k = bpf_map_lookup_elem(&sf_procnames, &e->name);
	if (k) {
		e->proc_class = k->proc_class;
		e->flags = k->flags;
		return;
	}
	if (e->name.name[0] >= '0' && e->name.name[0] <= '9') {
		/* /proc/<pid> itself. */
		e->proc_class = SF_PROC_PID_DIR;
		e->flags = SF_PROCNAME_F_IGNORE;
		return;
	}
	/* Unknown: treated as gated by ptrace access, the stricter class. */
	e->proc_class = SF_PROC_OTHER;
	e->flags = 0;
}

static __always_inline void sf_fill_task(struct sf_guard_task *out,
					 struct task_struct *t, bool subjective)
{
	out->pid = BPF_CORE_READ(t, pid);
	out->tgid = BPF_CORE_READ(t, tgid);
	if (subjective) {
		out->uid = BPF_CORE_READ(t, cred, uid.val);
		out->euid = BPF_CORE_READ(t, cred, euid.val);
	} else {
		out->uid = BPF_CORE_READ(t, real_cred, uid.val);
		out->euid = BPF_CORE_READ(t, real_cred, euid.val);
	}
	BPF_CORE_READ_STR_INTO(&out->comm, t, comm);
}

/* Everything an event says besides the two tasks. */
struct sf_verdict {
	__u32 enforcer;
	__u32 action;
	__u32 what;
	__u32 why;
	__u32 proc_class;
	__s32 syscall_nr;
	__u64 target_cgroup;
};

/*
 * Records a decision already taken and acted on: a full ring buffer costs
 * an event (counted per sandbox), never the verdict.
 */
static __always_inline void sf_emit(const struct sf_sandbox_ref *sb,
				    const struct sf_verdict *v,
				    struct task_struct *actor,
				    struct task_struct *target,
				    const char *name, __u32 name_len)
{
	struct sf_guard_event *ev = NULL;
	__u32 ring_slot = sb->ring, zero = 0;
	__u64 *lost;
	void *ring;

	ring = bpf_map_lookup_elem(&sf_grings, &ring_slot);
	if (ring)
		ev = bpf_ringbuf_reserve(ring, sizeof(*ev), 0);
	if (!ev) {
		lost = bpf_map_lookup_elem(&sf_glost, &sb->id);
		if (!lost)
			lost = bpf_map_lookup_elem(&sf_glost_other, &zero);
		if (lost)
			__sync_fetch_and_add(lost, 1);
		return;
	}
	__builtin_memset(ev, 0, sizeof(*ev));
	ev->ts_ns = bpf_ktime_get_ns();
	ev->sandbox_id = sb->id;
	ev->target_cgroup = v->target_cgroup;
	ev->enforcer = v->enforcer;
	ev->action = v->action;
	ev->what = v->what;
	ev->why = v->why;
	ev->proc_class = v->proc_class;
	ev->syscall_nr = v->syscall_nr;
	sf_fill_task(&ev->actor, actor, true);
	if (target)
		sf_fill_task(&ev->target, target, false);
	if (name && name_len)
		bpf_probe_read_kernel_str(ev->name,
					  name_len < sizeof(ev->name) ?
						  name_len : sizeof(ev->name),
					  name);
	bpf_ringbuf_submit(ev, 0);
}

/* Is the current system call a 32-bit one (int $0x80 or a 32-bit task)? */
static __always_inline bool sf_compat_syscall(struct task_struct *t)
{
	return BPF_CORE_READ(t, thread_info.status) & SF_TS_COMPAT;
}

/* A 32-bit system call number as its x86-64 equivalent (-1: none we judge). */
static __always_inline int sf_nr32_to_64(long nr)
{
	switch (nr) {
	case SF_NR32_OPEN:
		return SF_NR_OPEN;
	case SF_NR32_PTRACE:
		return SF_NR_PTRACE;
	case SF_NR32_READLINK:
		return SF_NR_READLINK;
	case SF_NR32_OPENAT:
		return SF_NR_OPENAT;
	case SF_NR32_READLINKAT:
		return SF_NR_READLINKAT;
	case SF_NR32_VM_READV:
		return SF_NR_VM_READV;
	case SF_NR32_VM_WRITEV:
		return SF_NR_VM_WRITEV;
	case SF_NR_CLONE3:
	case SF_NR_OPENAT2:
	case SF_NR_PIDFD_GETFD:
		return nr; /* same number in both tables */
	}
	return -1;
}

/* The cgroup a cgroupfs file (cgroup.procs, ...) belongs to. */
static __always_inline struct cgroup *sf_kernfs_file_cgroup(struct kernfs_node *kn)
{
	struct kernfs_node *dir = sf_kn_parent(kn);

	if (!dir)
		return NULL;
	return BPF_CORE_READ(dir, priv);
}

/* Eight characters as the little-endian word a name buffer holds. */
#define SF_C8(a, b, c, d, e, f, g, h)                                   \
	((__u64)(a) | (__u64)(b) << 8 | (__u64)(c) << 16 |              \
	 (__u64)(d) << 24 | (__u64)(e) << 32 | (__u64)(f) << 40 |       \
	 (__u64)(g) << 48 | (__u64)(h) << 56)

/* A name read into words; compared a word at a time (few branches). */
union sf_name32 {
	char c[32];
	__u64 w[4];
};

/* Is a cgroupfs file name one that moves processes when written? */
static __always_inline bool sf_is_procs_file(const union sf_name32 *n)
{
	const __u64 mask5 = 0xffffffffffULL, mask7 = 0xffffffffffffffULL;

	/* "cgroup.procs" and "cgroup.threads", with their NUL. */
	if (n->w[0] == SF_C8('c', 'g', 'r', 'o', 'u', 'p', '.', 'p'))
		return (n->w[1] & mask5) == SF_C8('r', 'o', 'c', 's', 0, 0, 0, 0);
	if (n->w[0] == SF_C8('c', 'g', 'r', 'o', 'u', 'p', '.', 't'))
		return (n->w[1] & mask7) == SF_C8('h', 'r', 'e', 'a', 'd', 's', 0, 0);
	return false;
}

#endif /* SANDFENCE_BPF_GUARD_GUARD_BPF_H_ */
