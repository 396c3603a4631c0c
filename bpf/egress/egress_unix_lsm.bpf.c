// SPDX-License-Identifier: GPL-2.0
/*
 * Unix sockets for sandboxes on kernels without the cgroup connect_unix
 * hooks (before 6.7), where BPF LSM runs: unix_stream_connect (stream and
 * seqpacket connects) and unix_may_send (every datagram, and datagram
 * connects) judge the socket a sandboxed task reaches, by the same rules
 * as the cgroup hooks: the names the phase lists, the sandbox's own
 * sockets, never a protected name.
 *
 * The hooks see the server's socket itself, so "own" needs no bind
 * tracker: a socket is the sandbox's when it was created inside it (its
 * cgroup), whatever name leads to it, and a swapped path cannot mislead
 * them. The name judged and recorded is the one the server bound
 * (relative, if it bound a relative path). A name nobody listens on never
 * reaches the hooks: the caller gets ECONNREFUSED or ENOENT, unrecorded.
 *
 * The programs run for every task on the host (LSM hooks are global); a
 * task in no sandbox of this controller's is left alone.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "egress/egress_abi.h"

#define SF_EPERM 1

_Static_assert((SF_MAX_CGROUP_DEPTH & (SF_MAX_CGROUP_DEPTH - 1)) == 0,
	       "sf_lsm_level masks levels with SF_MAX_CGROUP_DEPTH - 1");

/* The egress object's maps, reused by fd at load. */
#include "egress/egress_shared_maps.bpf.h"
#include "egress/egress_unix.bpf.h"

/* The id of cg's ancestor at level (cg itself at its own level); 0 when
 * cg is shallower. */
static __always_inline __u64 sf_ancestor_id(struct cgroup *cg, int cg_level,
					    int level)
{
	struct cgroup *anc = NULL;

	if (!cg || level > cg_level)
		return 0;
	bpf_core_read(&anc, sizeof(anc), &cg->ancestors[level & 31]);
	return anc ? BPF_CORE_READ(anc, kn, id) : 0;
}

/* The task's ancestry and, per level, whether the server's socket is the
 * sandbox's own there. Under bpf_loop (one level verified once): 6.1's
 * verifier gives up on the unrolled walks. */
struct sf_lsm_walk {
	struct sf_unix_walk w;
	struct cgroup *cg, *peer_cg;
	int cg_level, peer_level;
	/* Bit L: the server's socket is the sandbox's own at level L + 1. */
	__u32 own_levels;
};

/* First pass: own_levels. Apart from the judging walk (sf_lsm_level), so
 * that a level's states there do not differ by the bits set before. */
static long sf_lsm_own_level(__u32 i, void *ctx)
{
	struct sf_lsm_walk *l = ctx;
	__u64 id;

	if (i >= SF_MAX_CGROUP_DEPTH)
		return 1;
	id = sf_ancestor_id(l->cg, l->cg_level, i + 1);
	if (!id)
		return 1;
	/* The server's socket is the sandbox's own at every level where its
	 * cgroup (where it was created) shares the task's ancestor. */
	if (sf_ancestor_id(l->peer_cg, l->peer_level, i + 1) == id)
		l->own_levels |= 1u << i;
	return 0;
}

/* The judging walk: the task's ancestor at each level, read again (a
 * cgroup's ancestors never change) instead of kept in an array. */
static long sf_lsm_level(__u32 i, void *ctx)
{
	struct sf_lsm_walk *l = ctx;
	__u64 id;

	if (i >= SF_MAX_CGROUP_DEPTH)
		return 1;
	id = sf_ancestor_id(l->cg, l->cg_level, i + 1);
	if (!id)
		return 1;
	return sf_unix_level(&l->w, i, id, l->own_levels & (1u << i));
}

/* Judge the calling task's reach to the AF_UNIX socket peer, record it,
 * and return the LSM verdict. */
static __always_inline int sf_unix_lsm(struct sock *sk, struct sock *peer,
				       __u8 hook)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct sf_lsm_walk l = {};
	struct sf_unix_walk *w = &l.w;
	struct unix_address *a;

	/* Locals, not l's fields: BPF_CORE_READ(l.cg, ...) would relocate
	 * sf_lsm_walk itself against the kernel's types. */
	struct cgroup *cg = BPF_CORE_READ(task, cgroups, dfl_cgrp);
	struct cgroup *peer_cg;

	if (!cg || !peer)
		return 0;
	l.cg = cg;
	l.cg_level = BPF_CORE_READ(cg, level);
	if (l.cg_level <= 0)
		return 0; /* the root cgroup: in no sandbox */
	peer_cg = BPF_CORE_READ(peer, sk_cgrp_data.cgroup);
	l.peer_cg = peer_cg;
	l.peer_level = peer_cg ? BPF_CORE_READ(peer_cg, level) : 0;
	bpf_loop(SF_MAX_CGROUP_DEPTH, sf_lsm_own_level, &l, 0);
	w->too_deep = l.cg_level > SF_MAX_CGROUP_DEPTH;

	a = BPF_CORE_READ((struct unix_sock *)peer, addr);
	if (a)
		sf_unix_name((const void *)a + bpf_core_field_offset(
						       struct unix_address,
						       name),
			     BPF_CORE_READ(a, len), &w->key);
	/* Scope 0 holds the protected names. */
	w->key.scope = 0;
	w->protected = bpf_map_lookup_elem(&sf_unix_protected, &w->key) != NULL;

	bpf_loop(SF_MAX_CGROUP_DEPTH, sf_lsm_level, &l, 0);
	if (!w->found)
		return 0;
	if (w->too_deep)
		sf_unix_set(&w->dec, SF_VERDICT_DENY, SF_REASON_TOO_DEEP,
			    SF_NO_RULE);
	sf_unix_apply_audit(w);
	sf_unix_record(w, hook, sk ? BPF_CORE_READ(sk, sk_type) : 0);
	return w->dec.verdict != SF_VERDICT_DENY ? 0 : -SF_EPERM;
}

SEC("lsm/unix_stream_connect")
int BPF_PROG(sf_lsm_unix_stream_connect, struct sock *sock, struct sock *other,
	     struct sock *newsk, int ret)
{
	if (ret)
		return ret;
	return sf_unix_lsm(sock, other, SF_HOOK_UNIX_STREAM_CONNECT);
}

SEC("lsm/unix_may_send")
int BPF_PROG(sf_lsm_unix_may_send, struct socket *sock, struct socket *other,
	     int ret)
{
	if (ret)
		return ret;
	return sf_unix_lsm(BPF_CORE_READ(sock, sk), BPF_CORE_READ(other, sk),
			   SF_HOOK_UNIX_MAY_SEND);
}

char LICENSE[] SEC("license") = "GPL";
