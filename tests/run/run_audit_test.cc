// Audit-only phases through `sandfence run` (issue 15), as a user runs it:
// the real binary, a real sandbox and a real forbidden connect to a
// loopback listener. Refused unless --allow-audit says so; with it, the
// connect goes through, and the summary, the record and `records show` say
// AUDIT ONLY first and list the would-deny with its reason.
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "tests/egress/egress_fixture.h"
#include "tests/run/run_fixture.h"

namespace sandfence::testing {
namespace {

class RunAuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    model_ = Listen("127.0.0.2");
    forbidden_ = Listen("127.0.0.4");
    base_ = absl::StrCat("/tmp/sandfence-run-audit-", getpid());
    policy_ = base_ + ".textproto";
    record_ = base_ + ".sfrec";
    marker_ = base_ + ".ran";
    std::ofstream(policy_) << absl::StrCat(
        "name: \"audit-test\"\n"
        "phase { name: \"agent\" network_access: MODEL_ONLY enforce: AUDIT\n"
        "        model: \"http://127.0.0.2:",
        model_.port,
        "/v1\"\n"
        "        dns { mode: NONE } }\n");
  }
  void TearDown() override {
    unlink(policy_.c_str());
    unlink(record_.c_str());
    unlink(marker_.c_str());
  }

  // `run POLICY [flags] -- CMD`, with --unix unchecked where nothing here
  // judges Unix sockets (not what this test is about).
  Result Run(std::vector<std::string> flags, std::vector<std::string> cmd) {
    std::vector<std::string> args = {"run", policy_};
    if (!HostChecksUnixSockets().ok()) {
      args.insert(args.end(), {"--unix", "unchecked"});
    }
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), cmd.begin(), cmd.end());
    return Sandfence(args);
  }

  std::string ConnectForbidden() const {
    return absl::StrCat("exec 3<>/dev/tcp/127.0.0.4/", forbidden_.port,
                        " && touch ", marker_);
  }
  std::string Forbidden() const {
    return absl::StrCat("127.0.0.4:", forbidden_.port);
  }

  Listener model_, forbidden_;
  std::string base_, policy_, record_, marker_;
};

// A policy file alone cannot turn enforcement off: refused (78) before
// anything starts, naming the phase and the flag.
TEST_F(RunAuditTest, AnAuditPhaseIsRefusedWithoutAllowAudit) {
  Result r = Run({}, {"bash", "-c", ConnectForbidden()});
  EXPECT_EQ(r.status, 78) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "phase \"agent\"")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "audit only (enforce: AUDIT)")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--allow-audit")) << r.err;
  EXPECT_NE(access(marker_.c_str(), F_OK), 0) << "the command ran";
}

TEST_F(RunAuditTest, AForbiddenConnectGoesThroughAndEverythingSaysWouldDeny) {
  REQUIRE_KERNEL_FOR_RUN();
  Result r = Run({"--allow-audit", "--record", record_},
                 {"bash", "-c", ConnectForbidden()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(access(marker_.c_str(), F_OK), 0)
      << "the forbidden connect did not go through:\n"
      << r.err;

  // stderr: the banner before the command, then the summary, whose first
  // line is the AUDIT ONLY line.
  std::vector<std::string> lines = absl::StrSplit(r.err, '\n');
  ASSERT_GE(lines.size(), 3u) << r.err;
  EXPECT_TRUE(absl::StartsWith(
      lines[0],
      "sandfence: AUDIT ONLY: phase \"agent\" (enforce: AUDIT) "
      "denies nothing"))
      << r.err;
  size_t summary = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (absl::StartsWith(lines[i], "sandfence: phase \"agent\"")) summary = i;
  }
  ASSERT_GT(summary, 0u) << r.err;
  EXPECT_TRUE(absl::StartsWith(lines[summary - 1],
                               "sandfence: AUDIT ONLY (nothing denied): phase "
                               "\"agent\" has enforce: AUDIT;"))
      << r.err;
  EXPECT_TRUE(absl::StrContains(lines[summary - 1], "would have been denied"))
      << r.err;
  EXPECT_TRUE(absl::StrContains(lines[summary],
                                "egress audited (not "
                                "enforced) by cgroup BPF"))
      << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, ", 0 denied (")) << r.err;
  bool listed = false;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    if (lines[i] != "sandfence: would deny (audit only, let through):") {
      continue;
    }
    for (size_t j = i + 1; j < lines.size() && absl::StartsWith(lines[j], "  ");
         ++j) {
      listed |= absl::StrContains(lines[j], Forbidden()) &&
                absl::StrContains(lines[j], " 1x ");
    }
  }
  EXPECT_TRUE(listed) << "no would-deny line for " << Forbidden() << ":\n"
                      << r.err;
  EXPECT_FALSE(absl::StrContains(r.err, "sandfence: denied:")) << r.err;

  // The record: AUDIT ONLY first, the would-deny with its reason.
  Result show = Sandfence({"records", "show", record_});
  ASSERT_EQ(show.status, 0) << show.err;
  EXPECT_TRUE(absl::StartsWith(
      show.out,
      "AUDIT ONLY: phase \"agent\" ran with enforce: AUDIT and denied "
      "nothing;"))
      << show.out;
  bool row = false;
  for (absl::string_view line : absl::StrSplit(show.out, '\n')) {
    row |= absl::StrContains(line, Forbidden()) &&
           absl::StrContains(line, "no rule") &&
           absl::StrContains(line, "agent  tcp");
  }
  EXPECT_TRUE(row) << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "would deny: ")) << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "model_only AUDIT ONLY")) << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "denied: 0 attempts")) << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "complete, nothing lost"))
      << show.out;

  Result json = Sandfence({"records", "show", "--json", record_});
  ASSERT_EQ(json.status, 0) << json.err;
  EXPECT_TRUE(absl::StrContains(json.out, "\"VERDICT_AUDIT_DENY\""))
      << json.out;
  EXPECT_TRUE(absl::StrContains(json.out, "\"audit_only_phase\": [\n  \"agent\""))
      << json.out;
  EXPECT_TRUE(absl::StrContains(json.out, "\"audit_only\": true")) << json.out;
}

// The same policy without enforce: AUDIT denies the connect: the audit
// setting is the only difference.
TEST_F(RunAuditTest, TheSamePhaseEnforcedDenies) {
  REQUIRE_KERNEL_FOR_RUN();
  std::ofstream(policy_) << absl::StrCat(
      "name: \"audit-test\"\n"
      "phase { name: \"agent\" network_access: MODEL_ONLY\n"
      "        model: \"http://127.0.0.2:",
      model_.port,
      "/v1\"\n"
      "        dns { mode: NONE } }\n");
  Result r = Run({"--allow-audit"}, {"bash", "-c", ConnectForbidden()});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(access(marker_.c_str(), F_OK), 0) << "the connect went through";
  EXPECT_FALSE(absl::StrContains(r.err, "AUDIT")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, Forbidden())) << r.err;
}

}  // namespace
}  // namespace sandfence::testing
