/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The egress maps, shared by the enforcing programs (egress.bpf.c) and the
 * test harness (egress_harness.bpf.c) so that both judge with the same
 * layout. Sizes come from egress_abi.h.
 */
#ifndef SANDFENCE_BPF_EGRESS_MAPS_BPF_H
#define SANDFENCE_BPF_EGRESS_MAPS_BPF_H

/* The cut iterators (egress_cut.bpf.c) are built on vmlinux.h instead. */
#ifndef __VMLINUX_H__
#include <linux/bpf.h>
#endif
#include <bpf/bpf_helpers.h>

#include "egress/egress_abi.h"

#include "egress/egress_shared_maps.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SF_MAX_EXACT_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sf_exact4_key);
	__type(value, struct sf_rule_ref);
} sf_exact4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SF_MAX_EXACT_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sf_exact6_key);
	__type(value, struct sf_rule_ref);
} sf_exact6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SF_MAX_CIDR_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sf_cidr4_key);
	__type(value, struct sf_cidr_value);
} sf_cidr4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SF_MAX_CIDR_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sf_cidr6_key);
	__type(value, struct sf_cidr_value);
} sf_cidr6 SEC(".maps");

/*
 * Learned addresses. Not preallocated: an update replaces the element, so
 * a reader sees the old ranges and expiry or the new ones, never a mix.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SF_MAX_LEARNED);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sf_learned4_key);
	__type(value, struct sf_learned_value);
} sf_learned4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SF_MAX_LEARNED);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sf_learned6_key);
	__type(value, struct sf_learned_value);
} sf_learned6 SEC(".maps");

/*
 * On a socket a sandbox's connect hook allowed to connect (TCP or UDP): it
 * was opened outward, not accepted. A phase switch cuts only such sockets
 * (egress_cut.bpf.c); the value is unused.
 */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} sf_outbound SEC(".maps");

#endif /* SANDFENCE_BPF_EGRESS_MAPS_BPF_H */
