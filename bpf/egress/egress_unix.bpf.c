// SPDX-License-Identifier: GPL-2.0
/*
 * Unix sockets for sandboxes: cgroup connect_unix and sendmsg_unix (Linux
 * 6.7+) judge every AF_UNIX connect and addressed send of a restricted
 * sandbox whose phase checks them. Allowed are the names the phase lists
 * and the names bound last by a process inside the same sandbox; a name
 * in sf_unix_protected (sandfence's own sockets) never. Everything else is
 * EPERM, counted and recorded like any egress attempt.
 *
 * A separate object from egress.bpf.c because it needs kernel types (the
 * hooks read the name through bpf_cast_to_kern_ctx, the bind tracker walks
 * the fd table) and kfuncs an older kernel does not have: it is loaded only
 * where the hooks exist, and shares the egress maps (the controller hands
 * it their fds before load).
 *
 * Who bound a name: a tp_btf/sys_exit tracker sees every successful bind()
 * on the host and keeps, per name, the binder's cgroup ancestry when it was
 * inside a sandbox (the entry goes when anyone else binds the name). Paths
 * are judged by the name the caller gives; a path that is the sandbox's own
 * could have been swapped for a link to an outside socket, so a connect to
 * it is checked at its exit against the socket it reached (the connector
 * is killed on a mismatch), and only from a socket no other process can
 * hold; an addressed datagram to it, which no check could see before it
 * is delivered, is refused. See the README's limits.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "egress/egress_abi.h"

#define S_IFMT 00170000
#define S_IFSOCK 0140000
/* bind(2) and connect(2) on x86-64 and x32 (whose numbers are x86-64's
 * with bit 30 set) take the fd in di; the 32-bit entry (TS_COMPAT: a
 * 32-bit process, or int $0x80 from a 64-bit one) has numbers of its own
 * and takes it in bx. Its socketcall is not seen here: binds through it
 * count as outside (denied), never as the sandbox's own, and the guard or
 * the supervisor refuses it. */
#define SF_TS_COMPAT 0x0002
#define SF_NR_X32_BIT 0x40000000
#define SF_NR_BIND 49
#define SF_NR_CONNECT 42
#define SF_NR_I386_BIND 361
#define SF_NR_I386_CONNECT 362
#define SF_SIGKILL 9
#define SF_SOCK_DGRAM 2

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* Test only, as in egress.bpf.c: the mutation run builds this object with
 * -DSF_TEST_NEUTRALIZE=SF_HOOK_<HOOK> to show the Unix tests fail when
 * that hook allows everything. 0 in every normal build. */
#ifndef SF_TEST_NEUTRALIZE
#define SF_TEST_NEUTRALIZE 0
#endif
#define SF_NEUTRALIZED(hook) (SF_TEST_NEUTRALIZE == (hook))

/* The egress object's maps, reused by fd at load. */
#include "egress/egress_shared_maps.bpf.h"
#include "egress/egress_unix.bpf.h"

/* This object's own maps (the names' maps are in egress_unix.bpf.h). */

/* Connects to the sandbox's own paths, checked at the call's exit. LRU: a
 * connect that never reaches its exit leaves nothing behind for long. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct sf_unix_pending);
} sf_unix_verify SEC(".maps");

/* LRU: binds outside sandboxes never get in, and an evicted sandbox name
 * is denied (fail closed), never opened. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SF_MAX_UNIX_BOUND);
	__type(key, struct sf_unix_key);
	__type(value, struct sf_unix_binder);
} sf_unix_bound SEC(".maps");

/* Connects sandfence's supervisor makes on a sandbox's behalf, to a path
 * whose socket it checked is held inside the sandbox (SF_SB_UNIX_BROKER):
 * written just before the connect, for that socket and that supervisor
 * thread only, so a connect the agent makes meanwhile on the same socket
 * (another thread) finds nothing here. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SF_MAX_UNIX_BROKERED);
	__type(key, __u64);   /* the socket's cookie */
	__type(value, __u64); /* the supervisor thread's pid_tgid */
} sf_unix_brokered SEC(".maps");

/* Before 6.13, struct file counted its references in f_count. */
struct file___f_count {
	atomic_long_t f_count;
} __attribute__((preserve_access_index));

/*
 * Whether the socket being connected is held by this process alone: its
 * file has one reference (no fork, dup, SCM_RIGHTS in flight or io_uring
 * slot holds another) and the descriptor table holding it is not shared
 * (no thread, no CLONE_FILES process). Only then does killing the
 * connector at a failed exit check leave no connected socket behind.
 */
static __always_inline bool sf_unix_held_alone(struct bpf_sock_addr_kern *sa)
{
	struct task_struct *t = (void *)bpf_get_current_task();
	struct socket *sock = BPF_CORE_READ(sa, sk, sk_socket);
	struct file *f = BPF_CORE_READ(sock, file);
	long refs;

	if (!f || BPF_CORE_READ(t, files, count.counter) != 1)
		return false;
	if (bpf_core_field_exists(struct file, f_ref))
		/* file_ref_t counts from 0: one reference reads 0. */
		refs = BPF_CORE_READ(f, f_ref.refcnt.counter) + 1;
	else
		refs = BPF_CORE_READ((struct file___f_count *)f,
				     f_count.counter);
	return refs == 1;
}

/* Whether the sandbox reaches its own paths only through the supervisor
 * (SF_SB_UNIX_BROKER), which checks the socket reached: never by name. */
static __always_inline bool sf_unix_brokered_only(__u64 id)
{
	const struct sf_sandbox *sb = bpf_map_lookup_elem(&sf_sandboxes, &id);

	return sb && (sb->flags & SF_SB_UNIX_BROKER);
}

/* The hooks' walk (bpf_loop's context). */
struct sf_unix_hook_walk {
	struct sf_unix_walk w;
	/* Bit L: the name's last binder shares the task's ancestor at level
	 * L + 1 (so was inside a sandbox there). */
	__u32 own_levels;
};

/* One level of the hooks' walk: the task's ancestor there. */
static long sf_unix_hook_level(__u32 level, void *ctx)
{
	struct sf_unix_hook_walk *h = ctx;
	__u64 id;

	if (level >= SF_MAX_CGROUP_DEPTH)
		return 1;
	id = bpf_get_current_ancestor_cgroup_id(level + 1);
	if (!id)
		return 1;
	return sf_unix_level(&h->w, level, id, h->own_levels & (1u << level));
}

static __always_inline int sf_unix_hook(struct bpf_sock_addr *ctx, __u8 hook)
{
	struct bpf_sock_addr_kern *sa = bpf_cast_to_kern_ctx(ctx);
	struct sf_unix_hook_walk h = {};
	struct sf_unix_walk *w = &h.w;
	struct sf_unix_binder *b;
	int level;

	/* The supervisor's own connect for a sandbox: decided (and recorded)
	 * by it; this thread is outside every sandbox, so the walk below
	 * would find none. */
	if (hook == SF_HOOK_CONNECT_UNIX) {
		__u64 cookie = bpf_get_socket_cookie(ctx);
		__u64 *broker = bpf_map_lookup_elem(&sf_unix_brokered, &cookie);

		if (broker && *broker == bpf_get_current_pid_tgid()) {
			bpf_map_delete_elem(&sf_unix_brokered, &cookie);
			return 1;
		}
	}

	sf_unix_name(sa->uaddr, sa->uaddrlen, &w->key);
	w->too_deep =
		bpf_get_current_ancestor_cgroup_id(SF_MAX_CGROUP_DEPTH + 1) != 0;

	/* Scope 0 holds the protected names. */
	w->key.scope = 0;
	w->protected = bpf_map_lookup_elem(&sf_unix_protected, &w->key) != NULL;

	w->key.scope = w->key.abstract ? bpf_get_netns_cookie(ctx) : 0;
	b = bpf_map_lookup_elem(&sf_unix_bound, &w->key);
	if (b) {
		for (level = 0; level < SF_MAX_CGROUP_DEPTH; level++) {
			__u64 id = bpf_get_current_ancestor_cgroup_id(level + 1);

			if (!id)
				break;
			if (b->ids[level] == id)
				h.own_levels |= 1u << level;
		}
	}

	bpf_loop(SF_MAX_CGROUP_DEPTH, sf_unix_hook_level, &h, 0);
	if (!w->found) {
		/* Attached only to sandboxes: a task that finds none escaped
		 * or outlived its sandbox. Counted under sandbox 0. */
		sf_unix_set(&w->dec, SF_VERDICT_DENY, SF_REASON_NO_SANDBOX,
			    SF_NO_RULE);
		w->id = 0;
		w->ring = SF_MAX_DRIVERS;
		sf_unix_record(w, hook, ctx->type);
		return 0;
	}
	/* After the walk, not in it (sf_unix_level): each branch there is
	 * verified once per caller state, and two more took the verifier past
	 * its limit. The deciding sandbox's flags are w->flags. An abstract
	 * name it does not list, in a sandbox whose Landlock domain refuses
	 * those bound outside it: the kernel leaves it to Landlock. */
	if (w->dec.verdict == SF_VERDICT_DENY &&
	    w->dec.reason == SF_REASON_NO_RULE && w->key.abstract &&
	    (w->flags & SF_SB_UNIX_SCOPED))
		sf_unix_set(&w->dec, SF_VERDICT_ALLOW, SF_REASON_UNIX_SCOPED,
			    SF_NO_RULE);
	if (w->too_deep)
		sf_unix_set(&w->dec, SF_VERDICT_DENY, SF_REASON_TOO_DEEP,
			    SF_NO_RULE);
	sf_unix_apply_audit(w);
	/* A path is a name, not a socket: the sandbox may have swapped the
	 * one it bound for a link to an outside socket. A connect gets
	 * checked against what it reached (sf_unix_bind_exit), from a socket
	 * no other process holds; a datagram sent to the path cannot be
	 * checked before it is delivered. The enforcing sandbox that allowed
	 * the name as its own refuses both otherwise. An abstract name
	 * cannot be swapped while the tracker sees every bind. */
	if (w->dec.verdict != SF_VERDICT_DENY && w->own_id && !w->key.abstract &&
	    (hook == SF_HOOK_SENDMSG_UNIX || sf_unix_brokered_only(w->own_id) ||
	     !sf_unix_held_alone(sa))) {
		sf_unix_set(&w->dec, SF_VERDICT_DENY,
			    SF_REASON_UNIX_UNVERIFIABLE, SF_NO_RULE);
		w->id = w->own_id;
		w->generation = w->own_generation;
		w->ring = w->own_ring;
	}
	if (w->dec.verdict != SF_VERDICT_DENY && w->own_id && !w->key.abstract &&
	    hook == SF_HOOK_CONNECT_UNIX) {
		struct sf_unix_pending p = {
			.sandbox = w->own_id,
			.level = w->own_level,
			.generation = w->own_generation,
			.ring = w->own_ring,
		};
		__u64 cookie = bpf_get_socket_cookie(ctx);

		bpf_map_update_elem(&sf_unix_verify, &cookie, &p, BPF_ANY);
	}
	sf_unix_record(w, hook, ctx->type);
	return w->dec.verdict != SF_VERDICT_DENY;
}

/* libbpf 1.1 does not know the unix section names: the controller sets the
 * attach types (BPF_CGROUP_UNIX_CONNECT, _SENDMSG) before load. */
SEC("cgroup/connect4")
int sf_connect_unix(struct bpf_sock_addr *ctx)
{
	if (SF_NEUTRALIZED(SF_HOOK_CONNECT_UNIX))
		return 1;
	return sf_unix_hook(ctx, SF_HOOK_CONNECT_UNIX);
}

SEC("cgroup/sendmsg4")
int sf_sendmsg_unix(struct bpf_sock_addr *ctx)
{
	if (SF_NEUTRALIZED(SF_HOOK_SENDMSG_UNIX))
		return 1;
	return sf_unix_hook(ctx, SF_HOOK_SENDMSG_UNIX);
}

static __noinline int sf_unix_verify_connect(int fd);

/* The file behind fd in the current task's table (NULL: none). */
static __always_inline struct file *sf_fd_file(struct task_struct *t, int fd)
{
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	struct file **arr;
	struct file *f = NULL;

	if (!fdt || fd < 0 || (__u32)fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	arr = BPF_CORE_READ(fdt, fd);
	bpf_probe_read_kernel(&f, sizeof(f), &arr[fd]);
	return f;
}

/* The AF_UNIX sock behind fd (NULL: none). */
static __always_inline struct sock *sf_fd_unix_sock(int fd)
{
	struct file *f = sf_fd_file(bpf_get_current_task_btf(), fd);
	struct socket *sock;
	struct sock *sk;

	if (!f || (BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT) != S_IFSOCK)
		return NULL;
	sock = BPF_CORE_READ(f, private_data);
	sk = BPF_CORE_READ(sock, sk);
	if (!sk || BPF_CORE_READ(sk, __sk_common.skc_family) != AF_UNIX)
		return NULL;
	return sk;
}

/* Whether cg is the cgroup at `level` whose id is `id`, or below it. */
static __always_inline bool sf_cgroup_below(struct cgroup *cg, __u32 level,
					    __u64 id)
{
	struct cgroup *anc = NULL;

	if (!cg || BPF_CORE_READ(cg, level) < (int)level)
		return false;
	/* Masked for the verifier; the level check keeps it in the array. */
	bpf_core_read(&anc, sizeof(anc), &cg->ancestors[level & 31]);
	return anc && BPF_CORE_READ(anc, kn, id) == id;
}

/*
 * The cgroup of the server a connected AF_UNIX socket reached. A datagram
 * socket's peer is the server's socket itself. A stream (or seqpacket)
 * socket's peer is the embryo the connect made on the client's side, so
 * its cgroup says nothing: the server is the process that called listen(),
 * whose pid the connect copied into the client (SO_PEERCRED). NULL when
 * that process is gone: judged as outside.
 */
static __always_inline struct cgroup *sf_unix_server_cgroup(struct sock *sk,
							    struct sock *peer)
{
	struct hlist_node *first;
	struct task_struct *t;
	struct pid *pid;

	if (BPF_CORE_READ(sk, sk_type) == SF_SOCK_DGRAM)
		return BPF_CORE_READ(peer, sk_cgrp_data.cgroup);
	pid = BPF_CORE_READ(sk, sk_peer_pid);
	if (!pid)
		return NULL;
	first = BPF_CORE_READ(pid, tasks[0].first); /* PIDTYPE_PID */
	if (!first)
		return NULL;
	t = (void *)first - bpf_core_field_offset(struct task_struct, pid_links);
	return BPF_CORE_READ(t, cgroups, dfl_cgrp);
}

/*
 * The exit of a connect the hook allowed as the sandbox's own path: the
 * socket it reached must be one a process of the sandbox created. If not,
 * the name was swapped (a symbolic link to an outside socket, say): the
 * process is killed before the call returns, and the attempt recorded
 * with the name the outside socket was bound to.
 */
static __noinline int sf_unix_verify_connect(int fd)
{
	struct sf_unix_pending *p;
	struct sf_unix_pending pending;
	struct sf_unix_event *e;
	struct sf_counters *c;
	struct unix_address *a;
	struct sock *sk, *peer;
	__u64 cookie, pid_tgid, uid_gid;
	__u32 slot;
	void *ring;

	sk = sf_fd_unix_sock(fd);
	if (!sk)
		return 0;
	cookie = BPF_CORE_READ(sk, __sk_common.skc_cookie.counter);
	p = bpf_map_lookup_elem(&sf_unix_verify, &cookie);
	if (!p)
		return 0;
	pending = *p;
	bpf_map_delete_elem(&sf_unix_verify, &cookie);
	peer = BPF_CORE_READ((struct unix_sock *)sk, peer);
	if (!peer)
		return 0;
	if (sf_cgroup_below(sf_unix_server_cgroup(sk, peer), pending.level,
			    pending.sandbox))
		return 0;

	/* Decide (the kill), count, then try to record. */
	bpf_send_signal(SF_SIGKILL);
	c = bpf_map_lookup_elem(&sf_counters, &pending.sandbox);
	if (c)
		__sync_fetch_and_add(&c->denied, 1);
	slot = pending.ring;
	ring = bpf_map_lookup_elem(&sf_rings, &slot);
	e = ring ? bpf_ringbuf_reserve(ring, sizeof(*e), 0) : NULL;
	if (!e) {
		if (c)
			__sync_fetch_and_add(&c->events_lost, 1);
		return 0;
	}
	pid_tgid = bpf_get_current_pid_tgid();
	uid_gid = bpf_get_current_uid_gid();
	__builtin_memset(e, 0, sizeof(*e));
	e->net.type = SF_EVENT_UNIX;
	e->net.hook = SF_HOOK_CONNECT_UNIX;
	e->net.verdict = SF_VERDICT_DENY;
	e->net.reason = SF_REASON_UNIX_PEER_OUTSIDE;
	e->net.family = AF_UNIX;
	e->net.sock_type = BPF_CORE_READ(sk, sk_type);
	e->net.rule_id = SF_NO_RULE;
	e->net.generation = pending.generation;
	e->net.pid = (__u32)pid_tgid;
	e->net.tgid = pid_tgid >> 32;
	e->net.uid = (__u32)uid_gid;
	e->net.gid = uid_gid >> 32;
	e->net.boot_ns = bpf_ktime_get_boot_ns();
	e->net.sandbox = pending.sandbox;
	e->net.cgroup = bpf_get_current_cgroup_id();
	bpf_get_current_comm(e->net.comm, sizeof(e->net.comm));
	a = BPF_CORE_READ((struct unix_sock *)peer, addr);
	if (a) {
		struct sf_unix_key k = {};

		sf_unix_name((const void *)a +
				     bpf_core_field_offset(struct unix_address,
							   name),
			     BPF_CORE_READ(a, len), &k);
		e->len = k.len;
		e->abstract = k.abstract;
		__builtin_memcpy(e->name, k.name, SF_UNIX_NAME_MAX);
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/*
 * A successful bind() of fd: an AF_UNIX name bound inside a sandbox is
 * remembered with the binder's ancestry; bound anywhere else, the name is
 * forgotten (it is no longer the sandbox's). A function of its own, like
 * sf_unix_verify_connect(): the two large keys here and that one's frame
 * are never on the stack together.
 */
static __noinline int sf_unix_track_bind(int fd)
{
	struct sf_unix_key k = {};
	struct sf_unix_binder binder = {};
	struct unix_address *a;
	struct socket *sock;
	struct file *f;
	struct sock *sk;
	bool sandboxed = false;
	int level;

	f = sf_fd_file(bpf_get_current_task_btf(), fd);
	if (!f)
		return 0;
	/* Another thread may have put something else under the fd since. */
	if ((BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT) != S_IFSOCK)
		return 0;
	sock = BPF_CORE_READ(f, private_data);
	sk = BPF_CORE_READ(sock, sk);
	if (!sk || BPF_CORE_READ(sk, __sk_common.skc_family) != AF_UNIX)
		return 0;
	a = BPF_CORE_READ((struct unix_sock *)sk, addr);
	if (!a)
		return 0;
	sf_unix_name((const void *)a + bpf_core_field_offset(struct unix_address,
							      name),
		     BPF_CORE_READ(a, len), &k);
	if (!k.name[0] && !k.len)
		return 0;
	if (k.abstract)
		k.scope = BPF_CORE_READ(sk, __sk_common.skc_net.net, net_cookie);

	for (level = 0; level < SF_MAX_CGROUP_DEPTH; level++) {
		binder.ids[level] =
			bpf_get_current_ancestor_cgroup_id(level + 1);
		if (!binder.ids[level])
			break;
		if (bpf_map_lookup_elem(&sf_sandboxes, &binder.ids[level]))
			sandboxed = true;
	}
	if (sandboxed)
		bpf_map_update_elem(&sf_unix_bound, &k, &binder, BPF_ANY);
	else
		bpf_map_delete_elem(&sf_unix_bound, &k);
	return 0;
}

/*
 * Every successful bind() and connect() on the host: binds are tracked
 * (sf_unix_track_bind), and a connect the hooks let through as the
 * sandbox's own path is checked against the socket it reached
 * (sf_unix_verify_connect).
 */
SEC("tp_btf/sys_exit")
int BPF_PROG(sf_unix_bind_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *t;
	long nr;

	if (ret != 0)
		return 0;
	t = bpf_get_current_task_btf();
	if (BPF_CORE_READ(t, thread_info.status) & SF_TS_COMPAT) {
		nr = regs->orig_ax;
		if (nr == SF_NR_I386_CONNECT)
			return sf_unix_verify_connect((int)regs->bx);
		if (nr == SF_NR_I386_BIND)
			return sf_unix_track_bind((int)regs->bx);
		return 0;
	}
	nr = regs->orig_ax & ~SF_NR_X32_BIT;
	if (nr == SF_NR_CONNECT)
		return sf_unix_verify_connect((int)regs->di);
	if (nr == SF_NR_BIND)
		return sf_unix_track_bind((int)regs->di);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
