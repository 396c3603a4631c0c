// What the guard scenario tests share: real sandboxes (cgroup v2
// directories under the mount found in /proc/mounts), real processes of
// real UIDs in them (setpriv), a second procfs mount, the guard's events,
// and one runner that plays a scenario row and checks its outcome.
#ifndef SANDFENCE_TESTS_GUARD_GUARD_FIXTURE_H_
#define SANDFENCE_TESTS_GUARD_GUARD_FIXTURE_H_

#include <sys/types.h>

#include <cerrno>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cgroup.h"
#include "gtest/gtest.h"
#include "guard/guard_abi.h"
#include "guard/guard_controller.h"
#include "guard_domain.h"

namespace sandfence::guard_test {

// UIDs with no passwd entry needed: setpriv takes numbers.
inline constexpr uid_t kRoot = 0;
inline constexpr uid_t kAgentUid = 4242;
inline constexpr uid_t kOtherUid = 4343;

// Where a process runs.
enum class Where {
  kGuarded,    // the guarded sandbox
  kUring,      // a guarded sandbox that allows io_uring (allow_io_uring)
  kSub,        // a child cgroup of the guarded sandbox
  kAudited,    // a sandbox guarded in audit-only mode
  kUnguarded,  // a cgroup the guard does not know
  kOutside,    // the test's own cgroup: outside every sandbox
};

// The sandboxes of one test process, removed (their processes killed) at
// the end.
class Sandboxes {
 public:
  static absl::StatusOr<Sandboxes> Create();
  Sandboxes(Sandboxes&& other) noexcept;
  Sandboxes& operator=(Sandboxes&&) = delete;
  ~Sandboxes();

  const CgroupRef& guarded() const { return guarded_; }
  const CgroupRef& uring() const { return uring_; }
  const CgroupRef& audited() const { return audited_; }
  // A cgroup outside every sandbox, for escapes to go to.
  const std::string& escape_dir() const { return escape_; }
  // "" for kOutside: stay in the test's cgroup.
  std::string DirFor(Where where) const;

 private:
  Sandboxes() = default;
  std::string base_;
  CgroupRef guarded_;
  CgroupRef uring_;
  CgroupRef audited_;
  std::string sub_, unguarded_, escape_;
};

// A second procfs, mounted in a temporary directory (the same pids: it
// shows the kernel's init pid namespace, like /proc).
class ProcMount {
 public:
  static absl::StatusOr<ProcMount> Create();
  ProcMount(ProcMount&& other) noexcept;
  ProcMount& operator=(ProcMount&&) = delete;
  ~ProcMount();
  const std::string& path() const { return path_; }

 private:
  ProcMount() = default;
  std::string path_;
};

// What the tests protect (GuardController::Protect), as sandfence's pins,
// state and socket would be, and an unprotected twin:
//   prot/            protected: state, pins/sub/pin, pins/empty/, a
//                    listening stream socket daemon.sock, a datagram
//                    socket dgram.sock
//   sock/s.sock      a listening socket protected by itself (its directory
//                    is not)
//   free/            not protected: free.sock (listening)
// Reset() puts back what a row may have removed.
class ProtectedFiles {
 public:
  static absl::StatusOr<ProtectedFiles> Create();
  ProtectedFiles(ProtectedFiles&& other) noexcept;
  ProtectedFiles& operator=(ProtectedFiles&&) = delete;
  ~ProtectedFiles();

  absl::Status Reset() const;
  const std::string& prot() const { return prot_; }
  const std::string& free() const { return free_; }
  const std::string& socket() const { return socket_; }

 private:
  ProtectedFiles() = default;
  std::string base_, prot_, free_, socket_;
  std::vector<int> listeners_;
};

// A child process whose stdout the test reads; killed and reaped when it
// goes out of scope.
class Child {
 public:
  struct Spec {
    std::vector<std::string> argv;  // argv[0] is the executable's path
    uid_t uid = kRoot;              // not root: through setpriv
    std::string cgroup_dir;         // moved there before exec; "" stays
    // Started by this zygote, in its Landlock domain (landlock suite);
    // null: forked here, unconfined.
    const Zygote* zygote = nullptr;
  };
  static absl::StatusOr<Child> Spawn(const Spec& spec);

  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  // Blocks for one line of output ("" at end of file).
  std::string ReadLine();
  // Blocks until the child ends; its wait status.
  int Wait();
  // Whether it still runs (not yet ended).
  bool Running();
  // All output still buffered in the pipe, without blocking.
  std::string DrainOutput();
  // Blocks until the output ends (the child and its children closed it).
  std::string ReadAll();

 private:
  Child() = default;
  pid_t pid_ = -1;
  int out_ = -1;
  bool reaped_ = false;
  std::string buffered_;
};

// The target process of a scenario, and what it printed about itself.
struct Target {
  Child child;
  uintptr_t addr = 0;  // of its known string
  size_t len = 0;
  int fd = -1;  // a file it holds open
};
absl::StatusOr<Target> StartTarget(uid_t uid, const std::string& cgroup_dir,
                                   const Zygote* zygote = nullptr);

// What a scenario expects in one enforcer mode.
enum class Outcome {
  kAllowed,  // succeeds, no event
  kAudited,  // succeeds, an "audited" event
  kKilled,   // SIGKILL, a "killed" event
  kDenied,   // fails with err, a "denied" event
  kErrno,    // fails with err, no event (the kernel's own refusal)
  // succeeds, with a "denied" event: the kernel reports success when part
  // of a call went through (kill(-1) and kill(0) signal what they may)
  kDeniedPartly,
  // Landlock (no event ever): the open succeeds, its read fails with err
  // (/proc/<pid>/syscall, stack: checked when read, not when opened)
  kReadRefused,
  // Landlock: succeeds, no event, and the target (outside the domain) got
  // nothing: kill(-1), kill(0), kill(-pgrp) skip what is outside
  kScopedOut,
  // The row means nothing to this enforcer: skipped, with `why`
  kNotApplicable,
};

struct Expect {
  Outcome outcome = Outcome::kAllowed;
  int err = 0;              // kDenied, kErrno
  uint32_t what = 0;        // enum sf_guard_what (kAudited, kKilled, kDenied)
  uint32_t proc_class = 0;  // enum sf_proc_class; 0: not checked
  // The target must still run afterwards (a refused signal never landed).
  bool target_survives = false;
  // kNotApplicable: why (the skip's message).
  const char* why = nullptr;
};

inline Expect Allowed() { return {Outcome::kAllowed}; }
inline Expect Refused(int err) { return {Outcome::kErrno, err}; }
inline Expect Killed(uint32_t what, uint32_t cls = 0) {
  return {Outcome::kKilled, 0, what, cls};
}
inline Expect Audited(uint32_t what, uint32_t cls = 0) {
  return {Outcome::kAudited, 0, what, cls};
}
inline Expect Denied(int err, uint32_t what, uint32_t cls = 0) {
  return {Outcome::kDenied, err, what, cls};
}
inline Expect ReadRefused(int err) { return {Outcome::kReadRefused, err}; }
inline Expect ScopedOut() { return {Outcome::kScopedOut}; }
inline Expect NotApplicable(const char* why) {
  Expect e{Outcome::kNotApplicable};
  e.why = why;
  return e;
}
// Landlock's signal scope: EPERM, and the target must still run.
inline Expect LandlockSignalRefused() {
  Expect e = Refused(EPERM);
  e.target_survives = true;
  return e;
}
// Why an audit-only sandbox's rows do not run under landlock.
inline constexpr char kLandlockNoAudit[] =
    "Landlock and seccomp refuse or allow, and record nothing: there is no "
    "audit-only Landlock sandbox (no policy asks the landlock guard to "
    "audit; an audit-only phase is about the network)";

// One row: who does what to whom, and what each enforcer must make of it.
struct Scenario {
  const char* name;  // the test's name: letters, digits, underscores
  const char* description;
  uid_t actor_uid;
  Where actor_where;
  uid_t target_uid;    // the target runs as this UID ...
  Where target_where;  // ... here
  // The actor's arguments; {pid} {addr} {len} {fd} {pgid} {procmnt}
  // {escape} {sub} {guarded} {prot} {prot_name} {free} {free_name} {sock}
  // are replaced by the target's pid, string address and length, open fd,
  // process group, the second procfs mount, the escape cgroup, the guarded
  // sandbox's child cgroup, the guarded sandbox, the protected directory
  // (and its name in /tmp), the unprotected one (and its name), the
  // protected socket (ProtectedFiles).
  std::vector<std::string> args;
  Expect signal;
  Expect lsm;
  // Landlock + seccomp + no_new_privs, applied as `sandfence run` applies
  // them (guard_landlock_test.cc): the kernel's own refusals, never an
  // event. A row Landlock does not cover says "landlock: not covered
  // (why)" in its description.
  Expect landlock;
  // A child the call creates must never have run where the call is
  // stopped (clone3 into a cgroup outside, clone(CLONE_FILES)).
  bool child_must_not_run = false;
};

// The scenario table (guard_scenarios.cc).
const std::vector<Scenario>& GuardScenarios();
// Its rows for what keeps sandfence out of a sandbox's reach
// (guard_scenarios_reach.cc).
void AddReachScenarios(std::vector<Scenario>* table);

// A parameterized test's name: the row's name.
std::string ScenarioTestName(const ::testing::TestParamInfo<Scenario>& row);

// Everything one test process needs: a loaded guard in the requested
// mode, the sandboxes, the second procfs and the event stream. kLandlock
// loads no BPF guard: its sandboxes are Landlock domains (zygotes) whose
// plan is `run`'s, with the protected files as sandfence's own paths.
class GuardWorld {
 public:
  static absl::StatusOr<GuardWorld*> Get(Enforcer enforcer);

  Enforcer enforcer() const { return enforcer_; }
  // The BPF guard (kLsm, kSignal only).
  GuardController& guard() { return *guard_; }
  Sandboxes& sandboxes() { return sandboxes_; }
  const std::string& proc_mount() const { return proc_.path(); }
  const ProtectedFiles& protected_files() const { return files_; }

  // Drops events so far; then Collect() returns the ones after.
  void ClearEvents();
  std::vector<sf_guard_event> CollectEvents();

  // Plays a scenario and reports every mismatch as a gtest failure.
  void Run(const Scenario& s, const Expect& expect);

  // Unprotect() ends the protection (an unlink in the guarded sandbox then
  // goes through, with no event) and Protect() brings it back.
  void CheckUnprotect();

  // Runs `ps aux` as uid in the guarded sandbox, with other UIDs'
  // processes inside and outside it: it must finish and succeed, and the
  // guard may audit or deny, never kill.
  void RunPsAux(uid_t uid);

  // kLandlock: the zygote whose domain stands for this sandbox (kGuarded
  // and kSub share one, kUring has its own: its plan allows io_uring),
  // started on first use; null for kOutside and kUnguarded (unconfined).
  // kAudited has no Landlock counterpart: an error.
  absl::StatusOr<const Zygote*> ZygoteFor(Where where);
  // kLandlock: the plan of the sandbox at `where` (kGuarded or kUring).
  ConfinePlan LandlockPlan(Where where) const;

  // Use Get().
  GuardWorld(Enforcer enforcer, std::optional<GuardController> guard,
             Sandboxes sandboxes, ProcMount proc, ProtectedFiles files);
  ~GuardWorld();

 private:
  // kLandlock: Run() and RunPsAux() through the zygotes.
  Enforcer enforcer_;
  std::optional<GuardController> guard_;
  Sandboxes sandboxes_;
  ProcMount proc_;
  ProtectedFiles files_;
  std::vector<sf_guard_event> events_;
  std::unique_ptr<GuardEventReader> reader_;
  // The directory the actor makes its scratch directories in
  // (SF_GUARD_SCRATCH), removed with the world (MakeScratch).
  std::string scratch_;
  std::unique_ptr<Zygote> guarded_zygote_, uring_zygote_;
};

// The helper executables.
std::string ActorPath();
std::string TargetPath();

std::string DescribeWaitStatus(int status);

}  // namespace sandfence::guard_test

#endif  // SANDFENCE_TESTS_GUARD_GUARD_FIXTURE_H_
