// The host's shared enforcement state. Every sandfence process on a host
// (the daemon, each `sandfence run`) drives the same pinned programs and
// maps under one pin root, so that enforcement belongs to the kernel, not to
// whichever process attached it: a process that dies leaves its sandboxes
// enforced until another one reaps or adopts them.
//
// HostState is this process's membership: the pin root (a bpffs directory)
// and this build's set under it (pin_layout.h; flock()ed while shared state
// changes), the ABI check, the generation counter shared by all, and the
// registry of the processes using the set ("drivers"), each with an event
// ring slot. A private HostState (no pin root) shares nothing and pins
// nothing: tests and benchmarks use it.
#ifndef SANDFENCE_HOST_HOST_STATE_H_
#define SANDFENCE_HOST_HOST_STATE_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "host/host_abi.h"
#include "host/pin_layout.h"

namespace sandfence {

enum class DriverKind : uint32_t {
  kDaemon = SF_DRIVER_DAEMON,  // its sandboxes wait for the next daemon
  kRun = SF_DRIVER_RUN,        // its sandboxes are reaped when it dies
};

absl::string_view DriverKindName(DriverKind kind);

// The default pin root (the daemon's --pin-dir).
inline constexpr char kDefaultPinRoot[] = "/sys/fs/bpf/sandfence";
// The daemon's default runtime directory (its socket, rollout states) and
// records directory.
inline constexpr char kDefaultRunDir[] = "/run/sandfence";
inline constexpr char kDefaultStateDir[] = "/run/sandfence/rollouts";
inline constexpr char kDefaultRecordsDir[] = "/var/lib/sandfence";

// What no sandboxed process may read or write: the pin root, the daemon's
// runtime and records directories (the defaults), and `extra` (a record
// file, a daemon's own directories). Missing paths are skipped by the
// confinement that uses them.
std::vector<std::string> SandfenceOwnPaths(
    const std::string& pin_root, const std::vector<std::string>& extra = {});

struct HostOptions {
  // A directory on a bpf filesystem (created; /sys/fs/bpf is mounted if no
  // bpffs is there). Empty: private, nothing shared or pinned.
  std::string pin_root;
  DriverKind kind = DriverKind::kRun;
};

// A driver that registered and died without unregistering.
struct DeadDriver {
  uint32_t slot = 0;
  DriverKind kind = DriverKind::kRun;
  pid_t pid = 0;
  uint64_t start_ticks = 0;  // with pid, names the process for good
};

class HostState {
 public:
  // Opens (or creates) the shared state and registers this process in a
  // free slot. Unavailable when every slot is taken by a live process;
  // Rejected when the pinned state is of another ABI.
  static absl::StatusOr<std::unique_ptr<HostState>> Open(
      const HostOptions& options);
  // Unregisters (the slot becomes free).
  ~HostState();

  HostState(const HostState&) = delete;
  HostState& operator=(const HostState&) = delete;

  bool pinned() const { return !pin_root_.empty(); }
  // The pin root every build's set lives under ("" when private).
  const std::string& pin_root() const { return pin_root_; }
  // Where this build's set pins what (pinned() == pins().pinned()).
  const PinLayout& pins() const { return pins_; }
  // This process's slot: its event rings are at this index.
  uint32_t slot() const { return slot_; }
  DriverKind kind() const { return kind_; }

  // Exclusive access to the shared state across processes and threads, for
  // changes that must not interleave (loading or removing programs,
  // allocating generations, reaping). Blocks. Re-entrant in one thread.
  class Lock {
   public:
    Lock(Lock&& other) noexcept : host_(other.host_) { other.host_ = nullptr; }
    ~Lock();

   private:
    friend class HostState;
    explicit Lock(const HostState* host) : host_(host) {}
    const HostState* host_;
  };
  Lock Exclusive() const;

  // A generation no process on the host has used (rule map keys).
  absl::StatusOr<uint32_t> AllocateGeneration();

  // What a probe of the running kernel says (a status: OK, or why not),
  // asked once per set, i.e. per boot and build, and kept pinned: the
  // next process reads it instead of loading the probe's programs again.
  // A private host asks once per process. `name` is at most 31 bytes.
  absl::Status CachedProbe(absl::string_view name,
                           absl::FunctionRef<absl::Status()> probe) const;
  // Whether BPF LSM programs run here (ProbeBpfLsm), cached.
  absl::Status BpfLsm() const;

  // Registered drivers whose process is gone.
  std::vector<DeadDriver> DeadDrivers() const;
  // Frees a dead driver's slot once its sandboxes are reaped or adopted.
  void FreeSlot(uint32_t slot);
  // Whether d's slot still holds that dead process. Another process may
  // have forgotten it since DeadDrivers() said so, and a new one taken the
  // slot: its rings and journal must not be cleared. Ask under Exclusive().
  bool StillDead(const DeadDriver& d) const;
  // Whether a live process other than this one is registered.
  bool OthersAlive() const;

 private:
  HostState() = default;

  std::string pin_root_;
  PinLayout pins_;
  DriverKind kind_ = DriverKind::kRun;
  UniqueFd set_fd_;      // flock()ed by Lock
  // flock() excludes other processes only; this, other threads.
  mutable absl::Mutex lock_mu_;
  mutable std::thread::id lock_owner_ ABSL_GUARDED_BY(lock_mu_);
  mutable int lock_depth_ ABSL_GUARDED_BY(lock_mu_) = 0;
  UniqueFd host_map_;    // sf_host[0]
  UniqueFd facts_map_;   // CachedProbe's results
  UniqueFd drivers_map_;  // sf_drivers[SF_MAX_DRIVERS]
  uint32_t slot_ = 0;
  uint32_t private_generation_ = 0;  // private state: the counter
};

// Removes, under the pin root, the sets of other builds than keep_build
// that no live process uses and no sandbox needs (no sandbox links, no
// attached guard); sets with sandboxes stay enforced until a process of
// their build ends or adopts them, or `daemon --cleanup`. Returns the sets
// removed. The caller holds the root's lock (HostState::Open does).
std::vector<std::string> CollectUnusedSets(const std::string& pin_root,
                                           const std::string& keep_build);

// `daemon --cleanup`'s last step: every set nobody uses, and the pin root
// itself when nothing is left in it. Takes the root's lock.
absl::Status RemoveUnusedPins(const std::string& pin_root);

// Removes a pinned tree: links first, so that enforcement ends before the
// maps and programs it uses go. Missing paths are not errors.
absl::Status RemovePinnedTree(const std::string& dir);

// Where a bpffs must be for pin_root (mounts one at /sys/fs/bpf if none).
absl::Status EnsureBpfFs(const std::string& pin_root);
// Creates dir and its parents (mode 0700).
absl::Status MakeDirs(const std::string& dir);

// The start time of a process in clock ticks since boot (field 22 of
// /proc/<pid>/stat): with the pid, it names one process for good.
absl::StatusOr<uint64_t> ProcessStartTicks(pid_t pid);

}  // namespace sandfence

#endif  // SANDFENCE_HOST_HOST_STATE_H_
