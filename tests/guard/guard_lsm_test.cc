// The lsm enforcer: the same scenario table as the signal enforcer, where
// sandfence steps in expecting EPERM (EACCES through a /proc magic link)
// and a "denied" event, before anything happened.
//
// It needs a kernel that runs BPF LSM programs; elsewhere it skips with the
// reason, and the VM suite (tests/vm, a kernel booted with lsm=...,bpf)
// runs it, where SANDFENCE_IN_VM=1 turns a refusal into a failure.
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>

#include "gtest/gtest.h"
#include "guard/guard_controller.h"
#include "guard_fixture.h"
#include "support/host_probe.h"
#include "support/test_env.h"

namespace sandfence::guard_test {

void PrintTo(const Scenario& s, std::ostream* os) { *os << s.description; }

namespace {

constexpr char kUnavailable[] =
    "BPF LSM not available on this kernel (runs in the VM suite)";

bool InVm() {
  const char* v = std::getenv("SANDFENCE_IN_VM");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// A kernel with BPF LSM but older than the enforcer's programs (Debian 11's
// 5.10 in the VM suite) skips with what it lacks; GuardController refuses
// it (guard_controller_test).
#define REQUIRE_BPF_LSM()                                                    \
  do {                                                                       \
    SANDFENCE_REQUIRE_ROOT();                                                \
    SANDFENCE_REQUIRE_HOST(sandfence::testing::HostKernelRunsLsmEnforcer()); \
    static const absl::Status probe = ProbeBpfLsm();                         \
    if (!probe.ok()) {                                                       \
      if (InVm()) FAIL() << "in the VM, BPF LSM must run: " << probe;        \
      GTEST_SKIP() << kUnavailable << ": " << probe.message();               \
    }                                                                        \
  } while (0)

class LsmScenario : public ::testing::TestWithParam<Scenario> {};

TEST_P(LsmScenario, Enforced) {
  REQUIRE_BPF_LSM();
  absl::StatusOr<GuardWorld*> world = GuardWorld::Get(Enforcer::kLsm);
  ASSERT_TRUE(world.ok()) << world.status();
  (*world)->Run(GetParam(), GetParam().lsm);
}

INSTANTIATE_TEST_SUITE_P(Guard, LsmScenario,
                         ::testing::ValuesIn(GuardScenarios()),
                         ScenarioTestName);

// Root's ps aux (procps 4 reads every process's environ, too): refused
// what is not its own, it carries on.
TEST(LsmGuard, RootsPsAuxSurvives) {
  REQUIRE_BPF_LSM();
  absl::StatusOr<GuardWorld*> world = GuardWorld::Get(Enforcer::kLsm);
  ASSERT_TRUE(world.ok()) << world.status();
  (*world)->RunPsAux(kRoot);
}

// Protect() and Unprotect() for real: after Unprotect the guarded sandbox
// may change the directory, after Protect again it may not (the rows).
TEST(LsmGuard, UnprotectEndsTheProtection) {
  REQUIRE_BPF_LSM();
  absl::StatusOr<GuardWorld*> world = GuardWorld::Get(Enforcer::kLsm);
  ASSERT_TRUE(world.ok()) << world.status();
  (*world)->CheckUnprotect();
}

}  // namespace
}  // namespace sandfence::guard_test
