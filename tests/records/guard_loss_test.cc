// Every loss reaches the record, the guard's too: a sandbox whose guard
// events overflow the ring while nobody reads it ends with a record that is
// lossy and counts exactly what the kernel could not deliver.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/cgroup.h"
#include "egress/spawn.h"
#include "gtest/gtest.h"
#include "records/journal.h"
#include "sandbox/kernel_enforcement.h"
#include "sandbox/sandbox.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "tests/egress/egress_fixture.h"

namespace sandfence::testing {
namespace {

TEST(GuardLoss, AFloodedGuardRingMakesTheRecordLossyWithTheExactCount) {
  SANDFENCE_REQUIRE_ROOT();
  SANDFENCE_REQUIRE_HOST(HostKernelRunsEgress());
  KernelEnforcementOptions options;
  options.host.pin_root =
      absl::StrCat("/sys/fs/bpf/sandfence-test-guardloss-", getpid());
  // The pins stay for the next process (load once per host): this test's
  // own root goes when it ends.
  struct RemovePins {
    std::string root;
    ~RemovePins() { RemovePinnedTree(root).IgnoreError(); }
  } remove_pins{options.host.pin_root};
  absl::StatusOr<std::unique_ptr<KernelEnforcement>> host =
      KernelEnforcement::Create(options);
  ASSERT_TRUE(host.ok()) << host.status();
  absl::StatusOr<GuardInfo> guard = (*host)->PrepareGuard(GuardMode::kAuto, /*spawns=*/false);
  if (!guard.ok()) GTEST_SKIP() << "no process guard here: " << guard.status();

  // A process outside the sandbox, of another user: its /proc/<pid>/stat is
  // readable by all, so each open is audited (an event, not a kill).
  pid_t target = fork();
  ASSERT_GE(target, 0);
  if (target == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(1);
    pause();
    _exit(0);
  }

  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  ASSERT_TRUE(mount.ok()) << mount.status();
  const std::string record = absl::StrCat("/tmp/sandfence-guardloss-",
                                          getpid(), ".record");
  SandboxSpec spec;
  spec.rollout_id = "guard-flood";
  spec.cgroup_path =
      absl::StrCat(*mount, "/sandfence-test-guardloss-", getpid());
  spec.policy.name = "flood";
  spec.policy.phases = {Phase(v1::INHERIT, {})};
  spec.policy.phases[0].name = "agent";
  spec.guard_mode = GuardMode::kAuto;
  spec.record_path = record;
  absl::StatusOr<std::unique_ptr<Sandbox>> sb =
      Sandbox::Start(host->get(), std::move(spec));
  ASSERT_TRUE(sb.ok()) << sb.status();

  // 4000 audited opens and a final forbidden one; nobody reads the ring
  // meanwhile (this test never polls), and 4001 events cannot fit in it.
  constexpr uint64_t kAttempts = 4001;
  const std::string proc = absl::StrCat("/proc/", target);
  SpawnOptions spawn;
  spawn.cgroup_fd = (*host)->CgroupFd((*sb)->cgroup().id);
  // Root with its capabilities, as an agent root in its container: the
  // kernel's own ptrace check lets the environ open through to the guard.
  spawn.drop_privileges = false;
  spawn.argv = {SF_GUARD_ACTOR, "open-many", proc + "/stat", "4000",
                proc + "/environ"};
  absl::StatusOr<pid_t> actor = SpawnInCgroup(spawn);
  ASSERT_TRUE(actor.ok()) << actor.status();
  int status = 0;
  ASSERT_EQ(waitpid(*actor, &status, 0), *actor);
  EXPECT_TRUE(WIFSIGNALED(status) || WEXITSTATUS(status) != 0)
      << "the final open of environ must be refused";

  absl::StatusOr<SandboxEnd> end = (*sb)->End();
  kill(target, SIGKILL);
  waitpid(target, nullptr, 0);
  ASSERT_TRUE(end.ok()) << end.status();
  ASSERT_TRUE(end->record.has_value());
  const v1::LossAccounting& loss = end->record->loss;
  EXPECT_GT(loss.guard_events_lost(), 0u);
  EXPECT_EQ(loss.guard_events_lost(), end->guard_events_lost);
  EXPECT_EQ(loss.guard_events_recorded() + loss.guard_events_lost(), kAttempts)
      << "every judged open is in the record or counted as lost";
  EXPECT_TRUE(end->record->lossy) << loss.DebugString();

  absl::StatusOr<v1::RolloutRecord> read = ReadRecordFile(record);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->lossy());
  EXPECT_EQ(read->loss().guard_events_lost(), loss.guard_events_lost());
  unlink(record.c_str());
}

}  // namespace
}  // namespace sandfence::testing
