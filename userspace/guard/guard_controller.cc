#include "guard/guard_controller.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "guard/proc_names.h"
#include "sf_guard_lsm.skel.h"
#include "sf_guard_probe.skel.h"
#include "sf_guard_sig.skel.h"

namespace sandfence {
namespace {

constexpr char kLsmAdvice[] =
    "boot the kernel with bpf in its LSM list (lsm=...,bpf on the command "
    "line, or CONFIG_LSM including bpf; needs CONFIG_BPF_LSM=y)";

// libbpf logs to stderr by default; while we try a load whose failure is an
// expected answer (the lsm probe), its lines go to a buffer instead, and the
// first warning (usually the kernel's refusal) becomes part of the reason.
class LibbpfLogCapture {
 public:
  LibbpfLogCapture() { previous_ = libbpf_set_print(&LibbpfLogCapture::Print); }
  ~LibbpfLogCapture() {
    libbpf_set_print(previous_);
    active_ = nullptr;
  }
  LibbpfLogCapture(const LibbpfLogCapture&) = delete;
  LibbpfLogCapture& operator=(const LibbpfLogCapture&) = delete;

  void Activate() { active_ = this; }
  // The first libbpf warning (often the kernel's reason).
  const std::string& first_line() const { return first_line_; }
  // The verifier's own reason for the first refused program: the last line
  // of its log before the statistics ("invalid func unknown#158" where a
  // helper is missing). Empty if no program was refused.
  const std::string& verifier_reason() const { return verifier_reason_; }

 private:
  static int Print(enum libbpf_print_level level, const char* format,
                   va_list args) {
    if (active_ == nullptr || level == LIBBPF_DEBUG) return 0;
    // The verifier's log comes in one message, often longer than a line.
    va_list copy;
    va_copy(copy, args);
    const int n = std::vsnprintf(nullptr, 0, format, copy);
    va_end(copy);
    if (n <= 0) return 0;
    std::string text(static_cast<size_t>(n) + 1, '\0');
    std::vsnprintf(text.data(), text.size(), format, args);
    text.resize(static_cast<size_t>(n));
    if (active_->verifier_reason_.empty()) {
      active_->verifier_reason_ = VerifierReason(text);
    }
    absl::string_view s(text);
    s = s.substr(0, s.find('\n'));
    absl::ConsumePrefix(&s, "libbpf: ");
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    if (!s.empty() && active_->first_line_.empty()) {
      active_->first_line_ = std::string(s);
    }
    return 0;
  }

  static std::string VerifierReason(absl::string_view text) {
    const size_t begin = text.find("-- BEGIN PROG LOAD LOG --\n");
    if (begin == absl::string_view::npos) return "";
    absl::string_view log = text.substr(begin);
    log.remove_prefix(log.find('\n') + 1);
    size_t end = log.find("\nprocessed ");
    if (end == absl::string_view::npos) end = log.find("-- END PROG LOAD LOG");
    if (end == absl::string_view::npos) return "";
    log = log.substr(0, end);
    while (!log.empty() && log.back() == '\n') log.remove_suffix(1);
    const size_t last = log.rfind('\n');
    return std::string(last == absl::string_view::npos ? log
                                                       : log.substr(last + 1));
  }

  static inline LibbpfLogCapture* active_ = nullptr;
  libbpf_print_fn_t previous_ = nullptr;
  std::string first_line_;
  std::string verifier_reason_;
};

absl::Status LoadError(int err, absl::string_view what,
                       const LibbpfLogCapture* log) {
  std::string detail = std::strerror(err);
  if (log != nullptr && !log->first_line().empty()) {
    absl::StrAppend(&detail, " (libbpf: ", log->first_line(),
                    log->verifier_reason().empty() ? "" : "; the verifier: ",
                    log->verifier_reason(), ")");
  }
  if ((err == EPERM || err == EACCES) && ::geteuid() != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, ": ", detail, " (loading BPF programs needs root)"));
  }
  return Unavailable(absl::StrCat(what, ": ", detail));
}

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

}  // namespace

absl::Status ProbeBpfLsm() {
  LibbpfLogCapture log;
  log.Activate();
  Skeleton<sf_guard_probe> skel(sf_guard_probe::open());
  if (skel == nullptr) {
    return LoadError(errno, "BPF LSM probe: open", &log);
  }
  skel->bss->sf_probe_tgid = static_cast<__u32>(::getpid());
  if (int err = sf_guard_probe::load(skel.get()); err != 0) {
    absl::Status s = LoadError(-err, "BPF LSM probe: load", &log);
    if (s.code() == absl::StatusCode::kPermissionDenied) return s;
    return Unavailable(absl::StrCat(s.message(), "; ", kLsmAdvice));
  }
  if (int err = sf_guard_probe::attach(skel.get()); err != 0) {
    absl::Status s = LoadError(-err, "BPF LSM probe: attach", &log);
    return Unavailable(absl::StrCat(s.message(), "; ", kLsmAdvice));
  }
  // An attached program that the kernel never calls (bpf not an active
  // LSM) would enforce nothing: make it run.
  UniqueFd probe(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!probe) return ErrnoError(errno, "BPF LSM probe: open /dev/null");
  if (skel->bss->sf_probe_hits == 0) {
    return Unavailable(absl::StrCat(
        "BPF LSM probe: the program attached but never ran (bpf is not an "
        "active LSM); ",
        kLsmAdvice));
  }
  return absl::OkStatus();
}

// Both skeletons have the same maps and globals under the same names.
struct GuardController::Bpf {
  Skeleton<sf_guard_lsm> lsm;
  Skeleton<sf_guard_sig> sig;
  int guarded_fd = -1;
  int lost_fd = -1;
  int events_fd = -1;
  volatile __u64* levels = nullptr;
  volatile __u64* lost_other = nullptr;

  template <typename S>
  void Bind(S* s) {
    guarded_fd = bpf_map__fd(s->maps.sf_guarded);
    lost_fd = bpf_map__fd(s->maps.sf_glost);
    events_fd = bpf_map__fd(s->maps.sf_gevents);
    levels = &s->bss->sf_glevels;
    lost_other = &s->bss->sf_glost_other;
  }
};

namespace {

// Opens, loads, fills and attaches one enforcer's skeleton.
template <typename S>
absl::StatusOr<Skeleton<S>> LoadEnforcer(absl::string_view name) {
  LibbpfLogCapture log;
  log.Activate();
  Skeleton<S> skel(S::open());
  if (skel == nullptr) {
    return LoadError(errno, absl::StrCat(name, " enforcer: open"), &log);
  }
  if (int err = S::load(skel.get()); err != 0) {
    return LoadError(-err, absl::StrCat(name, " enforcer: load"), &log);
  }
  if (absl::Status s = FillProcNames(bpf_map__fd(skel->maps.sf_procnames));
      !s.ok()) {
    return s;
  }
  if (int err = S::attach(skel.get()); err != 0) {
    return LoadError(-err, absl::StrCat(name, " enforcer: attach"), &log);
  }
  return skel;
}

}  // namespace

GuardController::GuardController(Enforcer enforcer, std::unique_ptr<Bpf> bpf)
    : enforcer_(enforcer), bpf_(std::move(bpf)) {}
GuardController::GuardController(GuardController&&) noexcept = default;
GuardController& GuardController::operator=(GuardController&&) noexcept =
    default;
GuardController::~GuardController() = default;

absl::StatusOr<GuardController> GuardController::Create(GuardMode mode) {
  if (mode == GuardMode::kOff) return GuardController(Enforcer::kOff, nullptr);

  std::string fallback;
  if (mode == GuardMode::kAuto || mode == GuardMode::kLsm) {
    absl::Status probe = ProbeBpfLsm();
    absl::Status loaded = probe;
    if (probe.ok()) {
      absl::StatusOr<Skeleton<sf_guard_lsm>> lsm =
          LoadEnforcer<sf_guard_lsm>("lsm");
      if (lsm.ok()) {
        auto bpf = std::make_unique<Bpf>();
        bpf->lsm = *std::move(lsm);
        bpf->Bind(bpf->lsm.get());
        return GuardController(Enforcer::kLsm, std::move(bpf));
      }
      loaded = lsm.status();
    }
    if (loaded.code() == absl::StatusCode::kPermissionDenied) return loaded;
    if (mode == GuardMode::kLsm) {
      return Rejected(
          absl::StrCat("guard mode lsm cannot be enforced on this kernel: ",
                       loaded.message()));
    }
    fallback = std::string(loaded.message());
  }

  absl::StatusOr<Skeleton<sf_guard_sig>> sig =
      LoadEnforcer<sf_guard_sig>("signal");
  if (!sig.ok()) {
    if (sig.status().code() == absl::StatusCode::kPermissionDenied) {
      return sig.status();
    }
    return Rejected(absl::StrCat(
        "no process guard can be enforced on this kernel: ",
        sig.status().message(),
        fallback.empty() ? "" : absl::StrCat("; lsm: ", fallback)));
  }
  auto bpf = std::make_unique<Bpf>();
  bpf->sig = *std::move(sig);
  bpf->Bind(bpf->sig.get());
  GuardController guard(Enforcer::kSignal, std::move(bpf));
  guard.fallback_reason_ = std::move(fallback);
  return guard;
}

absl::Status GuardController::AddSandbox(const GuardedSandbox& sandbox) {
  if (sandbox.cgroup_id == 0) return Malformed("sandbox cgroup id 0");
  if (sandbox.level > SF_GUARD_MAX_LEVEL) {
    return Rejected(absl::StrCat("sandbox cgroup at level ", sandbox.level,
                                 " is deeper than the guard supports (",
                                 SF_GUARD_MAX_LEVEL, ")"));
  }
  if (bpf_ == nullptr) return absl::OkStatus();

  auto known = sandbox_levels_.find(sandbox.cgroup_id);
  if (known != sandbox_levels_.end() && known->second != sandbox.level) {
    return Malformed(absl::StrCat("sandbox ", sandbox.cgroup_id,
                                  " added again at another level"));
  }
  // The loss counter and the level bit exist before the sandbox does, so
  // that its first event already finds them.
  if (known == sandbox_levels_.end()) {
    __u64 zero = 0;
    if (bpf_map_update_elem(bpf_->lost_fd, &sandbox.cgroup_id, &zero,
                            BPF_NOEXIST) != 0 &&
        errno != EEXIST) {
      return ErrnoError(errno, "sf_glost");
    }
    if (level_counts_[sandbox.level]++ == 0) {
      __atomic_fetch_or(bpf_->levels, 1ULL << sandbox.level, __ATOMIC_SEQ_CST);
    }
    sandbox_levels_[sandbox.cgroup_id] = sandbox.level;
  }
  sf_guard_sandbox value = {};
  value.mode = sandbox.audit_only ? SF_GUARD_AUDIT : SF_GUARD_ENFORCE;
  value.flags = sandbox.kill_readable ? SF_GUARD_F_KILL_READABLE : 0;
  if (bpf_map_update_elem(bpf_->guarded_fd, &sandbox.cgroup_id, &value,
                          BPF_ANY) != 0) {
    int err = errno;
    (void)RemoveSandbox(sandbox.cgroup_id);
    return ErrnoError(err, "sf_guarded");
  }
  return absl::OkStatus();
}

absl::Status GuardController::RemoveSandbox(uint64_t cgroup_id) {
  auto it = sandbox_levels_.find(cgroup_id);
  if (it == sandbox_levels_.end()) {
    if (bpf_ == nullptr) return absl::OkStatus();
    return absl::NotFoundError(
        absl::StrCat("sandbox ", cgroup_id, " is not guarded"));
  }
  uint32_t level = it->second;
  if (bpf_map_delete_elem(bpf_->guarded_fd, &cgroup_id) != 0 &&
      errno != ENOENT) {
    return ErrnoError(errno, "sf_guarded");
  }
  // Events still in flight count as untracked losses from now on.
  __u64 lost = 0;
  if (bpf_map_lookup_elem(bpf_->lost_fd, &cgroup_id, &lost) == 0) {
    __atomic_fetch_add(bpf_->lost_other, lost, __ATOMIC_SEQ_CST);
  }
  (void)bpf_map_delete_elem(bpf_->lost_fd, &cgroup_id);
  if (--level_counts_[level] == 0) {
    level_counts_.erase(level);
    __atomic_fetch_and(bpf_->levels, ~(1ULL << level), __ATOMIC_SEQ_CST);
  }
  sandbox_levels_.erase(it);
  return absl::OkStatus();
}

int GuardController::events_fd() const {
  return bpf_ == nullptr ? -1 : bpf_->events_fd;
}

absl::StatusOr<uint64_t> GuardController::LostEvents(uint64_t cgroup_id) const {
  if (bpf_ == nullptr) return 0;
  __u64 lost = 0;
  if (bpf_map_lookup_elem(bpf_->lost_fd, &cgroup_id, &lost) != 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("sandbox ", cgroup_id, " is not guarded"));
    }
    return ErrnoError(errno, "sf_glost");
  }
  return lost;
}

uint64_t GuardController::LostEventsUntracked() const {
  if (bpf_ == nullptr) return 0;
  return __atomic_load_n(bpf_->lost_other, __ATOMIC_SEQ_CST);
}

absl::StatusOr<GuardEventReader> GuardEventReader::Create(int events_fd,
                                                          Callback callback) {
  if (events_fd < 0) return Malformed("no guard event ring buffer (off)");
  GuardEventReader reader;
  reader.callback_ = std::make_unique<Callback>(std::move(callback));
  reader.ring_.reset(ring_buffer__new(events_fd, &GuardEventReader::OnSample,
                                      reader.callback_.get(), nullptr));
  if (reader.ring_ == nullptr) return ErrnoError(errno, "ring_buffer__new");
  return reader;
}

GuardEventReader::GuardEventReader(GuardEventReader&&) noexcept = default;
GuardEventReader& GuardEventReader::operator=(GuardEventReader&&) noexcept =
    default;
GuardEventReader::~GuardEventReader() = default;

int GuardEventReader::OnSample(void* ctx, void* data, size_t size) {
  if (size < sizeof(sf_guard_event)) return 0;  // not ours: skip it
  sf_guard_event event;
  std::memcpy(&event, data, sizeof(event));
  (*static_cast<Callback*>(ctx))(event);
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
