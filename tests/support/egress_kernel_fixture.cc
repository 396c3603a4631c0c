#include "support/egress_kernel_fixture.h"

#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "egress/spawn.h"
#include "support/host_probe.h"
#include "support/private_host.h"
#include "support/test_env.h"
#include "tests/egress/egress_fixture.h"

namespace sandfence::testing {

EgressController* EgressKernelTest::controller_ = nullptr;

void EgressKernelTest::TearDownTestSuite() {
  delete controller_;
  controller_ = nullptr;
  if (!TestCgroupRoot().empty()) rmdir(TestCgroupRoot().c_str());
}

void EgressKernelTest::SetUp() {
  SANDFENCE_REQUIRE_ROOT();
  SANDFENCE_REQUIRE_HOST(HostKernelRunsEgress());
  if (!controller_) {
    absl::StatusOr<std::unique_ptr<EgressController>> c =
        EgressController::Create(PrivateHost());
    ASSERT_TRUE(c.ok()) << c.status();
    controller_ = c->release();
  }
}

void EgressKernelTest::TearDown() {
  for (auto it = sandbox_ids_.rbegin(); it != sandbox_ids_.rend(); ++it) {
    if (controller_) controller_->RemoveSandbox(*it).IgnoreError();
  }
  sandbox_ids_.clear();
}

Cgroup EgressKernelTest::NewSandbox(const CompiledPhase& phase,
                                    const std::string& parent) {
  static int n = 0;
  absl::StatusOr<Cgroup> cg = Cgroup::Create(absl::StrCat(
      parent.empty() ? TestCgroupRoot() : parent, "/sb", ++n, "-", getpid()));
  EXPECT_TRUE(cg.ok()) << cg.status();
  absl::Status s = controller_->AddSandbox(cg->fd(), cg->ref(), phase).status();
  EXPECT_TRUE(s.ok()) << s;
  sandbox_ids_.push_back(cg->id());
  return *std::move(cg);
}

pid_t EgressKernelTest::Start(const Cgroup& sandbox,
                              std::vector<std::string> argv, bool new_netns,
                              bool keep_caps) {
  SpawnOptions o;
  o.cgroup_fd = sandbox.fd();
  o.argv = std::move(argv);
  o.new_netns = new_netns;
  o.drop_privileges = !keep_caps;
  absl::StatusOr<pid_t> pid = SpawnInCgroup(o);
  EXPECT_TRUE(pid.ok()) << pid.status();
  return pid.ok() ? *pid : -1;
}

int EgressKernelTest::Wait(pid_t pid) {
  if (pid <= 0) return -1;
  absl::StatusOr<int> status = WaitForExit(pid);
  return status.ok() ? *status : -1;
}

int EgressKernelTest::Probe(const Cgroup& sandbox,
                            std::vector<std::string> args, bool new_netns,
                            bool keep_caps) {
  args.insert(args.begin(), NetProbePath());
  return Wait(Start(sandbox, std::move(args), new_netns, keep_caps));
}

void EgressKernelTest::ReadEvents() {
  absl::StatusOr<std::unique_ptr<NetEventReader>> reader =
      NetEventReader::Create(
          controller_->events_fd(),
          [this](const NetEvent& e) { events_.push_back(e); });
  ASSERT_TRUE(reader.ok()) << reader.status();
  reader_ = *std::move(reader);
}

}  // namespace sandfence::testing
