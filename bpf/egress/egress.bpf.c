// SPDX-License-Identifier: GPL-2.0
/*
 * Egress enforcement for sandboxes: cgroup sock_addr hooks judge every
 * connect and every addressed send, sock_create refuses raw and exotic
 * sockets, and a cgroup_skb egress backstop drops new flows that reached the
 * wire without passing a hook. The programs are attached to sandbox cgroups
 * only; sf_sandboxes says which policy generation each sandbox is on.
 *
 * Order in every hook: decide, count, then try to record. A failed
 * ring-buffer reserve is counted per sandbox and never changes a verdict.
 *
 * DNS filter: in a sandbox whose phase filters DNS, every query to port 53
 * (UDP or TCP, any address) is rewritten to go to the sandbox's filter
 * target (sf_dns_targets); the original destination is kept on the socket
 * (sf_dns_orig) so that recvmsg and getpeername show the client the server
 * it asked, as socket-level load balancers do their reverse NAT.
 */
#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "egress/egress_verdict.bpf.h"
#include "egress/egress_budget.bpf.h"

/*
 * Test only: the mutation run (tests/egress/CMakeLists.txt) builds this
 * object once per judging hook with -DSF_TEST_NEUTRALIZE=SF_HOOK_<HOOK>,
 * which makes that one program allow everything first thing, and shows
 * that the egress tests fail. Never set in a normal build: 0 names no hook,
 * and the test below compiles away.
 */
#ifndef SF_TEST_NEUTRALIZE
#define SF_TEST_NEUTRALIZE 0
#endif
#define SF_NEUTRALIZED(hook) (SF_TEST_NEUTRALIZE == (hook))

/* IPv6 extension headers the backstop skips before the transport header. */
#define SF_MAX_IPV6_EXT 4

#ifndef SOCK_RAW
#define SOCK_RAW 3
#endif
#ifndef SOCK_STREAM
#define SOCK_STREAM 1
#endif
#ifndef SOCK_DGRAM
#define SOCK_DGRAM 2
#endif

/* Set by the controller before load: the netns cookie of the host netns. */
const volatile __u64 sf_host_netns = 0;
/*
 * Whether cgroup_skb programs may call bpf_get_netns_cookie (6.x kernels
 * added it after 6.1). The controller probes and sets it; when it is false
 * the verifier prunes the call as dead code.
 */
const volatile bool sf_skb_has_netns_cookie = false;
/*
 * Set by the controller where the cut iterators load (Linux 6.5+): an
 * allowed connect marks its socket (sf_outbound), so that a phase switch
 * finds what the sandbox opened, never what it accepted. Elsewhere the
 * verifier prunes the call, and connect pays nothing for it.
 */
const volatile bool sf_mark_outbound = false;

/* Where each sandbox's DNS queries go; no entry in a DNS-filtered phase
 * means its queries are denied. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SF_MAX_SANDBOXES);
	__type(key, __u64);
	__type(value, struct sf_dns_target);
} sf_dns_targets SEC(".maps");

/* On a redirected socket: what it asked for, for the reply side. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sf_dns_orig);
} sf_dns_orig SEC(".maps");

/* The controllers' journal of queued deletes (see SF_DOOMED_ENTRIES). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SF_DOOMED_ENTRIES);
	__type(key, __u32);
	__type(value, __u32);
} sf_doomed SEC(".maps");

/* Where the walks start (struct sf_levels). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sf_levels);
} sf_levels SEC(".maps");

/*
 * The walk index (index i is cgroup level i + 1) of the shallowest level
 * that has held a sandbox: the levels above it hold none, and the walks
 * neither fetch nor look them up. An array lookup the verifier inlines: no
 * helper call.
 */
static __always_inline __u8 sf_first_level(void)
{
	__u32 zero = 0;
	const struct sf_levels *l = bpf_map_lookup_elem(&sf_levels, &zero);

	if (!l || l->shallowest < 1 || l->shallowest > SF_MAX_CGROUP_DEPTH)
		return 0;
	return l->shallowest - 1;
}

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SF_SEEN_ENTRIES);
	__type(key, struct sf_seen_key);
	__type(value, __u8);
} sf_seen SEC(".maps");

static __always_inline struct sf_counters *sf_counters_of(__u64 id)
{
	struct sf_counters *c = bpf_map_lookup_elem(&sf_counters, &id);

	if (!c) {
		struct sf_counters zero = {};

		bpf_map_update_elem(&sf_counters, &id, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&sf_counters, &id);
	}
	return c;
}

/* Whether an allow on d should be recorded under sandbox id. */
static __always_inline bool sf_should_record_allow(__u64 id,
						   const struct sf_sandbox *sb,
						   const struct sf_dest *d)
{
	if (sb->flags & SF_SB_AUDIT_ALLOW_ALL)
		return true;
	if (!(sb->flags & SF_SB_AUDIT_ALLOW_FIRST))
		return false;

	struct sf_seen_key k = {
		.sandbox = id,
		.generation = sb->generation,
		.protocol = d->protocol,
		.family = d->family,
		.port = d->port,
	};
	__u8 one = 1;

	__builtin_memcpy(k.addr, d->addr, 16);
	/* A lookup is far cheaper than a failed insert on an LRU map, and
	 * almost every allow after the first finds its destination. */
	if (bpf_map_lookup_elem(&sf_seen, &k))
		return false;
	/* Inserted now: the first allow to this destination in this phase. */
	return bpf_map_update_elem(&sf_seen, &k, &one, BPF_NOEXIST) == 0;
}

/*
 * task: the hook runs in the calling task's context (the sock_addr and
 * sock_create hooks). cgroup_skb may run in softirq context, and before 6.2
 * it may not call the current-task helpers at all: no pid, uid or comm
 * there. Always a constant at the call site, so the branch compiles away.
 */
static __always_inline void sf_record(__u64 sandbox, const struct sf_dest *d,
				      const struct sf_decision *dec,
				      __u32 generation, __u32 ring_slot,
				      __u8 hook, __u8 sock_type, bool task)
{
	struct sf_counters *c = sf_counters_of(sandbox);
	struct sf_net_event *e = NULL;
	__u64 pid_tgid, uid_gid;
	void *ring;

	if (c) {
		if (dec->verdict == SF_VERDICT_ALLOW) {
			__sync_fetch_and_add(&c->allowed, 1);
		} else if (dec->verdict == SF_VERDICT_DENY) {
			__sync_fetch_and_add(&c->denied, 1);
		} else {
			/* A would-deny went through: allowed, and counted. */
			__sync_fetch_and_add(&c->allowed, 1);
			__sync_fetch_and_add(&c->audit_denied, 1);
		}
	}

	ring = bpf_map_lookup_elem(&sf_rings, &ring_slot);
	if (ring)
		e = bpf_ringbuf_reserve(ring, sizeof(*e), 0);
	if (!e) {
		if (c)
			__sync_fetch_and_add(&c->events_lost, 1);
		return;
	}
	pid_tgid = task ? bpf_get_current_pid_tgid() : 0;
	uid_gid = task ? bpf_get_current_uid_gid() : 0;
	e->type = SF_EVENT_NET;
	e->hook = hook;
	e->verdict = dec->verdict;
	e->reason = dec->reason;
	e->protocol = d->protocol;
	e->family = d->family;
	e->sock_type = sock_type;
	e->port = d->port;
	e->pad = 0;
	e->rule_id = dec->rule_id;
	e->generation = generation;
	e->pid = (__u32)pid_tgid;
	e->tgid = pid_tgid >> 32;
	e->uid = (__u32)uid_gid;
	e->gid = uid_gid >> 32;
	e->boot_ns = bpf_ktime_get_boot_ns();
	e->sandbox = sandbox;
	e->cgroup = task ? bpf_get_current_cgroup_id() : 0;
	__builtin_memcpy(e->addr, d->addr, 16);
	if (task)
		bpf_get_current_comm(e->comm, sizeof(e->comm));
	else
		__builtin_memset(e->comm, 0, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

/*
 * The walk over a task's (or socket's) cgroup ancestors, outermost first.
 * It runs under bpf_loop so that the verifier checks one level once instead
 * of every level of an unrolled loop: program load stays fast.
 */
struct sf_walk {
	/* The packet whose socket's cgroup is walked (the backstop); NULL:
	 * the current task's. Each level's id is read when the walk gets
	 * there, never into an array first: the stack stays small. */
	struct __sk_buff *skb;
	/* The socket a sock_addr hook judges (for the budget); NULL else. */
	struct bpf_sock *sk;
	struct sf_dest d;
	__u8 own_netns;
	__u8 sock_type;
	__u8 sock_check;
	__u8 found;
	/* The task (or socket) sits below SF_MAX_CGROUP_DEPTH. */
	__u8 too_deep;
	__u8 ring;
	/* The first index walked (sf_first_level). */
	__u8 start;
	__u8 pad;
	/* The last sandbox that allowed, or the first that denied. */
	struct sf_decision dec;
	__u64 id;
	__u32 generation;
	__u32 flags;
	/* Sandboxes among the ancestors (sf_find_judge), each with its own
	 * links. */
	__u32 nsandboxes;
	/* The deepest restricted sandbox (sf_find_judge), for DNS. */
	__u64 judge_id;
	struct sf_sandbox judge;
	/* The first audit-only sandbox that would have denied (audit_id 0:
	 * none): reported as a would-deny unless another sandbox denies. */
	__u64 audit_id;
	struct sf_decision audit;
	__u32 audit_generation;
	__u8 audit_ring;
	__u8 pad2[3];
};

/* Socket creation: only raw sockets and non-TCP/UDP protocols are refused. */
static __always_inline void sf_decide_socket(const struct sf_sandbox *sb,
					     const struct sf_dest *d,
					     __u8 sock_type,
					     struct sf_decision *out)
{
	if (!(sb->flags & SF_SB_RESTRICTED))
		sf_set(out, SF_VERDICT_ALLOW, SF_REASON_UNRESTRICTED,
		       SF_NO_RULE);
	else if (sock_type == SOCK_RAW)
		sf_set(out, SF_VERDICT_DENY, SF_REASON_SOCKET_TYPE, SF_NO_RULE);
	else if (d->protocol != IPPROTO_TCP && d->protocol != IPPROTO_UDP)
		sf_set(out, SF_VERDICT_DENY, SF_REASON_PROTOCOL, SF_NO_RULE);
	else
		sf_set(out, SF_VERDICT_ALLOW, SF_REASON_RULE, SF_NO_RULE);
}

/*
 * The id of the walk's ancestor at index `level` (cgroup level + 1); 0
 * past the task's or socket's own level. One callback per source, so that
 * each program's verifier sees only the helper its type may call.
 */
#define SF_WALK_ID_TASK(w, level) bpf_get_current_ancestor_cgroup_id((level) + 1)
#define SF_WALK_ID_SKB(w, level) bpf_skb_ancestor_cgroup_id((w)->skb, (level) + 1)

static __always_inline long sf_walk_level_at(struct sf_walk *w, __u64 id)
{
	struct sf_decision dec = {};
	const struct sf_sandbox *sb;

	sb = bpf_map_lookup_elem(&sf_sandboxes, &id);
	if (!sb)
		return 0;
	/* One copy: the element is replaced, never rewritten (the map is not
	 * preallocated), so generation and flags always belong together. */
	struct sf_sandbox s = *sb;

	if (w->sock_check)
		sf_decide_socket(&s, &w->d, w->sock_type, &dec);
	else
		sf_decide(&s, &w->d, w->own_netns, &dec);
	w->found = 1;
	/* Audit only: the denial is remembered (the first one) and the walk
	 * goes on, so that every enforcing sandbox still judges. One flag
	 * test, on the deny path only. */
	if (dec.verdict == SF_VERDICT_DENY && (s.flags & SF_SB_AUDIT) &&
	    sf_audit_relaxes(dec.reason)) {
		if (!w->audit_id) {
			w->audit_id = id;
			w->audit = dec;
			w->audit_generation = s.generation;
			w->audit_ring = s.ring;
		}
		return 0;
	}
	w->dec = dec;
	w->id = id;
	w->generation = s.generation;
	w->flags = s.flags;
	w->ring = s.ring;
	/* A nested sandbox narrows its parent's policy, never widens it. */
	return dec.verdict == SF_VERDICT_DENY;
}

#define SF_WALK_CALLBACK(name, body, ID)				\
	static long name(__u32 i, void *ctx)				\
	{								\
		struct sf_walk *w = ctx;				\
		__u32 level = w->start + i;				\
		__u64 id;						\
									\
		if (level >= SF_MAX_CGROUP_DEPTH)			\
			return 1;					\
		id = ID(w, level);					\
		if (!id)						\
			return 1;					\
		return body(w, id);					\
	}

SF_WALK_CALLBACK(sf_walk_level, sf_walk_level_at, SF_WALK_ID_TASK)
SF_WALK_CALLBACK(sf_walk_level_skb, sf_walk_level_at, SF_WALK_ID_SKB)

/* An allow by w->id, recorded or counted as its audit setting says. */
static __always_inline void sf_record_allow(struct sf_walk *w, __u8 hook)
{
	struct sf_sandbox sb = { .generation = w->generation,
				 .flags = w->flags };

	if (sf_should_record_allow(w->id, &sb, &w->d)) {
		sf_record(w->id, &w->d, &w->dec, w->generation, w->ring, hook,
			  w->sock_type, true);
	} else {
		struct sf_counters *c = sf_counters_of(w->id);

		/* Not an event and not a loss: records balance with this. */
		if (c) {
			__sync_fetch_and_add(&c->allowed, 1);
			__sync_fetch_and_add(&c->allowed_unreported, 1);
		}
	}
}

/*
 * The sandbox that judges DNS: the deepest restricted ancestor (the walk
 * goes outermost first, so the last one found). Also counts the
 * sandboxes: each has its links, so the hook runs once per sandbox.
 */
static __always_inline long sf_find_judge_at(struct sf_walk *w, __u64 id)
{
	const struct sf_sandbox *sb;

	sb = bpf_map_lookup_elem(&sf_sandboxes, &id);
	if (!sb)
		return 0;
	w->nsandboxes++;
	if (sb->flags & SF_SB_RESTRICTED) {
		w->judge = *sb;
		w->judge_id = id;
	}
	return 0;
}

SF_WALK_CALLBACK(sf_find_judge, sf_find_judge_at, SF_WALK_ID_TASK)
SF_WALK_CALLBACK(sf_find_judge_skb, sf_find_judge_at, SF_WALK_ID_SKB)

/* The judge's filter target, when its phase filters DNS (NULL: it does not,
 * or there is no restricted sandbox; *filtered says which). `from_skb` is a
 * constant at every call: older verifiers (6.1) check both arms of a
 * runtime branch, and the task arm's helper is unknown to cgroup_skb. */
static __always_inline struct sf_dns_target *
sf_dns_target_of(struct sf_walk *w, const bool from_skb, bool *filtered)
{
	if (from_skb)
		bpf_loop(SF_MAX_CGROUP_DEPTH - w->start, sf_find_judge_skb, w,
			 0);
	else
		bpf_loop(SF_MAX_CGROUP_DEPTH - w->start, sf_find_judge, w, 0);
	*filtered = w->judge_id && (w->judge.flags & SF_SB_DNS_FILTER);
	if (!*filtered)
		return NULL;
	return bpf_map_lookup_elem(&sf_dns_targets, &w->judge_id);
}

/*
 * Judges w->d for every sandbox among the ancestors and records it. No
 * sandbox at all, in a hook attached only to sandboxes, means the socket
 * outlived or escaped its sandbox: deny.
 */
static __always_inline int sf_judge(struct sf_walk *w, __u8 hook)
{
	bpf_loop(SF_MAX_CGROUP_DEPTH - w->start, sf_walk_level, w, 0);

	if (!w->found) {
		sf_set(&w->dec, SF_VERDICT_DENY, SF_REASON_NO_SANDBOX,
		       SF_NO_RULE);
		/* Counted under sandbox 0, one entry for all; no process owns
		 * such a denial, so it goes to no ring (counted as lost). */
		sf_record(0, &w->d, &w->dec, 0, SF_MAX_DRIVERS, hook,
			  w->sock_type, true);
		return 0;
	}
	/* Sandboxes below the walk's reach would go unjudged: deny. */
	if (w->too_deep) {
		sf_set(&w->dec, SF_VERDICT_DENY, SF_REASON_TOO_DEEP,
		       SF_NO_RULE);
		sf_record(w->id, &w->d, &w->dec, w->generation, w->ring, hook,
			  w->sock_type, true);
		return 0;
	}
	if (w->dec.verdict == SF_VERDICT_DENY) {
		sf_record(w->id, &w->d, &w->dec, w->generation, w->ring, hook,
			  w->sock_type, true);
		return 0;
	}
	/* Every sandbox allowed: the budget of the one that judged last (the
	 * deepest) may still be spent. (Enforcing phases only: the flag is
	 * never set on an audit-only one.) */
	/* The loopback of the sandbox's own network namespace is not egress:
	 * a local server there spends nothing of the budget. */
	if ((w->flags & SF_SB_BUDGET) && !w->sock_check &&
	    w->dec.reason != SF_REASON_OWN_LOOPBACK) {
		__u8 reason = sf_budget_admit(w->id, w->sk, &w->d,
					      hook == SF_HOOK_CONNECT4 ||
						      hook == SF_HOOK_CONNECT6);

		if (reason) {
			sf_set(&w->dec, SF_VERDICT_DENY, reason, SF_NO_RULE);
			sf_record(w->id, &w->d, &w->dec, w->generation,
				  w->ring, hook, w->sock_type, true);
			return 0;
		}
	}
	/* No sandbox denied, an audit-only one would have: let it through,
	 * and report it as that sandbox's would-deny. */
	if (w->audit_id) {
		w->audit.verdict = SF_VERDICT_AUDIT_DENY;
		sf_record(w->audit_id, &w->d, &w->audit, w->audit_generation,
			  w->audit_ring, hook, w->sock_type, true);
		return 1;
	}
	/* Socket creation that passes is not an event worth recording. */
	if (w->sock_check)
		return 1;
	sf_record_allow(w, hook);
	return 1;
}

/* Protocols past 255 (IPPROTO_MPTCP is 262) must not alias TCP or UDP in
 * an 8-bit field: they become IPPROTO_RAW, which no rule allows. */
static __always_inline __u8 sf_proto8(__u32 protocol)
{
	return protocol > 255 ? 255 : protocol;
}

/*
 * Where the walk of the current task's ancestors starts, and whether the
 * task sits below its reach. Level 0 is the root cgroup, never a sandbox.
 */
static __always_inline void sf_current_ancestors(struct sf_walk *w)
{
	w->start = sf_first_level();
	w->too_deep =
		bpf_get_current_ancestor_cgroup_id(SF_MAX_CGROUP_DEPTH + 1) != 0;
}

/*
 * Whether the socket lives in a network namespace of its own. Only a
 * loopback destination asks (sf_decide's own-loopback freedom): the helper
 * call is skipped for every other one.
 */
static __always_inline bool sf_own_netns(struct bpf_sock_addr *ctx,
					 const struct sf_dest *d)
{
	return sf_is_local(d) && sf_host_netns &&
	       bpf_get_netns_cookie(ctx) != sf_host_netns;
}

/*
 * A DNS query (port 53) in a sandbox whose judging sandbox (the deepest
 * restricted one) filters DNS: rewritten to that sandbox's filter target,
 * and allowed by it alone. Its ancestors do not judge the query: it can
 * reach only the filter, which answers for the judge's phase, and the
 * connections its answers lead to are judged by every sandbox as usual.
 * Returns -1 when DNS is not filtered here (the rules judge port 53).
 */
static __always_inline int sf_dns_redirect(struct bpf_sock_addr *ctx,
					   struct sf_walk *w, __u8 hook)
{
	struct sf_dns_target *t;
	struct sf_dns_orig *o;
	bool filtered;

	t = sf_dns_target_of(w, false, &filtered);
	if (!filtered)
		return -1;
	w->found = 1;
	w->id = w->judge_id;
	w->generation = w->judge.generation;
	w->flags = w->judge.flags;
	w->ring = w->judge.ring;
	/* An audit-only judge lets these two denials below go to the rules
	 * instead, which every sandbox judges: it cannot widen an enforcing
	 * ancestor, and its own would-deny is reported there. */
	if (!t) {
		if (w->judge.flags & SF_SB_AUDIT)
			return -1;
		/* Fail closed: never pass a query by that was meant for a
		 * filter that is not there. */
		sf_set(&w->dec, SF_VERDICT_DENY, SF_REASON_DNS_NO_TARGET,
		       SF_NO_RULE);
		sf_record(w->id, &w->d, &w->dec, w->generation, w->ring, hook,
			  w->sock_type, true);
		return 0;
	}
	if (hook == SF_HOOK_SENDMSG6) {
		if (w->judge.flags & SF_SB_AUDIT)
			return -1;
		/* udpv6_sendmsg refuses (ENOTSUPP) a sendmsg6 rewrite to an
		 * IPv4-mapped address, and the filter is IPv4: deny with a
		 * reason instead of allowing what cannot be sent. (Mapped
		 * destinations never get here: the kernel sends them through
		 * sendmsg4. Connected sockets redirect through connect6.) */
		sf_set(&w->dec, SF_VERDICT_DENY, SF_REASON_DNS_UNREDIRECTABLE,
		       SF_NO_RULE);
		sf_record(w->id, &w->d, &w->dec, w->generation, w->ring, hook,
			  w->sock_type, true);
		return 0;
	}
	/* Remember the original for the reply side. Without the storage
	 * (out of memory) the query still goes to the filter: the client
	 * then sees the filter's address as the peer, never another server. */
	o = bpf_sk_storage_get(&sf_dns_orig, ctx->sk, 0,
			       BPF_SK_STORAGE_GET_F_CREATE);
	if (o) {
		o->family = hook == SF_HOOK_CONNECT6 ? AF_INET6 : AF_INET;
		o->port = w->d.port;
		/* The other sandboxes' links run this hook again in this call
		 * (sf_redirect_rerun); without the storage they deny it. */
		o->reruns = w->nsandboxes > 1 ? w->nsandboxes - 1 : 0;
		o->target_addr = t->addr;
		o->target_port = t->port;
	}
	if (hook == SF_HOOK_CONNECT6) {
		if (o) {
			o->addr[0] = ctx->user_ip6[0];
			o->addr[1] = ctx->user_ip6[1];
			o->addr[2] = ctx->user_ip6[2];
			o->addr[3] = ctx->user_ip6[3];
		}
		/* ::ffff:a.b.c.d. An IPV6_V6ONLY socket cannot reach it and
		 * its connect fails (ENETUNREACH): fail closed. */
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = bpf_htonl(0x0000ffff);
		ctx->user_ip6[3] = t->addr;
	} else {
		if (o)
			o->addr[0] = ctx->user_ip4;
		ctx->user_ip4 = t->addr;
	}
	ctx->user_port = bpf_htons(t->port);
	sf_set(&w->dec, SF_VERDICT_ALLOW, SF_REASON_DNS_REDIRECT, SF_NO_RULE);
	sf_record_allow(w, hook);
	return 1;
}

/*
 * A destination in the filters' range that a redirect itself produced:
 * - a later run of the hook in the call that redirected (nested sandboxes:
 *   one run per sandbox's link) sees the target the first run wrote; it
 *   is let through and counted down;
 * - a connected IPv6 socket's datagrams to its IPv4-mapped peer come back
 *   through sendmsg4 with that peer as the destination (udpv6_sendmsg):
 *   the target the socket was redirected to and connected to stays open.
 * Neither is recorded again. Any other destination in the range is for
 * the rules, which deny it.
 */
static __always_inline bool sf_redirect_rerun(struct bpf_sock_addr *ctx,
					      const struct sf_dest *d)
{
	struct bpf_sock *sk = ctx->sk;
	struct sf_dns_orig *o;

	if (!sk)
		return false;
	o = bpf_sk_storage_get(&sf_dns_orig, sk, 0, 0);
	if (!o || o->target_addr != d->addr[0] || o->target_port != d->port)
		return false;
	if (o->reruns) {
		o->reruns--;
		return true;
	}
	return sk->dst_ip4 == d->addr[0] &&
	       sk->dst_port == bpf_htons(d->port);
}

/*
 * Port 53 and the filters' range cost the DNS checks (one more walk);
 * every other destination goes straight to the rules.
 */
static __always_inline int sf_addr(struct bpf_sock_addr *ctx,
				   struct sf_walk *w, __u8 hook)
{
	sf_current_ancestors(w);
	if (!w->too_deep &&
	    (w->d.protocol == IPPROTO_TCP || w->d.protocol == IPPROTO_UDP)) {
		if (sf_in_filter_range(&w->d)) {
			if (sf_redirect_rerun(ctx, &w->d))
				return 1;
		} else if (w->d.port == SF_DNS_PORT) {
			int r = sf_dns_redirect(ctx, w, hook);

			if (r >= 0)
				return r;
		}
	}
	return sf_judge(w, hook);
}

static __always_inline int sf_addr4(struct bpf_sock_addr *ctx, __u8 hook)
{
	struct sf_walk w = {
		.d = {
			.family = AF_INET,
			.protocol = sf_proto8(ctx->protocol),
			.port = bpf_ntohs((__u16)ctx->user_port),
			.addr = { ctx->user_ip4 },
		},
		.sock_type = ctx->type,
		.sk = ctx->sk,
	};

	w.own_netns = sf_own_netns(ctx, &w.d);
	return sf_addr(ctx, &w, hook);
}

static __always_inline int sf_addr6(struct bpf_sock_addr *ctx, __u8 hook)
{
	struct sf_walk w = {
		.d = {
			.protocol = sf_proto8(ctx->protocol),
			.port = bpf_ntohs((__u16)ctx->user_port),
		},
		.sock_type = ctx->type,
		.sk = ctx->sk,
	};
	__u32 a[4] = { ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2],
		       ctx->user_ip6[3] };

	sf_dest_from6(&w.d, a);
	w.own_netns = sf_own_netns(ctx, &w.d);
	return sf_addr(ctx, &w, hook);
}

/* An allowed connect marks its socket as opened outward (sf_outbound). */
static __always_inline int sf_connected(struct bpf_sock_addr *ctx, int verdict)
{
	if (verdict == 1 && sf_mark_outbound && ctx->sk)
		bpf_sk_storage_get(&sf_outbound, ctx->sk, 0,
				   BPF_SK_STORAGE_GET_F_CREATE);
	return verdict;
}

SEC("cgroup/connect4")
int sf_connect4(struct bpf_sock_addr *ctx)
{
	if (SF_NEUTRALIZED(SF_HOOK_CONNECT4))
		return 1;
	return sf_connected(ctx, sf_addr4(ctx, SF_HOOK_CONNECT4));
}

SEC("cgroup/connect6")
int sf_connect6(struct bpf_sock_addr *ctx)
{
	if (SF_NEUTRALIZED(SF_HOOK_CONNECT6))
		return 1;
	return sf_connected(ctx, sf_addr6(ctx, SF_HOOK_CONNECT6));
}

SEC("cgroup/sendmsg4")
int sf_sendmsg4(struct bpf_sock_addr *ctx)
{
	if (SF_NEUTRALIZED(SF_HOOK_SENDMSG4))
		return 1;
	return sf_addr4(ctx, SF_HOOK_SENDMSG4);
}

SEC("cgroup/sendmsg6")
int sf_sendmsg6(struct bpf_sock_addr *ctx)
{
	if (SF_NEUTRALIZED(SF_HOOK_SENDMSG6))
		return 1;
	return sf_addr6(ctx, SF_HOOK_SENDMSG6);
}

SEC("cgroup/sock_create")
int sf_sock_create(struct bpf_sock *sk)
{
	struct sf_walk w = {
		.d = {
			.family = sk->family,
			.protocol = sf_proto8(sk->protocol),
		},
		.sock_type = sk->type,
		.sock_check = 1,
	};

	if (SF_NEUTRALIZED(SF_HOOK_SOCK_CREATE))
		return 1;
	sf_current_ancestors(&w);
	if (!sf_judge(&w, SF_HOOK_SOCK_CREATE))
		return 0;
	/* A socket that could not carry its budget's mark is refused: it
	 * would send uncounted in a budgeted phase (out of memory only). */
	return w.found ? sf_budget_mark(w.id, sk) : 1;
}

/*
 * The backstop judges what a hook should have judged: the first packet of
 * a TCP connection (SYN without ACK) and every UDP datagram's first
 * fragment. Later TCP segments belong to connections a hook already judged
 * (or that the sandbox accepted); other protocols cannot come from a socket
 * sock_create allowed, so they are dropped.
 */
/*
 * A packet the backstop lets through, counted against its socket's egress
 * budget (egress_budget.bpf.h): dropped past it, and the first overrun of
 * each kind recorded. No task here: softirq context. A function of its
 * own: its frame is not the backstop's, which stays small.
 */
static __noinline int sf_skb_pass(struct __sk_buff *skb,
				  const struct sf_dest *d, __u32 payload_off,
				  bool own_local)
{
	struct sf_budget_drop drop = {};
	const struct sf_sandbox *sb;
	struct sf_decision dec = {};

	sf_budget_packet(skb, d, payload_off, own_local, &drop);
	if (!drop.reason)
		return 1;
	if (drop.report) {
		sb = bpf_map_lookup_elem(&sf_sandboxes, &drop.sandbox);
		sf_set(&dec, SF_VERDICT_DENY, drop.reason, SF_NO_RULE);
		sf_record(drop.sandbox, d, &dec, sb ? sb->generation : 0,
			  sb ? sb->ring : SF_MAX_DRIVERS, SF_HOOK_SKB_EGRESS, 0,
			  false);
	}
	return 0;
}

/* A loopback destination in the sandbox's own network namespace, known to
 * be its own: where the kernel cannot say a packet's netns (cgroup_skb
 * without bpf_get_netns_cookie: SkbHasNetnsCookie), none is, and the
 * budget counts it as before. */
static __always_inline bool sf_skb_own_local(const struct sf_walk *w)
{
	return sf_skb_has_netns_cookie && w->own_netns && sf_is_local(&w->d);
}

static __always_inline int sf_skb_judge(struct __sk_buff *skb,
					struct sf_walk *w, __u32 l4_off)
{
	/* Where the payload starts (past the transport header). */
	__u32 payload_off = l4_off;

	if (w->d.protocol == IPPROTO_TCP) {
		struct tcphdr th;

		if (bpf_skb_load_bytes(skb, l4_off, &th, sizeof(th)))
			return 1;
		w->d.port = bpf_ntohs(th.dest);
		payload_off = l4_off + th.doff * 4;
		if (!th.syn || th.ack)
			return sf_skb_pass(skb, &w->d, payload_off,
					   sf_skb_own_local(w));
	} else if (w->d.protocol == IPPROTO_UDP) {
		struct udphdr uh;

		if (bpf_skb_load_bytes(skb, l4_off, &uh, sizeof(uh)))
			return 1;
		w->d.port = bpf_ntohs(uh.dest);
		payload_off = l4_off + sizeof(uh);
	}
	/* The socket's cgroup, not the current task's: softirq context. */
	w->skb = skb;
	w->start = sf_first_level();
	w->too_deep =
		bpf_skb_ancestor_cgroup_id(skb, SF_MAX_CGROUP_DEPTH + 1) != 0;
	/* Into the filters' range only a redirected query passes: to the
	 * judging sandbox's own target, exactly. The rules deny the rest. */
	if (sf_in_filter_range(&w->d) && !w->too_deep &&
	    (w->d.protocol == IPPROTO_TCP || w->d.protocol == IPPROTO_UDP)) {
		struct sf_dns_target *t;
		bool filtered;

		t = sf_dns_target_of(w, true, &filtered);
		if (t && t->addr == w->d.addr[0] && t->port == w->d.port)
			return 1; /* the DNS budget's, not the egress one's */
	}
	bpf_loop(SF_MAX_CGROUP_DEPTH - w->start, sf_walk_level_skb, w, 0);
	if (w->found && w->too_deep)
		sf_set(&w->dec, SF_VERDICT_DENY, SF_REASON_TOO_DEEP,
		       SF_NO_RULE);
	/* Unlike the hooks, no sandbox here is not a denial: the backstop only
	 * catches what a sandbox's rules forbid. An audit-only sandbox's
	 * would-deny passes unreported: its hook reported the attempt. */
	if (w->found && w->dec.verdict == SF_VERDICT_DENY) {
		sf_record(w->id, &w->d, &w->dec, w->generation, w->ring,
			  SF_HOOK_SKB_EGRESS, 0, false);
		return 0;
	}
	return sf_skb_pass(skb, &w->d, payload_off,
			   sf_skb_own_local(w));
}

SEC("cgroup_skb/egress")
int sf_skb_egress(struct __sk_buff *skb)
{
	struct sf_walk w = {};
	__u32 l4_off;

	if (SF_NEUTRALIZED(SF_HOOK_SKB_EGRESS))
		return 1;
	if (sf_skb_has_netns_cookie) {
		w.own_netns = sf_host_netns &&
			      bpf_get_netns_cookie(skb) != sf_host_netns;
	} else {
		/* Unknown netns: let loopback through where a private netns
		 * would (the connect hooks judged it exactly). */
		w.own_netns = 1;
	}

	/* Parse to one place, then judge once: one copy for the verifier. */
	if (skb->protocol == bpf_htons(0x0800 /* ETH_P_IP */)) {
		struct iphdr iph;

		if (bpf_skb_load_bytes(skb, 0, &iph, sizeof(iph)))
			return 1;
		/* Non-first fragments carry no ports; the first was judged. */
		if (iph.frag_off & bpf_htons(0x1fff))
			return 1;
		w.d.family = AF_INET;
		w.d.protocol = iph.protocol;
		w.d.addr[0] = iph.daddr;
		l4_off = iph.ihl * 4;
	} else if (skb->protocol == bpf_htons(0x86DD /* ETH_P_IPV6 */)) {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, 0, &ip6, sizeof(ip6)))
			return 1;
		l4_off = sizeof(ip6);
		w.d.protocol = ip6.nexthdr;
		/* Skip the extension headers a sending socket may add (hop-by-
		 * hop, routing, destination options, fragment): the transport
		 * header follows them. */
		for (int i = 0; i < SF_MAX_IPV6_EXT; i++) {
			struct {
				__u8 nexthdr, hdrlen;
				__be16 frag_off;
			} eh;

			if (w.d.protocol != 0 && w.d.protocol != 43 &&
			    w.d.protocol != 44 && w.d.protocol != 60)
				break;
			if (bpf_skb_load_bytes(skb, l4_off, &eh, sizeof(eh)))
				return 1;
			if (w.d.protocol == 44) {
				/* Non-first fragments carry no ports. */
				if (eh.frag_off & bpf_htons(0xfff8))
					return 1;
				l4_off += 8;
			} else {
				l4_off += (eh.hdrlen + 1) * 8;
			}
			w.d.protocol = eh.nexthdr;
		}
		sf_dest_from6(&w.d, ip6.daddr.in6_u.u6_addr32);
	} else {
		return 1;
	}
	return sf_skb_judge(skb, &w, l4_off);
}

/*
 * The reply side of the DNS redirect: where a redirected socket's peer (or
 * a datagram's source) is the target it was sent to, the client sees the
 * destination it asked for. A socket that sent to several port-53 servers
 * without connecting sees the last one asked: every answer comes from the
 * one filter. These hooks change no verdict and must return 1.
 */
static __always_inline struct sf_dns_orig *sf_orig_of(struct bpf_sock_addr *ctx)
{
	if (!ctx->sk)
		return NULL;
	return bpf_sk_storage_get(&sf_dns_orig, ctx->sk, 0, 0);
}

static __always_inline void sf_restore4(struct bpf_sock_addr *ctx)
{
	struct sf_dns_orig *o = sf_orig_of(ctx);

	if (!o || ctx->user_ip4 != o->target_addr ||
	    ctx->user_port != bpf_htons(o->target_port))
		return;
	if (o->family == AF_INET)
		ctx->user_ip4 = o->addr[0];
	else if (sf_is_v4_mapped(o->addr))
		ctx->user_ip4 = o->addr[3];
	else
		return; /* an IPv6 original has no IPv4 form: leave it */
	ctx->user_port = bpf_htons(o->port);
}

static __always_inline void sf_restore6(struct bpf_sock_addr *ctx)
{
	struct sf_dns_orig *o = sf_orig_of(ctx);

	/* An IPv4 reply on a dual-stack socket shows as ::ffff:a.b.c.d. */
	if (!o || ctx->user_ip6[0] != 0 || ctx->user_ip6[1] != 0 ||
	    ctx->user_ip6[2] != bpf_htonl(0x0000ffff) ||
	    ctx->user_ip6[3] != o->target_addr ||
	    ctx->user_port != bpf_htons(o->target_port))
		return;
	if (o->family == AF_INET) {
		/* Sent through sendmsg4 (a mapped destination): mapped back. */
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = bpf_htonl(0x0000ffff);
		ctx->user_ip6[3] = o->addr[0];
	} else {
		ctx->user_ip6[0] = o->addr[0];
		ctx->user_ip6[1] = o->addr[1];
		ctx->user_ip6[2] = o->addr[2];
		ctx->user_ip6[3] = o->addr[3];
	}
	ctx->user_port = bpf_htons(o->port);
}

SEC("cgroup/recvmsg4")
int sf_recvmsg4(struct bpf_sock_addr *ctx)
{
	sf_restore4(ctx);
	return 1;
}

SEC("cgroup/recvmsg6")
int sf_recvmsg6(struct bpf_sock_addr *ctx)
{
	sf_restore6(ctx);
	return 1;
}

SEC("cgroup/getpeername4")
int sf_getpeername4(struct bpf_sock_addr *ctx)
{
	sf_restore4(ctx);
	return 1;
}

SEC("cgroup/getpeername6")
int sf_getpeername6(struct bpf_sock_addr *ctx)
{
	sf_restore6(ctx);
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
