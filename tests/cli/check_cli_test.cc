// `sandfence check` end to end: the built binary runs as a child process,
// names are resolved by a real dnsmasq on loopback (never anything else),
// and each case checks the exit status and what the user reads.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/dns_server.h"
#include "support/sandfence_cli.h"
#include "support/test_files.h"

namespace sandfence {
namespace {

using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Policy(const char* name) {
  return SourcePath(absl::StrCat("policies/", name));
}

class CheckCli : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_DNSMASQ();
    absl::StatusOr<std::unique_ptr<TestDnsServer>> dns = TestDnsServer::Start({
        {"model.internal", {"10.1.2.3"}},
        {"model6.internal", {"10.1.2.4", "fd00::4"}},
        {"search.internal", {"10.0.0.9"}},
        {"loop.internal", {"127.0.0.1"}},
        {"empty.internal", {}},
    });
    ASSERT_TRUE(dns.ok()) << dns.status();
    dns_ = *std::move(dns);
    resolver_ = dns_->address().ToString();
  }

  // Every run names the loopback test server: `check` never asks the
  // host's resolver in these tests.
  CliRun Check(std::vector<std::string> args) {
    std::vector<std::string> full = {"check", "--resolver", resolver_};
    full.insert(full.end(), args.begin(), args.end());
    CliRun run = RunSandfence(full);
    if (HasFailure() && dns_ != nullptr) {
      ADD_FAILURE() << "dnsmasq log:\n" << dns_->log();
    }
    return run;
  }

  std::unique_ptr<TestDnsServer> dns_;
  std::string resolver_;
};

TEST_F(CheckCli, ModelOnlyPrintsTheModelRule) {
  CliRun run = Check({Policy("model_only.textproto"), "--model",
                      "http://model.internal:8000/v1"});
  ASSERT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, ContainsRegex("\nagent  allow tcp 10\\.1\\.2\\.3:8000 +"
                                     "model\\.internal\n"))
      << run;
  // dns SYSTEM is the --resolver here, on UDP and TCP.
  EXPECT_THAT(run.out,
              AllOf(HasSubstr(absl::StrCat("agent  allow udp ", resolver_)),
                    HasSubstr(absl::StrCat("agent  allow tcp ", resolver_)),
                    HasSubstr("agent  deny  all other traffic\n")))
      << run;
  EXPECT_EQ(run.err, "");
}

// Issue 15: an audit-only policy is valid (exit 0) and says so before any
// rule; a contradiction of the policy's enforce is malformed (65).
TEST_F(CheckCli, AnAuditOnlyPolicySaysSoFirst) {
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string file = dir->Path("audit.textproto");
  std::ofstream(file) << "name: \"audit\" enforce: AUDIT\n"
                         "phase { name: \"agent\" network_access: MODEL_ONLY\n"
                         "        dns { mode: NONE } }\n";
  CliRun run = Check({file, "--model", "http://model.internal:8000/v1"});
  ASSERT_EQ(run.exit_code, 0) << run;
  const std::vector<std::string> lines = absl::StrSplit(run.out, '\n');
  ASSERT_GE(lines.size(), 2u) << run;
  EXPECT_TRUE(absl::StartsWith(lines[1],
                               "AUDIT ONLY: phase \"agent\" denies "
                               "nothing (enforce: AUDIT)"))
      << run;
  EXPECT_THAT(run.out, Not(HasSubstr("deny  all other traffic"))) << run;

  std::ofstream(file) << "name: \"audit\" enforce: AUDIT\n"
                         "phase { name: \"agent\" network_access: MODEL_ONLY\n"
                         "        enforce: ENFORCE dns { mode: NONE } }\n";
  CliRun bad = Check({file, "--model", "http://model.internal:8000/v1"});
  EXPECT_EQ(bad.exit_code, 65) << bad;
  EXPECT_THAT(bad.err, HasSubstr("phase \"agent\": enforce: ENFORCE "
                                 "contradicts the policy's enforce: AUDIT"))
      << bad;
}

TEST_F(CheckCli, OwnNetnsPrintsExactlyTheModelRuleAndTheDroppedResolver) {
  CliRun run = Check({Policy("model_only.textproto"), "--own-netns", "--model",
                      "http://model.internal:8000/v1"});
  ASSERT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, HasSubstr("\nagent  allow tcp 10.1.2.3:8000  "
                                 "model.internal\n"))
      << run;
  EXPECT_THAT(run.out, HasSubstr(absl::StrCat(
                           "agent  drop  dns ", resolver_,
                           ": the host's resolver cannot be reached")))
      << run;
}

TEST_F(CheckCli, EveryAddressOfANameGetsARule) {
  CliRun run = Check({"--network-access", "model_only", "--model",
                      "https://Model6.Internal./v1"});
  ASSERT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, AllOf(ContainsRegex("allow tcp 10\\.1\\.2\\.4:443 +"
                                           "model6\\.internal"),
                             ContainsRegex("allow tcp \\[fd00::4\\]:443 +"
                                           "model6\\.internal")))
      << run;
}

TEST_F(CheckCli, ModelAndToolsKeepsToolsAndExtraRules) {
  CliRun run = Check({"--network-access", "model_and_tools", "--model",
                      "http://model.internal:8000", "--tool",
                      "search=https://search.internal", "--tool",
                      "http://nx.internal", "--allow", "[fd00::/8]:443/udp"});
  ASSERT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(
      run.out,
      AllOf(ContainsRegex("default  allow tcp 10\\.0\\.0\\.9:443 +search"),
            ContainsRegex("default  allow udp \\[fd00::/8\\]:443 +"
                          "fd00::/8"),
            HasSubstr("default  drop  tool http://nx.internal: cannot "
                      "be reached: name \"nx.internal\" does not "
                      "exist")))
      << run;
}

// A tool grant's host may be a wildcard with dns FILTERED (issue 14):
// `check` shows its name rule and no address rule for it.
TEST_F(CheckCli, ToolWildcardShowsItsNameRule) {
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<std::string> filtered = dir->WriteFile(
      "filtered.textproto",
      "phase { name: \"agent\" network_access: MODEL_AND_TOOLS "
      "dns { mode: FILTERED } }\n");
  ASSERT_TRUE(filtered.ok());
  CliRun run = Check({*filtered, "--model", "http://model.internal:8000/v1",
                      "--tool", "cdn=https://*.CDN.Internal:8443/mcp"});
  ASSERT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, ContainsRegex("name +\\*\\.cdn\\.internal +tcp:8443 +"
                                     "tool:cdn"))
      << run;
  EXPECT_THAT(run.out, Not(HasSubstr("allow tcp 10.0.0.9"))) << run;

  absl::StatusOr<std::string> none = dir->WriteFile(
      "none.textproto",
      "phase { name: \"agent\" network_access: MODEL_AND_TOOLS "
      "dns { mode: NONE } }\n");
  ASSERT_TRUE(none.ok());
  run = Check({*none, "--model", "http://model.internal:8000/v1", "--tool",
               "cdn=https://*.cdn.internal:8443/mcp"});
  EXPECT_EQ(run.exit_code, 65) << run;
  EXPECT_THAT(run.err,
              HasSubstr("tool \"cdn\" (https://*.cdn.internal:8443/mcp): a "
                        "wildcard needs dns { mode: FILTERED }"))
      << run;
}

TEST_F(CheckCli, JsonCarriesTheSameRules) {
  CliRun run = Check({Policy("model_only.textproto"), "--model",
                      "http://model.internal:8000/v1", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out,
              AllOf(HasSubstr("\"policy\": \"model-only\""),
                    HasSubstr("{\"protocol\": \"tcp\", \"dest\": \"10.1.2.3\", "
                              "\"port_first\": 8000, \"port_last\": 8000, "
                              "\"source\": \"model\", \"origin\": "
                              "\"model.internal\"}")))
      << run;
}

TEST_F(CheckCli, PhaseSelectsOnePhase) {
  CliRun run = Check({Policy("phased.textproto"), "--phase", "setup"});
  ASSERT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, AllOf(HasSubstr("setup  mode inherit (no restrictions)"),
                             Not(HasSubstr("agent"))))
      << run;
}

// --- refusals: exit 78, a message naming the phase, field and value ---

TEST_F(CheckCli, RequiredToolInModelOnlyIsRejected) {
  CliRun run = Check({Policy("model_only.textproto"), "--model",
                      "http://model.internal:8000/v1", "--required-tool",
                      "search=https://search.internal"});
  EXPECT_EQ(run.exit_code, 78) << run;
  EXPECT_THAT(run.err,
              HasSubstr("sandfence check: rejected: phase \"agent\": tool "
                        "\"search\" (https://search.internal) is required, "
                        "but model_only allows only the model server"))
      << run;
  EXPECT_EQ(run.out, "");
}

TEST_F(CheckCli, ModelThatDoesNotExistIsRejected) {
  CliRun run = Check({Policy("model_only.textproto"), "--model",
                      "http://nx.internal:8000/v1"});
  EXPECT_EQ(run.exit_code, 78) << run;
  EXPECT_THAT(run.err, HasSubstr("phase \"agent\": model "
                                 "\"http://nx.internal:8000/v1\": name "
                                 "\"nx.internal\" does not exist"))
      << run;
}

TEST_F(CheckCli, ModelWithoutAddressRecordsIsRejected) {
  CliRun run = Check(
      {Policy("model_only.textproto"), "--model", "http://empty.internal/"});
  EXPECT_EQ(run.exit_code, 78) << run;
  EXPECT_THAT(run.err, HasSubstr("model \"http://empty.internal/\"")) << run;
}

TEST_F(CheckCli, LoopbackModelFromAnOwnNetnsIsRejected) {
  CliRun run = Check({Policy("model_only.textproto"), "--own-netns", "--model",
                      "http://loop.internal:8000"});
  EXPECT_EQ(run.exit_code, 78) << run;
  EXPECT_THAT(run.err, HasSubstr("model \"http://loop.internal:8000\" cannot "
                                 "be reached: \"loop.internal\" resolves only "
                                 "to addresses the sandbox cannot reach: "
                                 "127.0.0.1 is a loopback address"))
      << run;
}

TEST_F(CheckCli, BorrowedSandboxIsRejectedUnlessInherit) {
  CliRun run = Check({Policy("model_only.textproto"), "--borrowed", "--model",
                      "http://model.internal:8000"});
  EXPECT_EQ(run.exit_code, 78) << run;
  EXPECT_THAT(run.err, HasSubstr("network_access model_only cannot be "
                                 "enforced on a borrowed sandbox"))
      << run;
  run = Check({Policy("inherit.textproto"), "--borrowed"});
  EXPECT_EQ(run.exit_code, 0) << run;
}

TEST_F(CheckCli, RestrictedModeWithoutModelIsRejected) {
  CliRun run = Check({Policy("model_only.textproto")});
  EXPECT_EQ(run.exit_code, 78) << run;
  EXPECT_THAT(run.err, HasSubstr("needs the model server's endpoint, and none "
                                 "is given"))
      << run;
}

TEST_F(CheckCli, RefusalAsJson) {
  CliRun run = Check({Policy("model_only.textproto"), "--json"});
  EXPECT_EQ(run.exit_code, 78) << run;
  EXPECT_THAT(run.out, HasSubstr("{\"error\": {\"refusal\": \"rejected\", "
                                 "\"message\": \"phase \\\"agent\\\":"))
      << run;
}

// --- unavailable: exit 75, retry may help ---

TEST_F(CheckCli, DnsTimeoutIsUnavailable) {
  absl::StatusOr<std::unique_ptr<TestSilentDnsServer>> silent =
      TestSilentDnsServer::Start();
  ASSERT_TRUE(silent.ok()) << silent.status();
  CliRun run = RunSandfence({"check", Policy("model_only.textproto"),
                             "--resolver", (*silent)->address().ToString(),
                             "--model", "http://model.internal:8000"});
  EXPECT_EQ(run.exit_code, 75) << run;
  EXPECT_THAT(run.err, AllOf(HasSubstr("sandfence check: unavailable: phase "
                                       "\"agent\": model "
                                       "\"http://model.internal:8000\""),
                             HasSubstr("timeout")))
      << run;
}

TEST_F(CheckCli, NoDnsServerListeningIsUnavailable) {
  absl::StatusOr<uint16_t> port = PickFreeLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status();
  CliRun run = RunSandfence({"check", Policy("model_only.textproto"),
                             "--resolver", absl::StrCat("127.0.0.1:", *port),
                             "--model", "http://model.internal:8000"});
  EXPECT_EQ(run.exit_code, 75) << run;
  EXPECT_THAT(run.err, HasSubstr("model \"http://model.internal:8000\""))
      << run;
}

// --- malformed input: exit 65 ---

TEST_F(CheckCli, UnknownFieldIsMalformedWithLineAndColumn) {
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<std::string> path = dir->WriteFile(
      "typo.textproto",
      "name: \"typo\"\nphase {\n  name: \"agent\"\n  network_acess: "
      "MODEL_ONLY\n}\n");
  ASSERT_TRUE(path.ok()) << path.status();
  CliRun run = Check({*path});
  EXPECT_EQ(run.exit_code, 65) << run;
  EXPECT_THAT(run.err, HasSubstr(absl::StrCat(
                           "sandfence check: malformed: ", *path,
                           ":4:3: Message type \"sandfence.v1.Phase\" has no "
                           "field named \"network_acess\"")))
      << run;
}

TEST_F(CheckCli, UnknownModeIsMalformedAndListsTheModes) {
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<std::string> path = dir->WriteFile(
      "mode.textproto", "phase { name: \"agent\" network_access: OPEN }\n");
  ASSERT_TRUE(path.ok()) << path.status();
  CliRun run = Check({*path});
  EXPECT_EQ(run.exit_code, 65) << run;
  EXPECT_THAT(run.err,
              AllOf(HasSubstr("mode.textproto:1:39: "), HasSubstr("\"OPEN\""),
                    HasSubstr("\"network_access\""),
                    HasSubstr("INHERIT, MODEL_ONLY, MODEL_AND_TOOLS")))
      << run;
}

TEST_F(CheckCli, UnsetModeAndBadUrlInAFileAreMalformed) {
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<std::string> unset =
      dir->WriteFile("unset.textproto", "phase { name: \"agent\" }\n");
  ASSERT_TRUE(unset.ok());
  CliRun run = Check({*unset});
  EXPECT_EQ(run.exit_code, 65) << run;
  EXPECT_THAT(run.err, HasSubstr("phase \"agent\": network_access is not set"))
      << run;

  absl::StatusOr<std::string> url =
      dir->WriteFile("url.textproto",
                     "phase { name: \"agent\" network_access: MODEL_ONLY "
                     "model: \"http://model.internal:99999\" }\n");
  ASSERT_TRUE(url.ok());
  run = Check({*url});
  EXPECT_EQ(run.exit_code, 65) << run;
  EXPECT_THAT(run.err, HasSubstr("phase \"agent\": model "
                                 "\"http://model.internal:99999\": "))
      << run;
}

// --- usage: exit 64; unreadable file: exit 66 ---

TEST_F(CheckCli, UsageErrorsNameTheFlagAndValue) {
  struct Row {
    std::vector<std::string> args;
    const char* message_part;
  };
  for (const Row& row : std::vector<Row>{
           {{"--bogus"}, "unknown flag \"--bogus\""},
           {{Policy("model_only.textproto"), "--model", "ftp://m"},
            "--model \"ftp://m\": scheme \"ftp\" is not supported"},
           {{Policy("model_only.textproto"), "--allow", "10.0.0.1"},
            "--allow \"10.0.0.1\""},
           {{"--network-access", "everything"},
            "--network-access \"everything\""},
           {{Policy("inherit.textproto"), "--network-access", "inherit"},
            "use one or the other"},
           {{}, "no policy"},
           {{Policy("phased.textproto"), "--phase", "agnet"},
            "--phase \"agnet\": the policy has no such phase (it has: setup, "
            "agent, verify)"},
           {{Policy("inherit.textproto"), "--", "/bin/true"}, "sandfence run"},
       }) {
    CliRun run = Check(row.args);
    EXPECT_EQ(run.exit_code, 64) << run;
    EXPECT_THAT(run.err, HasSubstr(row.message_part)) << run;
  }
}

TEST_F(CheckCli, MissingPolicyFileIsNoInput) {
  CliRun run = Check({"/nonexistent/policy.textproto"});
  EXPECT_EQ(run.exit_code, 66) << run;
  EXPECT_THAT(run.err, HasSubstr("cannot open policy file "
                                 "\"/nonexistent/policy.textproto\""))
      << run;
}

TEST_F(CheckCli, HelpListsTheFlags) {
  CliRun run = RunSandfence({"check", "--help"});
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, AllOf(HasSubstr("usage: sandfence check"),
                             HasSubstr("--required-tool"), HasSubstr("--json")))
      << run;
}

}  // namespace
}  // namespace sandfence
