// Learning and proving (issue 15, part 3): `records suggest` turns records
// into a policy, and the replay behind `check --against` judges records
// against a compiled policy. The round trip is the specification: what
// suggest prints parses as it is, compiles, and denies nothing of the
// records it came from; one host fewer denies exactly that host.
// Records are written through the real recorder; names resolve through a
// fake resolver; addresses are loopback only.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "compile/compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy_loader.h"
#include "records/replay.h"
#include "records/show_command.h"
#include "records/suggest.h"
#include "support/test_files.h"
#include "tests/compile/fake_resolver.h"
#include "tests/records/gym_rollout.h"
#include "tests/records/learn_records.h"
#include "tests/records/records_test_util.h"

namespace sandfence::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class LearnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_.emplace(*std::move(dir));
    resolver_.Add("a.test", {"127.0.0.3"})
        .Add("b.test", {"127.0.0.4"})
        .Add("c.test", {"127.0.0.5"})
        .Add("solo.other.test", {"127.0.0.8"});
  }

  std::vector<RecordInput> Read(const std::vector<std::string>& paths) {
    auto records = ReadRecordInputs(paths);
    EXPECT_TRUE(records.ok()) << records.status();
    return records.ok() ? *records : std::vector<RecordInput>{};
  }

  std::string Suggest(const std::vector<RecordInput>& records,
                      SuggestOptions options = {}) {
    absl::StatusOr<std::string> text = SuggestPolicy(records, options);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  // Parses and compiles policy text as `sandfence check` does.
  absl::StatusOr<CompiledPolicy> Compile(const std::string& text) {
    absl::StatusOr<v1::PolicySet> policy =
        ParsePolicySetText(text, "suggested");
    if (!policy.ok()) return policy.status();
    return Compile(*policy);
  }
  absl::StatusOr<CompiledPolicy> Compile(const v1::PolicySet& policy) {
    PolicyCompiler compiler(
        &resolver_, std::vector<HostPort>{*HostPort::Parse("127.0.0.1", 53)});
    return compiler.Compile(policy, RolloutEndpoints{}, CompileContext{});
  }

  ReplayReport Replay(const CompiledPolicy& policy,
                      const std::vector<RecordInput>& records) {
    absl::StatusOr<ReplayReport> report = ReplayRecords(policy, records);
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? *report : ReplayReport{};
  }

  std::optional<ScopedTempDir> dir_;
  FakeResolver resolver_;
};

std::set<std::string> Destinations(const ReplayReport& report) {
  std::set<std::string> out;
  for (const WouldDeny& d : report.denied) {
    out.insert(absl::StrCat(d.phase, " ", d.kind, " ", d.destination));
  }
  return out;
}

TEST_F(LearnTest, SuggestThenCheckDeniesNothingAndOneHostFewerDeniesThatHost) {
  const std::string path = dir_->Path("three.sfrec");
  ASSERT_TRUE(RecordThreeHosts(path).ok());
  const std::vector<RecordInput> records = Read({path});
  const std::string text = Suggest(records);
  for (const char* host : {"a.test", "b.test", "c.test"}) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("allow { host: \"", host, "\"")))
        << text;
  }
  EXPECT_THAT(text, HasSubstr("model: \"http://127.0.0.2:8000\"")) << text;
  // Siblings directly under a top-level label: never "*.test".
  EXPECT_THAT(text, Not(HasSubstr("*.test"))) << text;

  absl::StatusOr<v1::PolicySet> policy = ParsePolicySetText(text, "suggested");
  ASSERT_TRUE(policy.ok()) << policy.status() << "\n" << text;
  absl::StatusOr<CompiledPolicy> compiled = Compile(*policy);
  ASSERT_TRUE(compiled.ok()) << compiled.status() << "\n" << text;
  ReplayReport all = Replay(*compiled, records);
  EXPECT_TRUE(all.denied.empty())
      << FormatReplayText(all, records) << "\npolicy:\n"
      << text;
  // 4 model + 6 DNS + 3 + 2 + 3 attempts; 2 + 2 + 3 queries.
  EXPECT_EQ(all.attempts, 18u);
  EXPECT_EQ(all.queries, 7u);
  EXPECT_EQ(all.attempts_denied + all.queries_denied, 0u);

  // One host fewer: its address and its name are denied, nothing else.
  v1::PolicySet fewer = *policy;
  auto* allows = fewer.mutable_phase(0)->mutable_allow();
  const int before = allows->size();
  allows->erase(std::remove_if(allows->begin(), allows->end(),
                               [](const v1::AllowRule& a) {
                                 return a.host() == "b.test";
                               }),
                allows->end());
  ASSERT_EQ(allows->size(), before - 1);
  compiled = Compile(fewer);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ReplayReport one_fewer = Replay(*compiled, records);
  EXPECT_EQ(
      Destinations(one_fewer),
      (std::set<std::string>{"agent tcp 127.0.0.4:80", "agent dns b.test"}))
      << FormatReplayText(one_fewer, records);
  EXPECT_EQ(one_fewer.attempts_denied, 2u);
  EXPECT_EQ(one_fewer.queries_denied, 2u);
  ASSERT_EQ(one_fewer.denied.size(), 2u);
  // Sorted by kind within the phase: the query, then the connection.
  EXPECT_EQ(one_fewer.denied[0].kind, "dns");
  EXPECT_EQ(one_fewer.denied[0].detail, "A,AAAA");
  EXPECT_EQ(one_fewer.denied[0].reason, "no name rule matches");
  EXPECT_EQ(one_fewer.denied[1].count, 2u);
  EXPECT_EQ(one_fewer.denied[1].reason, "no rule");
  EXPECT_EQ(one_fewer.denied[1].records, std::vector<size_t>{0});
}

TEST_F(LearnTest, AWildcardForSiblingNamesAndNotForASingleName) {
  const std::string path = dir_->Path("siblings.sfrec");
  {
    auto rec =
        LearnRecord::Create(path, "rollout-sib", LearningPolicy({"agent"}));
    ASSERT_TRUE(rec.ok()) << rec.status();
    LearnRecord& r = **rec;
    ASSERT_TRUE(r.Phase("agent").ok());
    r.Query("x.tools.test", 1, {"127.0.0.6"});
    r.Connect("127.0.0.6", 443, 2);
    r.Query("y.tools.test", 1, {"127.0.0.7"});
    r.Connect("127.0.0.7", 443, 1);
    // A sibling on another port stays exact, and so does a lone name.
    r.Query("z.tools.test", 1, {"127.0.0.9"});
    r.Connect("127.0.0.9", 8443, 1);
    r.Query("solo.other.test", 1, {"127.0.0.8"});
    r.Connect("127.0.0.8", 443, 1);
    ASSERT_TRUE(r.Finish().ok());
  }
  const std::vector<RecordInput> records = Read({path});
  const std::string text = Suggest(records);
  EXPECT_THAT(text, HasSubstr("allow { host: \"*.tools.test\" port: 443 "
                              "protocol: TCP }"))
      << text;
  EXPECT_THAT(text, HasSubstr("*.tools.test for 2 sibling names x.tools.test, "
                              "y.tools.test: 3 attempts [1] to 127.0.0.6, "
                              "127.0.0.7"))
      << text;
  EXPECT_THAT(text, Not(HasSubstr("host: \"x.tools.test\""))) << text;
  EXPECT_THAT(text, HasSubstr("allow { host: \"z.tools.test\" port: 8443"))
      << text;
  EXPECT_THAT(text, HasSubstr("allow { host: \"solo.other.test\" port: 443"))
      << text;
  EXPECT_THAT(text, Not(HasSubstr("*.other.test"))) << text;

  resolver_.Add("z.tools.test", {"127.0.0.9"});
  absl::StatusOr<CompiledPolicy> compiled = Compile(text);
  ASSERT_TRUE(compiled.ok()) << compiled.status() << "\n" << text;
  ReplayReport report = Replay(*compiled, records);
  // The wildcard's addresses are open only as learned from the answers.
  EXPECT_TRUE(report.denied.empty()) << FormatReplayText(report, records);
  EXPECT_EQ(report.attempts, 5u);
}

TEST_F(LearnTest, WhatNoGrantCoversIsSaidAndTheRestIsGranted) {
  const std::string path = dir_->Path("mixed.sfrec");
  {
    auto rec = LearnRecord::Create(path, "rollout-mixed",
                                   LearningPolicy({"setup", "agent"}));
    ASSERT_TRUE(rec.ok()) << rec.status();
    LearnRecord& r = **rec;
    ASSERT_TRUE(r.Phase("setup").ok());
    r.Connect("127.0.0.10", 8080, 2, SF_VERDICT_DENY, SF_REASON_NO_RULE);
    ASSERT_TRUE(r.Phase("agent").ok());
    r.Connect("127.0.0.2", 8000, 1, SF_VERDICT_ALLOW, SF_REASON_RULE);
    // The same host and port over TCP and UDP: one rule, protocol ANY.
    r.Connect("127.0.0.11", 9000, 1, SF_VERDICT_DENY, SF_REASON_NO_RULE);
    r.Connect("127.0.0.11", 9000, 1, SF_VERDICT_DENY, SF_REASON_NO_RULE,
              /*udp=*/true, SF_HOOK_SENDMSG4);
    r.ConnectUnix("/run/tool.sock", 2, SF_VERDICT_DENY, SF_REASON_NO_RULE);
    r.ConnectUnix("@kernel-1", 1, SF_VERDICT_ALLOW, SF_REASON_UNIX_OWN);
    r.ConnectUnix("/tmp/own-brokered.sock", 1, SF_VERDICT_ALLOW,
                  SF_REASON_UNIX_OWN_SOCKET);
    // The supervisor refused: a swapped name, and a host socket by its own
    // name (which a grant may list).
    r.ConnectUnix("/tmp/own-swapped.sock", 1, SF_VERDICT_DENY,
                  SF_REASON_UNIX_OUTSIDE_SOCKET,
                  "/run/docker.sock (inode 41)");
    r.ConnectUnix("/run/host-tool.sock", 1, SF_VERDICT_DENY,
                  SF_REASON_UNIX_OUTSIDE_SOCKET,
                  "/run/host-tool.sock (inode 42)");
    r.RawSocket(SF_VERDICT_DENY, SF_REASON_SOCKET_TYPE);
    r.Query("never.test", 1, {}, 2, "blocked");
    ASSERT_TRUE(r.Finish().ok());
  }
  const std::vector<RecordInput> records = Read({path});
  const std::string text = Suggest(records);
  EXPECT_THAT(text, HasSubstr("allow { host: \"127.0.0.10\" port: 8080 "
                              "protocol: TCP }"))
      << text;
  EXPECT_THAT(text, HasSubstr("allow { host: \"127.0.0.11\" port: 9000 "
                              "protocol: ANY }"))
      << text;
  EXPECT_THAT(text, HasSubstr("allow: \"/run/tool.sock\"")) << text;
  EXPECT_THAT(text, Not(HasSubstr("allow: \"@kernel-1\""))) << text;
  EXPECT_THAT(text, Not(HasSubstr("allow: \"/tmp/own-brokered.sock\"")))
      << text;
  EXPECT_THAT(text, Not(HasSubstr("allow: \"/tmp/own-swapped.sock\"")))
      << text;
  EXPECT_THAT(text, HasSubstr("attempts through /tmp/own-swapped.sock, which "
                              "led to /run/docker.sock (inode 41) outside "
                              "the sandbox: not granted"))
      << text;
  EXPECT_THAT(text, HasSubstr("allow: \"/run/host-tool.sock\"")) << text;
  EXPECT_THAT(text, HasSubstr("raw icmp sockets: a restricted phase creates "
                              "only TCP and UDP sockets"))
      << text;
  EXPECT_THAT(text, HasSubstr("never.test: asked 2x (A; blocked) [1], never "
                              "connected to, so no port is known"))
      << text;

  absl::StatusOr<CompiledPolicy> compiled = Compile(text);
  ASSERT_TRUE(compiled.ok()) << compiled.status() << "\n" << text;
  ReplayReport report = Replay(*compiled, records);
  // What no policy grants stays denied, and check says so.
  EXPECT_EQ(
      Destinations(report),
      (std::set<std::string>{"agent socket raw icmp", "agent dns never.test",
                             "agent unix /tmp/own-swapped.sock"}))
      << FormatReplayText(report, records);

  // --phase: one phase only; an unknown one names the phases there are.
  SuggestOptions only;
  only.only_phase = "setup";
  const std::string setup = Suggest(records, only);
  EXPECT_THAT(setup, HasSubstr("name: \"setup\"")) << setup;
  EXPECT_THAT(setup, Not(HasSubstr("name: \"agent\""))) << setup;
  only.only_phase = "verify";
  absl::StatusOr<std::string> unknown = SuggestPolicy(records, only);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("--phase \"verify\": no record has that phase (they "
                        "have: setup, agent)"));
}

// Records of a run with no restriction (inherit): no model rule and no DNS
// filter, so the resolvers become a LISTED dns block and --model names the
// model.
TEST_F(LearnTest, AnInheritRunListsItsResolversAndTakesTheModelFromTheFlag) {
  const std::string path = dir_->Path("inherit.sfrec");
  {
    auto rec = LearnRecord::Create(path, "rollout-inh",
                                   LearningPolicy({"default"}, true));
    ASSERT_TRUE(rec.ok()) << rec.status();
    LearnRecord& r = **rec;
    ASSERT_TRUE(r.Phase("default").ok());
    r.Connect("127.0.0.53", 53, 3, SF_VERDICT_ALLOW, SF_REASON_UNRESTRICTED,
              true, SF_HOOK_SENDMSG4);
    r.Connect("127.0.0.2", 8000, 2, SF_VERDICT_ALLOW, SF_REASON_UNRESTRICTED);
    r.Connect("127.0.0.3", 80, 1, SF_VERDICT_ALLOW, SF_REASON_UNRESTRICTED);
    ASSERT_TRUE(r.Finish().ok());
  }
  const std::vector<RecordInput> records = Read({path});
  const std::string without = Suggest(records);
  EXPECT_THAT(without, HasSubstr("# model: none in the records")) << without;
  EXPECT_FALSE(Compile(without).ok()) << "a model_only phase needs a model";

  SuggestOptions options;
  options.models = {"http://127.0.0.2:8000/v1"};
  const std::string text = Suggest(records, options);
  EXPECT_THAT(text, HasSubstr("model: \"http://127.0.0.2:8000/v1\"")) << text;
  EXPECT_THAT(text, HasSubstr("mode: LISTED")) << text;
  EXPECT_THAT(text, HasSubstr("resolver: \"127.0.0.53:53\"")) << text;
  EXPECT_THAT(text, Not(HasSubstr("127.0.0.2\" port: 8000"))) << text;
  absl::StatusOr<CompiledPolicy> compiled = Compile(text);
  ASSERT_TRUE(compiled.ok()) << compiled.status() << "\n" << text;
  ReplayReport report = Replay(*compiled, records);
  EXPECT_TRUE(report.denied.empty()) << FormatReplayText(report, records);
  EXPECT_EQ(report.attempts, 6u);
}

TEST_F(LearnTest, SuggestMatchesTheGoldenFile) {
  const std::string three = dir_->Path("three.sfrec");
  ASSERT_TRUE(RecordThreeHosts(three).ok());
  const std::string mixed = dir_->Path("mixed.sfrec");
  {
    auto rec = LearnRecord::Create(mixed, "rollout-mixed",
                                   LearningPolicy({"setup", "agent"}));
    ASSERT_TRUE(rec.ok()) << rec.status();
    LearnRecord& r = **rec;
    ASSERT_TRUE(r.Phase("setup").ok());
    r.Connect("127.0.0.10", 8080, 2, SF_VERDICT_DENY, SF_REASON_NO_RULE);
    ASSERT_TRUE(r.Phase("agent").ok());
    r.Query("x.tools.test", 1, {"127.0.0.6"});
    r.Connect("127.0.0.6", 443, 2);
    r.Query("y.tools.test", 1, {"127.0.0.7"});
    r.Connect("127.0.0.7", 443, 1);
    r.Query("a.test", 1, {"127.0.0.3"});
    r.Connect("127.0.0.3", 80, 1, SF_VERDICT_DENY, SF_REASON_NO_RULE);
    r.ConnectUnix("/run/tool.sock", 2, SF_VERDICT_DENY, SF_REASON_NO_RULE);
    r.RawSocket(SF_VERDICT_DENY, SF_REASON_SOCKET_TYPE);
    r.Query("never.test", 1, {}, 2, "blocked");
    ASSERT_TRUE(r.Finish().ok());
  }
  CommandOutput out = RunRecordsCommand({"suggest", three, mixed});
  EXPECT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(out.err, "");
  ExpectGolden("tests/records/golden/suggest.textproto",
               absl::StrReplaceAll(out.out, {{dir_->path(), "RECORDS"}}));
  // The golden is a policy, too.
  absl::StatusOr<CompiledPolicy> compiled = Compile(out.out);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
}

TEST(SuggestCommandTest, BadInputNamesTheFileOrThePhase) {
  auto dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok());
  auto not_record = dir->WriteFile("policy.txtpb", "name: \"x\"\n");
  ASSERT_TRUE(not_record.ok());
  const std::string record = dir->Path("three.sfrec");
  ASSERT_TRUE(RecordThreeHosts(record).ok());
  const std::string missing = dir->Path("missing.sfrec");
  struct Case {
    const char* name;
    std::vector<std::string> args;
    int exit_code;
    std::string says;
  };
  const Case cases[] = {
      {"no record", {"suggest"}, 64, "at least one RECORD is needed"},
      {"help", {"suggest", "--help"}, 0, "usage: sandfence records suggest"},
      {"unknown flag",
       {"suggest", record, "--json"},
       64,
       "unknown flag --json"},
      {"phase without a value",
       {"suggest", record, "--phase"},
       64,
       "--phase needs a value"},
      {"unknown phase",
       {"suggest", record, "--phase", "verify"},
       64,
       "--phase \"verify\": no record has that phase (they have: agent)"},
      {"bad model",
       {"suggest", record, "--model", "ftp://m"},
       64,
       "--model \"ftp://m\""},
      {"not a record", {"suggest", record, *not_record}, 65, *not_record},
      {"unreadable", {"suggest", missing}, 66, absl::StrCat("open ", missing)},
  };
  for (const Case& c : cases) {
    CommandOutput out = RunRecordsCommand(c.args);
    EXPECT_EQ(out.exit_code, c.exit_code) << c.name << ": " << out.err;
    EXPECT_THAT(out.out + out.err, HasSubstr(c.says)) << c.name;
  }
}

// A record is a file: whatever its strings hold, they never leave a
// comment or a quoted string of the suggested policy.
TEST(SuggestTest, HostileStringsInARecordStayInsideComments) {
  const std::string evil =
      "evil\nphase { name: \"x\" network_access: INHERIT }";
  RecordInput in;
  in.path = "a\nb.sfrec";
  v1::RolloutRecord& r = in.record;
  r.set_rollout_id("id\r\nname: \"y\"");
  r.add_timeline()->set_name("agent");
  v1::DnsQuery* q = r.add_dns_query();
  q->set_phase("agent");
  q->set_name(evil);
  q->set_type_name("A\n}");
  q->set_verdict("blocked");
  q->set_count(1);
  v1::NetAttempt* a = r.add_net_attempt();
  a->set_phase("agent");
  a->set_count(1);
  a->set_protocol("unix");
  a->set_address("/run/x\"\n.sock");
  a->set_reason("no rule");
  v1::NetAttempt* b = r.add_net_attempt();
  b->set_phase("agent");
  b->set_count(1);
  b->set_protocol("tcp\nx");
  b->set_address("127.0.0.3");
  b->set_port(80);
  b->set_reason("no sandbox\n}");
  absl::StatusOr<std::string> text = SuggestPolicy({in}, {});
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<v1::PolicySet> policy = ParsePolicySetText(*text, "hostile");
  ASSERT_TRUE(policy.ok()) << policy.status() << "\n" << *text;
  ASSERT_EQ(policy->phase_size(), 1) << *text;
  EXPECT_EQ(policy->phase(0).name(), "agent");
  EXPECT_EQ(policy->phase(0).allow_size(), 0) << *text;
  // A path may hold any byte but NUL: it is listed, escaped, as it was.
  ASSERT_EQ(policy->phase(0).unix().allow_size(), 1) << *text;
  EXPECT_EQ(policy->phase(0).unix().allow(0), "/run/x\"\n.sock");
  for (char c : *text) {
    EXPECT_TRUE(c == '\n' || (c >= 0x20 && c <= 0x7e)) << int{c};
  }
}

// Answers that pointed at the host: those the recorded phase opened (by
// its dns.answers_may_point_at) stay opened, one address at a time; one
// refused as rebinding is named, not granted.
TEST(SuggestTest, AnswersPointingAtTheHostKeepTheirGrantOrAreNamed) {
  RecordInput in;
  in.path = "rebind.sfrec";
  v1::RolloutRecord& r = in.record;
  r.add_timeline()->set_name("agent");
  auto query = [&](const char* name, const char* verdict, const char* addr) {
    v1::DnsQuery* q = r.add_dns_query();
    q->set_phase("agent");
    q->set_name(name);
    q->set_type_name("A");
    q->set_verdict(verdict);
    q->set_count(1);
    q->add_address(addr);
  };
  query("a.tool.test", "allowed", "127.0.0.3");
  query("b.tool.test", "allowed", "192.0.2.4");
  query("evil.tool.test", "rebinding", "169.254.169.254");
  absl::StatusOr<std::string> text = SuggestPolicy({in}, {});
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<v1::PolicySet> policy = ParsePolicySetText(*text, "rebind");
  ASSERT_TRUE(policy.ok()) << policy.status() << "\n" << *text;
  ASSERT_EQ(policy->phase_size(), 1) << *text;
  EXPECT_THAT(policy->phase(0).dns().answers_may_point_at(),
              ::testing::ElementsAre("127.0.0.3"))
      << *text;
  EXPECT_THAT(*text, HasSubstr("evil.tool.test's answer pointed at "
                               "169.254.169.254, link-local"));
}

TEST(SuggestCommandTest, ALossyRecordIsNamedInAWarning) {
  auto dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok());
  const std::string path = dir->Path("cut.sfrec");
  ASSERT_TRUE(RecordThreeHosts(path).ok());
  // Cut inside the trailer, as a crash would leave it.
  const std::string bytes = FileContents(path);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << bytes.substr(0, bytes.size() - 7);
  CommandOutput out = RunRecordsCommand({"suggest", path});
  EXPECT_EQ(out.exit_code, 0) << out.err;
  EXPECT_THAT(out.err,
              HasSubstr(absl::StrCat("warning: ", path, ": lossy record")));
  EXPECT_THAT(out.out, HasSubstr("(lossy: what it lost is not here)"));
  // What was recorded before the cut is still learned.
  EXPECT_THAT(out.out, HasSubstr("allow { host: \"b.test\""));
  auto records = ReadRecordInputs({path});
  ASSERT_TRUE(records.ok());
  CompiledPolicy policy;
  policy.name = "p";
  auto report = ReplayRecords(policy, *records);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->notes.size(), 1u);
  EXPECT_THAT(report->notes[0], HasSubstr(path));
}

// The replay judges as the kernel and the DNS filter do: one row per case.
TEST(ReplayTest, EachKindOfEntryIsJudgedAsTheKernelWouldJudgeIt) {
  CompiledPhase filtered;
  filtered.name = "agent";
  filtered.access = v1::MODEL_ONLY;
  filtered.rules = {
      MakeRule(L4::kTcp, "127.0.0.2", 8000, RuleSource::kModel, "model"),
      MakeRule(L4::kTcp, "::1", 8000, RuleSource::kAllow, "v6"),
  };
  Rule range = MakeRule(L4::kUdp, "127.0.1.0/24", 0, RuleSource::kAllow, "r");
  range.port_first = 1000;
  range.port_last = 2000;
  filtered.rules.push_back(range);
  filtered.dns_filtered = true;
  filtered.dns_mode = v1::Dns::FILTERED;
  filtered.name_rules = {
      NameRule{"*.tools.test", {NameGrant{L4::kTcp, 443, 443}}, "allow"},
      NameRule{"api.test", {NameGrant{L4::kTcp, 80, 80}}, "allow"}};
  filtered.unix_checked = true;
  filtered.unix_names = {UnixName{"/run/listed.sock", false}};
  CompiledPhase rules_only = filtered;
  rules_only.loopback = v1::LOOPBACK_RULES_ONLY;
  CompiledPhase system = filtered;
  system.dns_filtered = false;
  system.dns_mode = v1::Dns::SYSTEM;
  system.name_rules.clear();
  CompiledPhase none = system;
  none.dns_mode = v1::Dns::NONE;
  CompiledPhase unchecked = filtered;
  unchecked.unix_checked = false;
  unchecked.unix_unchecked = true;
  CompiledPhase inherit;
  inherit.name = "agent";
  inherit.access = v1::INHERIT;

  auto attempt = [](const char* proto, const char* addr, uint32_t port,
                    const char* reason = "no rule",
                    const char* hook = "connect4") {
    v1::NetAttempt a;
    a.set_phase("agent");
    a.set_count(1);
    a.set_protocol(proto);
    a.set_address(addr);
    a.set_port(port);
    a.set_reason(reason);
    a.set_hook(hook);
    a.set_socket_type(std::string(proto) == "udp" ? "dgram" : "stream");
    return a;
  };
  v1::NetAttempt raw =
      attempt("icmp", "0.0.0.0", 0, "raw socket", "sock_create");
  raw.set_socket_type("raw");
  v1::NetAttempt overflow;
  overflow.set_overflow(true);
  overflow.set_count(7);

  v1::DnsQuery learned_x;
  learned_x.set_name("x.tools.test");
  learned_x.add_address("127.0.0.6");
  v1::DnsQuery learned_other;
  learned_other.set_name("other.test");
  learned_other.add_address("127.0.0.7");

  struct Case {
    const char* name;
    const CompiledPhase* phase;
    v1::NetAttempt attempt;
    ReplayOutcome outcome;
    const char* reason;
  };
  const Case cases[] = {
      {"inherit allows anything", &inherit, attempt("tcp", "127.0.0.99", 1),
       ReplayOutcome::kAllowed, "inherit"},
      {"a rule's host and port", &filtered, attempt("tcp", "127.0.0.2", 8000),
       ReplayOutcome::kAllowed, "rule tcp 127.0.0.2:8000"},
      {"another port of a rule's host", &filtered,
       attempt("tcp", "127.0.0.2", 8001), ReplayOutcome::kDenied, "no rule"},
      {"the rule's port over UDP", &filtered, attempt("udp", "127.0.0.2", 8000),
       ReplayOutcome::kDenied, "no rule"},
      {"IPv6 rule", &filtered, attempt("tcp", "::1", 8000),
       ReplayOutcome::kAllowed, "rule tcp [::1]:8000"},
      {"inside a CIDR's port range", &filtered,
       attempt("udp", "127.0.1.7", 1500), ReplayOutcome::kAllowed,
       "rule udp 127.0.1.0/24:1000-2000"},
      {"past a CIDR's port range", &filtered, attempt("udp", "127.0.1.7", 2001),
       ReplayOutcome::kDenied, "no rule"},
      {"an address learned under a wildcard, on its port", &filtered,
       attempt("tcp", "127.0.0.6", 443), ReplayOutcome::kAllowed,
       "learned from x.tools.test"},
      {"an address learned under a wildcard, another port", &filtered,
       attempt("tcp", "127.0.0.6", 80), ReplayOutcome::kDenied, "no rule"},
      {"an answer for a name the phase does not answer", &filtered,
       attempt("tcp", "127.0.0.7", 443), ReplayOutcome::kDenied, "no rule"},
      {"nothing is learned without the DNS filter", &system,
       attempt("tcp", "127.0.0.6", 443), ReplayOutcome::kDenied, "no rule"},
      {"port 53 goes to the filter", &filtered,
       attempt("udp", "127.0.0.53", 53, "rule", "sendmsg4"),
       ReplayOutcome::kAllowed, "redirected to the DNS filter"},
      {"unconnected IPv6 DNS cannot be redirected", &filtered,
       attempt("udp", "::1", 53, "rule", "sendmsg6"), ReplayOutcome::kDenied,
       "unconnected IPv6 DNS: cannot be redirected to the DNS filter"},
      {"port 53 without the filter needs a rule", &system,
       attempt("udp", "127.0.0.53", 53), ReplayOutcome::kDenied, "no rule"},
      {"the DNS filters' range", &filtered, attempt("udp", "127.83.0.1", 5353),
       ReplayOutcome::kDenied, "the DNS filters' range"},
      {"own loopback, by default", &filtered,
       attempt("tcp", "127.0.0.1", 9999, "own loopback"),
       ReplayOutcome::kAllowed, "own loopback"},
      {"own loopback under RULES_ONLY", &rules_only,
       attempt("tcp", "127.0.0.1", 9999, "own loopback"),
       ReplayOutcome::kDenied, "no rule"},
      {"host loopback is judged by rules", &filtered,
       attempt("tcp", "127.0.0.1", 9999, "unrestricted"),
       ReplayOutcome::kDenied, "no rule"},
      {"a raw socket", &filtered, raw, ReplayOutcome::kDenied,
       "raw icmp socket: a restricted phase creates only TCP and UDP "
       "sockets, never raw ones"},
      {"a raw socket in inherit", &inherit, raw, ReplayOutcome::kAllowed,
       "inherit"},
      {"not TCP or UDP", &filtered, attempt("sctp", "127.0.0.2", 8000),
       ReplayOutcome::kDenied,
       "protocol sctp: a restricted phase allows TCP and UDP"},
      {"a listed Unix name", &filtered, attempt("unix", "/run/listed.sock", 0),
       ReplayOutcome::kAllowed, "unix name listed"},
      {"an unlisted Unix name", &filtered,
       attempt("unix", "/run/other.sock", 0), ReplayOutcome::kDenied,
       "unix name not listed"},
      {"the sandbox's own Unix socket", &filtered,
       attempt("unix", "@kernel", 0, "unix socket of the sandbox"),
       ReplayOutcome::kAllowed, "the sandbox's own socket"},
      {"a path the supervisor connected for the sandbox", &filtered,
       attempt("unix", "/tmp/own.sock", 0,
               "unix socket of the sandbox (checked by the supervisor)"),
       ReplayOutcome::kAllowed, "the sandbox's own socket"},
      {"an abstract name left to Landlock", &filtered,
       attempt("unix", "@own", 0, "unix abstract name, scoped by Landlock"),
       ReplayOutcome::kAllowed, "an abstract name left to Landlock's scope"},
      {"sandfence's own socket, even listed", &filtered,
       attempt("unix", "/run/listed.sock", 0, "sandfence's own socket"),
       ReplayOutcome::kDenied, "sandfence's own socket"},
      {"Unix unchecked", &unchecked, attempt("unix", "/run/other.sock", 0),
       ReplayOutcome::kAllowed, "unix unchecked"},
      {"an overflow entry", &filtered, overflow, ReplayOutcome::kNotJudged,
       "overflow entry: no destination kept"},
      {"no sandbox", &filtered, attempt("tcp", "127.0.0.2", 1, "no sandbox"),
       ReplayOutcome::kNotJudged, "\"no sandbox\": not the policy's"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<PhaseJudge> judge = PhaseJudge::Create(*c.phase);
    ASSERT_TRUE(judge.ok()) << c.name << ": " << judge.status();
    LearnedAddresses learned = judge->Learn({&learned_x, &learned_other});
    ReplayVerdict v = judge->Attempt(c.attempt, learned);
    EXPECT_EQ(v.outcome, c.outcome) << c.name << ": " << v.reason;
    EXPECT_EQ(v.reason, c.reason) << c.name;
  }

  struct QueryCase {
    const char* name;
    const CompiledPhase* phase;
    const char* qname;
    ReplayOutcome outcome;
    const char* reason;
  };
  const QueryCase queries[] = {
      {"an exact name", &filtered, "api.test", ReplayOutcome::kAllowed,
       "api.test"},
      {"below a wildcard", &filtered, "a.b.tools.test", ReplayOutcome::kAllowed,
       "*.tools.test"},
      {"a wildcard's apex", &filtered, "tools.test", ReplayOutcome::kDenied,
       "no name rule matches"},
      {"another name", &filtered, "exfil.test", ReplayOutcome::kDenied,
       "no name rule matches"},
      {"dns SYSTEM: names are not judged", &system, "exfil.test",
       ReplayOutcome::kAllowed, "DNS not filtered by name"},
      {"dns NONE", &none, "api.test", ReplayOutcome::kDenied,
       "dns NONE: no DNS at all"},
      {"inherit", &inherit, "exfil.test", ReplayOutcome::kAllowed, "inherit"},
      {"a question that did not parse", &filtered, "",
       ReplayOutcome::kNotJudged, "the question did not parse"},
  };
  for (const QueryCase& c : queries) {
    absl::StatusOr<PhaseJudge> judge = PhaseJudge::Create(*c.phase);
    ASSERT_TRUE(judge.ok()) << c.name << ": " << judge.status();
    v1::DnsQuery q;
    q.set_name(c.qname);
    ReplayVerdict v = judge->Query(q);
    EXPECT_EQ(v.outcome, c.outcome) << c.name << ": " << v.reason;
    EXPECT_EQ(v.reason, c.reason) << c.name;
  }
}

// The replay against the policy a record was made under gives back the
// kernel's own verdicts: the gym rollout (inherit, model_and_tools and
// model_only phases; rules, no rule, raw sockets, IPv6, DNS without a
// filter, an attempt read after its phase ended) as the recorder wrote it.
TEST(ReplayTest, ARecordReplayedAgainstItsOwnPolicyGivesTheKernelsVerdicts) {
  auto dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok());
  const std::string path = dir->Path("gym.sfrec");
  ASSERT_TRUE(RecordGymRollout(path, {.dns = true}).ok());
  auto records = ReadRecordInputs({path});
  ASSERT_TRUE(records.ok()) << records.status();
  const v1::RolloutRecord& record = (*records)[0].record;
  std::map<std::string, PhaseJudge> judges;
  for (const v1::PhasePolicy& p : record.phase_policy()) {
    absl::StatusOr<CompiledPhase> phase = FromPhasePolicy(p);
    ASSERT_TRUE(phase.ok()) << phase.status();
    absl::StatusOr<PhaseJudge> judge = PhaseJudge::Create(*phase);
    ASSERT_TRUE(judge.ok()) << judge.status();
    judges.emplace(p.name(), *std::move(judge));
  }
  int compared = 0, allowed = 0, denied = 0;
  for (const v1::NetAttempt& a : record.net_attempt()) {
    ASSERT_TRUE(judges.count(a.phase())) << a.phase();
    ReplayVerdict v = judges.at(a.phase()).Attempt(a, LearnedAddresses());
    ASSERT_NE(v.outcome, ReplayOutcome::kNotJudged) << a.DebugString();
    const bool replay_allows = v.outcome == ReplayOutcome::kAllowed;
    EXPECT_EQ(replay_allows, a.verdict() == v1::VERDICT_ALLOW)
        << a.DebugString() << "replayed: " << v.reason;
    ++compared;
    (replay_allows ? allowed : denied)++;
  }
  // Both verdicts, in every kind the gym rollout has.
  EXPECT_EQ(compared, record.net_attempt_size());
  EXPECT_GE(allowed, 3);
  EXPECT_GE(denied, 4);
  // And what suggest makes of it is a policy (documentation addresses
  // here: it is parsed, not compiled).
  absl::StatusOr<std::string> text = SuggestPolicy(*records, {});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(ParsePolicySetText(*text, "gym").ok()) << *text;
}

TEST_F(LearnTest, PhasesOfTheRecordsMustBeThePolicysOrBeChosen) {
  const std::string path = dir_->Path("three.sfrec");
  ASSERT_TRUE(RecordThreeHosts(path).ok());
  const std::vector<RecordInput> records = Read({path});
  EXPECT_TRUE(CheckReplayPhases({"setup", "agent"}, records, "").ok());
  absl::Status missing = CheckReplayPhases({"setup", "verify"}, records, "");
  EXPECT_THAT(missing.message(),
              HasSubstr("has phase \"agent\", which the policy does not have "
                        "(it has: setup, verify)"));
  EXPECT_THAT(missing.message(), HasSubstr(path));
  EXPECT_TRUE(CheckReplayPhases({"setup", "agent"}, records, "agent").ok());
  absl::Status none = CheckReplayPhases({"setup", "agent"}, records, "setup");
  EXPECT_THAT(none.message(),
              HasSubstr("--phase \"setup\": no record has attempts or DNS "
                        "queries in it (they have: agent)"));
}

}  // namespace
}  // namespace sandfence::testing
