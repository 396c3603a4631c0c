#include "egress/egress_controller.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "sf_egress.skel.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

namespace sandfence {
namespace {

absl::Status MapWriteError(int err, absl::string_view map_name) {
  if (err == E2BIG || err == ENOMEM || err == ENOSPC) {
    return Unavailable(
        absl::StrCat("map ", map_name, " is full: ", std::strerror(err)));
  }
  return ErrnoError(err, absl::StrCat("write ", map_name));
}

// Hash maps take a whole generation in one bpf() call where the kernel has
// batch operations (5.6+): a phase switch of 1,000 rules is then a handful
// of system calls instead of 2,000. LPM tries have no batch operations, and
// a kernel without them gets the loop.
template <typename K, typename V>
absl::Status UpdateAll(int map_fd, const std::vector<MapEntry<K, V>>& entries,
                       absl::string_view map_name, bool try_batch) {
  size_t done = 0;
  if (try_batch && !entries.empty()) {
    std::vector<K> keys;
    std::vector<V> values;
    keys.reserve(entries.size());
    values.reserve(entries.size());
    for (const auto& e : entries) {
      keys.push_back(e.key);
      values.push_back(e.value);
    }
    LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
    __u32 count = static_cast<__u32>(keys.size());
    if (bpf_map_update_batch(map_fd, keys.data(), values.data(), &count,
                             &opts) == 0) {
      return absl::OkStatus();
    }
    const int err = errno;
    if (err != EINVAL && err != ENOTSUP && err != EOPNOTSUPP) {
      return MapWriteError(err, map_name);
    }
    done = count;  // entries before the failure are written
  }
  for (size_t i = done; i < entries.size(); ++i) {
    if (bpf_map_update_elem(map_fd, &entries[i].key, &entries[i].value,
                            BPF_ANY) != 0) {
      return MapWriteError(errno, map_name);
    }
  }
  return absl::OkStatus();
}

template <typename K, typename V>
void DeleteAll(int map_fd, const std::vector<MapEntry<K, V>>& entries,
               bool try_batch) {
  if (try_batch && !entries.empty()) {
    std::vector<K> keys;
    keys.reserve(entries.size());
    for (const auto& e : entries) keys.push_back(e.key);
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    __u32 count = static_cast<__u32>(keys.size());
    // Stops at the first missing key (ENOENT): the loop finishes the rest.
    if (bpf_map_delete_batch(map_fd, keys.data(), &count, &opts) == 0) return;
  }
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

constexpr long kBpfFsMagic = 0xcafe4a11;

// Pinning under /sys/fs/bpf needs a bpf filesystem there; some hosts boot
// without one mounted.
absl::Status EnsureBpfFs(const std::string& pin_dir) {
  constexpr char kBpfFs[] = "/sys/fs/bpf";
  if (pin_dir.rfind(kBpfFs, 0) != 0) return absl::OkStatus();
  struct statfs fs {};
  if (::statfs(kBpfFs, &fs) == 0 && fs.f_type == kBpfFsMagic) {
    return absl::OkStatus();
  }
  if (::mount("bpf", kBpfFs, "bpf", 0, "mode=0700") != 0) {
    return ErrnoError(errno, "mount a bpf filesystem at /sys/fs/bpf");
  }
  return absl::OkStatus();
}

absl::Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoError(errno, absl::StrCat("create ", path));
  }
  return absl::OkStatus();
}

// Deletes every key of a rule map whose generation field is `generation`.
// Keys are collected first: deleting while walking restarts the walk.
template <typename K>
void DeleteKeysOfGeneration(int map_fd, uint32_t generation) {
  std::vector<K> doomed;
  K key{};
  K next{};
  const K* prev = nullptr;
  while (bpf_map_get_next_key(map_fd, prev, &next) == 0) {
    if (next.generation == generation) doomed.push_back(next);
    key = next;
    prev = &key;
  }
  for (const K& k : doomed) bpf_map_delete_elem(map_fd, &k);
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

std::string LinkDir(const std::string& pin_dir, uint64_t cgroup_id) {
  return absl::StrCat(pin_dir, "/links/", cgroup_id);
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
    const EgressOptions& options) {
  std::unique_ptr<EgressController> c(new EgressController());
  c->skel_.reset(sf_egress::open());
  if (!c->skel_) return LoadError(errno, "open the egress programs");

  absl::StatusOr<uint64_t> cookie = CurrentNetnsCookie();
  if (!cookie.ok()) return cookie.status();
  c->skel_->rodata->sf_host_netns = *cookie;
  c->skel_->rodata->sf_skb_has_netns_cookie = SkbHasNetnsCookie();
  if (bpf_map__set_max_entries(c->skel_->maps.sf_events, options.ring_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring buffer size ", options.ring_bytes,
                     " is not a power of two of at least a page"));
  }
  if (!options.pin_dir.empty()) {
    if (absl::Status s = EnsureBpfFs(options.pin_dir); !s.ok()) return s;
    struct statfs fs {};
    if (::statfs(options.pin_dir.c_str(), &fs) != 0 &&
        (MakeDir(options.pin_dir).ok() == false ||
         ::statfs(options.pin_dir.c_str(), &fs) != 0)) {
      return ErrnoError(errno, absl::StrCat("pin directory ", options.pin_dir));
    }
    if (fs.f_type != kBpfFsMagic) {
      return Rejected(absl::StrCat(
          "pin directory ", options.pin_dir,
          " is not on a bpf filesystem (mount -t bpf bpf /sys/fs/bpf)"));
    }
    for (const std::string& dir :
         {options.pin_dir, absl::StrCat(options.pin_dir, "/maps"),
          absl::StrCat(options.pin_dir, "/links")}) {
      if (absl::Status s = MakeDir(dir); !s.ok()) return s;
    }
    // libbpf reuses a compatible pinned map of the same name, or creates
    // and pins it: the rules and counters of running sandboxes survive.
    bpf_map* map;
    bpf_object__for_each_map(map, c->skel_->obj) {
      if (bpf_map__is_internal(map)) continue;
      std::string path =
          absl::StrCat(options.pin_dir, "/maps/", bpf_map__name(map));
      if (bpf_map__set_pin_path(map, path.c_str()) != 0) {
        return ErrnoError(errno, absl::StrCat("pin path ", path));
      }
    }
    c->pin_dir_ = options.pin_dir;
  }
  if (sf_egress::load(c->skel_.get()) != 0) {
    return LoadError(errno, "load the egress programs");
  }
  if (!c->pin_dir_.empty()) {
    // Never reuse a generation an earlier controller left in the maps
    // (even one half-written when it died).
    absl::MutexLock lock(&c->mu_);
    c->next_generation_ = c->MaxGenerationInMaps() + 1;
  }
  return c;
}

EgressController::~EgressController() {
  absl::MutexLock lock(&mu_);
  // Pinned: the sandboxes stay enforced after this controller is gone.
  if (!pin_dir_.empty()) return;
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
  absl::Status s =
      UpdateAll(bpf_map__fd(m.sf_exact4), e.exact4, "sf_exact4", true);
  if (s.ok()) {
    s = UpdateAll(bpf_map__fd(m.sf_exact6), e.exact6, "sf_exact6", true);
  }
  if (s.ok()) {
    s = UpdateAll(bpf_map__fd(m.sf_cidr4), e.cidr4, "sf_cidr4", false);
  }
  if (s.ok()) {
    s = UpdateAll(bpf_map__fd(m.sf_cidr6), e.cidr6, "sf_cidr6", false);
  }
  if (!s.ok()) DeleteEntries(e);
  return s;
}

void EgressController::DeleteGeneration(uint32_t generation) {
  const auto& m = skel_->maps;
  DeleteKeysOfGeneration<sf_exact4_key>(bpf_map__fd(m.sf_exact4), generation);
  DeleteKeysOfGeneration<sf_exact6_key>(bpf_map__fd(m.sf_exact6), generation);
  DeleteKeysOfGeneration<sf_cidr4_key>(bpf_map__fd(m.sf_cidr4), generation);
  DeleteKeysOfGeneration<sf_cidr6_key>(bpf_map__fd(m.sf_cidr6), generation);
}

void EgressController::DeleteState(const SandboxState& state) {
  if (state.adopted) {
    DeleteGeneration(state.generation);
  } else {
    DeleteEntries(state.entries);
  }
}

uint32_t EgressController::MaxGenerationInMaps() const {
  const auto& m = skel_->maps;
  uint32_t max = 0;
  max =
      std::max(max, MaxKeyGeneration<sf_exact4_key>(bpf_map__fd(m.sf_exact4)));
  max =
      std::max(max, MaxKeyGeneration<sf_exact6_key>(bpf_map__fd(m.sf_exact6)));
  max = std::max(max, MaxKeyGeneration<sf_cidr4_key>(bpf_map__fd(m.sf_cidr4)));
  max = std::max(max, MaxKeyGeneration<sf_cidr6_key>(bpf_map__fd(m.sf_cidr6)));
  int fd = bpf_map__fd(m.sf_sandboxes);
  uint64_t key = 0, next = 0;
  const uint64_t* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    sf_sandbox value{};
    if (bpf_map_lookup_elem(fd, &next, &value) == 0) {
      max = std::max(max, value.generation);
    }
    key = next;
    prev = &key;
  }
  return max;
}

absl::Status EgressController::PinLinks(uint64_t cgroup_id,
                                        std::vector<BpfLink>& links) {
  const std::string dir = LinkDir(pin_dir_, cgroup_id);
  if (absl::Status s = MakeDir(dir); !s.ok()) return s;
  for (BpfLink& link : links) {
    bpf_link_info info{};
    uint32_t len = sizeof(info);
    bpf_obj_get_info_by_fd(bpf_link__fd(link.get()), &info, &len);
    std::string path = absl::StrCat(dir, "/prog-", info.prog_id);
    if (int err = bpf_link__pin(link.get(), path.c_str()); err != 0) {
      UnpinLinks(cgroup_id, links);
      return ErrnoError(-err, absl::StrCat("pin ", path));
    }
  }
  return absl::OkStatus();
}

void EgressController::UnpinLinks(uint64_t cgroup_id,
                                  std::vector<BpfLink>& links) {
  for (BpfLink& link : links) {
    if (bpf_link__pin_path(link.get()) != nullptr) {
      bpf_link__unpin(link.get());
    }
  }
  ::rmdir(LinkDir(pin_dir_, cgroup_id).c_str());
}

absl::StatusOr<uint32_t> EgressController::AdoptSandbox(uint64_t cgroup_id) {
  if (pin_dir_.empty()) {
    return absl::FailedPreconditionError(
        "adopting a sandbox needs a pinned controller "
        "(EgressOptions::pin_dir)");
  }
  absl::MutexLock lock(&mu_);
  if (sandboxes_.contains(cgroup_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("cgroup ", cgroup_id, " is already a sandbox"));
  }
  sf_sandbox value{};
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.sf_sandboxes), &cgroup_id,
                          &value) != 0) {
    return absl::NotFoundError(absl::StrCat(
        "cgroup ", cgroup_id, " has no sandbox entry in the pinned maps"));
  }
  SandboxState state;
  state.generation = value.generation;
  state.adopted = true;
  const std::string dir = LinkDir(pin_dir_, cgroup_id);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return ErrnoError(errno, absl::StrCat("open pinned links ", dir));
  }
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string path = absl::StrCat(dir, "/", e->d_name);
    BpfLink link(bpf_link__open(path.c_str()));
    if (!link) {
      int err = errno;
      ::closedir(d);
      return ErrnoError(err, absl::StrCat("open pinned link ", path));
    }
    state.links.push_back(std::move(link));
  }
  ::closedir(d);
  if (state.links.empty()) {
    return absl::NotFoundError(absl::StrCat("no pinned links in ", dir));
  }
  next_generation_ = std::max(next_generation_, value.generation + 1);
  sandboxes_.emplace(cgroup_id, std::move(state));
  return value.generation;
}

std::vector<uint64_t> EgressController::PinnedSandboxes() const {
  std::vector<uint64_t> ids;
  if (pin_dir_.empty()) return ids;
  DIR* d = ::opendir(absl::StrCat(pin_dir_, "/links").c_str());
  if (d == nullptr) return ids;
  while (dirent* e = ::readdir(d)) {
    uint64_t id = 0;
    if (absl::SimpleAtoi(e->d_name, &id)) ids.push_back(id);
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::Status EgressController::RemovePins(const std::string& pin_dir) {
  absl::Status first;
  auto remove_dir = [&first](const std::string& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      if (errno != ENOENT) first.Update(ErrnoError(errno, dir));
      return;
    }
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    ::closedir(d);
    for (const std::string& n : names) {
      std::string path = absl::StrCat(dir, "/", n);
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        first.Update(ErrnoError(errno, absl::StrCat("unpin ", path)));
      }
    }
    if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) {
      first.Update(ErrnoError(errno, absl::StrCat("remove ", dir)));
    }
  };
  const std::string links = absl::StrCat(pin_dir, "/links");
  if (DIR* d = ::opendir(links.c_str())) {
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    ::closedir(d);
    for (const std::string& n : names) remove_dir(absl::StrCat(links, "/", n));
  }
  remove_dir(links);
  remove_dir(absl::StrCat(pin_dir, "/maps"));
  if (::rmdir(pin_dir.c_str()) != 0 && errno != ENOENT) {
    first.Update(ErrnoError(errno, absl::StrCat("remove ", pin_dir)));
  }
  return first;
}

void EgressController::DeleteEntries(const RuleEntries& e) {
  const auto& m = skel_->maps;
  DeleteAll(bpf_map__fd(m.sf_exact4), e.exact4, true);
  DeleteAll(bpf_map__fd(m.sf_exact6), e.exact6, true);
  DeleteAll(bpf_map__fd(m.sf_cidr4), e.cidr4, false);
  DeleteAll(bpf_map__fd(m.sf_cidr6), e.cidr6, false);
}

absl::Status EgressController::WriteSandbox(uint64_t cgroup_id,
                                            uint32_t generation, uint32_t flags,
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

  // Without its counters a sandbox's record could not show it is whole:
  // a full counters map is a (retryable) refusal, not a silent gap.
  sf_counters zero{};
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.sf_counters), &cgroup_id,
                          &zero, BPF_ANY) != 0) {
    int err = errno;
    DeleteEntries(state.entries);
    return Unavailable(absl::StrCat("counters for sandbox ", cgroup_id, ": ",
                                    std::strerror(err)));
  }
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
  if (!pin_dir_.empty()) {
    if (absl::Status s = PinLinks(cgroup_id, state.links); !s.ok()) {
      state.links.clear();
      bpf_map_delete_elem(bpf_map__fd(skel_->maps.sf_sandboxes), &cgroup_id);
      DeleteEntries(state.entries);
      return s;
    }
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
  if (absl::Status s =
          WriteSandbox(cgroup_id, generation, SandboxFlags(phase), BPF_EXIST);
      !s.ok()) {
    DeleteEntries(*entries);
    return s;
  }
  // 3. Nothing refers to the old generation any more.
  DeleteState(state);
  state.adopted = false;
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
  // The sandbox entry goes first: while the links come off one by one,
  // the hooks still attached find no sandbox and deny (fail closed).
  bpf_map_delete_elem(bpf_map__fd(skel_->maps.sf_sandboxes), &cgroup_id);
  if (!pin_dir_.empty()) UnpinLinks(cgroup_id, it->second.links);
  it->second.links.clear();
  DeleteState(it->second);
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
