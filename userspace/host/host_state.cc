#include "host/host_state.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/bpf_handles.h"
#include "common/status.h"
#include "host/bpf_lsm.h"
#include "host/build_id.h"

namespace sandfence {
namespace {

constexpr long kBpfFsMagic = 0xcafe4a11;

// An array map pinned at path, created (and pinned) if absent.
absl::StatusOr<UniqueFd> OpenOrCreateArray(const std::string& path,
                                           const char* name,
                                           uint32_t value_size,
                                           uint32_t entries, bool* created) {
  *created = false;
  UniqueFd fd(bpf_obj_get(path.c_str()));
  if (fd) return fd;
  if (errno != ENOENT) {
    return ErrnoError(errno, absl::StrCat("open pinned map ", path));
  }
  fd.reset(CreateNamedMap(BPF_MAP_TYPE_ARRAY, name, sizeof(uint32_t),
                          value_size, entries));
  if (!fd) return ErrnoError(errno, absl::StrCat("create map ", name));
  if (bpf_obj_pin(fd.get(), path.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("pin ", path));
  }
  *created = true;
  return fd;
}

// A cached probe result (CachedProbe), as the facts map holds it.
struct FactKey {
  char name[32];
};
struct FactValue {
  int32_t code;  // absl::StatusCode
  uint32_t size;
  char message[504];
};
static_assert(sizeof(FactValue) == 512);

FactKey KeyOf(absl::string_view name) {
  FactKey k{};
  std::memcpy(k.name, name.data(), std::min(name.size(), sizeof(k.name) - 1));
  return k;
}

bool Alive(const sf_driver& d) {
  if (d.pid == 0) return false;
  absl::StatusOr<uint64_t> start = ProcessStartTicks(static_cast<pid_t>(d.pid));
  return start.ok() && *start == d.start_ticks;
}

}  // namespace

std::vector<std::string> SandfenceOwnPaths(
    const std::string& pin_root, const std::vector<std::string>& extra) {
  std::vector<std::string> out = {kDefaultRunDir, kDefaultRecordsDir};
  if (!pin_root.empty()) out.push_back(pin_root);
  for (const std::string& e : extra) {
    if (!e.empty()) out.push_back(e);
  }
  return out;
}

absl::string_view DriverKindName(DriverKind kind) {
  switch (kind) {
    case DriverKind::kDaemon:
      return "daemon";
    case DriverKind::kRun:
      return "run";
  }
  return "unknown";
}

absl::Status EnsureBpfFs(const std::string& pin_root) {
  constexpr char kBpfFs[] = "/sys/fs/bpf";
  if (pin_root.rfind(kBpfFs, 0) != 0) return absl::OkStatus();
  struct statfs fs {};
  if (::statfs(kBpfFs, &fs) == 0 && fs.f_type == kBpfFsMagic) {
    return absl::OkStatus();
  }
  if (::mount("bpf", kBpfFs, "bpf", 0, "mode=0700") != 0) {
    return ErrnoError(errno, "mount a bpf filesystem at /sys/fs/bpf");
  }
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string& dir) {
  std::string partial;
  for (absl::string_view part : absl::StrSplit(dir, '/', absl::SkipEmpty())) {
    absl::StrAppend(&partial, "/", part);
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoError(errno, absl::StrCat("create ", partial));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ProcessStartTicks(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  std::ifstream in(path);
  if (!in) return ErrnoError(errno, absl::StrCat("read ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string stat = buffer.str();
  // The command (field 2) is in parentheses and may hold spaces: count the
  // fields after its closing one. starttime is field 22.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) {
    return absl::InternalError(absl::StrCat(path, ": no command field"));
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(close + 2), ' ');
  uint64_t ticks = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &ticks)) {
    return absl::InternalError(absl::StrCat(path, ": no start time"));
  }
  return ticks;
}

absl::StatusOr<std::unique_ptr<HostState>> HostState::Open(
    const HostOptions& options) {
  std::unique_ptr<HostState> h(new HostState());
  h->kind_ = options.kind;
  if (options.pin_root.empty()) return h;

  h->pin_root_ = options.pin_root;
  while (h->pin_root_.size() > 1 && h->pin_root_.back() == '/') {
    h->pin_root_.pop_back();
  }
  if (absl::Status s = EnsureBpfFs(h->pin_root_); !s.ok()) return s;
  if (absl::Status s = MakeDirs(h->pin_root_); !s.ok()) return s;
  struct statfs fs {};
  if (::statfs(h->pin_root_.c_str(), &fs) != 0) {
    return ErrnoError(errno, absl::StrCat("statfs ", h->pin_root_));
  }
  if (fs.f_type != kBpfFsMagic) {
    return Rejected(absl::StrCat(
        "pin directory ", h->pin_root_,
        " is not on a bpf filesystem (mount -t bpf bpf /sys/fs/bpf)"));
  }
  // Pinned state of a layout before sets (its host map and maps directory
  // at the root): refuse rather than mix.
  if (::access(PinLayout(h->pin_root_).HostMap().c_str(), F_OK) == 0 ||
      ::access(PinLayout(h->pin_root_).MapsDir().c_str(), F_OK) == 0) {
    return Rejected(absl::StrCat(
        "pinned sandfence state under ", h->pin_root_,
        " is from an older sandfence (no per-build sets); `sandfence daemon "
        "--cleanup` removes it (and ends its sandboxes' enforcement)"));
  }
  // The root's lock orders what changes the sets: this set's creation and
  // this process's registration, against another process removing sets
  // nobody uses. `daemon --cleanup` removes the root itself: a directory
  // locked after that happened is a dead one, and is made again.
  UniqueFd root_fd;
  for (int attempt = 0;; ++attempt) {
    if (absl::Status s = MakeDirs(h->pin_root_); !s.ok()) return s;
    root_fd.reset(
        ::open(h->pin_root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root_fd) return ErrnoError(errno, absl::StrCat("open ", h->pin_root_));
    while (::flock(root_fd.get(), LOCK_EX) != 0 && errno == EINTR) {
    }
    struct stat held {}, now {};
    if (::fstat(root_fd.get(), &held) == 0 &&
        ::stat(h->pin_root_.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_nlink > 0) {
      break;
    }
    root_fd.reset();
    if (attempt == 100) {
      return Unavailable(absl::StrCat("the pin directory ", h->pin_root_,
                                      " keeps being removed"));
    }
  }
  CollectUnusedSets(h->pin_root_, BpfBuildId());
  h->pins_ = PinLayout(PinLayout::SetDir(h->pin_root_, BpfBuildId()));
  if (absl::Status s = MakeDirs(h->pins_.set()); !s.ok()) return s;
  h->set_fd_.reset(
      ::open(h->pins_.set().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!h->set_fd_) {
    return ErrnoError(errno, absl::StrCat("open ", h->pins_.set()));
  }
  Lock lock = h->Exclusive();

  bool created = false;
  absl::StatusOr<UniqueFd> host =
      OpenOrCreateArray(h->pins_.HostMap(), "sf_host", sizeof(sf_host), 1,
                        &created);
  if (!host.ok()) return host.status();
  h->host_map_ = *std::move(host);
  const uint32_t zero = 0;
  sf_host value{};
  if (created) {
    value.abi = SF_ABI_VERSION;
    value.next_generation = 1;
    if (bpf_map_update_elem(h->host_map_.get(), &zero, &value, BPF_ANY) != 0) {
      return ErrnoError(errno, "write sf_host");
    }
  } else if (bpf_map_lookup_elem(h->host_map_.get(), &zero, &value) != 0) {
    return ErrnoError(errno, "read sf_host");
  }
  if (value.abi != SF_ABI_VERSION) {
    return Rejected(absl::StrCat(
        "pinned sandfence state under ", h->pins_.set(), " has ABI ", value.abi,
        "; this sandfence speaks ABI ", SF_ABI_VERSION,
        ": `sandfence daemon --cleanup` removes it (and ends its sandboxes' "
        "enforcement)"));
  }
  h->facts_map_.reset(bpf_obj_get(h->pins_.FactsMap().c_str()));
  if (!h->facts_map_) {
    h->facts_map_.reset(CreateNamedMap(BPF_MAP_TYPE_HASH, "sf_facts",
                                       sizeof(FactKey), sizeof(FactValue), 64));
    if (!h->facts_map_ ||
        bpf_obj_pin(h->facts_map_.get(), h->pins_.FactsMap().c_str()) != 0) {
      return ErrnoError(errno, "create the pinned probe results");
    }
  }
  absl::StatusOr<UniqueFd> drivers =
      OpenOrCreateArray(h->pins_.DriversMap(), "sf_drivers",
                        sizeof(sf_driver), SF_MAX_DRIVERS, &created);
  if (!drivers.ok()) return drivers.status();
  h->drivers_map_ = *std::move(drivers);

  absl::StatusOr<uint64_t> start = ProcessStartTicks(::getpid());
  if (!start.ok()) return start.status();
  for (uint32_t slot = 0; slot < SF_MAX_DRIVERS; ++slot) {
    sf_driver d{};
    if (bpf_map_lookup_elem(h->drivers_map_.get(), &slot, &d) != 0) {
      return ErrnoError(errno, "read sf_drivers");
    }
    if (d.kind != SF_DRIVER_FREE) continue;
    d.pid = static_cast<uint32_t>(::getpid());
    d.kind = static_cast<uint32_t>(options.kind);
    d.start_ticks = *start;
    if (bpf_map_update_elem(h->drivers_map_.get(), &slot, &d, BPF_ANY) != 0) {
      return ErrnoError(errno, "write sf_drivers");
    }
    h->slot_ = slot;
    return h;
  }
  return Unavailable(absl::StrCat(
      "all ", SF_MAX_DRIVERS, " sandfence process slots of ", h->pins_.set(),
      " are taken; a dead process's slot frees when its sandboxes are "
      "reaped (any new sandfence run or the daemon does it)"));
}

HostState::~HostState() {
  if (!pinned()) return;
  Lock lock = Exclusive();
  FreeSlot(slot_);
}

HostState::Lock::~Lock() {
  if (host_ == nullptr) return;
  host_->lock_mu_.Lock();
  if (--host_->lock_depth_ == 0) {
    if (host_->set_fd_) ::flock(host_->set_fd_.get(), LOCK_UN);
    host_->lock_owner_ = std::thread::id();
  }
  host_->lock_mu_.Unlock();
}

HostState::Lock HostState::Exclusive() const {
  const std::thread::id me = std::this_thread::get_id();
  lock_mu_.Lock();
  if (lock_depth_ > 0 && lock_owner_ == me) {
    ++lock_depth_;
    lock_mu_.Unlock();
    return Lock(this);
  }
  // Another thread holds it: wait for it to let go.
  lock_mu_.Await(absl::Condition(
      +[](int* depth) { return *depth == 0; }, &lock_depth_));
  lock_owner_ = me;
  lock_depth_ = 1;
  lock_mu_.Unlock();
  if (set_fd_) {
    while (::flock(set_fd_.get(), LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  return Lock(this);
}

absl::StatusOr<uint32_t> HostState::AllocateGeneration() {
  if (!pinned()) return ++private_generation_;
  Lock lock = Exclusive();
  const uint32_t zero = 0;
  sf_host value{};
  if (bpf_map_lookup_elem(host_map_.get(), &zero, &value) != 0) {
    return ErrnoError(errno, "read sf_host");
  }
  const uint32_t generation = value.next_generation;
  // 0 is never a generation: a zeroed key must not match a rule.
  value.next_generation = generation + 1 == 0 ? 1 : generation + 1;
  if (bpf_map_update_elem(host_map_.get(), &zero, &value, BPF_ANY) != 0) {
    return ErrnoError(errno, "write sf_host");
  }
  return generation == 0 ? AllocateGeneration() : generation;
}

absl::Status HostState::CachedProbe(
    absl::string_view name, absl::FunctionRef<absl::Status()> probe) const {
  const FactKey key = KeyOf(name);
  FactValue value{};
  if (facts_map_ &&
      bpf_map_lookup_elem(facts_map_.get(), &key, &value) == 0) {
    return absl::Status(static_cast<absl::StatusCode>(value.code),
                        absl::string_view(value.message,
                                          std::min<size_t>(value.size,
                                                           sizeof(value.message))));
  }
  absl::Status result = probe();
  // Not knowing (no privileges to probe) is not a fact of the kernel.
  if (facts_map_ && !absl::IsPermissionDenied(result)) {
    value.code = static_cast<int32_t>(result.code());
    const absl::string_view message = result.message();
    value.size = static_cast<uint32_t>(
        std::min(message.size(), sizeof(value.message)));
    std::memcpy(value.message, message.data(), value.size);
    bpf_map_update_elem(facts_map_.get(), &key, &value, BPF_ANY);
  }
  return result;
}

absl::Status HostState::BpfLsm() const {
  if (!pinned()) {
    static const absl::Status lsm = ProbeBpfLsm();
    return lsm;
  }
  return CachedProbe("bpf_lsm", [] { return ProbeBpfLsm(); });
}

std::vector<DeadDriver> HostState::DeadDrivers() const {
  std::vector<DeadDriver> dead;
  if (!pinned()) return dead;
  for (uint32_t slot = 0; slot < SF_MAX_DRIVERS; ++slot) {
    sf_driver d{};
    if (slot == slot_ ||
        bpf_map_lookup_elem(drivers_map_.get(), &slot, &d) != 0 ||
        d.kind == SF_DRIVER_FREE || Alive(d)) {
      continue;
    }
    dead.push_back({slot, static_cast<DriverKind>(d.kind),
                    static_cast<pid_t>(d.pid), d.start_ticks});
  }
  return dead;
}

bool HostState::OthersAlive() const {
  if (!pinned()) return false;
  for (uint32_t slot = 0; slot < SF_MAX_DRIVERS; ++slot) {
    sf_driver d{};
    if (slot != slot_ &&
        bpf_map_lookup_elem(drivers_map_.get(), &slot, &d) == 0 &&
        d.kind != SF_DRIVER_FREE && Alive(d)) {
      return true;
    }
  }
  return false;
}

bool HostState::StillDead(const DeadDriver& dead) const {
  if (!pinned() || dead.slot == slot_) return false;
  sf_driver d{};
  return bpf_map_lookup_elem(drivers_map_.get(), &dead.slot, &d) == 0 &&
         d.kind != SF_DRIVER_FREE && d.pid == static_cast<uint32_t>(dead.pid) &&
         d.start_ticks == dead.start_ticks && !Alive(d);
}

void HostState::FreeSlot(uint32_t slot) {
  if (!pinned()) return;
  sf_driver free{};
  bpf_map_update_elem(drivers_map_.get(), &slot, &free, BPF_ANY);
}

namespace {

std::vector<std::string> ListNames(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    ::closedir(d);
  }
  return names;
}

// Whether a set is needed: a live process registered in it, a sandbox
// linked, or a guard attached. Unreadable state counts as needed.
bool SetInUse(const PinLayout& set) {
  UniqueFd drivers(bpf_obj_get(set.DriversMap().c_str()));
  if (drivers) {
    for (uint32_t slot = 0; slot < SF_MAX_DRIVERS; ++slot) {
      sf_driver d{};
      if (bpf_map_lookup_elem(drivers.get(), &slot, &d) != 0) return true;
      if (d.kind != SF_DRIVER_FREE && Alive(d)) return true;
    }
  } else if (errno != ENOENT) {
    return true;
  }
  for (const std::string& name : ListNames(set.LinksDir())) {
    if (name != "host") return true;  // a sandbox's links
  }
  for (const std::string& enforcer : ListNames(set.GuardsDir())) {
    if (!ListNames(set.GuardLinks(enforcer)).empty()) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> CollectUnusedSets(const std::string& pin_root,
                                           const std::string& keep_build) {
  std::vector<std::string> removed;
  for (const std::string& build : ListNames(PinLayout::SetsDir(pin_root))) {
    if (build == keep_build) continue;
    const PinLayout set(PinLayout::SetDir(pin_root, build));
    UniqueFd fd(::open(set.set().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    // A process of that build that holds its set's lock is busy with it.
    if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;
    if (SetInUse(set)) continue;
    if (RemovePinnedTree(set.set()).ok()) removed.push_back(build);
  }
  return removed;
}

absl::Status RemoveUnusedPins(const std::string& pin_root) {
  UniqueFd root(::open(pin_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoError(errno, absl::StrCat("open ", pin_root));
  }
  while (::flock(root.get(), LOCK_EX) != 0 && errno == EINTR) {
  }
  CollectUnusedSets(pin_root, "");
  ::rmdir(PinLayout::SetsDir(pin_root).c_str());
  std::vector<std::string> left = ListNames(PinLayout::SetsDir(pin_root));
  if (!left.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pinned sets still in use under ", pin_root, ": ",
        absl::StrJoin(left, ", "),
        " (a sandfence process of that build runs, or its sandboxes do)"));
  }
  if (::rmdir(pin_root.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(errno, absl::StrCat("remove ", pin_root));
  }
  return absl::OkStatus();
}

absl::Status RemovePinnedTree(const std::string& dir) {
  absl::Status first;
  std::vector<std::string> names = ListNames(dir);
  std::sort(names.begin(), names.end());
  std::stable_partition(names.begin(), names.end(),
                        [](const std::string& n) { return n == "links"; });
  for (const std::string& name : names) {
    const std::string path = absl::StrCat(dir, "/", name);
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      first.Update(RemovePinnedTree(path));
    } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      first.Update(ErrnoError(errno, absl::StrCat("unpin ", path)));
    }
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) {
    first.Update(ErrnoError(errno, absl::StrCat("remove ", dir)));
  }
  return first;
}

}  // namespace sandfence
