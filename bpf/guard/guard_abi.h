/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The process guard's ABI: the map keys and values user space writes and the
 * events the BPF programs emit. Included by the BPF objects (after vmlinux.h,
 * which provides __u32 and friends) and by C++ (which gets them from
 * <linux/types.h>); both sides assert the sizes, so a layout change breaks
 * the build instead of the records.
 */
#ifndef SANDFENCE_BPF_GUARD_GUARD_ABI_H_
#define SANDFENCE_BPF_GUARD_GUARD_ABI_H_

#if !defined(__bpf__)
#include <linux/types.h>
#endif

#include "host/host_abi.h"

#ifdef __cplusplus
#define SF_GUARD_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define SF_GUARD_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#define SF_GUARD_COMM_LEN 16
#define SF_GUARD_NAME_LEN 32
/* Keys of sf_procnames: a /proc/<pid>/ entry name, zero-padded. */
#define SF_GUARD_PROCNAME_LEN 16
/* Cgroup levels 0..63 can hold a guarded sandbox (a bit each in sf_glevels). */
#define SF_GUARD_MAX_LEVEL 63

/* sf_guarded: cgroup id of a guarded sandbox -> struct sf_guard_sandbox. */
enum sf_guard_mode {
	SF_GUARD_ENFORCE = 1, /* deny (lsm) or kill (signal) */
	SF_GUARD_AUDIT = 2,   /* only record what would have been stopped */
};

enum sf_guard_flag {
	/* Signal mode: kill for the files any user may read, too. */
	SF_GUARD_F_KILL_READABLE = 1u << 0,
	/*
	 * Signal mode: io_uring may be set up. Off by default, because the
	 * signal enforcer cannot see what a ring does (opens into fixed-file
	 * slots, writes): io_uring_setup kills.
	 */
	SF_GUARD_F_IO_URING = 1u << 1,
};

struct sf_guard_sandbox {
	__u32 mode;  /* enum sf_guard_mode */
	__u32 flags; /* enum sf_guard_flag */
	__u32 ring;  /* the owner's driver slot: where its events go */
	__u32 level; /* the sandbox's cgroup level (sf_glevels is their union) */
};
SF_GUARD_ASSERT(sizeof(struct sf_guard_sandbox) == 16,
		"sf_guard_sandbox is shared with user space");

/* sf_procnames: which /proc/<pid>/ entry is what. */
enum sf_proc_class {
	SF_PROC_NONE = 0,
	SF_PROC_OTHER,     /* an entry not in the table: treated as gated */
	SF_PROC_PID_DIR,   /* /proc/<pid>, /proc/<pid>/task, .../task/<tid> */
	SF_PROC_MEM,
	SF_PROC_ENVIRON,
	SF_PROC_CMDLINE,
	SF_PROC_MAPS,
	SF_PROC_SMAPS,
	SF_PROC_STATUS,
	SF_PROC_STAT,
	SF_PROC_FD_DIR,    /* /proc/<pid>/fd */
	SF_PROC_FD_LINK,   /* /proc/<pid>/fd/<n> (the link itself, O_PATH) */
	SF_PROC_FDINFO,    /* /proc/<pid>/fdinfo and fdinfo/<n> */
	SF_PROC_CWD,
	SF_PROC_ROOT,
	SF_PROC_EXE,
	SF_PROC_AUXV,
	SF_PROC_STACK,
	SF_PROC_SYSCALL,
	SF_PROC_PAGEMAP,
	SF_PROC_MAP_FILES,
	SF_PROC_READABLE_OTHER, /* statm, comm, limits, ...: readable by all */
	SF_PROC_GATED_OTHER,    /* io, personality, ...: ptrace-gated */
	SF_PROC_NS,             /* /proc/<pid>/ns and its entries */
	SF_PROC_CLASS_COUNT,
};

enum sf_procname_flag {
	/* Any user may read it anyway: signal mode audits instead of killing. */
	SF_PROCNAME_F_READABLE = 1u << 0,
	/* Never judged: lists pids or tids only (the pid directories). */
	SF_PROCNAME_F_IGNORE = 1u << 1,
	/* A directory whose entries (fd numbers, tids, ranges) take child_*. */
	SF_PROCNAME_F_PARENT = 1u << 2,
};

struct sf_procname {
	char name[SF_GUARD_PROCNAME_LEN];
};
SF_GUARD_ASSERT(sizeof(struct sf_procname) == 16, "sf_procname key");

struct sf_procname_kind {
	__u16 proc_class;  /* enum sf_proc_class */
	__u16 flags;       /* enum sf_procname_flag */
	__u16 child_class; /* with SF_PROCNAME_F_PARENT: class of the entries */
	__u16 child_flags;
};
SF_GUARD_ASSERT(sizeof(struct sf_procname_kind) == 8, "sf_procname_kind");

/* Events, one per judged access, through the owner's ring in sf_grings. */
enum sf_guard_enforcer {
	SF_ENFORCER_LSM = 1,
	SF_ENFORCER_SIGNAL = 2,
};

enum sf_guard_action {
	SF_ACTION_DENIED = 1,  /* lsm: the call failed with EPERM */
	SF_ACTION_KILLED = 2,  /* signal: SIGKILL before user space */
	SF_ACTION_AUDITED = 3, /* recorded, not stopped */
};

enum sf_guard_what {
	SF_WHAT_PTRACE_ATTACH = 1,
	SF_WHAT_PTRACE_SEIZE = 2,
	SF_WHAT_PTRACE_TRACEME = 3,
	SF_WHAT_VM_READV = 4,
	SF_WHAT_VM_WRITEV = 5,
	SF_WHAT_PIDFD_GETFD = 6,
	SF_WHAT_PROC_OPEN = 7,     /* a /proc/<pid>/ file; see proc_class */
	SF_WHAT_PROC_LINK = 8,     /* signal: through a /proc/<pid>/ magic link */
	SF_WHAT_PTRACE_ACCESS = 9, /* lsm: another ptrace_may_access() caller */
	SF_WHAT_CGROUP_WRITE = 10, /* opened cgroup.procs/threads outside */
	SF_WHAT_CGROUP_CLONE = 11, /* clone3(CLONE_INTO_CGROUP) outside */
	/*
	 * lsm: a path walk through /proc/<pid>/ that the kernel checks with
	 * ptrace_may_access() before any file is opened (the magic links exe,
	 * cwd, root, fd/<n>; fdinfo/): the hook cannot tell which entry.
	 */
	SF_WHAT_PROC_WALK = 12,
	/* A signal (kill, tgkill, pidfd_send_signal, ...) to a process
	 * outside the sandbox; name: "sig <n>" (and " group" for kill(0),
	 * kill(-pgrp), kill(-1)). */
	SF_WHAT_SIGNAL = 13,
	SF_WHAT_BPF = 14, /* any bpf() command */
	/*
	 * Protected objects (GuardController::Protect: sandfence's pins,
	 * state, records, socket), by what was attempted; name: the object
	 * (path's tail or dentry name).
	 */
	SF_WHAT_PROT_UNLINK = 15,  /* unlink, rmdir */
	SF_WHAT_PROT_RENAME = 16,  /* rename from or into */
	SF_WHAT_PROT_CREATE = 17,  /* create, mkdir, mknod, link, symlink in */
	SF_WHAT_PROT_SETATTR = 18, /* truncate, chmod, chown, utimes */
	SF_WHAT_PROT_WRITE = 19,   /* open for writing (or O_TRUNC) */
	SF_WHAT_PROT_CONNECT = 20, /* connect or send to a protected socket */
	/* Signal mode: io_uring_setup without SF_GUARD_F_IO_URING. */
	SF_WHAT_IO_URING = 21,
	/* Signal mode: clone(CLONE_FILES) without CLONE_THREAD. */
	SF_WHAT_CLONE_FILES = 22,
	/* perf_event_open on another process, a CPU or a cgroup. */
	SF_WHAT_PERF_OPEN = 23,
	SF_WHAT_KCMP = 24, /* kcmp() with a foreign process */
	/* Signal mode: a symlink whose target leads into procfs. */
	SF_WHAT_SYMLINK_PROC = 25,
	/* Signal mode: open_tree() of procfs, or name_to_handle_at() through
	 * a foreign /proc/<pid>. */
	SF_WHAT_PROC_HANDLE = 26,
};

enum sf_guard_why {
	SF_WHY_UID = 1u << 0,       /* real or effective UIDs differ */
	SF_WHY_OUTSIDE = 1u << 1,   /* the target is outside the sandbox */
	SF_WHY_PROTECTED = 1u << 2, /* a protected object (Protect()) */
	/* A primitive a guarded sandbox may not use at all (bpf, io_uring,
	 * a shared fd table, a symlink into procfs, ...). */
	SF_WHY_REFUSED = 1u << 3,
};

struct sf_guard_task {
	__u32 pid; /* thread id, as the kernel's init pid namespace sees it */
	__u32 tgid;
	__u32 uid;
	__u32 euid;
	char comm[SF_GUARD_COMM_LEN];
};
SF_GUARD_ASSERT(sizeof(struct sf_guard_task) == 32, "sf_guard_task");

struct sf_guard_event {
	__u64 ts_ns;         /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 sandbox_id;    /* cgroup id of the guarded sandbox */
	__u64 target_cgroup; /* target's cgroup id; for cgroup escapes, where */
	__u32 enforcer;      /* enum sf_guard_enforcer */
	__u32 action;        /* enum sf_guard_action */
	__u32 what;          /* enum sf_guard_what */
	__u32 why;           /* enum sf_guard_why bits */
	__u32 proc_class;    /* enum sf_proc_class, for the /proc cases */
	__s32 syscall_nr;    /* the actor's system call (x86-64 numbering) */
	struct sf_guard_task actor;
	struct sf_guard_task target; /* zero for cgroup escapes */
	char name[SF_GUARD_NAME_LEN]; /* /proc entry or cgroup file name */
};
SF_GUARD_ASSERT(sizeof(struct sf_guard_event) == 144,
		"sf_guard_event is read by user space");

/*
 * Protected objects (sf_gprot): a file system object by its device (the
 * kernel's encoding of super_block.s_dev: major << 20 | minor) and inode
 * number. ino 0 (no inode has it) marks a device that holds protected
 * objects, so that a hook on another file system stops at one lookup.
 */
struct sf_guard_inode {
	__u64 ino;
	__u32 dev;
	__u32 pad; /* zero */
};
SF_GUARD_ASSERT(sizeof(struct sf_guard_inode) == 16, "sf_guard_inode");

/*
 * Signal mode resolves path strings at system call entry, before the
 * object can be read from the result (unlink, rename, ...): sf_gprotn holds
 * the directory entries on the way from "/" to each protected object
 * (parent, name) -> child, so that a walk of the path's components from its
 * base directory can follow them by name; whether a child is protected is
 * sf_gprot's answer. Names longer than SF_GUARD_PROTNAME_LEN - 1 are
 * refused by user space.
 */
#define SF_GUARD_PROTNAME_LEN 48

struct sf_guard_dirent {
	struct sf_guard_inode parent;
	char name[SF_GUARD_PROTNAME_LEN];
};
SF_GUARD_ASSERT(sizeof(struct sf_guard_dirent) == 64, "sf_guard_dirent");

#endif /* SANDFENCE_BPF_GUARD_GUARD_ABI_H_ */
