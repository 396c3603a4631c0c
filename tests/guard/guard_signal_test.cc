// The signal enforcer for real, on this kernel: every row of the scenario
// table (guard_scenarios.cc) played by real processes of real UIDs in real
// cgroups, expecting SIGKILL or an audit event where sandfence must step in
// and nothing where it must not.
#include <ostream>

#include "gtest/gtest.h"
#include "guard_fixture.h"
#include "support/host_probe.h"
#include "support/test_env.h"

namespace sandfence::guard_test {

void PrintTo(const Scenario& s, std::ostream* os) { *os << s.description; }

namespace {

class SignalScenario : public ::testing::TestWithParam<Scenario> {};

TEST_P(SignalScenario, Enforced) {
  SANDFENCE_REQUIRE_ROOT();
  SANDFENCE_REQUIRE_HOST(sandfence::testing::HostKernelRunsSignalEnforcer());
  absl::StatusOr<GuardWorld*> world = GuardWorld::Get(Enforcer::kSignal);
  ASSERT_TRUE(world.ok()) << world.status();
  (*world)->Run(GetParam(), GetParam().signal);
}

INSTANTIATE_TEST_SUITE_P(Guard, SignalScenario,
                         ::testing::ValuesIn(GuardScenarios()),
                         ScenarioTestName);

// Protect() and Unprotect() for real: after Unprotect the guarded sandbox
// may change the directory, after Protect again it may not (the rows).
TEST(SignalGuard, UnprotectEndsTheProtection) {
  SANDFENCE_REQUIRE_ROOT();
  SANDFENCE_REQUIRE_HOST(sandfence::testing::HostKernelRunsSignalEnforcer());
  absl::StatusOr<GuardWorld*> world = GuardWorld::Get(Enforcer::kSignal);
  ASSERT_TRUE(world.ok()) << world.status();
  (*world)->CheckUnprotect();
}

}  // namespace
}  // namespace sandfence::guard_test
