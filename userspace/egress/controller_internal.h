// What the egress controller's files share and nothing else sees: the
// hooks, how each attaches, and what a sandbox's Unix traits mean.
#ifndef SANDFENCE_EGRESS_CONTROLLER_INTERNAL_H_
#define SANDFENCE_EGRESS_CONTROLLER_INTERNAL_H_

#include <bpf/libbpf.h>

#include <cstdint>
#include <iterator>

#include "absl/strings/string_view.h"
#include "egress/egress_abi.h"
#include "egress/egress_controller.h"
#include "sf_egress.skel.h"
#include "sf_egress_unix.skel.h"

namespace sandfence {

inline constexpr uint32_t kUnixTraitFlags =
    SF_SB_UNIX_BROKER | SF_SB_UNIX_SCOPED | SF_SB_UNIX_TRACKED;

// Whether a sandbox with these flags needs the bind tracker: it says so,
// or (an earlier build's entry, or one not yet given its traits) its phase
// checks Unix sockets by name; and no supervisor brokers its paths.
inline bool ReliesOnBindTracker(uint32_t flags) {
  const uint32_t checked = SF_SB_RESTRICTED | SF_SB_UNIX_CHECKED;
  return ((flags & SF_SB_UNIX_TRACKED) || (flags & checked) == checked) &&
         !(flags & SF_SB_UNIX_BROKER);
}

// A sandbox's Unix traits count only where its phase checks Unix sockets;
// whether it relies on the bind tracker, in every phase (its binds are
// tracked before a phase checks them).
inline uint32_t WithUnixTraits(uint32_t flags, uint32_t traits) {
  const uint32_t checked = SF_SB_RESTRICTED | SF_SB_UNIX_CHECKED;
  flags |= traits & SF_SB_UNIX_TRACKED;
  return (flags & checked) == checked ? flags | traits : flags;
}

// The programs, by hook: their skeleton name and how they attach.
struct HookSpec {
  const char* hook;
  bpf_program* (*program)(sf_egress*);
  bpf_attach_type attach;
  // A sandbox without this hook is not enforced. The DNS reply-side hooks
  // only restore addresses: a sandbox adopted without them gets them
  // attached instead of being treated as unenforced.
  bool enforcing = true;
  // In the unix object (sf_egress_unix): only where the kernel has the
  // hooks (unix_program instead of program).
  bpf_program* (*unix_program)(sf_egress_unix*) = nullptr;
};

// The kernel's numbers (Linux 6.7): Debian 12's headers predate them.
inline constexpr bpf_attach_type kUnixConnect = static_cast<bpf_attach_type>(49);
inline constexpr bpf_attach_type kUnixSendmsg = static_cast<bpf_attach_type>(50);

inline const HookSpec kHookSpecs[] = {
    {"sock_create", [](sf_egress* s) { return s->progs.sf_sock_create; },
     BPF_CGROUP_INET_SOCK_CREATE},
    {"connect4", [](sf_egress* s) { return s->progs.sf_connect4; },
     BPF_CGROUP_INET4_CONNECT},
    {"connect6", [](sf_egress* s) { return s->progs.sf_connect6; },
     BPF_CGROUP_INET6_CONNECT},
    {"sendmsg4", [](sf_egress* s) { return s->progs.sf_sendmsg4; },
     BPF_CGROUP_UDP4_SENDMSG},
    {"sendmsg6", [](sf_egress* s) { return s->progs.sf_sendmsg6; },
     BPF_CGROUP_UDP6_SENDMSG},
    {"skb_egress", [](sf_egress* s) { return s->progs.sf_skb_egress; },
     BPF_CGROUP_INET_EGRESS},
    {"recvmsg4", [](sf_egress* s) { return s->progs.sf_recvmsg4; },
     BPF_CGROUP_UDP4_RECVMSG, false},
    {"recvmsg6", [](sf_egress* s) { return s->progs.sf_recvmsg6; },
     BPF_CGROUP_UDP6_RECVMSG, false},
    {"getpeername4", [](sf_egress* s) { return s->progs.sf_getpeername4; },
     BPF_CGROUP_INET4_GETPEERNAME, false},
    {"getpeername6", [](sf_egress* s) { return s->progs.sf_getpeername6; },
     BPF_CGROUP_INET6_GETPEERNAME, false},
    {"connect_unix", nullptr, kUnixConnect, true,
     [](sf_egress_unix* s) { return s->progs.sf_connect_unix; }},
    {"sendmsg_unix", nullptr, kUnixSendmsg, true,
     [](sf_egress_unix* s) { return s->progs.sf_sendmsg_unix; }},
};
static_assert(std::size(kHookSpecs) == std::size(kEgressHooks),
              "every hook of kEgressHooks has a spec");

inline const HookSpec* FindHookSpec(absl::string_view hook) {
  for (const HookSpec& h : kHookSpecs) {
    if (hook == h.hook) return &h;
  }
  return nullptr;
}

}  // namespace sandfence

#endif  // SANDFENCE_EGRESS_CONTROLLER_INTERNAL_H_
