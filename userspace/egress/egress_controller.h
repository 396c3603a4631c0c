// The egress controller: this process's handle on the host's egress
// programs and maps. It programs a sandbox's rules, attaches the hooks to
// its cgroup, switches phases atomically, detaches, and reads what the
// kernel holds for any sandbox on the host.
//
// On a pinned host (HostState with a pin root) the programs, the maps and
// every sandbox's links are pinned and shared by every sandfence process:
//   <root>/maps/<map>             rules, sandboxes, counters, event rings
//   <root>/progs/<build>/<hook>   the programs of one sandfence build
//   <root>/links/<cgroup id>/<hook>
// so enforcement outlives the process that attached it; another process
// adopts (AdoptSandbox) or removes it. Each process reads its events from
// its own ring (HostState::slot()); a sandbox's entry names the ring of its
// owner. On a private host nothing is shared and everything is detached
// when the controller goes.
//
// Thread-safe: every public method may be called from any thread.
#ifndef SANDFENCE_EGRESS_EGRESS_CONTROLLER_H_
#define SANDFENCE_EGRESS_EGRESS_CONTROLLER_H_

#include <bpf/libbpf.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/cgroup.h"
#include "common/ip.h"
#include "common/unique_fd.h"
#include "compile/compiled_policy.h"
#include "egress/egress_abi.h"
#include "egress/budget.h"
#include "egress/learned_entries.h"
#include "egress/net_event.h"
#include "egress/reaper.h"
#include "egress/rule_entries.h"
#include "host/host_state.h"

namespace sandfence {

struct EgressOptions {
  // This process's event ring, in bytes: a power of two, at least a page.
  uint32_t ring_bytes = 4u << 20;
  // With the cgroup Unix hooks: attach the host-wide bind tracker (a
  // program on every system call's exit on the host) that lets a sandbox
  // reach a path it bound, while some sandbox needs it (UnixTraits::
  // tracked) and only then. A process whose sandboxes all connect through a
  // supervisor (UnixTraits::broker) never attaches it.
  bool unix_bind_tracker = true;
};

// How the processes of a sandbox reach Unix sockets, beyond its phase.
struct UnixTraits {
  // Every process connects to paths through sandfence's supervisor
  // (SF_SB_UNIX_BROKER): own paths are reached only through it.
  bool broker = false;
  // Every process is in a Landlock domain scoping abstract sockets
  // (SF_SB_UNIX_SCOPED): unlisted abstract names are left to Landlock.
  bool abstract_scoped = false;
  // A phase of its policy checks Unix sockets and nothing brokers its
  // paths: its own paths are known by the host-wide bind tracker
  // (SF_SB_UNIX_TRACKED). Ignored with broker, and by a controller made
  // without unix_bind_tracker.
  bool tracked = false;
};

struct SandboxCounters {
  uint64_t allowed = 0;
  uint64_t denied = 0;
  uint64_t events_lost = 0;  // kernel-side: ring buffer reserve failures
  // Allows not reported by the audit setting (not events, not losses).
  uint64_t allowed_unreported = 0;
  // Of the allowed: what an audit-only phase would have denied.
  uint64_t audit_denied = 0;
  // The egress budget's limits and counts, when the rollout has one.
  std::optional<EgressBudgetCounts> budget = std::nullopt;
};

// A sandbox as the kernel holds it (sf_sandboxes): the truth a process that
// takes over reads.
struct KernelSandbox {
  uint64_t cgroup_id = 0;
  uint32_t generation = 0;
  uint32_t flags = 0;
  uint16_t phase = 0;  // the owner's phase index
  uint8_t ring = 0;    // the owner's driver slot
};

// What AdoptSandbox found: the kernel's entry (now naming this process's
// ring) and the hooks whose pinned links were gone (the sandbox was not
// wholly enforced; the caller decides: kill it, or attach again).
struct AdoptedSandbox {
  KernelSandbox kernel;
  std::vector<std::string> missing_hooks;
};

// The egress hooks, by the names records use: one link each per sandbox.
// recvmsg4/6 and getpeername4/6 judge nothing: they show a DNS client whose
// query went to the sandbox's filter the server it asked, and are attached
// only to sandboxes given a DNS filter target. connect_unix and
// sendmsg_unix judge AF_UNIX sockets, on kernels that have them (6.7+).
inline constexpr const char* kEgressHooks[] = {
    "sock_create",  "connect4",     "connect6",     "sendmsg4",
    "sendmsg6",     "skb_egress",   "recvmsg4",     "recvmsg6",
    "getpeername4", "getpeername6", "connect_unix", "sendmsg_unix"};

// Whether the kernel has the cgroup Unix socket hooks (connect_unix,
// sendmsg_unix: Linux 6.7+), probed by loading a program for them.
bool KernelHasUnixHooks();
// Whether a phase switch can cut connections here (bpf_sock_destroy, 6.5+).
bool KernelCanCutSockets();
// Whether something here can judge a sandbox's Unix sockets: those hooks,
// or BPF LSM (ProbeBpfLsm) for unix_stream_connect/unix_may_send.
bool KernelChecksUnixSockets();

class EgressController {
 public:
  // Loads the programs, or on a pinned host where this build's programs are
  // pinned already, opens them; creates this process's event ring. Needs
  // root (CAP_BPF + CAP_NET_ADMIN): PermissionDenied otherwise. `host` must
  // outlive the controller.
  static absl::StatusOr<std::unique_ptr<EgressController>> Create(
      HostState* host, const EgressOptions& options = {});
  // Private host: detaches every sandbox. Pinned: they stay enforced (their
  // events are counted as lost until another process adopts them).
  ~EgressController();

  // Programs phase's rules for the sandbox under a new generation, then
  // attaches the hooks to its cgroup (and pins them). Nothing runs in the
  // sandbox unenforced if the caller spawns into it only afterwards.
  // phase_index is the caller's name for the phase, kept in the kernel's
  // entry. Returns the generation. Rejected for a cgroup deeper than the
  // programs judge (SF_MAX_CGROUP_DEPTH); AlreadyExists for a sandbox.
  absl::StatusOr<uint32_t> AddSandbox(int cgroup_fd, const CgroupRef& cgroup,
                                      const CompiledPhase& phase,
                                      uint16_t phase_index = 0);

  // Writes the new phase under a new generation, flips the sandbox to it in
  // one map update (generation, flags and phase index together), then
  // queues the old generation's deletion (on the reaper's thread, after
  // this returns): no connect is ever judged by a half-written policy.
  // Returns the new generation.
  absl::StatusOr<uint32_t> SwitchPhase(uint64_t cgroup_id,
                                       const CompiledPhase& phase,
                                       uint16_t phase_index = 0);
  // Returns once every old generation queued so far is deleted: the bench
  // times a switch with the reaper idle as well as back to back.
  void FinishDeletes() { reaper_.Drain(); }
  // Completes the deletes a dead driver (its ring slot) had queued and
  // journaled but not done (it was killed first): every entry of each
  // generation it doomed, in every map. Returns the generations completed.
  // For the one that forgets the dead driver, before its slot is freed.
  size_t FinishDeletesOf(uint32_t slot);
  // Tests: every delete queued from now on waits until ReleaseDeletes (a
  // process that exits meanwhile leaves them to FinishDeletesOf).
  void HoldDeletesForTest();
  void ReleaseDeletesForTest();

  // After a switch to a narrower phase: destroys every TCP connection and
  // connected UDP socket that the sandbox (cgroup at its level) opened and
  // its phases in force no longer allow, in this thread's network
  // namespace; returns them. FailedPrecondition (with cut_unavailable())
  // where the kernel cannot (bpf_sock_destroy, Linux 6.5+).
  // netns_fd >= 0: that network namespace is walked too (a sandbox with
  // its own), from a thread that enters it.
  absl::StatusOr<std::vector<CutConnection>> CutConnections(
      const CgroupRef& cgroup, int netns_fd = -1);
  // The link fds AddSandbox holds per sandbox (one per enforcing hook this
  // kernel runs; a DNS filter target adds the reply hooks'), for callers
  // that budget their fd limit.
  size_t LinksPerSandbox() const;
  // Why CutConnections cannot run here; "" where it can.
  const std::string& cut_unavailable() const { return cut_unavailable_; }

  // Detaches and forgets one of this process's sandboxes (an adopted one
  // too); returns its final counters.
  absl::StatusOr<SandboxCounters> RemoveSandbox(uint64_t cgroup_id);

  // Where the sandbox's DNS queries go while its phase filters DNS
  // (CompiledPhase::dns_filtered): an IPv4 address in SF_DNS_FILTER_NET
  // (127.83.0.0/16) and a port, Malformed otherwise. One of this process's
  // sandboxes (NotFound otherwise); a target another sandbox on the host
  // uses is AlreadyExists (the filter tells sandboxes apart by it). Kept
  // across phase switches. Until it is set, a filtered phase's queries are
  // denied: set it before spawning into the sandbox.
  absl::Status SetDnsTarget(uint64_t cgroup_id, const HostPort& target);
  // Its queries are denied from now on (if its phase filters DNS).
  absl::Status ClearDnsTarget(uint64_t cgroup_id);

  // Opens the learned addresses for the sandbox in `generation`, which must
  // be its current one and a DNS-filtered phase: FailedPrecondition
  // otherwise, and nothing is written (a phase switch won the race; the
  // answer was meant for rules no longer in force). An address already
  // learned keeps the later expiry and the union of the port ranges;
  // Rejected (nothing written) when that union would exceed
  // SF_MAX_PORT_RANGES, Malformed for a bad entry (naming it). A full map is
  // Unavailable; the entries written before it stay.
  absl::Status Learn(uint64_t cgroup_id, uint32_t generation,
                     const std::vector<LearnedEntry>& entries);
  // Deletes this process's sandboxes' learned addresses that expired at
  // now_boot_ns (CLOCK_BOOTTIME); returns how many. The kernel already
  // judges them absent: this frees their map space.
  size_t CollectExpired(uint64_t now_boot_ns);
  // Learned addresses the sandbox holds now (expired or not).
  absl::StatusOr<size_t> LearnedCount(uint64_t cgroup_id) const;
  // Allows the kernel has already reported for this cgroup (audit
  // FIRST_PER_DESTINATION), in every generation; they go with the
  // generation and with the sandbox, once FinishDeletes has returned.
  size_t SeenCount(uint64_t cgroup_id) const;

  // Sets how the sandbox's processes reach Unix sockets, for this phase and
  // every later one (only where its phase checks Unix sockets with the
  // cgroup hooks). Before anything runs in it; or, to broker a sandbox
  // that was tracked, at any time: its own paths are then refused by name
  // until they are brokered (closed, never open). Attaches or detaches the
  // bind tracker as the host's sandboxes now need it.
  absl::Status SetUnixTraits(uint64_t cgroup_id, const UnixTraits& traits);
  // The supervisor thread `pid_tgid` is about to connect the socket with
  // `cookie` on a sandbox's behalf: the hook lets that one connect through
  // (and forgets it). Forget: the connect did not reach the hook.
  absl::Status AllowBrokeredConnect(uint64_t cookie, uint64_t pid_tgid);
  void ForgetBrokeredConnect(uint64_t cookie);
  // Whether this controller holds the host-wide bind tracker's link.
  bool holds_unix_bind_tracker() const;
  // Whether a sandbox on the host (any process's) needs the bind tracker.
  bool BindTrackerNeeded() const;

  absl::StatusOr<SandboxCounters> Counters(uint64_t cgroup_id) const;
  // Per-address budget counts the kernel holds for the cgroup (a scan).
  size_t BudgetAddressesForTest(uint64_t cgroup_id) const {
    return budget_maps().DestCount(cgroup_id);
  }
  // The generation the sandbox is on now.
  absl::StatusOr<uint32_t> Generation(uint64_t cgroup_id) const;

  // Every sandbox the kernel holds, whoever owns it.
  std::vector<KernelSandbox> KernelSandboxes() const;
  absl::StatusOr<KernelSandbox> KernelSandboxOf(uint64_t cgroup_id) const;
  // Takes over a sandbox another process attached (pinned hosts only): its
  // links (moved to this build's programs if they run another build's), its
  // generation, and its events, which come to this process's ring from the
  // moment this returns. NotFound when the kernel has no entry for it; a
  // sandbox whose links are gone is taken over all the same, with the
  // missing hooks named: it was not wholly enforced.
  absl::StatusOr<AdoptedSandbox> AdoptSandbox(uint64_t cgroup_id);

  // This process's event ring (for an EventReader).
  int events_fd() const { return ring_.get(); }
  // The ring another (dead) process left in its slot, with whatever the
  // kernel queued in it since; NotFound when the slot has none.
  absl::StatusOr<UniqueFd> RingOfSlot(uint32_t slot) const;
  // Removes the ring from a dead process's slot (once it is read).
  void ClearSlot(uint32_t slot);
  // Program fds by hook name (kEgressHooks), for stats and tests.
  int prog_fd(absl::string_view hook) const;
  // The build of the programs this process attaches (a hash of the BPF
  // object): several builds may serve sandboxes on one host.
  const std::string& build() const { return build_; }
  HostState& host() const { return *host_; }

  // What judges Unix sockets here: the cgroup connect_unix/sendmsg_unix
  // hooks (Linux 6.7+), else the BPF LSM unix_stream_connect/unix_may_send
  // hooks where BPF LSM runs, else nothing (unix_unavailable() says why).
  enum class UnixEnforcer { kNone, kCgroupHooks, kLsm };
  UnixEnforcer unix_enforcer() const { return unix_enforcer_; }
  // "cgroup hooks", "BPF LSM" or "none".
  absl::string_view unix_enforcer_name() const;
  // Whether phases that check Unix sockets can be enforced here; when not,
  // why (unix_unavailable()).
  bool unix_checks() const { return unix_enforcer_ != UnixEnforcer::kNone; }
  const std::string& unix_unavailable() const { return unix_unavailable_; }
  // A Unix socket name no sandbox may connect or send to, whatever its
  // policy lists (sandfence's own sockets). Host-wide, kept while the maps
  // are pinned. A no-op where nothing judges Unix sockets.
  absl::Status ProtectUnixName(const UnixName& name);

  // Removes everything pinned under a pin root (`sandfence daemon
  // --cleanup`): links detach, maps and programs go with their last user.
  static absl::Status RemovePins(const std::string& pin_root);
  // Detaches the host-wide programs (the Unix bind tracker or the Unix LSM
  // hooks): the last process out of a set with no sandbox left calls it,
  // so that nothing taxes the host's system calls for nobody. The programs
  // stay pinned for the next process.
  void DetachHostProgs();

 private:
  struct SandboxState {
    uint32_t generation = 0;
    uint16_t phase = 0;
    uint32_t flags = 0;
    // SF_SB_UNIX_BROKER/SCOPED/TRACKED from SetUnixTraits, kept across
    // phases.
    uint32_t unix_traits = 0;
    RuleEntries entries;
    std::vector<UniqueFd> links;  // pinned hosts pin them as well
    // Adopted from another process: its entries are unknown, so the
    // generation's entries are found by scanning the rule maps.
    bool adopted = false;
    // The learned addresses of `generation` (an adopted sandbox's are
    // found by a scan when it is adopted).
    absl::flat_hash_set<LearnedKey> learned;
    // The DNS reply-side hooks are attached (with its filter target).
    bool reply_hooks = false;
  };
  struct Maps {
    UniqueFd sandboxes, counters, seen, exact4, exact6, cidr4, cidr6, rings,
        dns_targets, learned4, learned6, outbound, levels, doomed, budgets,
        budget_dests, budget_on;
    // The unix objects' (-1 where nothing judges Unix sockets; unix_bound
    // only with the cgroup hooks).
    UniqueFd unix_rules, unix_protected, unix_bound, unix_seen,
        unix_brokered;
  };
  struct MapSlot {
    const char* name;
    UniqueFd Maps::*field;
  };
  static const MapSlot kMapSlots[];
  EgressBudgetMaps budget_maps() const {
    return {maps_.budgets.get(), maps_.budget_dests.get(),
            maps_.budget_on.get()};
  }
  static const MapSlot kUnixMapSlots[];     // the cgroup hooks' object
  static const MapSlot kUnixLsmMapSlots[];  // the BPF LSM object
  // Host-wide programs, pinned with the hooks and attached once per host:
  // the cgroup enforcer's bind tracker, or the BPF LSM enforcer's hooks.
  static constexpr const char* kUnixBindProg = "unix_bind";
  static constexpr const char* kCutTcpProg = "cut_tcp";
  static constexpr const char* kCutUdpProg = "cut_udp";
  static constexpr const char* kUnixLsmConnectProg = "unix_stream_connect";
  static constexpr const char* kUnixLsmSendProg = "unix_may_send";
  // The host-wide programs of the Unix enforcer in use.
  std::vector<const char*> UnixHostProgs() const;

  explicit EgressController(HostState* host) : host_(host) {}
  absl::Status LoadOrOpen();
  absl::Status CreateRing(uint32_t ring_bytes);
  // Pin paths for obj's maps on a pinned host (skip_shared: only the unix
  // object's own maps; the rest are the egress object's, reused by fd).
  absl::Status SetPinPaths(bpf_object* obj, bool skip_shared = false);
  // Loads the Unix enforcer's object (the cgroup hooks or BPF LSM's) with
  // the egress maps it shares; unix_unavailable_ when the kernel refuses.
  absl::Status LoadUnix();
  // Loads this process's cut iterators (egress_cut.bpf.c) on the egress
  // maps; cut_unavailable_ where the kernel cannot destroy sockets.
  absl::Status LoadCut();
  // One walk of the calling thread's network namespace.
  absl::Status CutHere(const CgroupRef& cgroup,
                       std::vector<CutConnection>* out);
  // Keeps a loaded program's fd by name, pinned in the egress progs on a
  // pinned host.
  absl::Status KeepProg(const std::string& name, int prog_fd);
  // Attaches the Unix enforcer's host-wide programs, or opens the pinned
  // links of another process.
  absl::Status AttachUnixHostProgs();
  // Attaches the bind tracker when a sandbox needs it (or `attach`: one is
  // about to) and detaches it when none does (controllers made with
  // unix_bind_tracker only).
  absl::Status UpdateBindTracker(bool attach = false);
  // Attaches a host-wide program, or opens its pinned link.
  absl::StatusOr<UniqueFd> AttachHostProg(const char* prog);
  // Rejected for a phase that checks Unix sockets where nothing can.
  absl::Status CheckUnix(const CompiledPhase& phase) const;
  absl::Status WriteEntries(const RuleEntries& entries);
  // WriteEntries, once more after the reaper has caught up when a map was
  // full: dead generations may be what fills it.
  absl::Status WriteEntriesOrReap(const RuleEntries& entries);
  void DeleteEntries(const RuleEntries& entries);
  void DeleteGeneration(uint32_t generation);
  void DeleteState(const SandboxState& state);
  void DeleteLearned(SandboxState& state);
  // The allows already reported (sf_seen, sf_unix_seen) of a sandbox, or of
  // one of its generations. Both are LRU maps and would not grow without
  // bound, but a dead sandbox's entries would sit there until evicted, and
  // a long-running host must be back where it started (issue 36).
  void DeleteSeen(uint64_t cgroup_id,
                  std::optional<uint32_t> generation = std::nullopt);
  // The journal of queued deletes (sf_doomed): a generation is written
  // before its deletes are queued and erased once they are done.
  void Doom(uint32_t generation);
  void Undoom(uint32_t generation);
  // Every entry of a generation that no sandbox refers to any more: rules,
  // learned addresses, reported allows.
  void DeleteGenerationEverywhere(uint32_t generation);
  // The entries of both maps that are the cgroup's (of `generation`, if
  // given), counted, and deleted with `erase`.
  size_t SweepSeen(uint64_t cgroup_id, std::optional<uint32_t> generation,
                   bool erase) const;
  absl::flat_hash_set<LearnedKey> ScanLearned(uint32_t generation) const;
  absl::Status WriteSandbox(uint64_t cgroup_id, const SandboxState& state,
                            uint64_t map_flags);
  // Lowers sf_levels to a new sandbox's level when none was that shallow
  // yet; before its entry and links exist (struct sf_levels).
  absl::Status LowerShallowestLevel(uint32_t level);
  // Maps reused from an earlier build without sf_levels: walks start at
  // level 1 (host lock held).
  absl::Status SeedShallowestLevel();
  absl::Status Attach(int cgroup_fd, const CgroupRef& cgroup,
                      SandboxState& state);
  // recvmsg4/6 and getpeername4/6, for a sandbox given a DNS filter
  // target (mu_ held).
  absl::Status AttachReplyHooks(uint64_t cgroup_id, SandboxState& state);
  // One hook's link on a cgroup, pinned on a pinned host.
  absl::StatusOr<UniqueFd> AttachHook(int cgroup_fd, uint64_t cgroup_id,
                                      absl::string_view cgroup_path,
                                      absl::string_view hook);
  void Detach(uint64_t cgroup_id, SandboxState& state);
  SandboxCounters TakeCounters(uint64_t cgroup_id);
  // This process's sandbox in that cgroup, or NotFound.
  absl::StatusOr<SandboxState*> Find(uint64_t cgroup_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<const SandboxState*> Find(uint64_t cgroup_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string LinkDir(uint64_t cgroup_id) const;

  HostState* const host_;
  std::string build_;
  Maps maps_;
  absl::flat_hash_map<std::string, UniqueFd> progs_;  // by hook name
  UniqueFd ring_;
  UnixEnforcer unix_enforcer_ = UnixEnforcer::kNone;
  bool unix_bind_tracker_ = true;  // EgressOptions::unix_bind_tracker
  // Empty when a Unix enforcer is loaded; else why none is.
  std::string unix_unavailable_;
  // The cut iterators (LoadCut), or why there are none.
  // Iterator links, made once: each walk only opens an iterator on them.
  UniqueFd cut_tcp_, cut_udp_, cut_req_;
  std::string cut_unavailable_;
  // The links of UnixHostProgs() (see AttachUnixHostProgs) but the bind
  // tracker's, which UpdateBindTracker holds while it is needed.
  std::vector<UniqueFd> unix_host_links_;
  mutable absl::Mutex tracker_mu_;
  UniqueFd bind_tracker_link_ ABSL_GUARDED_BY(tracker_mu_);
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, SandboxState> sandboxes_ ABSL_GUARDED_BY(mu_);
  // HoldDeletesForTest's gate (released at the latest by the destructor).
  std::shared_ptr<absl::Notification> hold_;
  // Deletes old generations after their switch returned. Last: destroyed
  // first, so that what it still holds runs while the maps are open.
  Reaper reaper_;
};

// The netns cookie of the calling process's network namespace.
absl::StatusOr<uint64_t> CurrentNetnsCookie();

}  // namespace sandfence

#endif  // SANDFENCE_EGRESS_EGRESS_CONTROLLER_H_
