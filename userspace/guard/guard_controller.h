// The process guard in the kernel: loads one of the two enforcers, keeps
// its programs attached for as long as it lives, and says which sandboxes
// they govern.
//
// The programs are global: one attach serves every sandbox, and the map
// sf_guarded says which cgroups are guarded. Outside a guarded sandbox the
// programs cost a system-call-number compare, or for a /proc open one map
// miss.
//
//   GuardController guard = *GuardController::Create(GuardMode::kAuto);
//   guard.AddSandbox({.cgroup_id = cg.id, .level = cg.level});
//   GuardEventReader events = *GuardEventReader::Create(guard, callback);
//   events.Poll(100);
#ifndef SANDFENCE_GUARD_GUARD_CONTROLLER_H_
#define SANDFENCE_GUARD_GUARD_CONTROLLER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/bpf_handles.h"
#include "guard/guard_abi.h"
#include "guard/guard_protect.h"
#include "guard/guard_types.h"

namespace sandfence {

// Whether BPF LSM programs run on this kernel, found by loading and
// attaching one and watching it run for an open() of ours (never by reading
// /sys/kernel/security/lsm). OK if it ran; otherwise Unavailable, or
// PermissionDenied without the privileges to load BPF, with the reason.
absl::Status ProbeBpfLsm();

struct GuardedSandbox {
  uint64_t cgroup_id = 0;
  uint32_t level = 0;  // depth under the cgroup v2 root (SandboxCgroup)
  // Record what would have been stopped, stop nothing.
  bool audit_only = false;
  // Signal mode: kill for cmdline/stat/status too, instead of auditing.
  bool kill_readable = false;
  // Signal mode: io_uring may be set up (SF_GUARD_F_IO_URING). The signal
  // enforcer does not see what a ring does (an open into a fixed-file
  // slot, a write), so by default io_uring_setup kills. The lsm enforcer
  // judges a ring's opens like any other and ignores this.
  bool allow_io_uring = false;
};

class GuardController {
 public:
  // kAuto: lsm if ProbeBpfLsm() passes and the lsm programs load, else
  // signal (fallback_reason() says why). kLsm where lsm cannot run, or
  // kSignal where the signal programs cannot load: Rejected (exit 78).
  // kOff: nothing is loaded; AddSandbox() accepts and enforces nothing.
  static absl::StatusOr<GuardController> Create(GuardMode mode);

  GuardController(GuardController&&) noexcept;
  GuardController& operator=(GuardController&&) noexcept;
  ~GuardController();

  Enforcer enforcer() const { return enforcer_; }
  absl::string_view enforcer_name() const { return EnforcerName(enforcer_); }
  // Why kAuto did not choose lsm; empty otherwise.
  const std::string& fallback_reason() const { return fallback_reason_; }

  // Governs the processes of a cgroup and its descendants from now on.
  // Adding a sandbox again replaces its settings.
  absl::Status AddSandbox(const GuardedSandbox& sandbox);
  absl::Status RemoveSandbox(uint64_t cgroup_id);

  // Protects a file system object (sandfence's pin directory, state or
  // records directory, daemon socket) and everything under it from every
  // guarded sandbox: no unlink, rename, create, chmod/chown/truncate, open
  // for writing, or connect (a socket). lsm refuses with EPERM; signal mode
  // kills, judging the object from the opened file or fd where the call
  // returns one, else from the path (docs/guard.md, "protected objects").
  // The path must exist; it is canonicalised (realpath), and each of its
  // components must be shorter than SF_GUARD_PROTNAME_LEN (Malformed).
  // Protecting a path again is a no-op.
  absl::Status Protect(const std::string& path);
  // Stops protecting a path given to Protect(); NotFound otherwise.
  absl::Status Unprotect(const std::string& path);

  // The ring buffer map of sf_guard_event records; -1 when off.
  int events_fd() const;

  // Events lost to a full ring buffer: per sandbox (NotFound for one never
  // added), and for sandboxes already removed.
  absl::StatusOr<uint64_t> LostEvents(uint64_t cgroup_id) const;
  uint64_t LostEventsUntracked() const;

 private:
  struct Bpf;  // the loaded skeleton, whichever it is
  GuardController(Enforcer enforcer, std::unique_ptr<Bpf> bpf);

  Enforcer enforcer_ = Enforcer::kOff;
  std::unique_ptr<Bpf> bpf_;
  std::string fallback_reason_;
  std::map<uint64_t, uint32_t> sandbox_levels_;  // cgroup id -> level
  std::map<uint32_t, int> level_counts_;

  // Protect()/Unprotect(): the map entries each path holds.
  std::unique_ptr<ProtectedObjects> protected_;
};

// Reads guard events from the ring buffer, calling back for each.
class GuardEventReader {
 public:
  using Callback = std::function<void(const sf_guard_event&)>;

  static absl::StatusOr<GuardEventReader> Create(int events_fd,
                                                 Callback callback);

  GuardEventReader(GuardEventReader&&) noexcept;
  GuardEventReader& operator=(GuardEventReader&&) noexcept;
  ~GuardEventReader();

  // Waits up to timeout_ms for events (0: only what is there); returns how
  // many were handled.
  absl::StatusOr<int> Poll(int timeout_ms);

 private:
  GuardEventReader() = default;
  static int OnSample(void* ctx, void* data, size_t size);

  // Heap-held so that the ring buffer's context pointer survives moves.
  std::unique_ptr<Callback> callback_;
  RingBuffer ring_;
};

}  // namespace sandfence

#endif  // SANDFENCE_GUARD_GUARD_CONTROLLER_H_
