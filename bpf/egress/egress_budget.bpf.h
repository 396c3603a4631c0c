/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Egress budgets (issue 40): connections, and payload bytes in all and per
 * address, that a rollout may send through what its phases allow. Counted
 * in the kernel, per sandbox, across phases (struct sf_budget).
 *
 * - sock_create marks every socket of a sandbox that has a budget with
 *   that sandbox (sf_budget_socks), in any phase.
 * - The sock_addr hooks, after every sandbox allowed: a socket's first
 *   allowed connect takes a connection; a connect or datagram to a spent
 *   budget (in all, or to that address) is denied.
 * - The cgroup_skb backstop counts every packet of a marked socket that
 *   carries payload while a budgeted phase is in force, reserving before
 *   it admits: the packet that would pass a byte budget is dropped, so
 *   that what leaves stops at the budget (a TCP sender then stalls with
 *   its socket buffer full).
 * Until some sandbox on the host has a budget, the others pay one array
 * lookup per socket and per packet; after, one hash lookup per socket too,
 * and one socket-storage lookup per packet that carries payload.
 *
 * Included by egress.bpf.c after the egress maps and the verdict helpers.
 */
#ifndef SANDFENCE_BPF_EGRESS_BUDGET_BPF_H
#define SANDFENCE_BPF_EGRESS_BUDGET_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SF_MAX_SANDBOXES);
	__type(key, __u64);
	__type(value, struct sf_budget);
} sf_budgets SEC(".maps");

/* Preallocated: counted in softirq context, where allocating could fail. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SF_MAX_BUDGET_DESTS);
	__type(key, struct sf_budget_dest_key);
	__type(value, __u64);
} sf_budget_dests SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sf_budget_sock);
} sf_budget_socks SEC(".maps");

/* Index 0: nonzero once any sandbox on the host has had a budget. Until
 * then the backstop skips the socket-storage lookup on every packet. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} sf_budget_on SEC(".maps");

/* Takes n from *count unless that passes max (0: no limit); true if taken.
 * Reserve first, give back on overrun: concurrent CPUs never admit past
 * max together. */
static __always_inline bool sf_budget_take(__u64 *count, __u64 max, __u64 n)
{
	__u64 before;

	if (!max) {
		__sync_fetch_and_add(count, n);
		return true;
	}
	before = __sync_fetch_and_add(count, n);
	if (before + n <= max)
		return true;
	__sync_fetch_and_sub(count, n);
	return false;
}

/* The count of bytes sandbox sent to d's address; NULL when a new one
 * cannot be counted (*reason says why). */
static __always_inline __u64 *sf_budget_dest(__u64 sandbox, struct sf_budget *b,
					     const struct sf_dest *d,
					     bool create, __u8 *reason)
{
	struct sf_budget_dest_key k = { .sandbox = sandbox };
	__u64 zero = 0;
	__u64 *v;

	__builtin_memcpy(k.addr, d->addr, sizeof(k.addr));
	v = bpf_map_lookup_elem(&sf_budget_dests, &k);
	if (v || !create)
		return v;
	/* Counted before the insert, so that racing CPUs cannot pass the
	 * per-sandbox bound together. */
	if (__sync_fetch_and_add(&b->dests, 1) >= SF_BUDGET_DESTS_PER_SANDBOX) {
		__sync_fetch_and_sub(&b->dests, 1);
		*reason = SF_REASON_BUDGET_DESTS;
		return NULL;
	}
	if (bpf_map_update_elem(&sf_budget_dests, &k, &zero, BPF_NOEXIST)) {
		__sync_fetch_and_sub(&b->dests, 1);
		v = bpf_map_lookup_elem(&sf_budget_dests, &k);
		if (!v)
			*reason = SF_REASON_BUDGET_DESTS;
		return v; /* another CPU inserted it first */
	}
	v = bpf_map_lookup_elem(&sf_budget_dests, &k);
	if (!v)
		*reason = SF_REASON_BUDGET_DESTS;
	return v;
}

/*
 * An allowed connect or datagram of sandbox `id` (its phase has
 * SF_SB_BUDGET) to d, from socket sk: 0 when the budget admits it, else
 * the reason it is denied. A connect takes a connection once per socket.
 */
static __always_inline __u8 sf_budget_admit(__u64 id, struct bpf_sock *sk,
					    const struct sf_dest *d,
					    bool connect)
{
	struct sf_budget *b = bpf_map_lookup_elem(&sf_budgets, &id);
	struct sf_budget_sock *st;
	__u8 reason = SF_REASON_BUDGET_DESTS;
	__u64 *sent;

	/* The flag without the limits, or a socket that cannot be marked:
	 * nothing could count what it sends. Fail closed. */
	if (!b || !sk)
		return SF_REASON_BUDGET_BYTES;
	/* Spent: filled, or a packet was already refused for it (the rest
	 * may not fit what is left; the budget is over all the same). */
	if (b->max_bytes && (b->bytes >= b->max_bytes ||
			     (b->reported & SF_BUDGET_REPORTED_BYTES)))
		return SF_REASON_BUDGET_BYTES;
	if (b->max_dest_bytes) {
		sent = sf_budget_dest(id, b, d, false, &reason);
		if (sent && *sent >= b->max_dest_bytes)
			return SF_REASON_BUDGET_DEST_BYTES;
	}
	st = bpf_sk_storage_get(&sf_budget_socks, sk, 0,
				BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return SF_REASON_BUDGET_BYTES;
	if (connect && !st->counted) {
		if (!sf_budget_take(&b->connections, b->max_connections, 1))
			return SF_REASON_BUDGET_CONNECTIONS;
		st->counted = 1;
	}
	st->sandbox = id;
	return 0;
}

/*
 * A socket created in sandbox `id`: marked with it if the rollout has a
 * budget, whatever its phase, so that a connection opened in an inherit
 * phase is counted once a budgeted phase is in force. 0: it could not be
 * marked.
 */
static __always_inline int sf_budget_mark(__u64 id, struct bpf_sock *sk)
{
	struct sf_budget_sock *st;
	__u32 zero = 0;
	__u32 *on;

	on = bpf_map_lookup_elem(&sf_budget_on, &zero);
	if (!on || !*on || !bpf_map_lookup_elem(&sf_budgets, &id))
		return 1;
	st = bpf_sk_storage_get(&sf_budget_socks, sk, 0,
				BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return 0;
	st->sandbox = id;
	return 1;
}

/* What the backstop found: a packet of a budgeted socket to drop. */
struct sf_budget_drop {
	__u64 sandbox;
	__u8 reason;  /* 0: admitted (or not budgeted) */
	__u8 report;  /* the first overrun of its kind: record it */
};

/*
 * A packet to d whose payload starts at payload_off: counted against its
 * socket's budget, if it has one. Packets to the DNS filter are the DNS
 * budget's, not this one's; own_local (a loopback address, sent in a
 * network namespace other than the host's) stays in a sandbox whose phase
 * owns its loopback (SF_SB_OWN_LOOPBACK): not egress, not counted.
 */
static __always_inline void sf_budget_packet(struct __sk_buff *skb,
					     const struct sf_dest *d,
					     __u32 payload_off, bool own_local,
					     struct sf_budget_drop *out)
{
	struct bpf_sock *sk = skb->sk;
	const struct sf_sandbox *sb;
	struct sf_budget_sock *st;
	struct sf_budget *b;
	__u32 zero = 0, bit;
	__u32 *on;
	__u64 *sent = NULL;
	__u64 n;

	on = bpf_map_lookup_elem(&sf_budget_on, &zero);
	if (!on || !*on || skb->len <= payload_off || !sk)
		return;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return;
	st = bpf_sk_storage_get(&sf_budget_socks, sk, 0, 0);
	if (!st || sf_in_filter_range(d))
		return;
	b = bpf_map_lookup_elem(&sf_budgets, &st->sandbox);
	if (!b)
		return;
	/* Counted only while a budgeted phase is in force (enforcing and
	 * restricted): an inherit or audit-only phase's packets are not. */
	sb = bpf_map_lookup_elem(&sf_sandboxes, &st->sandbox);
	if (!sb || !(sb->flags & SF_SB_BUDGET))
		return;
	if (own_local && (sb->flags & SF_SB_OWN_LOOPBACK))
		return;
	n = skb->len - payload_off;
	if (b->max_dest_bytes) {
		__u8 reason = 0;

		sent = sf_budget_dest(st->sandbox, b, d, true, &reason);
		if (!sent) {
			out->reason = reason;
		} else if (!sf_budget_take(sent, b->max_dest_bytes, n)) {
			out->reason = SF_REASON_BUDGET_DEST_BYTES;
			/* Spent for good: the connect hooks deny this address
			 * from now on (a count that sits at its limit). */
			*sent = b->max_dest_bytes;
			sent = NULL;
		}
	}
	if (!out->reason && !sf_budget_take(&b->bytes, b->max_bytes, n)) {
		out->reason = SF_REASON_BUDGET_BYTES;
		if (sent)
			__sync_fetch_and_sub(sent, n);
	}
	if (!out->reason)
		return;
	out->sandbox = st->sandbox;
	__sync_fetch_and_add(&b->dropped_packets, 1);
	__sync_fetch_and_add(&b->dropped_bytes, n);
	bit = out->reason == SF_REASON_BUDGET_BYTES ?
		      SF_BUDGET_REPORTED_BYTES :
	      out->reason == SF_REASON_BUDGET_DEST_BYTES ?
		      SF_BUDGET_REPORTED_DEST_BYTES :
		      SF_BUDGET_REPORTED_DESTS;
	/* Once per kind; a race may report twice, never not at all. */
	if (!(b->reported & bit)) {
		b->reported |= bit;
		out->report = 1;
	}
}

#endif /* SANDFENCE_BPF_EGRESS_BUDGET_BPF_H */
