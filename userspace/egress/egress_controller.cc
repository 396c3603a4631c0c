#include "egress/egress_controller.h"

#include <bpf/bpf.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "sf_egress.skel.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

namespace sandfence {
namespace {

template <typename K, typename V>
absl::Status UpdateAll(int map_fd, const std::vector<MapEntry<K, V>>& entries,
                       absl::string_view map_name) {
  for (const auto& e : entries) {
    if (bpf_map_update_elem(map_fd, &e.key, &e.value, BPF_ANY) != 0) {
      int err = errno;
      if (err == E2BIG || err == ENOMEM || err == ENOSPC) {
        return Unavailable(absl::StrCat("map ", map_name,
                                        " is full: ", std::strerror(err)));
      }
      return ErrnoError(err, absl::StrCat("write ", map_name));
    }
  }
  return absl::OkStatus();
}

template <typename K, typename V>
void DeleteAll(int map_fd, const std::vector<MapEntry<K, V>>& entries) {
  for (const auto& e : entries) bpf_map_delete_elem(map_fd, &e.key);
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

}  // namespace

absl::StatusOr<uint64_t> CurrentNetnsCookie() {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) return ErrnoError(errno, "socket");
  uint64_t cookie = 0;
  socklen_t len = sizeof(cookie);
  if (::getsockopt(s.get(), SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) != 0) {
    return ErrnoError(errno, "getsockopt(SO_NETNS_COOKIE)");
  }
  return cookie;
}

absl::StatusOr<std::unique_ptr<EgressController>> EgressController::Create(
    const EgressOptions& options) {
  std::unique_ptr<EgressController> c(new EgressController());
  c->skel_.reset(sf_egress::open());
  if (!c->skel_) return LoadError(errno, "open the egress programs");

  absl::StatusOr<uint64_t> cookie = CurrentNetnsCookie();
  if (!cookie.ok()) return cookie.status();
  c->skel_->rodata->sf_host_netns = *cookie;
  c->skel_->rodata->sf_skb_has_netns_cookie =
      libbpf_probe_bpf_helper(BPF_PROG_TYPE_CGROUP_SKB,
                              BPF_FUNC_get_netns_cookie, nullptr) == 1;
  if (bpf_map__set_max_entries(c->skel_->maps.sf_events, options.ring_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring buffer size ", options.ring_bytes,
                     " is not a power of two of at least a page"));
  }
  if (sf_egress::load(c->skel_.get()) != 0) {
    return LoadError(errno, "load the egress programs");
  }
  return c;
}

EgressController::~EgressController() {
  absl::MutexLock lock(&mu_);
  for (auto& [id, state] : sandboxes_) {
    state.links.clear();
    bpf_map_delete_elem(bpf_map__fd(skel_->maps.sf_sandboxes), &id);
  }
}

int EgressController::events_fd() const {
  return bpf_map__fd(skel_->maps.sf_events);
}

int EgressController::prog_fd(absl::string_view hook) const {
  const auto& p = skel_->progs;
  if (hook == "connect4") return bpf_program__fd(p.sf_connect4);
  if (hook == "connect6") return bpf_program__fd(p.sf_connect6);
  if (hook == "sendmsg4") return bpf_program__fd(p.sf_sendmsg4);
  if (hook == "sendmsg6") return bpf_program__fd(p.sf_sendmsg6);
  if (hook == "sock_create") return bpf_program__fd(p.sf_sock_create);
  if (hook == "skb_egress") return bpf_program__fd(p.sf_skb_egress);
  return -1;
}

absl::Status EgressController::WriteEntries(const RuleEntries& e) {
  const auto& m = skel_->maps;
  absl::Status s = UpdateAll(bpf_map__fd(m.sf_exact4), e.exact4, "sf_exact4");
  if (s.ok()) s = UpdateAll(bpf_map__fd(m.sf_exact6), e.exact6, "sf_exact6");
  if (s.ok()) s = UpdateAll(bpf_map__fd(m.sf_cidr4), e.cidr4, "sf_cidr4");
  if (s.ok()) s = UpdateAll(bpf_map__fd(m.sf_cidr6), e.cidr6, "sf_cidr6");
  if (!s.ok()) DeleteEntries(e);
  return s;
}

void EgressController::DeleteEntries(const RuleEntries& e) {
  const auto& m = skel_->maps;
  DeleteAll(bpf_map__fd(m.sf_exact4), e.exact4);
  DeleteAll(bpf_map__fd(m.sf_exact6), e.exact6);
  DeleteAll(bpf_map__fd(m.sf_cidr4), e.cidr4);
  DeleteAll(bpf_map__fd(m.sf_cidr6), e.cidr6);
}

absl::Status EgressController::WriteSandbox(uint64_t cgroup_id,
                                            uint32_t generation,
                                            uint32_t flags,
                                            uint64_t map_flags) {
  sf_sandbox value{generation, flags};
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.sf_sandboxes), &cgroup_id,
                          &value, map_flags) != 0) {
    return ErrnoError(errno, absl::StrCat("write sandbox ", cgroup_id));
  }
  return absl::OkStatus();
}

absl::Status EgressController::AddSandbox(int cgroup_fd, uint64_t cgroup_id,
                                          const CompiledPhase& phase) {
  absl::MutexLock lock(&mu_);
  if (sandboxes_.contains(cgroup_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("cgroup ", cgroup_id, " is already a sandbox"));
  }
  SandboxState state;
  state.generation = next_generation_++;
  absl::StatusOr<RuleEntries> entries =
      BuildRuleEntries(phase, state.generation);
  if (!entries.ok()) return entries.status();
  state.entries = *std::move(entries);
  if (absl::Status s = WriteEntries(state.entries); !s.ok()) return s;

  sf_counters zero{};
  bpf_map_update_elem(bpf_map__fd(skel_->maps.sf_counters), &cgroup_id, &zero,
                      BPF_ANY);
  if (absl::Status s = WriteSandbox(cgroup_id, state.generation,
                                    SandboxFlags(phase), BPF_NOEXIST);
      !s.ok()) {
    DeleteEntries(state.entries);
    return s;
  }

  const auto& p = skel_->progs;
  for (bpf_program* prog : {p.sf_sock_create, p.sf_connect4, p.sf_connect6,
                            p.sf_sendmsg4, p.sf_sendmsg6, p.sf_skb_egress}) {
    BpfLink link(bpf_program__attach_cgroup(prog, cgroup_fd));
    if (!link) {
      int err = errno;
      state.links.clear();
      bpf_map_delete_elem(bpf_map__fd(skel_->maps.sf_sandboxes), &cgroup_id);
      DeleteEntries(state.entries);
      return LoadError(err, absl::StrCat("attach ", bpf_program__name(prog),
                                         " to cgroup ", cgroup_id));
    }
    state.links.push_back(std::move(link));
  }
  sandboxes_.emplace(cgroup_id, std::move(state));
  return absl::OkStatus();
}

absl::Status EgressController::SwitchPhase(uint64_t cgroup_id,
                                           const CompiledPhase& phase) {
  absl::MutexLock lock(&mu_);
  auto it = sandboxes_.find(cgroup_id);
  if (it == sandboxes_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " is not a sandbox"));
  }
  SandboxState& state = it->second;
  const uint32_t generation = next_generation_++;
  absl::StatusOr<RuleEntries> entries = BuildRuleEntries(phase, generation);
  if (!entries.ok()) return entries.status();
  // 1. The new generation is complete before anything can see it.
  if (absl::Status s = WriteEntries(*entries); !s.ok()) return s;
  // 2. One map update flips the sandbox from the old rules to the new.
  if (absl::Status s = WriteSandbox(cgroup_id, generation,
                                    SandboxFlags(phase), BPF_EXIST);
      !s.ok()) {
    DeleteEntries(*entries);
    return s;
  }
  // 3. Nothing refers to the old generation any more.
  DeleteEntries(state.entries);
  state.entries = *std::move(entries);
  state.generation = generation;
  return absl::OkStatus();
}

absl::StatusOr<SandboxCounters> EgressController::RemoveSandbox(
    uint64_t cgroup_id) {
  absl::MutexLock lock(&mu_);
  auto it = sandboxes_.find(cgroup_id);
  if (it == sandboxes_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", cgroup_id, " is not a sandbox"));
  }
  it->second.links.clear();
  bpf_map_delete_elem(bpf_map__fd(skel_->maps.sf_sandboxes), &cgroup_id);
  DeleteEntries(it->second.entries);
  sandboxes_.erase(it);

  SandboxCounters out;
  sf_counters c{};
  int fd = bpf_map__fd(skel_->maps.sf_counters);
  if (bpf_map_lookup_elem(fd, &cgroup_id, &c) == 0) {
    out = {c.allowed, c.denied, c.events_lost, c.allowed_unreported};
    bpf_map_delete_elem(fd, &cgroup_id);
  }
  return out;
}

absl::StatusOr<SandboxCounters> EgressController::Counters(
    uint64_t cgroup_id) const {
  sf_counters c{};
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.sf_counters), &cgroup_id,
                          &c) != 0) {
    return absl::NotFoundError(
        absl::StrCat("no counters for cgroup ", cgroup_id));
  }
  return SandboxCounters{c.allowed, c.denied, c.events_lost,
                         c.allowed_unreported};
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

}  // namespace sandfence
