// GuardController on the running kernel: which enforcer each mode chooses,
// the refusal when lsm is required and cannot run, and the sandbox
// bookkeeping. Runs here (signal) and in the VM suite (lsm).
#include "guard/guard_controller.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/cgroup.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "support/host_probe.h"
#include "support/private_host.h"
#include "support/test_env.h"

namespace sandfence {
namespace {

// Whether an enforcer can run on this kernel: lsm (BPF LSM, and the helpers
// its programs call) or signal (the kfuncs it calls); if not, why not.
absl::Status SomeEnforcerRuns() {
  absl::Status lsm = ProbeBpfLsm();
  if (lsm.ok()) lsm = sandfence::testing::HostKernelRunsLsmEnforcer();
  if (lsm.ok()) return lsm;
  const absl::Status& sig = sandfence::testing::HostKernelRunsSignalEnforcer();
  if (sig.ok()) return sig;
  return absl::UnavailableError(
      absl::StrCat("lsm: ", lsm.message(), "; signal: ", sig.message()));
}

TEST(GuardController, AutoChoosesLsmExactlyWhenItRunsHere) {
  SANDFENCE_REQUIRE_ROOT();
  SANDFENCE_REQUIRE_HOST(SomeEnforcerRuns());
  absl::Status probe = ProbeBpfLsm();
  absl::StatusOr<GuardController> guard =
      GuardController::Create(testing::PrivateHost(), GuardMode::kAuto);
  ASSERT_TRUE(guard.ok()) << guard.status() << " (lsm probe: " << probe << ")";
  if (probe.ok()) {
    EXPECT_EQ(guard->enforcer(), Enforcer::kLsm);
    EXPECT_EQ(guard->enforcer_name(), "lsm");
    EXPECT_EQ(guard->fallback_reason(), "");
  } else {
    EXPECT_EQ(guard->enforcer(), Enforcer::kSignal);
    EXPECT_EQ(guard->enforcer_name(), "signal");
    // The record says why lsm was not used.
    EXPECT_NE(guard->fallback_reason(), "");
    EXPECT_NE(guard->fallback_reason().find("lsm="), std::string::npos)
        << guard->fallback_reason();
  }
  EXPECT_GE(guard->events_fd(), 0);
}

TEST(GuardController, RequiringLsmWhereItCannotRunIsRejected) {
  SANDFENCE_REQUIRE_ROOT();
  absl::Status probe = ProbeBpfLsm();
  if (probe.ok()) GTEST_SKIP() << "BPF LSM runs on this kernel";
  EXPECT_EQ(RefusalOf(probe), Refusal::kUnavailable) << probe;
  absl::StatusOr<GuardController> guard =
      GuardController::Create(testing::PrivateHost(), GuardMode::kLsm);
  ASSERT_FALSE(guard.ok()) << "lsm mode must never fall back silently";
  EXPECT_EQ(RefusalOf(guard.status()), Refusal::kRejected) << guard.status();
  EXPECT_EQ(ExitCodeFor(guard.status()), 78) << guard.status();
  EXPECT_NE(guard.status().message().find("lsm="), std::string::npos)
      << "the refusal must say how to enable BPF LSM: " << guard.status();
}

// Debian 11's 5.10 in the VM suite: no enforcer's programs load, and auto
// mode says so instead of running unguarded.
TEST(GuardController, NoEnforcerForThisKernelIsRejected) {
  SANDFENCE_REQUIRE_ROOT();
  const absl::Status runs = SomeEnforcerRuns();
  if (runs.ok()) GTEST_SKIP() << "an enforcer runs on this kernel";
  absl::StatusOr<GuardController> guard =
      GuardController::Create(testing::PrivateHost(), GuardMode::kAuto);
  ASSERT_FALSE(guard.ok()) << "the kernel lacks " << runs.message();
  EXPECT_EQ(RefusalOf(guard.status()), Refusal::kRejected) << guard.status();
  EXPECT_NE(guard.status().message().find("this kernel"), std::string::npos)
      << guard.status();
  if (ProbeBpfLsm().ok()) {
    // BPF LSM runs, but the enforcer's programs do not load: the refusal
    // carries the verifier's reason.
    guard = GuardController::Create(testing::PrivateHost(), GuardMode::kLsm);
    ASSERT_FALSE(guard.ok());
    EXPECT_EQ(RefusalOf(guard.status()), Refusal::kRejected) << guard.status();
    EXPECT_NE(guard.status().message().find("the verifier: "),
              std::string::npos)
        << guard.status();
  }
}

// "Signal mode needs Linux 6.13+; older kernels are refused, not
// weakened." The refusal comes from loading the programs (their kfuncs are
// missing), not from a version number, so there is no version to inject:
// this runs on the kernels that lack them (the VM suite's 6.1, 6.12 and
// 5.10) and is skipped where the signal enforcer runs (here).
TEST(GuardController, SignalModeWithoutItsKfuncsIsRejected) {
  SANDFENCE_REQUIRE_ROOT();
  const absl::Status& kfuncs =
      sandfence::testing::HostKernelRunsSignalEnforcer();
  if (kfuncs.ok()) {
    GTEST_SKIP() << "the signal enforcer runs on this kernel (6.13+); the "
                    "refusal runs in the VM suite";
  }
  absl::StatusOr<GuardController> guard =
      GuardController::Create(testing::PrivateHost(), GuardMode::kSignal);
  ASSERT_FALSE(guard.ok()) << "signal mode must refuse a kernel that lacks "
                           << kfuncs.message();
  EXPECT_EQ(RefusalOf(guard.status()), Refusal::kRejected) << guard.status();
  EXPECT_EQ(ExitCodeFor(guard.status()), 78) << guard.status();
  EXPECT_NE(guard.status().message().find("this kernel"), std::string::npos)
      << guard.status();
}

TEST(GuardController, LsmModeLoadsLsmWhereItRuns) {
  SANDFENCE_REQUIRE_ROOT();
  SANDFENCE_REQUIRE_HOST(sandfence::testing::HostKernelRunsLsmEnforcer());
  if (absl::Status probe = ProbeBpfLsm(); !probe.ok()) {
    GTEST_SKIP() << "BPF LSM not available on this kernel (runs in the VM "
                    "suite): "
                 << probe.message();
  }
  absl::StatusOr<GuardController> guard =
      GuardController::Create(testing::PrivateHost(), GuardMode::kLsm);
  ASSERT_TRUE(guard.ok()) << guard.status();
  EXPECT_EQ(guard->enforcer(), Enforcer::kLsm);
}

TEST(GuardController, OffLoadsNothingAndSaysSo) {
  absl::StatusOr<GuardController> guard =
      GuardController::Create(testing::PrivateHost(), GuardMode::kOff);
  ASSERT_TRUE(guard.ok()) << guard.status();
  EXPECT_EQ(guard->enforcer(), Enforcer::kOff);
  EXPECT_EQ(guard->enforcer_name(), "off");
  EXPECT_EQ(guard->events_fd(), -1);
  EXPECT_TRUE(guard->AddSandbox({.cgroup_id = 1234, .level = 1}).ok());
  EXPECT_TRUE(guard->RemoveSandbox(1234).ok());
}

TEST(GuardController, SandboxBookkeeping) {
  SANDFENCE_REQUIRE_ROOT();
  SANDFENCE_REQUIRE_HOST(SomeEnforcerRuns());
  absl::StatusOr<GuardController> guard =
      GuardController::Create(testing::PrivateHost(), GuardMode::kAuto);
  ASSERT_TRUE(guard.ok()) << guard.status();
  absl::StatusOr<std::string> root = FindCgroup2Mount();
  ASSERT_TRUE(root.ok()) << root.status();
  absl::StatusOr<CgroupRef> cg = InspectCgroup(*root);
  ASSERT_TRUE(cg.ok()) << cg.status();
  EXPECT_EQ(cg->level, 0u) << "the cgroup v2 root is level 0";

  const GuardedSandbox sandbox = {.cgroup_id = 987654321, .level = 3};
  ASSERT_TRUE(guard->AddSandbox(sandbox).ok());
  absl::StatusOr<uint64_t> lost = guard->LostEvents(sandbox.cgroup_id);
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(*lost, 0u);
  // Adding again updates its mode; at another level it is a mistake.
  EXPECT_TRUE(
      guard
          ->AddSandbox({.cgroup_id = 987654321, .level = 3, .audit_only = true})
          .ok());
  EXPECT_EQ(RefusalOf(guard->AddSandbox({.cgroup_id = 987654321, .level = 4})),
            Refusal::kMalformed);
  EXPECT_EQ(RefusalOf(guard->AddSandbox({.cgroup_id = 5, .level = 64})),
            Refusal::kRejected);
  EXPECT_EQ(RefusalOf(guard->AddSandbox({.cgroup_id = 0, .level = 1})),
            Refusal::kMalformed);

  ASSERT_TRUE(guard->RemoveSandbox(sandbox.cgroup_id).ok());
  EXPECT_EQ(guard->LostEvents(sandbox.cgroup_id).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(guard->RemoveSandbox(sandbox.cgroup_id).code(),
            absl::StatusCode::kNotFound);
}

TEST(Cgroup, LevelAndIdOfANestedCgroup) {
  SANDFENCE_REQUIRE_ROOT();
  absl::StatusOr<std::string> root = FindCgroup2Mount();
  ASSERT_TRUE(root.ok()) << root.status();
  // This process's own names: a crashed earlier run's leftovers, or a
  // concurrent one, cannot collide with them.
  std::string a = absl::StrCat(*root, "/sf-guard-level-test-", ::getpid());
  std::string b = a + "/inner";
  ::rmdir(b.c_str());
  ::rmdir(a.c_str());
  ASSERT_EQ(::mkdir(a.c_str(), 0755), 0) << a << ": " << strerror(errno);
  ASSERT_EQ(::mkdir(b.c_str(), 0755), 0) << b << ": " << strerror(errno);
  absl::StatusOr<CgroupRef> cg = InspectCgroup(a + "/./inner/");
  ::rmdir(b.c_str());
  ::rmdir(a.c_str());
  ASSERT_TRUE(cg.ok()) << cg.status();
  EXPECT_EQ(cg->level, 2u);
  EXPECT_EQ(cg->path, b);
  EXPECT_NE(cg->id, 0u);
}

TEST(Cgroup, ADirectoryOutsideCgroupFsIsMalformed) {
  absl::StatusOr<CgroupRef> cg = InspectCgroup("/tmp");
  EXPECT_EQ(RefusalOf(cg.status()), Refusal::kMalformed) << cg.status();
}

TEST(Cgroup, NoCgroup2MountIsRejected) {
  absl::StatusOr<std::string> root = FindCgroup2Mount("/dev/null");
  EXPECT_EQ(RefusalOf(root.status()), Refusal::kRejected) << root.status();
}

}  // namespace
}  // namespace sandfence
