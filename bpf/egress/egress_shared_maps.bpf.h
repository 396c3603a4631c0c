/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The egress maps every egress object uses: the sandboxes, their counters
 * and the drivers' event rings. egress.bpf.c creates them; the unix object
 * (egress_unix.bpf.c) reuses them by fd, so both must define them alike:
 * they define them here, once. No includes of its own: the includer brings
 * the map types (<linux/bpf.h> or vmlinux.h), bpf_helpers.h and
 * egress_abi.h.
 */
#ifndef SANDFENCE_BPF_EGRESS_SHARED_MAPS_BPF_H
#define SANDFENCE_BPF_EGRESS_SHARED_MAPS_BPF_H

/*
 * Events go to the ring of the process that owns the sandbox (its driver
 * slot, sf_sandbox.ring): several processes share these programs, and each
 * reads only its own ring. A slot without a ring counts the event as lost.
 */
struct sf_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, SF_MAX_DRIVERS);
	__type(key, __u32);
	__array(values, struct sf_ring);
} sf_rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SF_MAX_SANDBOXES);
	/* Replaced, never rewritten in place: see struct sf_sandbox. */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct sf_sandbox);
} sf_sandboxes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SF_MAX_SANDBOXES);
	__type(key, __u64);
	__type(value, struct sf_counters);
} sf_counters SEC(".maps");

#endif /* SANDFENCE_BPF_EGRESS_SHARED_MAPS_BPF_H */
