// The process guard in the kernel: one enforcer per host (lsm where BPF LSM
// runs, else the signal fallback), shared by every sandfence process.
//
// On a pinned host the guard's programs and maps are pinned in the build's
// set (PinLayout::GuardDir: one directory per enforcer and object) by the
// first process that needs them, and stay there; its programs are attached
// (links pinned) while at least one sandbox is guarded and detached when
// the last one goes, whoever removes it. A
// process that dies leaves its sandboxes guarded until another one adopts
// or removes them. Each process reads its events from its own ring (its
// driver slot). On a private host the guard is this process's alone.
//
// The programs are global: one attach serves every sandbox, and the map
// sf_guarded says which cgroups are guarded. Outside a guarded sandbox the
// programs cost a system-call-number compare, or for a /proc open one map
// miss.
//
//   GuardController guard = *GuardController::Create(&host, GuardMode::kAuto);
//   guard.AddSandbox({.cgroup_id = cg.id(), .level = cg.level()});
//   GuardEventReader events = *GuardEventReader::Create(guard.events_fd(), cb);
//   events.Poll(100);
#ifndef SANDFENCE_GUARD_GUARD_CONTROLLER_H_
#define SANDFENCE_GUARD_GUARD_CONTROLLER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/bpf_handles.h"
#include "common/unique_fd.h"
#include "guard/guard_abi.h"
#include "guard/guard_protect.h"
#include "guard/guard_types.h"
#include "host/bpf_lsm.h"  // ProbeBpfLsm
#include "host/host_state.h"

namespace sandfence {

struct GuardedSandbox {
  uint64_t cgroup_id = 0;
  uint32_t level = 0;  // depth under the cgroup v2 root (CgroupRef::level)
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
  // On a pinned host whose guard is loaded already, that enforcer is used
  // (kLsm asked of a host whose guard runs signal is Rejected). `host`
  // must outlive the controller.
  static absl::StatusOr<GuardController> Create(HostState* host,
                                                GuardMode mode);

  GuardController(GuardController&&) noexcept;
  GuardController& operator=(GuardController&&) noexcept;
  ~GuardController();

  Enforcer enforcer() const { return enforcer_; }
  absl::string_view enforcer_name() const { return EnforcerName(enforcer_); }
  // Why kAuto did not choose lsm; empty otherwise.
  const std::string& fallback_reason() const { return fallback_reason_; }

  // Governs the processes of a cgroup and its descendants from now on
  // (attaching the host's guard programs if no sandbox had them). Adding a
  // sandbox again replaces its settings.
  absl::Status AddSandbox(const GuardedSandbox& sandbox);
  // Stops governing it; the last sandbox on the host detaches the programs.
  absl::Status RemoveSandbox(uint64_t cgroup_id);
  // Takes over a sandbox another (dead) process guarded: its events come
  // to this process from now on. NotFound when it is not guarded.
  absl::Status AdoptSandbox(uint64_t cgroup_id);
  // The cgroup ids the kernel guards, whoever added them.
  std::vector<uint64_t> GuardedSandboxes() const;

  // The enforcer's programs (by program name), for the kernel's per-run
  // statistics (bench/); empty when off.
  std::vector<std::pair<std::string, int>> prog_fds() const {
    std::vector<std::pair<std::string, int>> out;
    for (const auto& [name, fd] : progs_) out.emplace_back(name, fd.get());
    return out;
  }

  // This process's ring buffer of sf_guard_event records; -1 when off.
  int events_fd() const { return ring_.get(); }
  // The ring a dead process left in its slot (NotFound: none), and its
  // removal once read.
  absl::StatusOr<UniqueFd> RingOfSlot(uint32_t slot) const;
  void ClearSlot(uint32_t slot);

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

  // Events lost to a full ring buffer (or a ring nobody reads): per
  // sandbox (NotFound for one never added), and for sandboxes already
  // removed.
  absl::StatusOr<uint64_t> LostEvents(uint64_t cgroup_id) const;
  uint64_t LostEventsUntracked() const;

 private:
  struct Maps {
    UniqueFd guarded, lost, levels, lost_other, rings, procnames, prot, protn;
  };

  GuardController(HostState* host, Enforcer enforcer)
      : host_(host), enforcer_(enforcer) {}
  absl::Status LoadOrOpen(absl::string_view key);
  absl::Status CreateRing();
  // Attaches the programs if they are not (host lock held).
  absl::Status EnsureAttached();
  void DetachIfUnused();
  absl::Status UpdateLevels();
  // This enforcer's name in the pin layout ("" on a private host).
  std::string Key() const;

  HostState* host_ = nullptr;
  Enforcer enforcer_ = Enforcer::kOff;
  std::string fallback_reason_;
  Maps maps_;
  std::vector<std::pair<std::string, UniqueFd>> progs_;  // by program name
  std::vector<UniqueFd> links_;                          // private hosts
  UniqueFd ring_;

  // Protect()/Unprotect(): the map entries each path holds.
  std::unique_ptr<ProtectedObjects> protected_;
};

// Whether a process of this build has the host's guard attached (some
// sandbox is guarded): its pinned programs then govern every guard mode.
bool GuardAttachedOnHost(const HostState& host);

// Reads guard events from a ring buffer, calling back for each. A record
// too short to be an event is counted, not skipped silently.
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
  uint64_t decode_errors() const { return state_->decode_errors; }

 private:
  struct State {
    Callback callback;
    uint64_t decode_errors = 0;
  };
  GuardEventReader() = default;
  static int OnSample(void* ctx, void* data, size_t size);

  // Heap-held so that the ring buffer's context pointer survives moves.
  std::unique_ptr<State> state_;
  RingBuffer ring_;
};

}  // namespace sandfence

#endif  // SANDFENCE_GUARD_GUARD_CONTROLLER_H_
