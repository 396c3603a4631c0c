// `daemon --socket-group GROUP` (issue 39): a non-root framework in the
// group calls the daemon; a user outside it cannot reach the socket; and
// the group's members inside a sandbox are still refused (the daemon
// judges the caller's cgroup, not its groups).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "tests/daemon/daemon_fixture.h"

namespace sandfence::testing {
namespace {

// A gid no account uses here: the test's group exists only in the
// processes that name it.
constexpr gid_t kGroup = 48151;

// `sandfence health --socket S` as nobody, with `groups` as its
// supplementary groups ("" = none); its exit status.
int HealthAsNobody(const std::string& socket, const std::string& groups) {
  const std::string cmd = absl::StrCat(
      "/usr/bin/setpriv --reuid 65534 --regid 65534 ",
      groups.empty() ? "--clear-groups" : absl::StrCat("--groups ", groups),
      " ", SandfenceBinary(), " health --socket ", socket, " >/dev/null 2>&1");
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class DaemonSocketGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    SANDFENCE_REQUIRE_HOST(HostKernelRunsEgress());
    if (access("/usr/bin/setpriv", X_OK) != 0) {
      GTEST_SKIP() << "SKIPPED: needs /usr/bin/setpriv (util-linux)";
    }
    DaemonDirs dirs = MakeDaemonDirs("group");
    daemon_ = std::make_unique<DaemonProcess>(
        dirs,
        std::vector<std::string>{"--socket-group", absl::StrCat(kGroup)});
    daemon_->Start();
  }
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(DaemonSocketGroupTest, TheGroupCallsOthersCannotReachTheSocket) {
  const std::string socket = daemon_->dirs().socket();
  struct stat st {};
  ASSERT_EQ(stat(socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, kGroup);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  // Its root-private directory lets the group through, and no one else.
  ASSERT_EQ(stat(daemon_->dirs().root.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, kGroup);
  EXPECT_EQ(st.st_mode & 0777, 0710u);

  EXPECT_EQ(HealthAsNobody(socket, absl::StrCat(kGroup)), 0)
      << daemon_->Log();
  EXPECT_NE(HealthAsNobody(socket, ""), 0)
      << "a user outside the group reached the daemon";
  EXPECT_NE(HealthAsNobody(socket, absl::StrCat(kGroup + 1)), 0)
      << "a user of another group reached the daemon";
}

TEST_F(DaemonSocketGroupTest, AMemberInsideASandboxIsStillRefused) {
  v1::StartRolloutRequest req;
  req.set_rollout_id("grp-1");
  req.mutable_sandbox()->set_create(true);
  req.set_policy_text(
      "name: \"g\"\nphase { name: \"agent\" network_access: INHERIT }\n");
  v1::StartRolloutResponse started;
  grpc::Status s = daemon_->Start(req, &started);
  ASSERT_TRUE(s.ok()) << s.error_message();
  absl::StatusOr<Cgroup> cg = Cgroup::Open(started.cgroup_path());
  ASSERT_TRUE(cg.ok()) << cg.status();
  SpawnOptions spawn;
  spawn.cgroup_fd = cg->fd();
  spawn.argv = {"/usr/bin/setpriv", "--reuid", "65534", "--regid", "65534",
                "--groups", absl::StrCat(kGroup), SandfenceBinary(), "health",
                "--socket", daemon_->dirs().socket()};
  spawn.drop_privileges = false;  // setpriv drops them itself
  absl::StatusOr<pid_t> child = SpawnInCgroup(spawn);
  ASSERT_TRUE(child.ok()) << child.status();
  absl::StatusOr<int> status = WaitForExit(*child);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_NE(*status, 0) << "a call from inside a sandbox was served";
  // Refused by the daemon for where it came from, not stopped earlier (a
  // call that never reached it would prove nothing).
  EXPECT_TRUE(Eventually([&] {
    return daemon_->Log().find("it is inside a sandbox") != std::string::npos;
  })) << daemon_->Log();
  v1::EndRolloutResponse ended;
  EXPECT_TRUE(daemon_->End("grp-1", &ended).ok());
}

}  // namespace
}  // namespace sandfence::testing
