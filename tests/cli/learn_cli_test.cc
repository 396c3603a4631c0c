// `sandfence records suggest` and `sandfence check --against` end to end
// (issue 15, part 3): the built binary runs as a child process on records
// written by the real recorder; names resolve through a dnsmasq on loopback
// (never anything else). What suggest prints is checked as it is, against
// the records it came from.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "support/dns_server.h"
#include "support/sandfence_cli.h"
#include "support/test_files.h"
#include "tests/records/learn_records.h"

namespace sandfence {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

// `text` without the lines that contain `needle`.
std::string WithoutLines(const std::string& text, const std::string& needle) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.find(needle) != absl::string_view::npos) continue;
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

class LearnCli : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_DNSMASQ();
    absl::StatusOr<std::unique_ptr<TestDnsServer>> dns =
        TestDnsServer::Start({{"a.test", {"127.0.0.3"}},
                              {"b.test", {"127.0.0.4"}},
                              {"c.test", {"127.0.0.5"}}});
    ASSERT_TRUE(dns.ok()) << dns.status();
    dns_ = *std::move(dns);
    absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<ScopedTempDir>(*std::move(dir));
    record_ = dir_->Path("three.sfrec");
    ASSERT_TRUE(testing::RecordThreeHosts(record_).ok());
  }

  // `check --resolver <the test's dnsmasq> ARGS...`.
  CliRun Check(std::vector<std::string> args) {
    std::vector<std::string> full = {"check", "--resolver",
                                     dns_->address().ToString()};
    full.insert(full.end(), args.begin(), args.end());
    return RunSandfence(full);
  }
  std::string Write(const std::string& name, const std::string& text) {
    absl::StatusOr<std::string> path = dir_->WriteFile(name, text);
    EXPECT_TRUE(path.ok()) << path.status();
    return path.ok() ? *path : "";
  }

  std::unique_ptr<TestDnsServer> dns_;
  std::unique_ptr<ScopedTempDir> dir_;
  std::string record_;
};

TEST_F(LearnCli, SuggestedPolicyDeniesNothingAndOneHostFewerDeniesThatHost) {
  CliRun suggest = RunSandfence({"records", "suggest", record_});
  ASSERT_EQ(suggest.exit_code, 0) << suggest;
  const std::string policy = Write("suggested.textproto", suggest.out);

  CliRun all = Check({policy, "--against", record_});
  EXPECT_EQ(all.exit_code, 0) << all;
  EXPECT_THAT(all.out, HasSubstr("\nwould deny: nothing\n")) << all;
  EXPECT_THAT(all.out, HasSubstr("summary: would deny 0 of 18 network attempts "
                                 "and 0 of 7 DNS queries\n"))
      << all;

  // The allow rule of b.test (and its comment) taken out.
  const std::string fewer =
      Write("fewer.textproto", WithoutLines(suggest.out, "b.test"));
  CliRun one = Check({fewer, "--against", record_});
  EXPECT_EQ(one.exit_code, 1) << one;
  EXPECT_THAT(one.out, HasSubstr("would deny:\n")) << one;
  EXPECT_THAT(
      one.out,
      ContainsRegex("agent +tcp +127\\.0\\.0\\.4:80 +2 +\\[1\\] +no rule\n"))
      << one;
  EXPECT_THAT(one.out,
              ContainsRegex("agent +dns +b\\.test \\(A,AAAA\\) +2 +\\[1\\] +"
                            "no name rule matches\n"))
      << one;
  EXPECT_THAT(one.out, Not(HasSubstr("127.0.0.3"))) << one;
  EXPECT_THAT(one.out, Not(HasSubstr("127.0.0.5"))) << one;
  EXPECT_THAT(one.out, HasSubstr("summary: would deny 2 of 18 network attempts "
                                 "and 2 of 7 DNS queries\n"))
      << one;

  CliRun json = Check({fewer, "--json", "--against", record_});
  EXPECT_EQ(json.exit_code, 1) << json;
  EXPECT_THAT(json.out,
              HasSubstr("{\"phase\": \"agent\", \"kind\": \"tcp\", "
                        "\"destination\": \"127.0.0.4:80\", \"count\": 2, "
                        "\"records\": [1], \"because\": \"no rule\"}"))
      << json;
  EXPECT_THAT(json.out, HasSubstr("\"attempts_would_deny\": 2")) << json;
  google::protobuf::Struct parsed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json.out, &parsed).ok())
      << "not JSON:\n"
      << json;
  auto would_deny = parsed.fields().find("would_deny");
  ASSERT_NE(would_deny, parsed.fields().end()) << json;
  EXPECT_EQ(would_deny->second.list_value().values_size(), 2) << json;
}

TEST_F(LearnCli, SeveralRecordsFollowTheFlag) {
  const std::string second = dir_->Path("again.sfrec");
  ASSERT_TRUE(testing::RecordThreeHosts(second).ok());
  CliRun suggest = RunSandfence({"records", "suggest", record_, second});
  ASSERT_EQ(suggest.exit_code, 0) << suggest;
  EXPECT_THAT(suggest.out, HasSubstr("b.test: 4 attempts [1] [2]")) << suggest;
  const std::string fewer =
      Write("fewer.textproto", WithoutLines(suggest.out, "b.test"));
  CliRun run = Check({fewer, "--against", record_, second});
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.out,
              ContainsRegex("127\\.0\\.0\\.4:80 +4 +\\[1\\] \\[2\\] +no rule"))
      << run;
}

TEST_F(LearnCli, BadRecordsAndPhasesAreNamed) {
  const std::string policy = Write("p.textproto",
                                   "name: \"p\"\n"
                                   "phase { name: \"setup\" network_access: "
                                   "INHERIT }\n");
  const std::string not_record = Write("not-a-record", "hello\n");
  const std::string missing = dir_->Path("missing.sfrec");
  struct Row {
    const char* name;
    std::vector<std::string> args;
    int exit_code;
    std::string says;
  };
  const Row rows[] = {
      {"not a record", {policy, "--against", not_record}, 65, not_record},
      {"unreadable",
       {policy, "--against", missing},
       66,
       absl::StrCat("open ", missing)},
      {"a phase the policy lacks",
       {policy, "--against", record_},
       64,
       "has phase \"agent\", which the policy does not have (it has: setup)"},
      {"a phase no record has",
       {policy, "--phase", "setup", "--against", record_},
       64,
       "--phase \"setup\": no record has attempts or DNS queries in it (they "
       "have: agent)"},
  };
  for (const Row& row : rows) {
    CliRun run = Check(row.args);
    EXPECT_EQ(run.exit_code, row.exit_code) << row.name << "\n" << run;
    EXPECT_THAT(run.err, HasSubstr(row.says)) << row.name << "\n" << run;
  }
  CliRun suggest =
      RunSandfence({"records", "suggest", record_, "--phase", "verify"});
  EXPECT_EQ(suggest.exit_code, 64) << suggest;
  EXPECT_THAT(suggest.err, HasSubstr("--phase \"verify\": no record has that "
                                     "phase (they have: agent)"))
      << suggest;
}

}  // namespace
}  // namespace sandfence
