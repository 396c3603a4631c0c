// One version everywhere (issue 19): `sandfence --version` and `sandfence
// version` print it and exit 0, and the daemon's Health response and a
// rollout's record carry the very string the binary prints. The daemon side
// runs RolloutManager over the fake enforcement (no root, no BPF).
#include "sandfence/version.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "daemon/rollout_manager.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandbox/fake_enforcement.h"
#include "support/sandfence_cli.h"
#include "support/test_files.h"

namespace sandfence::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// The version the built binary prints ("" when it cannot be read).
std::string BinaryVersion() {
  CliRun run = RunSandfence({"--version"});
  absl::string_view out = run.out;
  if (run.exit_code != 0 || !absl::ConsumePrefix(&out, "sandfence ") ||
      !absl::ConsumeSuffix(&out, "\n")) {
    ADD_FAILURE() << "sandfence --version: exit " << run.exit_code
                  << ", stdout \"" << run.out << "\"";
    return "";
  }
  return std::string(out);
}

TEST(VersionTest, DashDashVersionPrintsTheVersionAndExitsZero) {
  CliRun run = RunSandfence({"--version"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, std::string("sandfence ") + SANDFENCE_VERSION + "\n");
  EXPECT_EQ(run.err, "");
  // The project version, then the git description when built from a
  // checkout ("0.1.0+g1bbde13-dirty"); never the old "unknown".
  EXPECT_THAT(run.out, MatchesRegex("sandfence [0-9]+\\.[0-9]+\\.[0-9]+"
                                    "(\\+[0-9A-Za-z.-]+)?\n"));
  EXPECT_TRUE(absl::StartsWith(SANDFENCE_VERSION, SANDFENCE_PROJECT_VERSION))
      << SANDFENCE_VERSION;
}

TEST(VersionTest, VersionCommandPrintsTheSame) {
  CliRun flag = RunSandfence({"--version"});
  CliRun command = RunSandfence({"version"});
  EXPECT_EQ(command.exit_code, 0) << command.err;
  EXPECT_EQ(command.out, flag.out);
  CliRun help = RunSandfence({"version", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, HasSubstr("usage: sandfence version\n"));
}

TEST(VersionTest, TopLevelHelpListsTheVersionCommand) {
  CliRun run = RunSandfence({"help"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("\n  version "));
}

class DaemonVersionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<ScopedTempDir>(*std::move(dir));
    ManagerOptions options;
    options.state_dir = dir_->Path("state");
    options.records_dir = dir_->Path("records");
    options.cgroup_parent = "/fake/sandfence";
    options.resolvers = {*HostPort::Parse("127.0.0.1:9", 53)};
    options.reap_interval_ms = 0;
    absl::StatusOr<std::unique_ptr<RolloutManager>> m =
        RolloutManager::CreateWith(
            options,
            std::make_unique<FakeEnforcement>(std::make_shared<FakeKernel>()));
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }

  std::unique_ptr<ScopedTempDir> dir_;
  std::unique_ptr<RolloutManager> manager_;
};

TEST_F(DaemonVersionTest, HealthCarriesTheBinarysVersion) {
  const std::string version = BinaryVersion();
  ASSERT_FALSE(version.empty());
  EXPECT_EQ(manager_->Health().version(), version);
}

TEST_F(DaemonVersionTest, RecordCarriesTheBinarysVersion) {
  const std::string version = BinaryVersion();
  ASSERT_FALSE(version.empty());
  v1::StartRolloutRequest req;
  req.set_rollout_id("version-1");
  req.mutable_sandbox()->set_create(true);
  req.set_policy_text(R"pb(phase { name: "watch" network_access: INHERIT })pb");
  absl::StatusOr<v1::StartRolloutResponse> started = manager_->Start(req);
  ASSERT_TRUE(started.ok()) << started.status();

  absl::StatusOr<v1::GetRecordResponse> open = manager_->GetRecord("version-1");
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(open->record().sandfence_version(), version);

  // The closed record, as written to disk, says the same.
  ASSERT_TRUE(manager_->End("version-1").ok());
  absl::StatusOr<v1::GetRecordResponse> closed =
      manager_->GetRecord("version-1");
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_FALSE(closed->open());
  EXPECT_EQ(closed->record().sandfence_version(), version);
}

}  // namespace
}  // namespace sandfence::testing
