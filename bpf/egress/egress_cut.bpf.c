// SPDX-License-Identifier: GPL-2.0
/*
 * Connections cut at a phase switch (issue 15). A switch to a narrower
 * phase stops new connections at once (the hooks read the new generation),
 * but a TCP connection or a connected UDP socket opened before it would
 * keep talking. These socket iterators walk the host's TCP and UDP sockets
 * (the reading thread's network namespace) and destroy each one that
 *   - a sandbox's connect hook let connect (sf_outbound, set by egress.bpf.c:
 *     opened outward; an accepted connection has no mark and is left alone),
 *   - was created under the sandbox the reading thread asks about
 *     (sf_cut_req; sockets passed out of a sandbox are judged by where they
 *     were created, their sk_cgrp_data),
 *   - and whose peer the sandboxes' phases in force now deny, judged by the
 *     hooks' own sf_decide (listening sockets have no peer; a socket to the
 *     sandbox's DNS filter is left to the filter, which judges each query).
 * Each destroyed socket is written to the iterator's output (sf_cut_entry):
 * the process sees ECONNABORTED on its next call.
 *
 * Needs bpf_sock_destroy (Linux 6.5+); the controller loads this object only
 * where the kernel has it, and says "not cut" with the reason elsewhere.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "egress/egress_abi.h"
#include "egress/egress_verdict.bpf.h"

extern int bpf_sock_destroy(struct sock_common *sk) __ksym;

/* Set by the controller before load: the netns cookie of the host netns. */
const volatile __u64 sf_host_netns = 0;

/* What each reading thread asks for, by its thread id. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct sf_cut_request);
} sf_cut_req SEC(".maps");

/*
 * The walk over the socket's cgroup ancestry (bpf_loop's context). The
 * ancestors' ids are read level by level as the walk gets there, not into
 * an array first: an array of SF_MAX_CGROUP_DEPTH ids on the stack put
 * this program's call chain over its stack budget (bpf/tools/stack_check).
 */
struct sf_cut_walk {
	__u64 cg; /* the socket's struct cgroup *, read only with probe reads */
	int level; /* its level */
	__u8 own_netns;
	__u8 found;
	struct sf_dest d;
	struct sf_decision dec;
	__u64 id;
};

static __always_inline __u64 sf_cg_ancestor_id(struct cgroup *cg, int level)
{
	struct cgroup *anc = NULL;

	bpf_core_read(&anc, sizeof(anc), &cg->ancestors[level]);
	return anc ? BPF_CORE_READ(anc, kn, id) : 0;
}

/*
 * The hooks' walk (sf_walk_level): outermost sandbox first, stop at a deny.
 * Level L (from 0) is the socket's cgroup's ancestor at level L + 1. A
 * callback, not an unrolled loop: unrolled, each level's branches multiply
 * the verifier's states (280,000 instructions processed, 0.7 s per load).
 */
static long sf_cut_level(__u32 level, void *ctx)
{
	struct sf_cut_walk *w = ctx;
	const struct sf_sandbox *sb;
	struct sf_decision dec = {};
	__u64 id;

	if (level >= SF_MAX_CGROUP_DEPTH || (int)level >= w->level)
		return 1;
	id = sf_cg_ancestor_id((struct cgroup *)w->cg, level + 1);
	if (!id)
		return 1;
	sb = bpf_map_lookup_elem(&sf_sandboxes, &id);
	if (!sb)
		return 0;
	struct sf_sandbox s = *sb;

	sf_decide(&s, &w->d, w->own_netns, &dec);
	w->found = 1;
	/* What an audit-only sandbox's own rules deny, its hooks let through:
	 * its switch cuts none of it either. The walk goes on (an enforcing
	 * sandbox around or inside it still judges), as the hooks' does. */
	if (dec.verdict == SF_VERDICT_DENY && (s.flags & SF_SB_AUDIT) &&
	    sf_audit_relaxes(dec.reason))
		return 0;
	w->dec = dec;
	w->id = id;
	return dec.verdict == SF_VERDICT_DENY;
}

static __always_inline void sf_cut_sock(struct seq_file *seq, struct sock *sk,
					struct sock_common *skc, __u8 protocol,
					__u8 state)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct sf_cut_request *req;
	struct sf_cut_walk w = {};
	struct sf_cut_entry e = {};
	struct cgroup *cg;
	__u16 family;
	int level;

	req = bpf_map_lookup_elem(&sf_cut_req, &tid);
	if (!req || req->level < 1 || req->level > SF_MAX_CGROUP_DEPTH)
		return;
	if (!bpf_sk_storage_get(&sf_outbound, sk, 0, 0))
		return;
	cg = BPF_CORE_READ(sk, sk_cgrp_data.cgroup);
	if (!cg)
		return;
	level = BPF_CORE_READ(cg, level);
	if (level < req->level ||
	    sf_cg_ancestor_id(cg, req->level) != req->sandbox)
		return;
	w.cg = (__u64)cg;
	w.level = level;

	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family == AF_INET) {
		w.d.family = AF_INET;
		w.d.addr[0] = BPF_CORE_READ(sk, __sk_common.skc_daddr);
	} else if (family == AF_INET6) {
		__u32 a[4] = {};

		BPF_CORE_READ_INTO(&a, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32);
		sf_dest_from6(&w.d, a);
	} else {
		return;
	}
	w.d.protocol = protocol;
	w.d.port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (sf_in_filter_range(&w.d))
		return;
	w.own_netns = sf_host_netns &&
		      BPF_CORE_READ(sk, __sk_common.skc_net.net, net_cookie) !=
			      sf_host_netns;

	bpf_loop(SF_MAX_CGROUP_DEPTH, sf_cut_level, &w, 0);
	if (level > SF_MAX_CGROUP_DEPTH) {
		/* Below the walk's reach: the hooks deny there, so does this. */
		w.found = 1;
		w.id = req->sandbox;
		sf_set(&w.dec, SF_VERDICT_DENY, SF_REASON_TOO_DEEP, SF_NO_RULE);
	}
	if (!w.found || w.dec.verdict != SF_VERDICT_DENY)
		return;

	e.sandbox = w.id;
	e.addr[0] = w.d.addr[0];
	e.addr[1] = w.d.addr[1];
	e.addr[2] = w.d.addr[2];
	e.addr[3] = w.d.addr[3];
	e.port = w.d.port;
	e.family = w.d.family;
	e.protocol = protocol;
	e.reason = w.dec.reason;
	e.state = state;
	e.destroy_err = bpf_sock_destroy(skc);
	bpf_seq_write(seq, &e, sizeof(e));
}

SEC("iter/tcp")
int sf_cut_tcp(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct tcp_sock *tp;
	__u8 state;

	if (!skc)
		return 0;
	/* NULL for time-wait and request sockets: nothing to cut there. */
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	state = skc->skc_state;
	/* Listening sockets have no peer; closing ones are on their way. */
	if (state != TCP_ESTABLISHED && state != TCP_SYN_SENT &&
	    state != TCP_CLOSE_WAIT)
		return 0;
	sf_cut_sock(ctx->meta->seq, (struct sock *)tp, skc, IPPROTO_TCP, state);
	return 0;
}

SEC("iter/udp")
int sf_cut_udp(struct bpf_iter__udp *ctx)
{
	struct udp_sock *udp = ctx->udp_sk;
	struct sock *sk;

	if (!udp)
		return 0;
	sk = (struct sock *)udp;
	/* Only a connected socket has a peer; the others' datagrams are each
	 * judged by sendmsg. */
	if (sk->__sk_common.skc_state != TCP_ESTABLISHED)
		return 0;
	sf_cut_sock(ctx->meta->seq, sk, (struct sock_common *)sk, IPPROTO_UDP,
		    1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
