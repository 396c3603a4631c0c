// Loading or opening the egress objects (the hooks, the Unix enforcers) and
// probing what this kernel can run.
#include "egress/egress_controller.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/bpf_handles.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "egress/controller_internal.h"
#include "host/bpf_lsm.h"
#include "host/bpf_object.h"
#include "sf_egress.skel.h"
#include "sf_egress_cut.skel.h"
#include "sf_egress_unix.skel.h"
#include "sf_egress_unix_lsm.skel.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

namespace sandfence {

namespace {

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
      host_->pins().EgressProgsDir(build_);
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
      UniqueFd fd(OpenPinned(host_->pins().EgressProg(build_, name)));
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
      if (absl::Status s = LoadCut(); !s.ok()) return s;
      return AttachUnixHostProgs();
    }
  }

  Skeleton<sf_egress> skel(sf_egress::open());
  if (!skel) return BpfLoadError(errno, "open the egress programs");
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
    return BpfLoadError(errno, "load the egress programs");
  }
  for (const MapSlot& m : kMapSlots) {
    bpf_map* map = bpf_object__find_map_by_name(skel->obj, m.name);
    maps_.*(m.field) = DupFd(map == nullptr ? -1 : bpf_map__fd(map));
    if (!(maps_.*(m.field))) {
      return ErrnoError(errno, absl::StrCat("map ", m.name));
    }
  }
  if (absl::Status s = SeedShallowestLevel(); !s.ok()) return s;
  if (host_->pinned()) {
    if (absl::Status s = MakeDirs(progs_dir); !s.ok()) return s;
  }
  auto keep_prog = [&](const std::string& name, int prog_fd) {
    return KeepProg(name, prog_fd);
  };
  for (const HookSpec& h : kHookSpecs) {
    if (h.unix_program != nullptr) continue;
    if (absl::Status s =
            keep_prog(h.hook, bpf_program__fd(h.program(skel.get())));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = LoadUnix(); !s.ok()) return s;
  if (absl::Status s = LoadCut(); !s.ok()) return s;
  return AttachUnixHostProgs();
}

absl::Status EgressController::LoadCut() {
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
  const std::string tcp_pin = host_->pins().EgressProg(build_, kCutTcpProg);
  const std::string udp_pin = host_->pins().EgressProg(build_, kCutUdpProg);
  const std::string req_pin =
      host_->pinned() ? host_->pins().Map("sf_cut_req") : "";
  auto link_iters = [&](int tcp_fd, int udp_fd, int req_fd) -> absl::Status {
    cut_tcp_ = UniqueFd(bpf_link_create(tcp_fd, 0, BPF_TRACE_ITER, nullptr));
    cut_udp_ = UniqueFd(bpf_link_create(udp_fd, 0, BPF_TRACE_ITER, nullptr));
    cut_req_ = DupFd(req_fd);
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
  if (!skel) return BpfLoadError(errno, "open the cut iterators");
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
      if (absl::Status s = PinFresh(fd, pin); !s.ok()) return s;
    }
  }
  return link_iters(tcp_fd, udp_fd, req_fd);
}

absl::Status EgressController::KeepProg(const std::string& name,
                                        int prog_fd) {
  UniqueFd fd = DupFd(prog_fd);
  if (!fd) return ErrnoError(errno, absl::StrCat("program ", name));
  if (host_->pinned()) {
    if (absl::Status s = PinFresh(fd.get(), host_->pins().EgressProg(build_, name));
        !s.ok()) {
      return s;
    }
  }
  progs_.emplace(name, std::move(fd));
  return absl::OkStatus();
}

absl::Status EgressController::LoadUnix() {
  if (unix_enforcer_ == UnixEnforcer::kNone) return absl::OkStatus();
  auto keep_prog = [&](const std::string& name, int prog_fd) {
    return KeepProg(name, prog_fd);
  };
  auto keep_maps = [&](bpf_object* obj,
                       absl::Span<const MapSlot> slots) -> absl::Status {
    for (const MapSlot& m : slots) {
      bpf_map* map = bpf_object__find_map_by_name(obj, m.name);
      maps_.*(m.field) = DupFd(map == nullptr ? -1 : bpf_map__fd(map));
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
    if (!lsm) return BpfLoadError(errno, "open the unix socket LSM programs");
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
  if (!unix_skel) return BpfLoadError(errno, "open the unix socket programs");
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
  // The Unix objects take the shared maps by fd (LoadUnix).
  return SetMapPinPaths(obj, [&](absl::string_view name) {
    return skip_shared && !absl::StartsWith(name, "sf_unix_")
               ? std::string()
               : host_->pins().Map(name);
  });
}

}  // namespace sandfence
