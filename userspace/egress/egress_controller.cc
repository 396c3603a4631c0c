#include "egress/egress_controller.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "common/bpf_handles.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "egress/egress_rules.h"
#include "host/bpf_lsm.h"
#include "sf_egress.skel.h"
#include "sf_egress_cut.skel.h"
#include "sf_egress_unix.skel.h"
#include "sf_egress_unix_lsm.skel.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

namespace sandfence {
namespace {

constexpr uint32_t kUnixTraitFlags =
    SF_SB_UNIX_BROKER | SF_SB_UNIX_SCOPED | SF_SB_UNIX_TRACKED;

// Whether a sandbox with these flags needs the bind tracker: it says so,
// or (an earlier build's entry, or one not yet given its traits) its phase
// checks Unix sockets by name; and no supervisor brokers its paths.
bool ReliesOnBindTracker(uint32_t flags) {
  const uint32_t checked = SF_SB_RESTRICTED | SF_SB_UNIX_CHECKED;
  return ((flags & SF_SB_UNIX_TRACKED) || (flags & checked) == checked) &&
         !(flags & SF_SB_UNIX_BROKER);
}

// A sandbox's Unix traits count only where its phase checks Unix sockets;
// whether it relies on the bind tracker, in every phase (its binds are
// tracked before a phase checks them).
uint32_t WithUnixTraits(uint32_t flags, uint32_t traits) {
  const uint32_t checked = SF_SB_RESTRICTED | SF_SB_UNIX_CHECKED;
  flags |= traits & SF_SB_UNIX_TRACKED;
  return (flags & checked) == checked ? flags | traits : flags;
}

// A kernel that refuses the programs will refuse them on every retry:
// rejected, not malformed (the policy is fine) nor unavailable.
absl::Status LoadError(int err, absl::string_view what) {
  if (err == EPERM || err == EACCES) {
    return absl::PermissionDeniedError(absl::StrCat(
        what, ": ", std::strerror(err),
        " (loading BPF programs needs root: CAP_BPF, CAP_NET_ADMIN)"));
  }
  return Rejected(absl::StrCat(
      what, ": ", std::strerror(err), " (errno ", err,
      "): this kernel cannot run sandfence's egress programs; the verifier's "
      "log above says why"));
}

// Attaching to a cgroup: as root, EPERM is the cgroup refusing another
// program on that hook, not missing privileges; as good as permanent.
absl::Status AttachError(int err, absl::string_view what) {
  // Out of file descriptors or memory (each sandbox's links are fds): the
  // host's limits, not the kernel's abilities, and retryable once rollouts
  // end.
  if (err == EMFILE || err == ENFILE || err == ENOMEM) {
    return Unavailable(absl::StrCat(
        what, ": ", std::strerror(err), " (errno ", err,
        "): each sandbox holds one link fd per hook; raise the process's "
        "RLIMIT_NOFILE (LimitNOFILE= in the unit) or end rollouts"));
  }
  if (err == EPERM && ::geteuid() == 0) {
    return Rejected(absl::StrCat(
        what, ": ", std::strerror(err), " (errno ", err,
        "): the kernel refused another program on this cgroup hook, "
        "usually because one is attached there exclusively (without "
        "BPF_F_ALLOW_MULTI, e.g. by another agent); sandfence's programs "
        "cannot run beside it"));
  }
  return LoadError(err, what);
}

// Whether cgroup_skb programs may call bpf_get_netns_cookie (Linux 6.14+),
// found by loading one that does. libbpf_probe_bpf_helper() is not enough:
// it takes any verifier message but "unknown func" for a yes, and 6.12 says
// "program of this type cannot use helper", so the real program then failed
// to load there.
bool SkbHasNetnsCookie() {
  // {code, dst_reg, src_reg, off, imm}; r1 is the context at entry.
  const bpf_insn insns[] = {
      {BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_netns_cookie},
      {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1},  // return 1 (pass)
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
  };
  UniqueFd fd(bpf_prog_load(BPF_PROG_TYPE_CGROUP_SKB, "sf_probe_cookie", "GPL",
                            insns, sizeof(insns) / sizeof(insns[0]), nullptr));
  return static_cast<bool>(fd);
}

template <typename K>
uint32_t MaxKeyGeneration(int map_fd) {
  uint32_t max = 0;
  K key{};
  K next{};
  const K* prev = nullptr;
  while (bpf_map_get_next_key(map_fd, prev, &next) == 0) {
    max = std::max(max, next.generation);
    key = next;
    prev = &key;
  }
  return max;
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
constexpr bpf_attach_type kUnixConnect = static_cast<bpf_attach_type>(49);
constexpr bpf_attach_type kUnixSendmsg = static_cast<bpf_attach_type>(50);

const HookSpec kHookSpecs[] = {
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

}  // namespace

// A minimal program for BPF_CGROUP_UNIX_CONNECT loads only where the attach
// type exists.
bool KernelHasUnixHooks() {
  const bpf_insn insns[] = {
      {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1},  // return 1 (allow)
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
  };
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = kUnixConnect);
  UniqueFd fd(bpf_prog_load(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, "sf_probe_unix",
                            "GPL", insns, sizeof(insns) / sizeof(insns[0]),
                            &opts));
  return static_cast<bool>(fd);
}

bool KernelChecksUnixSockets() {
  return KernelHasUnixHooks() || ProbeBpfLsm().ok();
}

// bpf_sock_destroy is a kfunc: the kernel has it when its BTF names it.
bool KernelCanCutSockets() {
  static const bool can = [] {
    btf* vmlinux = btf__load_vmlinux_btf();
    if (vmlinux == nullptr) return false;
    const bool found =
        btf__find_by_name_kind(vmlinux, "bpf_sock_destroy", BTF_KIND_FUNC) > 0;
    btf__free(vmlinux);
    return found;
  }();
  return can;
}

namespace {

const HookSpec* FindHookSpec(absl::string_view hook) {
  for (const HookSpec& h : kHookSpecs) {
    if (hook == h.hook) return &h;
  }
  return nullptr;
}

UniqueFd Dup(int fd) {
  return UniqueFd(fd < 0 ? -1 : ::fcntl(fd, F_DUPFD_CLOEXEC, 0));
}

uint32_t ProgId(int fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return 0;
  return info.id;
}

uint32_t LinkProgId(int fd) {
  bpf_link_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return 0;
  return info.prog_id;
}

// A directory's entries (names only, no dot files).
std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

absl::StatusOr<uint64_t> CurrentNetnsCookie() {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) return ErrnoError(errno, "socket");
  uint64_t cookie = 0;
  socklen_t len = sizeof(cookie);
  if (::getsockopt(s.get(), SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) != 0) {
    if (errno == ENOPROTOOPT) {
      return Rejected(
          "this kernel has no SO_NETNS_COOKIE socket option (Linux 5.14+): "
          "the egress programs need the host's network namespace cookie to "
          "tell it from a sandbox's own");
    }
    return ErrnoError(errno, "getsockopt(SO_NETNS_COOKIE)");
  }
  return cookie;
}

absl::StatusOr<std::unique_ptr<EgressController>> EgressController::Create(
    HostState* host, const EgressOptions& options) {
  std::unique_ptr<EgressController> c(new EgressController(host));
  c->unix_bind_tracker_ = options.unix_bind_tracker;
  if (absl::Status s = c->LoadOrOpen(); !s.ok()) return s;
  if (absl::Status s = c->CreateRing(options.ring_bytes); !s.ok()) return s;
  return c;
}

const EgressController::MapSlot EgressController::kMapSlots[] = {
    {"sf_sandboxes", &Maps::sandboxes},
    {"sf_counters", &Maps::counters},
    {"sf_seen", &Maps::seen},
    {"sf_exact4", &Maps::exact4},
    {"sf_exact6", &Maps::exact6},
    {"sf_cidr4", &Maps::cidr4},
    {"sf_cidr6", &Maps::cidr6},
    {"sf_rings", &Maps::rings},
    {"sf_dns_targets", &Maps::dns_targets},
    {"sf_learned4", &Maps::learned4},
    {"sf_learned6", &Maps::learned6},
    {"sf_outbound", &Maps::outbound},
    {"sf_levels", &Maps::levels},
    {"sf_doomed", &Maps::doomed},
    {"sf_budgets", &Maps::budgets},
    {"sf_budget_dests", &Maps::budget_dests},
    {"sf_budget_on", &Maps::budget_on},
};

const EgressController::MapSlot EgressController::kUnixMapSlots[] = {
    {"sf_unix_rules", &Maps::unix_rules},
    {"sf_unix_protected", &Maps::unix_protected},
    {"sf_unix_bound", &Maps::unix_bound},
    {"sf_unix_seen", &Maps::unix_seen},
    {"sf_unix_brokered", &Maps::unix_brokered},
};

const EgressController::MapSlot EgressController::kUnixLsmMapSlots[] = {
    {"sf_unix_rules", &Maps::unix_rules},
    {"sf_unix_protected", &Maps::unix_protected},
    {"sf_unix_seen", &Maps::unix_seen},
};

absl::string_view EgressController::unix_enforcer_name() const {
  switch (unix_enforcer_) {
    case UnixEnforcer::kCgroupHooks:
      return "cgroup hooks";
    case UnixEnforcer::kLsm:
      return "BPF LSM";
    case UnixEnforcer::kNone:
      break;
  }
  return "none";
}

std::vector<const char*> EgressController::UnixHostProgs() const {
  switch (unix_enforcer_) {
    case UnixEnforcer::kCgroupHooks:
      return {kUnixBindProg};
    case UnixEnforcer::kLsm:
      return {kUnixLsmConnectProg, kUnixLsmSendProg};
    case UnixEnforcer::kNone:
      break;
  }
  return {};
}

absl::Status EgressController::LoadOrOpen() {
  size_t elf_size = 0, unix_elf_size = 0;
  const void* elf = sf_egress::elf_bytes(&elf_size);
  const void* unix_elf = sf_egress_unix::elf_bytes(&unix_elf_size);
  build_ =
      Sha256Hex(absl::StrCat(
                    absl::string_view(static_cast<const char*>(elf), elf_size),
                    absl::string_view(static_cast<const char*>(unix_elf),
                                      unix_elf_size)))
          .substr(0, 16);
  const bool unix_hooks =
      host_->CachedProbe("unix_hooks", [] {
              return KernelHasUnixHooks()
                         ? absl::OkStatus()
                         : absl::UnavailableError("no cgroup unix hooks");
            }).ok();
  if (unix_hooks) {
    unix_enforcer_ = UnixEnforcer::kCgroupHooks;
  } else if (absl::Status lsm = host_->BpfLsm(); lsm.ok()) {
    unix_enforcer_ = UnixEnforcer::kLsm;
  } else {
    unix_unavailable_ = absl::StrCat(
        "this kernel has no cgroup connect_unix/sendmsg_unix hooks (Linux "
        "6.7+) and BPF LSM does not run here (",
        lsm.message(), ")");
  }
  // One process at a time loads and pins; the others open what it pinned.
  HostState::Lock lock = host_->Exclusive();
  const std::string progs_dir =
      absl::StrCat(host_->pins().ProgsDir(), "/", build_);
  if (host_->pinned()) {
    bool complete = true;
    Maps maps;
    absl::flat_hash_map<std::string, UniqueFd> progs;
    auto open_map = [&](const MapSlot& m) {
      UniqueFd fd(
          bpf_obj_get(host_->pins().Map(m.name).c_str()));
      if (!fd) complete = false;
      maps.*(m.field) = std::move(fd);
    };
    auto open_prog = [&](const std::string& name) {
      UniqueFd fd(bpf_obj_get(absl::StrCat(progs_dir, "/", name).c_str()));
      if (!fd) complete = false;
      progs.emplace(name, std::move(fd));
    };
    for (const MapSlot& m : kMapSlots) open_map(m);
    if (unix_enforcer_ == UnixEnforcer::kCgroupHooks) {
      for (const MapSlot& m : kUnixMapSlots) open_map(m);
    } else if (unix_enforcer_ == UnixEnforcer::kLsm) {
      for (const MapSlot& m : kUnixLsmMapSlots) open_map(m);
    }
    for (const char* prog : UnixHostProgs()) open_prog(prog);
    for (const HookSpec& h : kHookSpecs) {
      if (h.unix_program == nullptr ||
          unix_enforcer_ == UnixEnforcer::kCgroupHooks) {
        open_prog(h.hook);
      }
    }
    if (complete) {
      maps_ = std::move(maps);
      progs_ = std::move(progs);
      if (absl::Status s = LoadCut(progs_dir); !s.ok()) return s;
      return AttachUnixHostProgs();
    }
  }

  Skeleton<sf_egress> skel(sf_egress::open());
  if (!skel) return LoadError(errno, "open the egress programs");
  absl::StatusOr<uint64_t> cookie = CurrentNetnsCookie();
  if (!cookie.ok()) return cookie.status();
  skel->rodata->sf_host_netns = *cookie;
  skel->rodata->sf_skb_has_netns_cookie = SkbHasNetnsCookie();
  skel->rodata->sf_mark_outbound = KernelCanCutSockets();
  if (absl::Status s = SetPinPaths(skel->obj); !s.ok()) return s;
  if (int err = sf_egress::load(skel.get()); err != 0) {
    if (host_->pinned() && (err == -EINVAL || -err == EINVAL)) {
      return Rejected(absl::StrCat(
          "the egress maps pinned under ", host_->pins().set(),
          " do not match this sandfence build's (libbpf could not reuse "
          "them); `sandfence daemon --cleanup` removes them"));
    }
    return LoadError(errno, "load the egress programs");
  }
  for (const MapSlot& m : kMapSlots) {
    bpf_map* map = bpf_object__find_map_by_name(skel->obj, m.name);
    maps_.*(m.field) = Dup(map == nullptr ? -1 : bpf_map__fd(map));
    if (!(maps_.*(m.field))) {
      return ErrnoError(errno, absl::StrCat("map ", m.name));
    }
  }
  if (absl::Status s = SeedShallowestLevel(); !s.ok()) return s;
  if (host_->pinned()) {
    if (absl::Status s = MakeDirs(progs_dir); !s.ok()) return s;
  }
  auto keep_prog = [&](const std::string& name, int prog_fd) {
    return KeepProg(progs_dir, name, prog_fd);
  };
  for (const HookSpec& h : kHookSpecs) {
    if (h.unix_program != nullptr) continue;
    if (absl::Status s =
            keep_prog(h.hook, bpf_program__fd(h.program(skel.get())));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = LoadUnix(progs_dir); !s.ok()) return s;
  if (absl::Status s = LoadCut(progs_dir); !s.ok()) return s;
  return AttachUnixHostProgs();
}

absl::Status EgressController::LoadCut(const std::string& progs_dir) {
  // Reading the kernel's BTF costs a tenth of a second: once per set.
  const bool can_cut =
      host_->CachedProbe("cut", [] {
              return KernelCanCutSockets()
                         ? absl::OkStatus()
                         : absl::UnavailableError("no bpf_sock_destroy");
            }).ok();
  if (!can_cut) {
    cut_unavailable_ =
        "this kernel cannot destroy sockets from BPF (bpf_sock_destroy, "
        "Linux 6.5+)";
    return absl::OkStatus();
  }
  // Pinned beside the hooks by the first process of the set; the others
  // only make their own iterator links.
  const std::string tcp_pin = absl::StrCat(progs_dir, "/", kCutTcpProg);
  const std::string udp_pin = absl::StrCat(progs_dir, "/", kCutUdpProg);
  const std::string req_pin =
      host_->pinned() ? host_->pins().Map("sf_cut_req") : "";
  auto link_iters = [&](int tcp_fd, int udp_fd, int req_fd) -> absl::Status {
    cut_tcp_ = UniqueFd(bpf_link_create(tcp_fd, 0, BPF_TRACE_ITER, nullptr));
    cut_udp_ = UniqueFd(bpf_link_create(udp_fd, 0, BPF_TRACE_ITER, nullptr));
    cut_req_ = Dup(req_fd);
    if (!cut_tcp_ || !cut_udp_ || !cut_req_) {
      return ErrnoError(errno, "keep the cut iterators");
    }
    return absl::OkStatus();
  };
  if (host_->pinned()) {
    UniqueFd tcp(bpf_obj_get(tcp_pin.c_str()));
    UniqueFd udp(bpf_obj_get(udp_pin.c_str()));
    UniqueFd req(bpf_obj_get(req_pin.c_str()));
    if (tcp && udp && req) return link_iters(tcp.get(), udp.get(), req.get());
  }
  Skeleton<sf_egress_cut> skel(sf_egress_cut::open());
  if (!skel) return LoadError(errno, "open the cut iterators");
  absl::StatusOr<uint64_t> cookie = CurrentNetnsCookie();
  if (!cookie.ok()) return cookie.status();
  skel->rodata->sf_host_netns = *cookie;
  // Every map it shares with the hooks is theirs, by fd: the same
  // sandboxes, rules and marks. Only its request map is its own.
  bpf_map* map;
  bpf_object__for_each_map(map, skel->obj) {
    for (const MapSlot& m : kMapSlots) {
      if (std::strcmp(bpf_map__name(map), m.name) != 0) continue;
      if (int err = bpf_map__reuse_fd(map, (maps_.*(m.field)).get());
          err != 0) {
        return ErrnoError(-err, absl::StrCat("share map ", m.name));
      }
    }
  }
  if (sf_egress_cut::load(skel.get()) != 0) {
    // The kernel has the kfunc but refuses the programs: switches say
    // "not cut" with this, never pretend.
    cut_unavailable_ =
        absl::StrCat("this kernel refuses sandfence's socket iterators: ",
                     std::strerror(errno));
    return absl::OkStatus();
  }
  const int tcp_fd = bpf_program__fd(skel->progs.sf_cut_tcp);
  const int udp_fd = bpf_program__fd(skel->progs.sf_cut_udp);
  const int req_fd = bpf_map__fd(skel->maps.sf_cut_req);
  if (host_->pinned()) {
    for (const auto& [fd, pin] : {std::pair<int, const std::string&>(
                                      tcp_fd, tcp_pin),
                                  {udp_fd, udp_pin},
                                  {req_fd, req_pin}}) {
      ::unlink(pin.c_str());  // a half-pinned cut of a process that died
      if (bpf_obj_pin(fd, pin.c_str()) != 0) {
        return ErrnoError(errno, absl::StrCat("pin ", pin));
      }
    }
  }
  return link_iters(tcp_fd, udp_fd, req_fd);
}

absl::StatusOr<std::vector<CutConnection>> EgressController::CutConnections(
    const CgroupRef& cgroup, int netns_fd) {
  if (!cut_tcp_) return absl::FailedPreconditionError(cut_unavailable_);
  std::vector<CutConnection> out;
  if (absl::Status s = CutHere(cgroup, &out); !s.ok()) return s;
  if (netns_fd < 0) return out;
  // An iterator walks the namespace its creator is in: a thread of our
  // own enters the sandbox's (setns moves only the calling thread).
  absl::Status in_netns;
  std::thread walker([&] {
    if (::setns(netns_fd, CLONE_NEWNET) != 0) {
      in_netns = ErrnoError(errno, "cut: enter the sandbox's netns");
      return;
    }
    in_netns = CutHere(cgroup, &out);
  });
  walker.join();
  if (!in_netns.ok()) return in_netns;
  return out;
}

absl::Status EgressController::CutHere(const CgroupRef& cgroup,
                                       std::vector<CutConnection>* out) {
  // The programs are shared by every thread of every driver: each asks
  // under its own thread id, which the iterator runs as.
  const uint32_t tid = static_cast<uint32_t>(::gettid());
  const sf_cut_request req{
      .sandbox = cgroup.id, .level = cgroup.level, .pad = 0};
  if (bpf_map_update_elem(cut_req_.get(), &tid, &req, BPF_ANY) != 0) {
    return ErrnoError(errno, "cut: the request");
  }
  struct Drop {
    int fd;
    uint32_t tid;
    ~Drop() { bpf_map_delete_elem(fd, &tid); }
  } drop{cut_req_.get(), tid};
  for (int link : {cut_tcp_.get(), cut_udp_.get()}) {
    UniqueFd iter(bpf_iter_create(link));
    if (!iter) return ErrnoError(errno, "cut: the iterator");
    std::string data;
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::read(iter.get(), chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError(errno, "cut: read the iterator");
      if (n == 0) break;
      data.append(chunk, static_cast<size_t>(n));
    }
    if (data.size() % sizeof(sf_cut_entry) != 0) {
      return absl::InternalError(
          absl::StrCat("cut: the iterator wrote ", data.size(),
                       " bytes, not a whole number of entries"));
    }
    for (size_t at = 0; at < data.size(); at += sizeof(sf_cut_entry)) {
      sf_cut_entry e;
      std::memcpy(&e, data.data() + at, sizeof(e));
      CutConnection c;
      c.sandbox = e.sandbox;
      c.peer = IpAddress::FromBytes(e.family == AF_INET6 ? AF_INET6 : AF_INET,
                                    reinterpret_cast<const uint8_t*>(e.addr));
      c.port = e.port;
      c.protocol = e.protocol;
      c.tcp_state = e.state;
      c.reason = static_cast<sf_reason>(e.reason);
      c.destroy_errno = e.destroy_err < 0 ? -e.destroy_err : 0;
      out->push_back(c);
    }
  }
  return absl::OkStatus();
}

absl::Status EgressController::KeepProg(const std::string& progs_dir,
                                        const std::string& name, int prog_fd) {
  UniqueFd fd = Dup(prog_fd);
  if (!fd) return ErrnoError(errno, absl::StrCat("program ", name));
  if (host_->pinned()) {
    const std::string path = absl::StrCat(progs_dir, "/", name);
    ::unlink(path.c_str());  // a half-pinned set from a process that died
    if (bpf_obj_pin(fd.get(), path.c_str()) != 0) {
      return ErrnoError(errno, absl::StrCat("pin ", path));
    }
  }
  progs_.emplace(name, std::move(fd));
  return absl::OkStatus();
}

absl::Status EgressController::LoadUnix(const std::string& progs_dir) {
  if (unix_enforcer_ == UnixEnforcer::kNone) return absl::OkStatus();
  auto keep_prog = [&](const std::string& name, int prog_fd) {
    return KeepProg(progs_dir, name, prog_fd);
  };
  auto keep_maps = [&](bpf_object* obj,
                       absl::Span<const MapSlot> slots) -> absl::Status {
    for (const MapSlot& m : slots) {
      bpf_map* map = bpf_object__find_map_by_name(obj, m.name);
      maps_.*(m.field) = Dup(map == nullptr ? -1 : bpf_map__fd(map));
      if (!(maps_.*(m.field))) {
        return ErrnoError(errno, absl::StrCat("map ", m.name));
      }
    }
    return absl::OkStatus();
  };
  // The Unix enforcers share the egress maps: sandboxes, counters and
  // rings are one for every hook.
  auto share_maps = [&](bpf_map* rings, bpf_map* sandboxes,
                        bpf_map* counters) -> absl::Status {
    const std::pair<bpf_map*, int> shared[] = {
        {rings, maps_.rings.get()},
        {sandboxes, maps_.sandboxes.get()},
        {counters, maps_.counters.get()},
    };
    for (const auto& [map, fd] : shared) {
      if (int err = bpf_map__reuse_fd(map, fd); err != 0) {
        return ErrnoError(-err, absl::StrCat("share map ", bpf_map__name(map)));
      }
    }
    return absl::OkStatus();
  };
  // The kernel has the hooks but refuses the programs: every phase that
  // checks Unix sockets is refused with this reason, never run unchecked.
  auto refused = [&](absl::string_view what) {
    unix_unavailable_ = absl::StrCat(
        "this kernel refuses sandfence's unix socket programs (", what,
        "): ", std::strerror(errno), " (the verifier's log above says why)");
    unix_enforcer_ = UnixEnforcer::kNone;
    return absl::OkStatus();
  };

  if (unix_enforcer_ == UnixEnforcer::kLsm) {
    Skeleton<sf_egress_unix_lsm> lsm(sf_egress_unix_lsm::open());
    if (!lsm) return LoadError(errno, "open the unix socket LSM programs");
    if (absl::Status s = share_maps(lsm->maps.sf_rings, lsm->maps.sf_sandboxes,
                                    lsm->maps.sf_counters);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = SetPinPaths(lsm->obj, /*skip_shared=*/true); !s.ok()) {
      return s;
    }
    if (sf_egress_unix_lsm::load(lsm.get()) != 0) return refused("BPF LSM");
    if (absl::Status s = keep_maps(lsm->obj, kUnixLsmMapSlots); !s.ok()) {
      return s;
    }
    if (absl::Status s =
            keep_prog(kUnixLsmConnectProg,
                      bpf_program__fd(lsm->progs.sf_lsm_unix_stream_connect));
        !s.ok()) {
      return s;
    }
    return keep_prog(kUnixLsmSendProg,
                     bpf_program__fd(lsm->progs.sf_lsm_unix_may_send));
  }

  Skeleton<sf_egress_unix> unix_skel(sf_egress_unix::open());
  if (!unix_skel) return LoadError(errno, "open the unix socket programs");
  bpf_program__set_expected_attach_type(unix_skel->progs.sf_connect_unix,
                                        kUnixConnect);
  bpf_program__set_expected_attach_type(unix_skel->progs.sf_sendmsg_unix,
                                        kUnixSendmsg);
  if (absl::Status s =
          share_maps(unix_skel->maps.sf_rings, unix_skel->maps.sf_sandboxes,
                     unix_skel->maps.sf_counters);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = SetPinPaths(unix_skel->obj, /*skip_shared=*/true);
      !s.ok()) {
    return s;
  }
  if (sf_egress_unix::load(unix_skel.get()) != 0) {
    return refused("cgroup hooks");
  }
  if (absl::Status s = keep_maps(unix_skel->obj, kUnixMapSlots); !s.ok()) {
    return s;
  }
  for (const HookSpec& h : kHookSpecs) {
    if (h.unix_program == nullptr) continue;
    if (absl::Status s =
            keep_prog(h.hook, bpf_program__fd(h.unix_program(unix_skel.get())));
        !s.ok()) {
      return s;
    }
  }
  return keep_prog(kUnixBindProg,
                   bpf_program__fd(unix_skel->progs.sf_unix_bind_exit));
}

absl::Status EgressController::SetPinPaths(bpf_object* obj, bool skip_shared) {
  if (!host_->pinned()) return absl::OkStatus();
  if (absl::Status s = MakeDirs(host_->pins().MapsDir()); !s.ok()) return s;
  // libbpf reuses a compatible pinned map of the same name, or creates and
  // pins it: the rules and counters of running sandboxes survive.
  bpf_map* map;
  bpf_object__for_each_map(map, obj) {
    if (bpf_map__is_internal(map)) continue;
    if (skip_shared && !absl::StartsWith(bpf_map__name(map), "sf_unix_")) {
      continue;
    }
    const std::string path =
        host_->pins().Map(bpf_map__name(map));
    if (bpf_map__set_pin_path(map, path.c_str()) != 0) {
      return ErrnoError(errno, absl::StrCat("pin path ", path));
    }
  }
  return absl::OkStatus();
}

absl::Status EgressController::AttachUnixHostProgs() {
  // One link per program and host on a pinned host (pinned, so that it runs
  // while any sandbox may need it, whichever process attached it); one per
  // controller otherwise. A pinned link of an earlier build stays: it
  // shares these maps (libbpf refused the load if their layout changed).
  for (const char* prog : UnixHostProgs()) {
    // The bind tracker only while a sandbox needs it (UpdateBindTracker).
    if (absl::string_view(prog) == kUnixBindProg) continue;
    absl::StatusOr<UniqueFd> link = AttachHostProg(prog);
    if (!link.ok()) return link.status();
    unix_host_links_.push_back(*std::move(link));
  }
  return UpdateBindTracker();
}

absl::StatusOr<UniqueFd> EgressController::AttachHostProg(const char* prog) {
  const std::string pin = host_->pins().HostLink(prog);
  if (host_->pinned()) {
    UniqueFd existing(bpf_obj_get(pin.c_str()));
    if (existing) return existing;
  }
  // Tracing and LSM programs alike attach through raw_tracepoint_open.
  UniqueFd link(bpf_raw_tracepoint_open(nullptr, prog_fd(prog)));
  if (!link) {
    return LoadError(errno,
                     absl::StrCat("attach the unix socket program ", prog,
                                  " (", unix_enforcer_name(), ")"));
  }
  if (host_->pinned()) {
    if (absl::Status s = MakeDirs(host_->pins().HostLinksDir()); !s.ok()) {
      return s;
    }
    if (bpf_obj_pin(link.get(), pin.c_str()) != 0) {
      return ErrnoError(errno, absl::StrCat("pin ", pin));
    }
  }
  return link;
}

bool EgressController::BindTrackerNeeded() const {
  for (const KernelSandbox& k : KernelSandboxes()) {
    if (ReliesOnBindTracker(k.flags)) return true;
  }
  return false;
}

bool EgressController::holds_unix_bind_tracker() const {
  absl::MutexLock lock(&tracker_mu_);
  return static_cast<bool>(bind_tracker_link_);
}

absl::Status EgressController::UpdateBindTracker(bool attach) {
  if (!unix_bind_tracker_ || unix_enforcer_ != UnixEnforcer::kCgroupHooks) {
    return absl::OkStatus();
  }
  // The host's sandboxes decide, whichever process owns them: one process
  // at a time attaches or detaches (a driver without the tracker never
  // does).
  HostState::Lock host_lock = host_->Exclusive();
  absl::MutexLock lock(&tracker_mu_);
  const std::string pin = host_->pins().HostLink(kUnixBindProg);
  if (attach || BindTrackerNeeded()) {
    if (bind_tracker_link_) {
      // Pinned again if another process took the pin away: the next
      // process must find it.
      struct stat st {};
      if (host_->pinned() && ::stat(pin.c_str(), &st) != 0 &&
          bpf_obj_pin(bind_tracker_link_.get(), pin.c_str()) != 0) {
        return ErrnoError(errno, absl::StrCat("pin ", pin));
      }
      return absl::OkStatus();
    }
    absl::StatusOr<UniqueFd> link = AttachHostProg(kUnixBindProg);
    if (!link.ok()) return link.status();
    bind_tracker_link_ = *std::move(link);
    return absl::OkStatus();
  }
  // Nobody needs it: nothing taxes the host's system calls for nobody.
  if (host_->pinned()) ::unlink(pin.c_str());
  bind_tracker_link_.reset();
  return absl::OkStatus();
}

void EgressController::DetachHostProgs() {
  for (const char* prog : UnixHostProgs()) {
    if (!unix_bind_tracker_ && absl::string_view(prog) == kUnixBindProg) {
      continue;
    }
    if (host_->pinned()) ::unlink(host_->pins().HostLink(prog).c_str());
  }
  unix_host_links_.clear();
  absl::MutexLock lock(&tracker_mu_);
  bind_tracker_link_.reset();
}

absl::Status EgressController::CheckUnix(const CompiledPhase& phase) const {
  if (!phase.restricted() || !phase.unix_checked || unix_checks()) {
    return absl::OkStatus();
  }
  return Rejected(absl::StrCat(
      "phase \"", phase.name, "\" checks Unix sockets, but ", unix_unavailable_,
      "; give the phase unix { mode: UNCHECKED } to run it with Unix "
      "sockets unjudged (the record says so)"));
}

absl::Status EgressController::ProtectUnixName(const UnixName& name) {
  if (!unix_checks()) return absl::OkStatus();  // nothing judges names here
  const sf_unix_key key = UnixKey(name, 0);
  const uint8_t one = 1;
  if (bpf_map_update_elem(maps_.unix_protected.get(), &key, &one, BPF_ANY) !=
      0) {
    return MapWriteError(errno, "sf_unix_protected");
  }
  return absl::OkStatus();
}

absl::Status EgressController::CreateRing(uint32_t ring_bytes) {
  ring_.reset(CreateNamedMap(BPF_MAP_TYPE_RINGBUF, "sf_events", 0, 0,
                             ring_bytes));
  if (!ring_) {
    if (errno == EINVAL) {
      return absl::InvalidArgumentError(
          absl::StrCat("ring buffer size ", ring_bytes,
                       " is not a power of two of at least a page"));
    }
    return ErrnoError(errno, "create the event ring");
  }
  const uint32_t slot = host_->slot();
  const int fd = ring_.get();
  if (bpf_map_update_elem(maps_.rings.get(), &slot, &fd, BPF_ANY) != 0) {
    return ErrnoError(errno,
                      absl::StrCat("install the event ring in slot ", slot));
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> RingOfMapSlot(int rings_fd, uint32_t slot) {
  uint32_t id = 0;
  if (bpf_map_lookup_elem(rings_fd, &slot, &id) != 0) {
    return absl::NotFoundError(absl::StrCat("no ring in slot ", slot));
  }
  UniqueFd fd(bpf_map_get_fd_by_id(id));
  if (!fd) return ErrnoError(errno, absl::StrCat("open ring ", id));
  return fd;
}

absl::StatusOr<UniqueFd> EgressController::RingOfSlot(uint32_t slot) const {
  return RingOfMapSlot(maps_.rings.get(), slot);
}

void EgressController::ClearSlot(uint32_t slot) {
  if (slot != host_->slot()) bpf_map_delete_elem(maps_.rings.get(), &slot);
}

EgressController::~EgressController() {
  ReleaseDeletesForTest();
  absl::MutexLock lock(&mu_);
  if (host_->pinned()) {
    // The sandboxes stay enforced. Their events keep going to this
    // process's ring, which stays in its slot for a successor to read; a
    // process that leaves nothing behind takes its ring along.
    if (sandboxes_.empty()) {
      const uint32_t slot = host_->slot();
      bpf_map_delete_elem(maps_.rings.get(), &slot);
    }
    return;
  }
  for (auto& [id, state] : sandboxes_) {
    Detach(id, state);
    DeleteState(state);
    DeleteLearned(state);
    bpf_map_delete_elem(maps_.dns_targets.get(), &id);
    bpf_map_delete_elem(maps_.counters.get(), &id);
    budget_maps().Delete(id);
  }
}

int EgressController::prog_fd(absl::string_view hook) const {
  auto it = progs_.find(hook);
  return it == progs_.end() ? -1 : it->second.get();
}

std::string EgressController::LinkDir(uint64_t cgroup_id) const {
  return host_->pins().SandboxLinksDir(cgroup_id);
}

absl::Status EgressController::SeedShallowestLevel() {
  const uint32_t zero = 0;
  sf_levels levels{};
  if (bpf_map_lookup_elem(maps_.levels.get(), &zero, &levels) != 0) {
    return ErrnoError(errno, "read sf_levels");
  }
  uint64_t key = 0;
  if (levels.shallowest != 0 ||
      bpf_map_get_next_key(maps_.sandboxes.get(), nullptr, &key) != 0) {
    return absl::OkStatus();  // set already, or no sandbox yet
  }
  // Sandboxes whose levels nobody wrote down: walk them all.
  levels.shallowest = 1;
  if (bpf_map_update_elem(maps_.levels.get(), &zero, &levels, BPF_ANY) != 0) {
    return ErrnoError(errno, "write sf_levels");
  }
  return absl::OkStatus();
}

absl::Status EgressController::LowerShallowestLevel(uint32_t level) {
  // A level counted inside a cgroup namespace is at most the kernel's, so
  // lowering to it is safe; 0 (a namespace's root) would read as "none
  // yet", so it is 1, the shallowest there is.
  level = std::max<uint32_t>(level, 1);
  const uint32_t zero = 0;
  sf_levels levels{};
  // Only ever lowered: a value at or above this level stays true, and
  // needs no lock.
  if (bpf_map_lookup_elem(maps_.levels.get(), &zero, &levels) != 0) {
    return ErrnoError(errno, "read sf_levels");
  }
  if (levels.shallowest != 0 && levels.shallowest <= level) {
    return absl::OkStatus();
  }
  // Read and written under the host lock: two processes lowering at once
  // must not leave the deeper of their levels.
  HostState::Lock lock = host_->Exclusive();
  if (bpf_map_lookup_elem(maps_.levels.get(), &zero, &levels) != 0) {
    return ErrnoError(errno, "read sf_levels");
  }
  if (levels.shallowest != 0 && levels.shallowest <= level) {
    return absl::OkStatus();
  }
  levels.shallowest = level;
  if (bpf_map_update_elem(maps_.levels.get(), &zero, &levels, BPF_ANY) != 0) {
    return ErrnoError(errno, "write sf_levels");
  }
  return absl::OkStatus();
}

absl::Status EgressController::WriteSandbox(uint64_t cgroup_id,
                                            const SandboxState& state,
                                            uint64_t map_flags) {
  sf_sandbox value{};
  value.generation = state.generation;
  value.flags = state.flags;
  value.phase = state.phase;
  value.ring = static_cast<uint8_t>(host_->slot());
  if (bpf_map_update_elem(maps_.sandboxes.get(), &cgroup_id, &value,
                          map_flags) != 0) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat(
          "cgroup ", cgroup_id,
          " is already a sandbox (enforced by another sandfence process)"));
    }
    return MapWriteError(errno, "sf_sandboxes");
  }
  return absl::OkStatus();
}

size_t EgressController::LinksPerSandbox() const {
  size_t n = 0;
  for (const HookSpec& h : kHookSpecs) {
    if (!h.enforcing) continue;
    if (h.unix_program != nullptr &&
        unix_enforcer_ != UnixEnforcer::kCgroupHooks) {
      continue;
    }
    ++n;
  }
  return n;
}

absl::Status EgressController::Attach(int cgroup_fd, const CgroupRef& cgroup,
                                      SandboxState& state) {
  const uint64_t id = cgroup.id;
  const std::string dir = LinkDir(id);
  if (host_->pinned()) {
    if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  }
  for (const HookSpec& h : kHookSpecs) {
    // The reply-side hooks come with a DNS filter target (SetDnsTarget):
    // four link fds per sandbox that most sandboxes never need.
    if (!h.enforcing) continue;
    if (h.unix_program != nullptr &&
        unix_enforcer_ != UnixEnforcer::kCgroupHooks) {
      continue;
    }
    absl::StatusOr<UniqueFd> link =
        AttachHook(cgroup_fd, id, cgroup.path, h.hook);
    if (!link.ok()) {
      Detach(id, state);
      return link.status();
    }
    state.links.push_back(*std::move(link));
  }
  return absl::OkStatus();
}

absl::Status EgressController::AttachReplyHooks(uint64_t cgroup_id,
                                                SandboxState& state) {
  if (state.reply_hooks) return absl::OkStatus();
  absl::StatusOr<std::string> path = CgroupPathOfId(cgroup_id);
  if (!path.ok()) return path.status();
  UniqueFd cg(::open(path->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cg) return ErrnoError(errno, absl::StrCat("open ", *path));
  std::vector<UniqueFd> links;
  for (const HookSpec& h : kHookSpecs) {
    if (h.enforcing) continue;
    absl::StatusOr<UniqueFd> link =
        AttachHook(cg.get(), cgroup_id, *path, h.hook);
    if (!link.ok()) {
      if (host_->pinned()) {
        for (const HookSpec& r : kHookSpecs) {
          if (!r.enforcing) {
            ::unlink(absl::StrCat(LinkDir(cgroup_id), "/", r.hook).c_str());
          }
        }
      }
      return link.status();
    }
    links.push_back(*std::move(link));
  }
  for (UniqueFd& l : links) state.links.push_back(std::move(l));
  state.reply_hooks = true;
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> EgressController::AttachHook(
    int cgroup_fd, uint64_t cgroup_id, absl::string_view cgroup_path,
    absl::string_view hook) {
  const HookSpec* h = FindHookSpec(hook);
  if (h == nullptr) return absl::InternalError(absl::StrCat("hook ", hook));
  UniqueFd link(
      bpf_link_create(prog_fd(h->hook), cgroup_fd, h->attach, nullptr));
  if (!link) {
    return AttachError(
        errno, absl::StrCat("attach ", h->hook, " to cgroup ", cgroup_path));
  }
  if (host_->pinned()) {
    const std::string path = absl::StrCat(LinkDir(cgroup_id), "/", h->hook);
    if (bpf_obj_pin(link.get(), path.c_str()) != 0) {
      // The link goes with its fd: nothing attached stays behind.
      return ErrnoError(errno, absl::StrCat("pin ", path));
    }
  }
  return link;
}

void EgressController::Detach(uint64_t cgroup_id, SandboxState& state) {
  // The sandbox entry goes first: while the links come off one by one,
  // the hooks still attached find no sandbox and deny (fail closed).
  bpf_map_delete_elem(maps_.sandboxes.get(), &cgroup_id);
  if (host_->pinned()) {
    const std::string dir = LinkDir(cgroup_id);
    for (const std::string& name : ListDir(dir)) {
      ::unlink(absl::StrCat(dir, "/", name).c_str());
    }
    ::rmdir(dir.c_str());
  }
  state.links.clear();
}

SandboxCounters EgressController::TakeCounters(uint64_t cgroup_id) {
  SandboxCounters out;
  sf_counters c{};
  if (bpf_map_lookup_elem(maps_.counters.get(), &cgroup_id, &c) == 0) {
    out = {c.allowed, c.denied, c.events_lost, c.allowed_unreported,
           c.audit_denied, std::nullopt};
  }
  out.budget = budget_maps().Read(cgroup_id);
  bpf_map_delete_elem(maps_.counters.get(), &cgroup_id);
  budget_maps().Delete(cgroup_id);
  return out;
}

absl::StatusOr<uint32_t> EgressController::AddSandbox(
    int cgroup_fd, const CgroupRef& cgroup, const CompiledPhase& phase,
    uint16_t phase_index) {
  const uint64_t id = cgroup.id;
  if (cgroup.level > SF_MAX_CGROUP_DEPTH) {
    return Rejected(absl::StrCat(
        "sandbox ", cgroup.path, " is at cgroup level ", cgroup.level,
        "; the egress programs judge sandboxes down to level ",
        SF_MAX_CGROUP_DEPTH));
  }
  if (absl::Status s = CheckUnix(phase); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (sandboxes_.contains(id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("cgroup ", cgroup.path, " is already a sandbox"));
  }
  absl::StatusOr<uint32_t> generation = host_->AllocateGeneration();
  if (!generation.ok()) return generation.status();
  SandboxState state;
  state.generation = *generation;
  state.phase = phase_index;
  state.flags = SandboxFlags(phase);
  // Its binds are tracked from the start where its phase checks names
  // (until a supervisor brokers its paths).
  if (ReliesOnBindTracker(state.flags)) {
    if (absl::Status s = UpdateBindTracker(/*attach=*/true); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<RuleEntries> entries =
      BuildRuleEntries(phase, state.generation);
  if (!entries.ok()) return entries.status();
  state.entries = *std::move(entries);
  if (absl::Status s = WriteEntriesOrReap(state.entries); !s.ok()) return s;

  // Without its counters a sandbox's record could not show it is whole:
  // a full counters map is a (retryable) refusal, not a silent gap.
  sf_counters zero{};
  if (bpf_map_update_elem(maps_.counters.get(), &id, &zero, BPF_NOEXIST) != 0 &&
      errno != EEXIST) {
    const int err = errno;
    DeleteEntries(state.entries);
    return Unavailable(absl::StrCat("counters for sandbox ", cgroup.path, ": ",
                                    std::strerror(err)));
  }
  // The budget is the rollout's, written once: phases switch, counts go on.
  // Its limits exist before any phase can say SF_SB_BUDGET.
  if (absl::Status s = budget_maps().Set(id, phase.egress_budget); !s.ok()) {
    DeleteEntries(state.entries);
    bpf_map_delete_elem(maps_.counters.get(), &id);
    return s;
  }
  auto undo = [&] {
    DeleteEntries(state.entries);
    bpf_map_delete_elem(maps_.counters.get(), &id);
    budget_maps().Delete(id);
  };
  // The walks must reach this level before the entry and links exist.
  if (absl::Status s = LowerShallowestLevel(cgroup.level); !s.ok()) {
    undo();
    return s;
  }
  if (absl::Status s = WriteSandbox(id, state, BPF_NOEXIST); !s.ok()) {
    // Another process's sandbox: its counters and budget are not ours.
    if (absl::IsAlreadyExists(s)) {
      DeleteEntries(state.entries);
    } else {
      undo();
    }
    return s;
  }
  if (absl::Status s = Attach(cgroup_fd, cgroup, state); !s.ok()) {
    undo();
    return s;
  }
  const uint32_t out = state.generation;
  sandboxes_.emplace(id, std::move(state));
  return out;
}

absl::StatusOr<uint32_t> EgressController::SwitchPhase(
    uint64_t cgroup_id, const CompiledPhase& phase, uint16_t phase_index) {
  if (absl::Status s = CheckUnix(phase); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = sandboxes_.find(cgroup_id);
  if (it == sandboxes_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " is not a sandbox"));
  }
  absl::StatusOr<uint32_t> generation = host_->AllocateGeneration();
  if (!generation.ok()) return generation.status();
  SandboxState next;
  next.generation = *generation;
  next.phase = phase_index;
  next.unix_traits = it->second.unix_traits;
  next.flags = WithUnixTraits(SandboxFlags(phase), next.unix_traits);
  if (ReliesOnBindTracker(next.flags)) {
    if (absl::Status s = UpdateBindTracker(/*attach=*/true); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<RuleEntries> entries =
      BuildRuleEntries(phase, next.generation);
  if (!entries.ok()) return entries.status();
  next.entries = *std::move(entries);
  // 1. The new generation is complete before anything can see it.
  if (absl::Status s = WriteEntriesOrReap(next.entries); !s.ok()) return s;
  // 2. One map update flips the sandbox from the old rules to the new.
  if (absl::Status s = WriteSandbox(cgroup_id, next, BPF_EXIST); !s.ok()) {
    DeleteEntries(next.entries);
    return s;
  }
  // 3. Nothing refers to the old generation any more: its rules and the
  // addresses learned under it go (the filter learns anew for the phase),
  // once this has returned.
  SandboxState& state = it->second;
  auto old = std::make_shared<SandboxState>();
  old->generation = state.generation;
  old->adopted = state.adopted;
  old->entries = std::move(state.entries);
  old->learned = std::move(state.learned);
  state.learned.clear();
  // Journaled first: if this process dies before its reaper runs, the
  // one that forgets its dead driver completes the deletes.
  Doom(old->generation);
  reaper_.Post([this, old, cgroup_id] {
    DeleteState(*old);
    DeleteLearned(*old);
    DeleteSeen(cgroup_id, old->generation);
    Undoom(old->generation);
  });
  state.adopted = false;
  state.entries = std::move(next.entries);
  state.generation = next.generation;
  state.phase = next.phase;
  state.flags = next.flags;
  return state.generation;
}

absl::StatusOr<SandboxCounters> EgressController::RemoveSandbox(
    uint64_t cgroup_id) {
  bool tracked = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = sandboxes_.find(cgroup_id);
    if (it == sandboxes_.end()) {
      return absl::NotFoundError(
          absl::StrCat("cgroup ", cgroup_id, " is not a sandbox"));
    }
    tracked = ReliesOnBindTracker(it->second.flags);
    Detach(cgroup_id, it->second);
    DeleteState(it->second);
    DeleteLearned(it->second);
    bpf_map_delete_elem(maps_.dns_targets.get(), &cgroup_id);
    const uint32_t generation = it->second.generation;
    sandboxes_.erase(it);
    // A scan of two caches: off the caller's path, journaled as a switch's.
    Doom(generation);
    reaper_.Post([this, cgroup_id, generation] {
      DeleteSeen(cgroup_id);
      Undoom(generation);
    });
  }
  // The last sandbox that needed the bind tracker takes it along.
  if (tracked) UpdateBindTracker().IgnoreError();
  return TakeCounters(cgroup_id);
}

absl::Status EgressController::SetUnixTraits(uint64_t cgroup_id,
                                             const UnixTraits& traits) {
  // Only the cgroup hooks read them; the LSM hooks judge the socket reached.
  if (unix_enforcer_ != UnixEnforcer::kCgroupHooks) return absl::OkStatus();
  const bool tracked = traits.tracked && !traits.broker && unix_bind_tracker_;
  // The tracker first: a sandbox's binds are tracked before its entry says
  // it relies on them.
  if (tracked) {
    if (absl::Status s = UpdateBindTracker(/*attach=*/true); !s.ok()) {
      return s;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = sandboxes_.find(cgroup_id);
    if (it == sandboxes_.end()) {
      return absl::NotFoundError(
          absl::StrCat("cgroup ", cgroup_id, " is not a sandbox"));
    }
    SandboxState& state = it->second;
    const uint32_t traits_before = state.unix_traits;
    state.unix_traits = (traits.broker ? SF_SB_UNIX_BROKER : 0u) |
                        (traits.abstract_scoped ? SF_SB_UNIX_SCOPED : 0u) |
                        (tracked ? SF_SB_UNIX_TRACKED : 0u);
    const uint32_t flags =
        WithUnixTraits(state.flags & ~kUnixTraitFlags, state.unix_traits);
    if (flags != state.flags) {
      const uint32_t before = state.flags;
      state.flags = flags;
      if (absl::Status s = WriteSandbox(cgroup_id, state, BPF_EXIST);
          !s.ok()) {
        state.flags = before;
        state.unix_traits = traits_before;
        return s;
      }
    }
  }
  return UpdateBindTracker();
}

absl::Status EgressController::AllowBrokeredConnect(uint64_t cookie,
                                                    uint64_t pid_tgid) {
  if (!maps_.unix_brokered) {
    return absl::FailedPreconditionError(
        "no cgroup Unix hooks here: nothing to broker");
  }
  if (bpf_map_update_elem(maps_.unix_brokered.get(), &cookie, &pid_tgid,
                          BPF_ANY) != 0) {
    return MapWriteError(errno, "sf_unix_brokered");
  }
  return absl::OkStatus();
}

void EgressController::ForgetBrokeredConnect(uint64_t cookie) {
  if (maps_.unix_brokered) {
    bpf_map_delete_elem(maps_.unix_brokered.get(), &cookie);
  }
}

absl::StatusOr<SandboxCounters> EgressController::Counters(
    uint64_t cgroup_id) const {
  sf_counters c{};
  if (bpf_map_lookup_elem(maps_.counters.get(), &cgroup_id, &c) != 0) {
    return absl::NotFoundError(
        absl::StrCat("no counters for cgroup ", cgroup_id));
  }
  return SandboxCounters{c.allowed,
                         c.denied,
                         c.events_lost,
                         c.allowed_unreported,
                         c.audit_denied,
                         budget_maps().Read(cgroup_id)};
}

absl::StatusOr<uint32_t> EgressController::Generation(
    uint64_t cgroup_id) const {
  absl::MutexLock lock(&mu_);
  auto it = sandboxes_.find(cgroup_id);
  if (it == sandboxes_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " is not a sandbox"));
  }
  return it->second.generation;
}

std::vector<KernelSandbox> EgressController::KernelSandboxes() const {
  std::vector<KernelSandbox> out;
  const int fd = maps_.sandboxes.get();
  uint64_t key = 0, next = 0;
  const uint64_t* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    sf_sandbox v{};
    if (bpf_map_lookup_elem(fd, &next, &v) == 0) {
      out.push_back({next, v.generation, v.flags, v.phase, v.ring});
    }
    key = next;
    prev = &key;
  }
  return out;
}

absl::StatusOr<KernelSandbox> EgressController::KernelSandboxOf(
    uint64_t cgroup_id) const {
  sf_sandbox v{};
  if (bpf_map_lookup_elem(maps_.sandboxes.get(), &cgroup_id, &v) != 0) {
    return absl::NotFoundError(
        absl::StrCat("the kernel holds no sandbox for cgroup ", cgroup_id));
  }
  return KernelSandbox{cgroup_id, v.generation, v.flags, v.phase, v.ring};
}

absl::StatusOr<AdoptedSandbox> EgressController::AdoptSandbox(
    uint64_t cgroup_id) {
  if (!host_->pinned()) {
    return absl::FailedPreconditionError(
        "adopting a sandbox needs a pinned host");
  }
  absl::MutexLock lock(&mu_);
  if (sandboxes_.contains(cgroup_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("cgroup ", cgroup_id, " is already this process's"));
  }
  absl::StatusOr<KernelSandbox> kernel = KernelSandboxOf(cgroup_id);
  if (!kernel.ok()) return kernel.status();
  AdoptedSandbox out;
  out.kernel = *kernel;
  SandboxState state;
  state.generation = kernel->generation;
  state.phase = kernel->phase;
  state.flags = kernel->flags;
  state.unix_traits = kernel->flags & kUnixTraitFlags;
  state.adopted = true;
  const std::string dir = LinkDir(cgroup_id);
  sf_dns_target target{};
  const bool has_target =
      bpf_map_lookup_elem(maps_.dns_targets.get(), &cgroup_id, &target) == 0;
  for (const HookSpec& h : kHookSpecs) {
    const bool unix_hook = h.unix_program != nullptr;
    if (unix_hook && unix_enforcer_ != UnixEnforcer::kCgroupHooks) continue;
    UniqueFd link(bpf_obj_get(absl::StrCat(dir, "/", h.hook).c_str()));
    // Without a DNS filter target a sandbox has no reply-side hooks.
    if (!link && !h.enforcing && !has_target) continue;
    if (link && !h.enforcing) state.reply_hooks = true;
    // A build before the Unix hooks never set SF_SB_UNIX_CHECKED, so the
    // sandbox lost nothing for their absence: attach them now, as the
    // reply-side hooks of a build before the DNS filter.
    if (!link && (!h.enforcing || unix_hook)) {
      // Nothing ran unenforced for their absence.
      absl::StatusOr<std::string> path = CgroupPathOfId(cgroup_id);
      UniqueFd cg(
          path.ok() ? ::open(path->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                    : -1);
      if (cg) {
        absl::StatusOr<UniqueFd> attached =
            AttachHook(cg.get(), cgroup_id, *path, h.hook);
        if (attached.ok()) link = *std::move(attached);
      }
    }
    if (!link) {
      out.missing_hooks.push_back(h.hook);
      continue;
    }
    // Another build's program: swap in ours, atomically, so that the
    // events of this sandbox are ours to read and judged by our code.
    const int mine = prog_fd(h.hook);
    if (LinkProgId(link.get()) != ProgId(mine) &&
        bpf_link_update(link.get(), mine, nullptr) != 0) {
      return ErrnoError(errno, absl::StrCat("move the ", h.hook, " link of ",
                                            cgroup_id, " to this build"));
    }
    state.links.push_back(std::move(link));
  }
  // Its events come to this process's ring from now on.
  if (absl::Status s = WriteSandbox(cgroup_id, state, BPF_EXIST); !s.ok()) {
    return s;
  }
  out.kernel.ring = static_cast<uint8_t>(host_->slot());
  state.learned = ScanLearned(state.generation);
  sandboxes_.emplace(cgroup_id, std::move(state));
  return out;
}

absl::Status EgressController::SetDnsTarget(uint64_t cgroup_id,
                                            const HostPort& target) {
  const std::string text = target.ToString();
  uint32_t host_order = 0;
  if (target.addr.is_v4()) {
    std::memcpy(&host_order, target.addr.bytes(), 4);
    host_order = ntohl(host_order);
  }
  if (!target.addr.is_v4() ||
      (host_order & SF_DNS_FILTER_MASK) != SF_DNS_FILTER_NET) {
    return Malformed(absl::StrCat(
        "DNS filter target ", text,
        ": the address must be IPv4 in the reserved range 127.83.0.0/",
        SF_DNS_FILTER_PREFIX));
  }
  if (target.port == 0) {
    return Malformed(
        absl::StrCat("DNS filter target ", text, ": the port must not be 0"));
  }
  sf_dns_target value{};
  std::memcpy(&value.addr, target.addr.bytes(), 4);
  value.port = target.port;
  absl::MutexLock lock(&mu_);
  if (!sandboxes_.contains(cgroup_id)) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " is not a sandbox"));
  }
  // The filter knows a sandbox by the target its queries arrive at: two
  // sandboxes on one target would be taken for each other.
  const int fd = maps_.dns_targets.get();
  uint64_t key = 0, next = 0;
  const uint64_t* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    sf_dns_target other{};
    if (next != cgroup_id && bpf_map_lookup_elem(fd, &next, &other) == 0 &&
        other.addr == value.addr && other.port == value.port) {
      return absl::AlreadyExistsError(absl::StrCat(
          "DNS filter target ", text, " is sandbox ", next, "'s already"));
    }
    key = next;
    prev = &key;
  }
  // The reply side first: a query redirected before its answer's source
  // can be restored would confuse the client that checks it.
  if (absl::Status s = AttachReplyHooks(cgroup_id, sandboxes_[cgroup_id]);
      !s.ok()) {
    return s;
  }
  if (bpf_map_update_elem(fd, &cgroup_id, &value, BPF_ANY) != 0) {
    return MapWriteError(errno, "sf_dns_targets");
  }
  return absl::OkStatus();
}

absl::Status EgressController::ClearDnsTarget(uint64_t cgroup_id) {
  absl::MutexLock lock(&mu_);
  if (!sandboxes_.contains(cgroup_id)) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " is not a sandbox"));
  }
  if (bpf_map_delete_elem(maps_.dns_targets.get(), &cgroup_id) != 0 &&
      errno != ENOENT) {
    return ErrnoError(errno, "delete from sf_dns_targets");
  }
  return absl::OkStatus();
}

absl::Status EgressController::Learn(uint64_t cgroup_id, uint32_t generation,
                                     const std::vector<LearnedEntry>& entries) {
  // Under mu_ throughout: SwitchPhase cannot flip the generation (and
  // delete what is learned under it) between the check and the writes.
  absl::MutexLock lock(&mu_);
  auto it = sandboxes_.find(cgroup_id);
  if (it == sandboxes_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " is not a sandbox"));
  }
  SandboxState& state = it->second;
  if (generation != state.generation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sandbox ", cgroup_id, " is on generation ", state.generation, ", not ",
        generation, " (its phase changed): nothing learned"));
  }
  if (!(state.flags & SF_SB_DNS_FILTER)) {
    return absl::FailedPreconditionError(
        absl::StrCat("sandbox ", cgroup_id,
                     "'s phase does not filter DNS: nothing learned"));
  }
  // Every entry is checked and merged before anything is written.
  std::vector<std::pair<LearnedKey, sf_learned_value>> values;
  absl::flat_hash_map<LearnedKey, size_t> index;
  for (const LearnedEntry& e : entries) {
    const LearnedKey key = LearnedKeyOf(generation, e);
    sf_learned_value old{};
    const sf_learned_value* base = nullptr;
    if (auto found = index.find(key); found != index.end()) {
      base = &values[found->second].second;
    } else {
      int rc = -1;
      if (key.is_v4()) {
        const sf_learned4_key k = key.Key4();
        rc = bpf_map_lookup_elem(maps_.learned4.get(), &k, &old);
      } else {
        const sf_learned6_key k = key.Key6();
        rc = bpf_map_lookup_elem(maps_.learned6.get(), &k, &old);
      }
      if (rc == 0) base = &old;
    }
    absl::StatusOr<sf_learned_value> merged = MergeLearned(base, e);
    if (!merged.ok()) return merged.status();
    if (auto found = index.find(key); found != index.end()) {
      values[found->second].second = *merged;
    } else {
      index.emplace(key, values.size());
      values.emplace_back(key, *merged);
    }
  }
  for (const auto& [key, value] : values) {
    int rc;
    if (key.is_v4()) {
      const sf_learned4_key k = key.Key4();
      rc = bpf_map_update_elem(maps_.learned4.get(), &k, &value, BPF_ANY);
    } else {
      const sf_learned6_key k = key.Key6();
      rc = bpf_map_update_elem(maps_.learned6.get(), &k, &value, BPF_ANY);
    }
    if (rc != 0) {
      return MapWriteError(errno, key.is_v4() ? "sf_learned4" : "sf_learned6");
    }
    state.learned.insert(key);
  }
  return absl::OkStatus();
}

size_t EgressController::CollectExpired(uint64_t now_boot_ns) {
  absl::MutexLock lock(&mu_);
  size_t collected = 0;
  // Only this process's sandboxes: another process may be extending one
  // of its own entries between a read here and a delete.
  for (auto& [id, state] : sandboxes_) {
    std::vector<LearnedKey> gone;
    for (const LearnedKey& key : state.learned) {
      sf_learned_value v{};
      int rc;
      if (key.is_v4()) {
        const sf_learned4_key k = key.Key4();
        rc = bpf_map_lookup_elem(maps_.learned4.get(), &k, &v);
        if (rc == 0 && v.expires_ns <= now_boot_ns &&
            bpf_map_delete_elem(maps_.learned4.get(), &k) == 0) {
          ++collected;
        }
      } else {
        const sf_learned6_key k = key.Key6();
        rc = bpf_map_lookup_elem(maps_.learned6.get(), &k, &v);
        if (rc == 0 && v.expires_ns <= now_boot_ns &&
            bpf_map_delete_elem(maps_.learned6.get(), &k) == 0) {
          ++collected;
        }
      }
      if (rc != 0 || v.expires_ns <= now_boot_ns) gone.push_back(key);
    }
    for (const LearnedKey& key : gone) state.learned.erase(key);
  }
  return collected;
}

absl::StatusOr<size_t> EgressController::LearnedCount(
    uint64_t cgroup_id) const {
  absl::MutexLock lock(&mu_);
  auto it = sandboxes_.find(cgroup_id);
  if (it == sandboxes_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " is not a sandbox"));
  }
  return it->second.learned.size();
}

absl::Status EgressController::RemovePins(const std::string& pin_root) {
  return RemovePinnedTree(pin_root);
}

}  // namespace sandfence
