/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The egress decision, as pure inline functions over the rule maps: the
 * enforcing hooks and the raw_tp test harness call exactly this code.
 */
#ifndef SANDFENCE_BPF_EGRESS_VERDICT_BPF_H
#define SANDFENCE_BPF_EGRESS_VERDICT_BPF_H

#ifndef __VMLINUX_H__
#include <stdbool.h>
#include <linux/in.h>
#include <linux/socket.h>
#endif
#include <bpf/bpf_endian.h>

#include "egress/egress_maps.bpf.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

/* A destination as judged: IPv4-mapped IPv6 is already unmapped. */
struct sf_dest {
	__u8 family;
	__u8 protocol;
	__u16 port; /* host order */
	__u32 addr[4]; /* network order; IPv4 in addr[0] */
};

static __always_inline bool sf_is_v4_mapped(const __u32 *a)
{
	return a[0] == 0 && a[1] == 0 && a[2] == bpf_htonl(0x0000ffff);
}

/* Fills d from an IPv6 sock_addr destination, unmapping ::ffff:a.b.c.d. */
static __always_inline void sf_dest_from6(struct sf_dest *d, const __u32 *a)
{
	if (sf_is_v4_mapped(a)) {
		d->family = AF_INET;
		d->addr[0] = a[3];
		d->addr[1] = 0;
		d->addr[2] = 0;
		d->addr[3] = 0;
		return;
	}
	d->family = AF_INET6;
	d->addr[0] = a[0];
	d->addr[1] = a[1];
	d->addr[2] = a[2];
	d->addr[3] = a[3];
}

/*
 * Loopback for the purpose of "a private netns may use its own loopback":
 * 127/8, ::1, and the unspecified addresses, which Linux routes to the
 * local host on connect.
 */
static __always_inline bool sf_is_local(const struct sf_dest *d)
{
	if (d->family == AF_INET) {
		__u32 a = bpf_ntohl(d->addr[0]);
		return (a >> 24) == 127 || a == 0;
	}
	return d->addr[0] == 0 && d->addr[1] == 0 && d->addr[2] == 0 &&
	       (d->addr[3] == bpf_htonl(1) || d->addr[3] == 0);
}

static __always_inline void sf_set(struct sf_decision *out, __u8 verdict,
				   __u8 reason, __u32 rule_id)
{
	out->verdict = verdict;
	out->reason = reason;
	out->rule_id = rule_id;
}

static __always_inline bool sf_match_ranges(const struct sf_port_range *r,
					    __u32 n, __u16 port,
					    __u32 *rule_id)
{
	for (int i = 0; i < SF_MAX_PORT_RANGES; i++) {
		if (i >= n)
			break;
		if (port >= r[i].first && port <= r[i].last) {
			*rule_id = r[i].rule_id;
			return true;
		}
	}
	return false;
}

/* An IPv4 destination in the DNS filters' reserved range. */
static __always_inline bool sf_in_filter_range(const struct sf_dest *d)
{
	return d->family == AF_INET &&
	       (bpf_ntohl(d->addr[0]) & SF_DNS_FILTER_MASK) == SF_DNS_FILTER_NET;
}

static __always_inline bool sf_lookup_rules(__u32 gen, const struct sf_dest *d,
					    __u32 *rule_id)
{
	struct sf_rule_ref *ref;
	struct sf_cidr_value *v;

	if (d->family == AF_INET) {
		struct sf_exact4_key ek = {
			.generation = gen,
			.protocol = d->protocol,
			.port = d->port,
			.addr = d->addr[0],
		};
		struct sf_cidr4_key ck = {
			.prefixlen = SF_LPM_FIXED_BITS + 32,
			.generation = gen,
			.protocol = d->protocol,
			.addr = d->addr[0],
		};

		ref = bpf_map_lookup_elem(&sf_exact4, &ek);
		if (ref) {
			*rule_id = ref->rule_id;
			return true;
		}
		v = bpf_map_lookup_elem(&sf_cidr4, &ck);
		return v && sf_match_ranges(v->ranges, v->nranges, d->port, rule_id);
	}

	struct sf_exact6_key ek = {
		.generation = gen,
		.protocol = d->protocol,
		.port = d->port,
	};
	struct sf_cidr6_key ck = {
		.prefixlen = SF_LPM_FIXED_BITS + 128,
		.generation = gen,
		.protocol = d->protocol,
	};

	__builtin_memcpy(ek.addr, d->addr, 16);
	__builtin_memcpy(ck.addr, d->addr, 16);
	ref = bpf_map_lookup_elem(&sf_exact6, &ek);
	if (ref) {
		*rule_id = ref->rule_id;
		return true;
	}
	v = bpf_map_lookup_elem(&sf_cidr6, &ck);
	return v && sf_match_ranges(v->ranges, v->nranges, d->port, rule_id);
}

/*
 * An address the DNS filter learned for this generation, unexpired, with a
 * grant on the port. Expiry is checked here, so an entry the controller has
 * not collected yet judges as absent.
 */
static __always_inline bool sf_lookup_learned(__u32 gen,
					      const struct sf_dest *d,
					      __u32 *rule_id)
{
	struct sf_learned_value *v;

	if (d->family == AF_INET) {
		struct sf_learned4_key k = {
			.generation = gen,
			.protocol = d->protocol,
			.addr = d->addr[0],
		};

		v = bpf_map_lookup_elem(&sf_learned4, &k);
	} else {
		struct sf_learned6_key k = {
			.generation = gen,
			.protocol = d->protocol,
		};

		__builtin_memcpy(k.addr, d->addr, 16);
		v = bpf_map_lookup_elem(&sf_learned6, &k);
	}
	if (!v || v->expires_ns <= bpf_ktime_get_boot_ns())
		return false;
	return sf_match_ranges(v->ranges, v->nranges, d->port, rule_id);
}

/*
 * Whether an audit-only sandbox (SF_SB_AUDIT) lets a denial of its own
 * through as a would-deny: its rules' denials (no rule, a protocol or
 * socket type a restricted phase refuses) are; the filters' range is not,
 * since reaching another sandbox's DNS filter would pass for that sandbox.
 */
static __always_inline bool sf_audit_relaxes(__u8 reason)
{
	return reason == SF_REASON_NO_RULE || reason == SF_REASON_PROTOCOL ||
	       reason == SF_REASON_SOCKET_TYPE;
}

/*
 * One sandbox's verdict on one destination. own_netns: the socket lives in
 * a network namespace other than the host's, so its loopback is its own.
 */
static __always_inline void sf_decide(const struct sf_sandbox *sb,
				      const struct sf_dest *d, bool own_netns,
				      struct sf_decision *out)
{
	__u32 rule_id = SF_NO_RULE;

	if (!(sb->flags & SF_SB_RESTRICTED)) {
		sf_set(out, SF_VERDICT_ALLOW, SF_REASON_UNRESTRICTED, SF_NO_RULE);
		return;
	}
	if (d->protocol != IPPROTO_TCP && d->protocol != IPPROTO_UDP) {
		sf_set(out, SF_VERDICT_DENY, SF_REASON_PROTOCOL, SF_NO_RULE);
		return;
	}
	/* Before any rule or loopback freedom: a policy that allows 127/8
	 * must not open another sandbox's filter (the redirect to the own
	 * filter is decided before this, in the hooks). */
	if (sf_in_filter_range(d)) {
		sf_set(out, SF_VERDICT_DENY, SF_REASON_DNS_FILTER_RANGE,
		       SF_NO_RULE);
		return;
	}
	if (own_netns && (sb->flags & SF_SB_OWN_LOOPBACK) && sf_is_local(d)) {
		sf_set(out, SF_VERDICT_ALLOW, SF_REASON_OWN_LOOPBACK, SF_NO_RULE);
		return;
	}
	if (sf_lookup_rules(sb->generation, d, &rule_id)) {
		sf_set(out, SF_VERDICT_ALLOW, SF_REASON_RULE, rule_id);
		return;
	}
	/* Only DNS-filtered phases have learned addresses: no lookup for
	 * the others. */
	if ((sb->flags & SF_SB_DNS_FILTER) &&
	    sf_lookup_learned(sb->generation, d, &rule_id)) {
		sf_set(out, SF_VERDICT_ALLOW, SF_REASON_LEARNED, rule_id);
		return;
	}
	sf_set(out, SF_VERDICT_DENY, SF_REASON_NO_RULE, SF_NO_RULE);
}

#endif /* SANDFENCE_BPF_EGRESS_VERDICT_BPF_H */
