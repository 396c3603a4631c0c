/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What keeps sandfence out of a guarded sandbox's reach, shared by both
 * enforcers:
 *
 *  - protected objects: sandfence's pin directory, state and record
 *    directories and daemon socket, registered by user space
 *    (GuardController::Protect) by device and inode number. An object is
 *    protected when it, or a directory above it on the same file system
 *    (a bounded number of levels), is registered;
 *  - signals: who may be signalled (the sandbox's own processes), and how
 *    an event names the signal.
 *
 * Include after guard.bpf.h.
 */
#ifndef SANDFENCE_BPF_GUARD_GUARD_REACH_BPF_H_
#define SANDFENCE_BPF_GUARD_GUARD_REACH_BPF_H_

#include "guard/guard_abi.h"

#define SF_O_TRUNC 01000

/* Levels of d_parent looked at above an object (the pin tree is shallow). */
#define SF_PROT_DEPTH 16

/* (dev, ino) -> 1; (dev, 0) marks a device holding protected objects. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct sf_guard_inode);
	__type(value, __u32);
} sf_gprot SEC(".maps");

/* Signal mode: the directory entries from "/" down to each protected object. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct sf_guard_dirent);
	__type(value, struct sf_guard_inode);
} sf_gprotn SEC(".maps");

static __always_inline void sf_inode_key(struct inode *inode,
					 struct sf_guard_inode *k)
{
	k->ino = BPF_CORE_READ(inode, i_ino);
	k->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	k->pad = 0;
}

/* Does this device hold a protected object at all? One lookup. */
static __always_inline bool sf_dev_has_protected(__u32 dev)
{
	struct sf_guard_inode k = { .ino = 0, .dev = dev, .pad = 0 };

	return bpf_map_lookup_elem(&sf_gprot, &k) != NULL;
}

/*
 * Is the object at dentry d (positive or not) protected: d's inode or one
 * of its ancestors on the same file system registered? A file system with
 * no protected object costs one lookup.
 */
static __always_inline bool sf_dentry_protected(struct dentry *d)
{
	struct sf_guard_inode k = {};
	struct super_block *sb;

	if (!d)
		return false;
	sb = BPF_CORE_READ(d, d_sb);
	if (!sb || !sf_dev_has_protected(BPF_CORE_READ(sb, s_dev)))
		return false;
	k.dev = BPF_CORE_READ(sb, s_dev);
	for (int i = 0; i < SF_PROT_DEPTH; i++) {
		struct inode *inode = BPF_CORE_READ(d, d_inode);
		struct dentry *up;

		if (inode) {
			k.ino = BPF_CORE_READ(inode, i_ino);
			if (bpf_map_lookup_elem(&sf_gprot, &k))
				return true;
		}
		up = BPF_CORE_READ(d, d_parent);
		if (!up || up == d)
			return false;
		d = up;
	}
	return false;
}

/* The dentry a bound Unix socket lives at, or NULL (abstract, unbound). */
static __always_inline struct dentry *sf_unix_dentry(struct sock *sk)
{
	struct unix_sock *u = (void *)sk;

	if (!sk)
		return NULL;
	return BPF_CORE_READ(u, path.dentry);
}

/* Sixteen characters, written a word at a time. */
union sf_name16 {
	char c[16];
	__u64 w[2];
};

/*
 * "sig <n>", and " group" when it went to a process group or everyone: the
 * name of a signal event. n is 1..99 ("?" otherwise). Whole words, not
 * bytes at a computed index: clang turns those into an OR on the stack
 * pointer, which the 6.1 verifier refuses.
 */
static __always_inline void sf_signal_name(union sf_name16 *out, int sig,
					   bool group)
{
	__u64 d1, d2;

	out->w[0] = SF_C8('s', 'i', 'g', ' ', '?', 0, 0, 0);
	out->w[1] = 0;
	if (sig <= 0 || sig > 99)
		return;
	if (sig < 10) {
		d1 = '0' + (__u32)sig;
		out->w[0] = SF_C8('s', 'i', 'g', ' ', 0, 0, 0, 0) | d1 << 32;
		if (group) {
			out->w[0] |= SF_C8(0, 0, 0, 0, 0, ' ', 'g', 'r');
			out->w[1] = SF_C8('o', 'u', 'p', 0, 0, 0, 0, 0);
		}
		return;
	}
	/* Unsigned: BPF has no signed division. */
	d1 = '0' + (__u32)sig / 10;
	d2 = '0' + (__u32)sig % 10;
	out->w[0] = SF_C8('s', 'i', 'g', ' ', 0, 0, 0, 0) | d1 << 32 | d2 << 40;
	if (group) {
		out->w[0] |= SF_C8(0, 0, 0, 0, 0, 0, ' ', 'g');
		out->w[1] = SF_C8('r', 'o', 'u', 'p', 0, 0, 0, 0);
	}
}

#endif /* SANDFENCE_BPF_GUARD_GUARD_REACH_BPF_H_ */
