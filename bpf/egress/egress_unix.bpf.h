/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What both Unix socket enforcers share: the cgroup hooks (egress_unix.bpf.c,
 * Linux 6.7+) and the BPF LSM hooks (egress_unix_lsm.bpf.c, for kernels
 * before them). The names a phase lists and the protected names, the walk
 * over a task's sandboxes that judges one name, and the event it records.
 * The includer brings vmlinux.h, bpf_helpers.h, egress_abi.h and the shared
 * egress maps (egress_shared_maps.bpf.h).
 */
#ifndef SANDFENCE_BPF_EGRESS_UNIX_BPF_H
#define SANDFENCE_BPF_EGRESS_UNIX_BPF_H

#define AF_UNIX 1

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SF_MAX_UNIX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sf_unix_key);
	__type(value, struct sf_rule_ref);
} sf_unix_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SF_MAX_UNIX_PROTECTED);
	__type(key, struct sf_unix_key);
	__type(value, __u8);
} sf_unix_protected SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SF_SEEN_ENTRIES);
	__type(key, struct sf_unix_key);
	__type(value, __u8);
} sf_unix_seen SEC(".maps");

/*
 * The name in a sockaddr_un of alen bytes (family included) at uaddr, a
 * kernel address, into k (see struct sf_unix_key). No byte loops: the
 * verifier would walk every branch of every byte; reads of the exact
 * length into a zeroed key do the work.
 */
static __always_inline void sf_unix_name(const void *uaddr, __u32 alen,
					 struct sf_unix_key *k)
{
	__u64 n = alen > 2 ? alen - 2 : 0; /* 64-bit: no zero-extended copies */
	char first = 0;

	__builtin_memset(k->name, 0, SF_UNIX_NAME_MAX);
	k->len = 0;
	k->abstract = 0;
	if (n > SF_UNIX_NAME_MAX)
		n = SF_UNIX_NAME_MAX;
	if (!n || bpf_probe_read_kernel(&first, 1, uaddr + 2) != 0)
		return;
	if (first == 0) {
		/* Abstract: the n - 1 bytes after the leading NUL. */
		n--;
		k->abstract = 1;
		k->len = n;
		/* One bound, on the register the call gets: clang would
		 * otherwise fold a two-sided check into a derived register
		 * whose bounds older verifiers (6.1) do not carry over. A
		 * size of 0 reads nothing. */
		barrier_var(n);
		if (n < SF_UNIX_NAME_MAX)
			bpf_probe_read_kernel(k->name, n, uaddr + 3);
		return;
	}
	barrier_var(n);
	if (n <= SF_UNIX_NAME_MAX)
		bpf_probe_read_kernel(k->name, n, uaddr + 2);
}

/*
 * One name judged by the sandboxes of a task's ancestry. The ancestors'
 * ids are not kept here: an array of them on the stack put the hooks'
 * call chains over their stack budget (bpf/tools/stack_check). Each
 * enforcer's walk reads the id of the level it is at and hands it to
 * sf_unix_level, with whether the name is the sandbox's own there from a
 * mask the enforcer computes before the walk (computed during the walk,
 * it made each level's verifier states differ from the last one's: 2.5
 * times the instructions processed).
 */
struct sf_unix_walk {
	struct sf_unix_key key; /* scope set per sandbox */
	/* The deepest sandbox that allowed the name as its own (own_id 0:
	 * none), for the check at the connect's exit. */
	__u8 own_level;
	__u8 own_ring;
	__u64 own_id;
	__u32 own_generation;
	__u8 protected;
	__u8 found;
	__u8 too_deep;
	__u8 ring;
	__u8 pad[2];
	__u32 generation;
	__u32 flags;
	__u64 id;
	struct sf_decision dec;
	/* The first audit-only sandbox that would have denied (audit_id 0:
	 * none): reported as a would-deny unless another sandbox denies. */
	__u64 audit_id;
	__u32 audit_generation;
	__u8 audit_ring;
	__u8 pad3[3];
};

static __always_inline void sf_unix_set(struct sf_decision *d, __u8 verdict,
					__u8 reason, __u32 rule_id)
{
	d->verdict = verdict;
	d->reason = reason;
	d->rule_id = rule_id;
}

/*
 * One level of the walk, outermost first: id is the task's ancestor at
 * cgroup level `level` + 1 (never 0); own, whether the name is the own of
 * a process there (the name's last binder, or the server's socket, shares
 * that ancestor: it was inside the sandbox). Returns 1 to stop the walk
 * (bpf_loop's convention): each enforcer's bpf_loop callback finds the
 * level's id and own, and calls this.
 */
static __always_inline long sf_unix_level(struct sf_unix_walk *w,
					  __u32 level, __u64 id, bool own)
{
	const struct sf_sandbox *sb;
	struct sf_rule_ref *ref;

	sb = bpf_map_lookup_elem(&sf_sandboxes, &id);
	if (!sb)
		return 0;
	struct sf_sandbox s = *sb;

	w->found = 1;
	w->id = id;
	w->generation = s.generation;
	w->flags = s.flags;
	w->ring = s.ring;
	if (!(s.flags & SF_SB_RESTRICTED)) {
		sf_unix_set(&w->dec, SF_VERDICT_ALLOW, SF_REASON_UNRESTRICTED,
			    SF_NO_RULE);
		return 0;
	}
	if (!(s.flags & SF_SB_UNIX_CHECKED)) {
		sf_unix_set(&w->dec, SF_VERDICT_ALLOW, SF_REASON_UNIX_UNCHECKED,
			    SF_NO_RULE);
		return 0;
	}
	/* Before any rule: a policy cannot open sandfence's own sockets. */
	if (w->protected) {
		sf_unix_set(&w->dec, SF_VERDICT_DENY, SF_REASON_UNIX_PROTECTED,
			    SF_NO_RULE);
		return 1;
	}
	w->key.scope = s.generation;
	ref = bpf_map_lookup_elem(&sf_unix_rules, &w->key);
	if (ref) {
		sf_unix_set(&w->dec, SF_VERDICT_ALLOW, SF_REASON_UNIX_LISTED,
			    ref->rule_id);
		return 0;
	}
	/* Bound last by a process at or below this sandbox. */
	if (own) {
		sf_unix_set(&w->dec, SF_VERDICT_ALLOW, SF_REASON_UNIX_OWN,
			    SF_NO_RULE);
		/* Checked at the connect's exit (a swapped path): by the
		 * enforcing sandboxes only, whose check kills. */
		if (!(s.flags & SF_SB_AUDIT)) {
			w->own_id = id;
			w->own_level = level + 1;
			w->own_ring = s.ring;
			w->own_generation = s.generation;
		}
		return 0;
	}
	/* Audit only: remembered (the first), and the walk goes on so that
	 * every enforcing sandbox still judges. The protected names above
	 * are never relaxed. */
	if (s.flags & SF_SB_AUDIT) {
		if (!w->audit_id) {
			w->audit_id = id;
			w->audit_generation = s.generation;
			w->audit_ring = s.ring;
		}
		sf_unix_set(&w->dec, SF_VERDICT_AUDIT_DENY, SF_REASON_NO_RULE,
			    SF_NO_RULE);
		return 0;
	}
	sf_unix_set(&w->dec, SF_VERDICT_DENY, SF_REASON_NO_RULE, SF_NO_RULE);
	/* A nested sandbox narrows its parent's policy, never widens it. */
	return 1;
}

/*
 * After the walk: no sandbox denied, an audit-only one would have: the
 * attempt goes through as that sandbox's would-deny.
 */
static __always_inline void sf_unix_apply_audit(struct sf_unix_walk *w)
{
	if (!w->audit_id || w->dec.verdict == SF_VERDICT_DENY)
		return;
	w->id = w->audit_id;
	w->generation = w->audit_generation;
	w->ring = w->audit_ring;
	sf_unix_set(&w->dec, SF_VERDICT_AUDIT_DENY, SF_REASON_NO_RULE,
		    SF_NO_RULE);
}

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

/* Whether an allow goes to the ring (the audit setting), as egress does:
 * in first-per-destination mode, once per name and phase. */
static __always_inline bool sf_unix_report_allow(struct sf_unix_walk *w)
{
	__u8 one = 1;

	if (w->flags & SF_SB_AUDIT_ALLOW_ALL)
		return true;
	if (!(w->flags & SF_SB_AUDIT_ALLOW_FIRST))
		return false;
	/* The walk's key becomes the seen key: nothing reads it after. */
	w->key.scope = w->id;
	w->key.aux = w->generation;
	if (bpf_map_lookup_elem(&sf_unix_seen, &w->key))
		return false;
	return bpf_map_update_elem(&sf_unix_seen, &w->key, &one, BPF_NOEXIST) ==
	       0;
}

/* Decide first (done), count, then try to record. */
static __always_inline void sf_unix_record(struct sf_unix_walk *w, __u8 hook,
					   __u32 sock_type)
{
	struct sf_counters *c = sf_counters_of(w->id);
	struct sf_unix_event *e = NULL;
	__u32 slot = w->ring;
	__u64 pid_tgid, uid_gid;
	void *ring;

	if (w->dec.verdict == SF_VERDICT_ALLOW && !sf_unix_report_allow(w)) {
		if (c) {
			__sync_fetch_and_add(&c->allowed, 1);
			__sync_fetch_and_add(&c->allowed_unreported, 1);
		}
		return;
	}
	if (c) {
		if (w->dec.verdict == SF_VERDICT_ALLOW) {
			__sync_fetch_and_add(&c->allowed, 1);
		} else if (w->dec.verdict == SF_VERDICT_DENY) {
			__sync_fetch_and_add(&c->denied, 1);
		} else {
			/* A would-deny went through: allowed, and counted. */
			__sync_fetch_and_add(&c->allowed, 1);
			__sync_fetch_and_add(&c->audit_denied, 1);
		}
	}
	ring = bpf_map_lookup_elem(&sf_rings, &slot);
	if (ring)
		e = bpf_ringbuf_reserve(ring, sizeof(*e), 0);
	if (!e) {
		if (c)
			__sync_fetch_and_add(&c->events_lost, 1);
		return;
	}
	pid_tgid = bpf_get_current_pid_tgid();
	uid_gid = bpf_get_current_uid_gid();
	__builtin_memset(&e->net, 0, sizeof(e->net));
	e->net.type = SF_EVENT_UNIX;
	e->net.hook = hook;
	e->net.verdict = w->dec.verdict;
	e->net.reason = w->dec.reason;
	e->net.protocol = 0;
	e->net.family = AF_UNIX;
	e->net.sock_type = sock_type;
	e->net.rule_id = w->dec.rule_id;
	e->net.generation = w->generation;
	e->net.pid = (__u32)pid_tgid;
	e->net.tgid = pid_tgid >> 32;
	e->net.uid = (__u32)uid_gid;
	e->net.gid = uid_gid >> 32;
	e->net.boot_ns = bpf_ktime_get_boot_ns();
	e->net.sandbox = w->id;
	e->net.cgroup = bpf_get_current_cgroup_id();
	bpf_get_current_comm(e->net.comm, sizeof(e->net.comm));
	e->len = w->key.len;
	e->abstract = w->key.abstract;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	__builtin_memset(e->pad2, 0, sizeof(e->pad2));
	__builtin_memcpy(e->name, w->key.name, SF_UNIX_NAME_MAX);
	bpf_ringbuf_submit(e, 0);
}

#endif /* SANDFENCE_BPF_EGRESS_UNIX_BPF_H */
