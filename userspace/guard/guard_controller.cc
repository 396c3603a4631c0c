#include "guard/guard_controller.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/cgroup.h"
#include "common/libbpf_log.h"
#include "common/sha256.h"
#include "common/bpf_handles.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "guard/proc_names.h"
#include "host/bpf_object.h"
#include "sf_guard_lsm.skel.h"
#include "sf_guard_sig.skel.h"

#ifdef SF_GUARD_TEST_MUTANT
#include <cstdlib>

#include "guard/guard_mutant.h"
#endif

namespace sandfence {
namespace {

absl::Status FillProcNames(int map_fd) {
  for (const ProcNameEntry& e : ProcNameTable()) {
    sf_procname key = {};
    std::strncpy(key.name, e.name, sizeof(key.name) - 1);
    sf_procname_kind kind = {};
    kind.proc_class = e.proc_class;
    kind.flags = e.flags;
    kind.child_class = e.child_class;
    kind.child_flags = e.child_flags;
    if (bpf_map_update_elem(map_fd, &key, &kind, BPF_ANY) != 0) {
      return ErrnoError(errno, absl::StrCat("sf_procnames: ", e.name));
    }
  }
  return absl::OkStatus();
}

// The number of arguments of an LSM hook in the running kernel's BTF.
absl::StatusOr<uint32_t> LsmHookArgs(const btf* vmlinux, const char* hook) {
  std::string func = absl::StrCat("bpf_lsm_", hook);
  int id = btf__find_by_name_kind(vmlinux, func.c_str(), BTF_KIND_FUNC);
  if (id < 0) {
    return Unavailable(absl::StrCat("the kernel has no LSM hook ", hook));
  }
  const btf_type* proto =
      btf__type_by_id(vmlinux, btf__type_by_id(vmlinux, id)->type);
  if (proto == nullptr || !btf_is_func_proto(proto)) {
    return Unavailable(absl::StrCat("LSM hook ", hook, ": no prototype"));
  }
  return static_cast<uint32_t>(btf_vlen(proto));
}

// Hooks whose arguments moved between kernels: the program reads them
// where the running kernel puts them (sf_guard_lsm.bpf.c).
absl::Status ConfigureHookArgs(sf_guard_lsm* skel) {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (vmlinux == nullptr) return ErrnoError(errno, "vmlinux BTF");
  absl::StatusOr<uint32_t> setattr = LsmHookArgs(vmlinux, "inode_setattr");
  absl::StatusOr<uint32_t> perf = LsmHookArgs(vmlinux, "perf_event_open");
  btf__free(vmlinux);
  if (!setattr.ok()) return setattr.status();
  if (!perf.ok()) return perf.status();
  if ((*setattr != 2 && *setattr != 3) || (*perf != 1 && *perf != 2)) {
    return Unavailable(
        absl::StrCat("unknown LSM hook prototypes: inode_setattr has ",
                     *setattr, " arguments, perf_event_open ", *perf));
  }
  skel->rodata->sf_setattr_nargs = *setattr;
  skel->rodata->sf_perf_nargs = *perf;
  return absl::OkStatus();
}

#ifdef SF_GUARD_TEST_MUTANT
// The mutation run's build only (bpf/guard/guard_mutant.h): the program
// SF_TEST_NEUTRALIZE names allows everything. A name that is no guard
// program fails the load, so a typo cannot pass as a proven hook.
template <typename S>
absl::Status NeutralizeForTest(S* skel) {
  const char* want = std::getenv("SF_TEST_NEUTRALIZE");
  if (want == nullptr || *want == '\0') return absl::OkStatus();
#define SF_GPROG_NAME(p) #p,
  static constexpr const char* kNames[] = {"", SF_GUARD_PROGS(SF_GPROG_NAME)};
#undef SF_GPROG_NAME
  for (uint32_t id = 1; id < SF_GPROG_COUNT; ++id) {
    if (std::strcmp(kNames[id], want) == 0) {
      skel->rodata->sf_test_neutralize = id;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "SF_TEST_NEUTRALIZE=", want, ": no guard program of that name"));
}
#endif

constexpr const char* kMapNames[] = {
    "sf_guarded", "sf_glost",     "sf_glevels", "sf_glost_other",
    "sf_grings",  "sf_procnames", "sf_gprot",   "sf_gprotn"};

// Loads one enforcer's object (its maps pinned as the enforcer `key` of
// pins, when key is not empty), fills its /proc name table, and returns the fds of its maps (in
// kMapNames order) and programs. Nothing is attached.
template <typename S>
absl::Status LoadEnforcer(
    absl::string_view name, const PinLayout& pins, const std::string& key,
    std::vector<UniqueFd>* maps,
    std::vector<std::pair<std::string, UniqueFd>>* progs) {
  LibbpfLogCapture log;
  Skeleton<S> skel(S::open());
  if (skel == nullptr) {
    return BpfLoadError(errno, absl::StrCat(name, " enforcer: open"), &log);
  }
  if (!key.empty()) {
    if (absl::Status s = MakeDirs(pins.GuardMaps(key)); !s.ok()) {
      return s;
    }
    if (absl::Status s = SetMapPinPaths(skel->obj,
                                        [&](absl::string_view map) {
                                          return pins.GuardMap(key, map);
                                        });
        !s.ok()) {
      return s;
    }
  }
  if constexpr (std::is_same_v<S, sf_guard_lsm>) {
    if (absl::Status s = ConfigureHookArgs(skel.get()); !s.ok()) return s;
  }
#ifdef SF_GUARD_TEST_MUTANT
  if (absl::Status s = NeutralizeForTest(skel.get()); !s.ok()) return s;
#endif
  if (int err = S::load(skel.get()); err != 0) {
    return BpfLoadError(-err, absl::StrCat(name, " enforcer: load"), &log);
  }
  for (const char* map_name : kMapNames) {
    bpf_map* map = bpf_object__find_map_by_name(skel->obj, map_name);
    UniqueFd fd = DupFd(map == nullptr ? -1 : bpf_map__fd(map));
    if (!fd) return ErrnoError(errno, absl::StrCat("guard map ", map_name));
    maps->push_back(std::move(fd));
  }
  if (absl::Status s = FillProcNames((*maps)[5].get()); !s.ok()) return s;
  if (!key.empty()) {
    if (absl::Status s = MakeDirs(pins.GuardProgs(key)); !s.ok()) {
      return s;
    }
  }
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel->obj) {
    UniqueFd fd = DupFd(bpf_program__fd(prog));
    if (!fd) return ErrnoError(errno, bpf_program__name(prog));
    if (!key.empty()) {
      if (absl::Status s =
              PinFresh(fd.get(), pins.GuardProg(key, bpf_program__name(prog)));
          !s.ok()) {
        return s;
      }
    }
    progs->emplace_back(bpf_program__name(prog), std::move(fd));
  }
  return absl::OkStatus();
}

}  // namespace

GuardController::GuardController(GuardController&&) noexcept = default;
GuardController& GuardController::operator=(GuardController&&) noexcept =
    default;

GuardController::~GuardController() {
  if (host_ == nullptr || enforcer_ == Enforcer::kOff || !maps_.rings) return;
  // This process's sandboxes stay guarded on a pinned host, and their
  // events wait in its ring for a successor to read; a process that guards
  // nothing any more takes its ring along. On a private host the links
  // close with this object.
  const uint32_t slot = host_->slot();
  bool mine = false;
  for (uint64_t id : GuardedSandboxes()) {
    sf_guard_sandbox v{};
    if (bpf_map_lookup_elem(maps_.guarded.get(), &id, &v) == 0 &&
        v.ring == slot) {
      mine = true;
    }
  }
  if (!mine || !host_->pinned()) bpf_map_delete_elem(maps_.rings.get(), &slot);
}

absl::StatusOr<UniqueFd> GuardController::RingOfSlot(uint32_t slot) const {
  if (!maps_.rings) return absl::NotFoundError("the guard is off");
  return RingOfMapSlot(maps_.rings.get(), slot);
}

void GuardController::ClearSlot(uint32_t slot) {
  if (maps_.rings && host_ != nullptr && slot != host_->slot()) {
    bpf_map_delete_elem(maps_.rings.get(), &slot);
  }
}

namespace {

// The object an enforcer loads, by its bytes: a set keeps one pinned copy
// per object (a test's mutant object included), never one in another's
// place.
std::string GuardObjectId(Enforcer enforcer) {
  size_t size = 0;
  const void* bytes = enforcer == Enforcer::kLsm
                          ? sf_guard_lsm::elf_bytes(&size)
                          : sf_guard_sig::elf_bytes(&size);
  return Sha256Hex(absl::string_view(static_cast<const char*>(bytes), size))
      .substr(0, 16);
}

// The enforcer's name in the pin layout ("" on a private host).
std::string GuardKeyOf(const HostState& host, Enforcer enforcer) {
  if (!host.pinned()) return "";
  return absl::StrCat(EnforcerName(enforcer), "-", GuardObjectId(enforcer));
}

}  // namespace

std::string GuardController::Key() const { return GuardKeyOf(*host_, enforcer_); }

bool GuardAttachedOnHost(const HostState& host) {
  if (!host.pinned()) return false;
  for (Enforcer e : {Enforcer::kLsm, Enforcer::kSignal}) {
    if (!ListPins(host.pins().GuardLinks(GuardKeyOf(host, e))).empty()) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<GuardController> GuardController::Create(HostState* host,
                                                        GuardMode mode) {
  if (mode == GuardMode::kOff) return GuardController(host, Enforcer::kOff);
  // The programs look sandboxes up by absolute cgroup level.
  if (absl::Status s = CheckCgroupLevelsAbsolute(); !s.ok()) return s;

  HostState::Lock lock = host->Exclusive();
  // One guard per host: an attached one (guarding a sandbox) is the one
  // that governs. One only pinned, idle since its last sandbox, does not.
  if (host->pinned()) {
    for (Enforcer e : {Enforcer::kLsm, Enforcer::kSignal}) {
      if (ListPins(host->pins().GuardLinks(GuardKeyOf(*host, e))).empty()) {
        continue;
      }
      if (mode == GuardMode::kLsm && e != Enforcer::kLsm) {
        return Rejected(
            "guard mode lsm: the process guard this host runs is signal "
            "(BPF LSM was unavailable when it was loaded)");
      }
      GuardController guard(host, e);
      if (absl::Status s = guard.LoadOrOpen(guard.Key()); !s.ok()) return s;
      if (absl::Status s = guard.CreateRing(); !s.ok()) return s;
      return guard;
    }
  }

  std::string fallback;
  if (mode == GuardMode::kAuto || mode == GuardMode::kLsm) {
    absl::Status loaded = host->BpfLsm();
    if (loaded.ok()) {
      GuardController guard(host, Enforcer::kLsm);
      loaded = guard.LoadOrOpen(guard.Key());
      if (loaded.ok()) loaded = guard.CreateRing();
      if (loaded.ok()) return guard;
    }
    if (loaded.code() == absl::StatusCode::kPermissionDenied) return loaded;
    if (mode == GuardMode::kLsm) {
      return Rejected(
          absl::StrCat("guard mode lsm cannot be enforced on this kernel: ",
                       loaded.message()));
    }
    fallback = std::string(loaded.message());
  }
  GuardController guard(host, Enforcer::kSignal);
  absl::Status loaded = guard.LoadOrOpen(guard.Key());
  if (loaded.ok()) loaded = guard.CreateRing();
  if (!loaded.ok()) {
    if (loaded.code() == absl::StatusCode::kPermissionDenied) return loaded;
    return Rejected(absl::StrCat(
        "no process guard can be enforced on this kernel: ", loaded.message(),
        fallback.empty() ? "" : absl::StrCat("; lsm: ", fallback)));
  }
  guard.fallback_reason_ = std::move(fallback);
  return guard;
}

absl::Status GuardController::LoadOrOpen(absl::string_view key_view) {
  const std::string key(key_view);
  const PinLayout& pins = host_->pins();
  std::vector<UniqueFd> maps;
  if (!key.empty() && !ListPins(pins.GuardProgs(key)).empty()) {
    for (const char* name : kMapNames) {
      UniqueFd fd(OpenPinned(pins.GuardMap(key, name)));
      if (!fd) {
        return ErrnoError(errno,
                          absl::StrCat("open the host's guard map ", name));
      }
      maps.push_back(std::move(fd));
    }
    for (const std::string& name : ListPins(pins.GuardProgs(key))) {
      UniqueFd fd(OpenPinned(pins.GuardProg(key, name)));
      if (!fd) {
        return ErrnoError(errno,
                          absl::StrCat("open the host's guard program ", name));
      }
      progs_.emplace_back(name, std::move(fd));
    }
  } else {
    absl::Status s =
        enforcer_ == Enforcer::kLsm
            ? LoadEnforcer<sf_guard_lsm>("lsm", pins, key, &maps, &progs_)
            : LoadEnforcer<sf_guard_sig>("signal", pins, key, &maps, &progs_);
    if (!s.ok()) return s;
  }
  maps_.guarded = std::move(maps[0]);
  maps_.lost = std::move(maps[1]);
  maps_.levels = std::move(maps[2]);
  maps_.lost_other = std::move(maps[3]);
  maps_.rings = std::move(maps[4]);
  maps_.procnames = std::move(maps[5]);
  maps_.prot = std::move(maps[6]);
  maps_.protn = std::move(maps[7]);
  return absl::OkStatus();
}

absl::Status GuardController::CreateRing() {
  absl::StatusOr<UniqueFd> ring = CreateSlotRing(
      maps_.rings.get(), host_->slot(), "sf_gevents", 256 * 1024);
  if (!ring.ok()) return ring.status();
  ring_ = *std::move(ring);
  return absl::OkStatus();
}

absl::Status GuardController::EnsureAttached() {
  const std::string links =
      host_->pinned() ? host_->pins().GuardLinks(Key()) : "";
  if (host_->pinned()) {
    if (ListPins(links).size() == progs_.size()) return absl::OkStatus();
    if (absl::Status s = MakeDirs(links); !s.ok()) return s;
  } else if (!links_.empty()) {
    return absl::OkStatus();
  }
  LibbpfLogCapture log;
  std::vector<UniqueFd> attached;
  for (const auto& [name, fd] : progs_) {
    const std::string pin =
        host_->pinned() ? host_->pins().GuardLink(Key(), name) : "";
    if (host_->pinned() && ::access(pin.c_str(), F_OK) == 0) continue;
    UniqueFd link(bpf_raw_tracepoint_open(nullptr, fd.get()));
    if (!link) {
      return BpfLoadError(
          errno,
          absl::StrCat(EnforcerName(enforcer_), " enforcer: attach ", name),
          &log);
    }
    if (host_->pinned() && bpf_obj_pin(link.get(), pin.c_str()) != 0) {
      return ErrnoError(errno, absl::StrCat("pin ", pin));
    }
    attached.push_back(std::move(link));
  }
  if (!host_->pinned()) links_ = std::move(attached);
  return absl::OkStatus();
}

void GuardController::DetachIfUnused() {
  if (!GuardedSandboxes().empty()) return;
  if (host_->pinned()) {
    UnpinDir(host_->pins().GuardLinks(Key()));
  }
  links_.clear();
}

absl::Status GuardController::UpdateLevels() {
  uint64_t mask = 0;
  const int fd = maps_.guarded.get();
  uint64_t key = 0, next = 0;
  const uint64_t* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    sf_guard_sandbox v{};
    if (bpf_map_lookup_elem(fd, &next, &v) == 0 &&
        v.level <= SF_GUARD_MAX_LEVEL) {
      mask |= 1ULL << v.level;
    }
    key = next;
    prev = &key;
  }
  const uint32_t zero = 0;
  if (bpf_map_update_elem(maps_.levels.get(), &zero, &mask, BPF_ANY) != 0) {
    return ErrnoError(errno, "sf_glevels");
  }
  return absl::OkStatus();
}

absl::Status GuardController::AddSandbox(const GuardedSandbox& sandbox) {
  if (sandbox.cgroup_id == 0) return Malformed("sandbox cgroup id 0");
  if (sandbox.level > SF_GUARD_MAX_LEVEL) {
    return Rejected(absl::StrCat("sandbox cgroup at level ", sandbox.level,
                                 " is deeper than the guard supports (",
                                 SF_GUARD_MAX_LEVEL, ")"));
  }
  if (enforcer_ == Enforcer::kOff) return absl::OkStatus();

  HostState::Lock lock = host_->Exclusive();
  sf_guard_sandbox known = {};
  if (bpf_map_lookup_elem(maps_.guarded.get(), &sandbox.cgroup_id, &known) ==
          0 &&
      known.level != sandbox.level) {
    return Malformed(absl::StrCat("sandbox ", sandbox.cgroup_id,
                                  " added again at another level (",
                                  sandbox.level, ", was ", known.level, ")"));
  }
  sf_guard_sandbox value = {};
  value.mode = sandbox.audit_only ? SF_GUARD_AUDIT : SF_GUARD_ENFORCE;
  value.flags = (sandbox.kill_readable ? SF_GUARD_F_KILL_READABLE : 0) |
                (sandbox.allow_io_uring ? SF_GUARD_F_IO_URING : 0);
  value.ring = host_->slot();
  value.level = sandbox.level;
  // The loss counter, the level bit and the programs exist before the
  // sandbox does, so that its first event already finds them.
  __u64 zero = 0;
  if (bpf_map_update_elem(maps_.lost.get(), &sandbox.cgroup_id, &zero,
                          BPF_NOEXIST) != 0 &&
      errno != EEXIST) {
    return ErrnoError(errno, "sf_glost");
  }
  if (absl::Status s = EnsureAttached(); !s.ok()) {
    bpf_map_delete_elem(maps_.lost.get(), &sandbox.cgroup_id);
    DetachIfUnused();
    return s;
  }
  const uint32_t key0 = 0;
  uint64_t mask = 0;
  bpf_map_lookup_elem(maps_.levels.get(), &key0, &mask);
  mask |= 1ULL << sandbox.level;
  if (bpf_map_update_elem(maps_.levels.get(), &key0, &mask, BPF_ANY) != 0 ||
      bpf_map_update_elem(maps_.guarded.get(), &sandbox.cgroup_id, &value,
                          BPF_ANY) != 0) {
    const int err = errno;
    bpf_map_delete_elem(maps_.lost.get(), &sandbox.cgroup_id);
    UpdateLevels().IgnoreError();
    DetachIfUnused();
    return ErrnoError(err, "sf_guarded");
  }
  return absl::OkStatus();
}

absl::Status GuardController::RemoveSandbox(uint64_t cgroup_id) {
  if (enforcer_ == Enforcer::kOff) return absl::OkStatus();
  HostState::Lock lock = host_->Exclusive();
  if (bpf_map_delete_elem(maps_.guarded.get(), &cgroup_id) != 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("sandbox ", cgroup_id, " is not guarded"));
    }
    return ErrnoError(errno, "sf_guarded");
  }
  // Events still in flight count as untracked losses from now on.
  __u64 lost = 0;
  if (bpf_map_lookup_elem(maps_.lost.get(), &cgroup_id, &lost) == 0 &&
      lost > 0) {
    const uint32_t zero = 0;
    __u64 other = 0;
    bpf_map_lookup_elem(maps_.lost_other.get(), &zero, &other);
    other += lost;
    bpf_map_update_elem(maps_.lost_other.get(), &zero, &other, BPF_ANY);
  }
  bpf_map_delete_elem(maps_.lost.get(), &cgroup_id);
  absl::Status levels = UpdateLevels();
  DetachIfUnused();
  return levels;
}

absl::Status GuardController::AdoptSandbox(uint64_t cgroup_id) {
  if (enforcer_ == Enforcer::kOff) {
    return absl::FailedPreconditionError("the process guard is off");
  }
  HostState::Lock lock = host_->Exclusive();
  sf_guard_sandbox value{};
  if (bpf_map_lookup_elem(maps_.guarded.get(), &cgroup_id, &value) != 0) {
    return absl::NotFoundError(
        absl::StrCat("sandbox ", cgroup_id, " is not guarded"));
  }
  value.ring = host_->slot();
  if (bpf_map_update_elem(maps_.guarded.get(), &cgroup_id, &value, BPF_EXIST) !=
      0) {
    return ErrnoError(errno, "sf_guarded");
  }
  // A guard whose programs were detached meanwhile (they never are while
  // a sandbox is guarded, but a process may have died mid-way) is attached
  // again.
  return EnsureAttached();
}

std::vector<uint64_t> GuardController::GuardedSandboxes() const {
  std::vector<uint64_t> ids;
  if (!maps_.guarded) return ids;
  uint64_t key = 0, next = 0;
  const uint64_t* prev = nullptr;
  while (bpf_map_get_next_key(maps_.guarded.get(), prev, &next) == 0) {
    ids.push_back(next);
    key = next;
    prev = &key;
  }
  return ids;
}

absl::Status GuardController::Protect(const std::string& path) {
  if (enforcer_ == Enforcer::kOff) {
    // Off: nothing is enforced, but a bad path is still an error.
    absl::StatusOr<ProtectedChain> chain = ResolveProtected(path);
    return chain.ok() ? absl::OkStatus() : chain.status();
  }
  if (protected_ == nullptr) {
    protected_ =
        std::make_unique<ProtectedObjects>(maps_.prot.get(), maps_.protn.get());
  }
  return protected_->Add(path);
}

absl::Status GuardController::Unprotect(const std::string& path) {
  if (protected_ == nullptr) {
    if (enforcer_ == Enforcer::kOff) return absl::OkStatus();
    return absl::NotFoundError(
        absl::StrCat("path ", path, " is not protected"));
  }
  return protected_->Remove(path);
}

absl::StatusOr<uint64_t> GuardController::LostEvents(uint64_t cgroup_id) const {
  if (enforcer_ == Enforcer::kOff) return 0;
  __u64 lost = 0;
  if (bpf_map_lookup_elem(maps_.lost.get(), &cgroup_id, &lost) != 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("sandbox ", cgroup_id, " is not guarded"));
    }
    return ErrnoError(errno, "sf_glost");
  }
  return lost;
}

uint64_t GuardController::LostEventsUntracked() const {
  if (enforcer_ == Enforcer::kOff) return 0;
  const uint32_t zero = 0;
  __u64 other = 0;
  bpf_map_lookup_elem(maps_.lost_other.get(), &zero, &other);
  return other;
}

absl::StatusOr<GuardEventReader> GuardEventReader::Create(int events_fd,
                                                          Callback callback) {
  if (events_fd < 0) return Malformed("no guard event ring buffer (off)");
  GuardEventReader reader;
  reader.state_ = std::make_unique<State>();
  reader.state_->callback = std::move(callback);
  reader.ring_.reset(ring_buffer__new(events_fd, &GuardEventReader::OnSample,
                                      reader.state_.get(), nullptr));
  if (reader.ring_ == nullptr) return ErrnoError(errno, "ring_buffer__new");
  return reader;
}

GuardEventReader::GuardEventReader(GuardEventReader&&) noexcept = default;
GuardEventReader& GuardEventReader::operator=(GuardEventReader&&) noexcept =
    default;
GuardEventReader::~GuardEventReader() = default;

int GuardEventReader::OnSample(void* ctx, void* data, size_t size) {
  State* state = static_cast<State*>(ctx);
  if (size < sizeof(sf_guard_event)) {
    ++state->decode_errors;
    return 0;
  }
  sf_guard_event event;
  std::memcpy(&event, data, sizeof(event));
  state->callback(event);
  return 0;
}

absl::StatusOr<int> GuardEventReader::Poll(int timeout_ms) {
  int n = ring_buffer__poll(ring_.get(), timeout_ms);
  if (n < 0) {
    if (n == -EINTR) return 0;
    return ErrnoError(-n, "ring_buffer__poll");
  }
  return n;
}

}  // namespace sandfence
