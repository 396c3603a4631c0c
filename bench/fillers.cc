#include "bench/fillers.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "egress/egress_abi.h"

namespace sandfence::bench {
namespace {

constexpr size_t kFdReserve = 1024;

size_t OpenFds() {
  size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

template <typename K, typename V>
absl::Status WriteAll(int fd, const std::vector<MapEntry<K, V>>& entries) {
  for (const auto& e : entries) {
    if (bpf_map_update_elem(fd, &e.key, &e.value, BPF_ANY) != 0) {
      return ErrnoError(errno, "write a map-only sandbox's rule");
    }
  }
  return absl::OkStatus();
}

template <typename K, typename V>
void DeleteAll(int fd, const std::vector<MapEntry<K, V>>& entries) {
  for (const auto& e : entries) bpf_map_delete_elem(fd, &e.key);
}

}  // namespace

size_t SandboxFdBudget(const EgressController& controller) {
  rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  const size_t used = OpenFds() + kFdReserve;
  const size_t per = std::max<size_t>(1, controller.LinksPerSandbox());
  return rl.rlim_cur > used ? (rl.rlim_cur - used) / per : 0;
}

CgroupDirs::~CgroupDirs() {
  for (auto it = paths_.rbegin(); it != paths_.rend(); ++it) {
    ::rmdir(it->c_str());
  }
}

HostState* BenchHost() {
  static HostState* host = [] {
    absl::StatusOr<std::unique_ptr<HostState>> h = HostState::Open({});
    return h.ok() ? h->release() : nullptr;
  }();
  return host;
}

absl::StatusOr<CgroupDirs::Dir> CgroupDirs::Make(const std::string& name) {
  Dir d;
  d.path = absl::StrCat(parent_, "/", name);
  if (::mkdir(d.path.c_str(), 0755) != 0) {
    return ErrnoError(errno, absl::StrCat("create cgroup ", d.path));
  }
  paths_.push_back(d.path);
  d.fd.reset(::open(d.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d.fd) return ErrnoError(errno, absl::StrCat("open ", d.path));
  struct stat st;
  if (::fstat(d.fd.get(), &st) != 0) {
    return ErrnoError(errno, absl::StrCat("stat ", d.path));
  }
  d.id = st.st_ino;
  // One below the parent, whose level is counted once.
  if (level_ == 0) {
    absl::StatusOr<CgroupRef> parent = InspectCgroup(parent_);
    level_ = parent.ok() ? parent->level + 1 : 1;
  }
  d.level = level_;
  return d;
}

absl::StatusOr<MapOnlySandboxes> MapOnlySandboxes::Open(
    const EgressController& controller) {
  const int prog = controller.prog_fd("connect4");
  uint32_t ids[64] = {};
  bpf_prog_info info;
  std::memset(&info, 0, sizeof(info));
  info.nr_map_ids = 64;
  info.map_ids = reinterpret_cast<uint64_t>(ids);
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(prog, &info, &len) != 0) {
    return ErrnoError(errno, "read connect4's map ids");
  }
  MapOnlySandboxes m;
  const std::pair<const char*, UniqueFd*> wanted[] = {
      {"sf_sandboxes", &m.sandboxes_}, {"sf_counters", &m.counters_},
      {"sf_exact4", &m.exact4_},       {"sf_exact6", &m.exact6_},
      {"sf_cidr4", &m.cidr4_},         {"sf_cidr6", &m.cidr6_}};
  for (uint32_t i = 0; i < std::min<uint32_t>(info.nr_map_ids, 64); ++i) {
    UniqueFd fd(bpf_map_get_fd_by_id(ids[i]));
    if (!fd) continue;
    bpf_map_info mi;
    std::memset(&mi, 0, sizeof(mi));
    uint32_t mlen = sizeof(mi);
    if (bpf_obj_get_info_by_fd(fd.get(), &mi, &mlen) != 0) continue;
    for (const auto& [name, slot] : wanted) {
      if (std::strcmp(mi.name, name) == 0) *slot = std::move(fd);
    }
  }
  for (const auto& [name, slot] : wanted) {
    if (!slot->valid()) {
      return absl::NotFoundError(
          absl::StrCat("connect4 does not use a map named ", name));
    }
  }
  return m;
}

MapOnlySandboxes::~MapOnlySandboxes() {
  if (!sandboxes_) return;  // moved from
  for (const auto& [id, e] : written_) {
    bpf_map_delete_elem(sandboxes_.get(), &id);
    bpf_map_delete_elem(counters_.get(), &id);
    DeleteAll(exact4_.get(), e.exact4);
    DeleteAll(exact6_.get(), e.exact6);
    DeleteAll(cidr4_.get(), e.cidr4);
    DeleteAll(cidr6_.get(), e.cidr6);
  }
}

absl::Status MapOnlySandboxes::Add(uint64_t cgroup_id,
                                   const CompiledPhase& phase) {
  const uint32_t generation = next_generation_++;
  absl::StatusOr<RuleEntries> e = BuildRuleEntries(phase, generation);
  if (!e.ok()) return e.status();
  written_.emplace_back(cgroup_id, *std::move(e));
  const RuleEntries& entries = written_.back().second;
  absl::Status s = WriteAll(exact4_.get(), entries.exact4);
  if (s.ok()) s = WriteAll(exact6_.get(), entries.exact6);
  if (s.ok()) s = WriteAll(cidr4_.get(), entries.cidr4);
  if (s.ok()) s = WriteAll(cidr6_.get(), entries.cidr6);
  if (!s.ok()) return s;
  sf_counters zero{};
  sf_sandbox sb{};
  sb.generation = generation;
  sb.flags = SandboxFlags(phase);
  if (bpf_map_update_elem(counters_.get(), &cgroup_id, &zero, BPF_ANY) != 0 ||
      bpf_map_update_elem(sandboxes_.get(), &cgroup_id, &sb, BPF_NOEXIST) !=
          0) {
    return ErrnoError(errno, "write a map-only sandbox");
  }
  return absl::OkStatus();
}

}  // namespace sandfence::bench
