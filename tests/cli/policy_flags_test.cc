// The shared policy flags of `sandfence check` (and later `run`), parsed
// without running anything.
#include "cli/policy_flags.h"

#include <cctype>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compile/compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/compile/fake_resolver.h"

namespace sandfence {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<FlagParser::Result> ParseWith(FlagParser& parser,
                                             std::vector<std::string> args) {
  return parser.Parse(args);
}

TEST(FlagParser, ValuesInBothSpellingsPositionalsAndTheRestAfterDashes) {
  PolicyFlags flags;
  FlagParser parser;
  RegisterPolicyFlags(&parser, &flags);
  std::string netns;  // an extra flag, as `run` will register
  parser.AddValueFlag("netns", "NAME", "network namespace",
                      [&netns](absl::string_view v) {
                        netns = std::string(v);
                        return absl::OkStatus();
                      });
  absl::StatusOr<FlagParser::Result> r =
      ParseWith(parser, {"--model=http://m:1", "policy.textproto", "--model",
                         "https://m2", "--own-netns", "--netns", "ns1",
                         "--phase=agent", "--", "/bin/true", "--model", "x"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->positionals, ElementsAre("policy.textproto"));
  EXPECT_TRUE(r->saw_dashes);
  EXPECT_THAT(r->after_dashes, ElementsAre("/bin/true", "--model", "x"));
  EXPECT_THAT(flags.endpoints.model, ElementsAre("http://m:1", "https://m2"));
  EXPECT_TRUE(flags.context.own_netns);
  EXPECT_FALSE(flags.context.borrowed);
  EXPECT_EQ(flags.phase, "agent");
  EXPECT_EQ(netns, "ns1");
}

struct UsageCase {
  const char* title;
  std::vector<std::string> args;
  const char* message_part;  // the flag and the value are named
};

void PrintTo(const UsageCase& c, std::ostream* os) { *os << c.title; }

std::string CaseName(const ::testing::TestParamInfo<UsageCase>& param) {
  std::string name;
  for (const char* p = param.param.title; *p; ++p) {
    name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  }
  return name;
}

class UsageErrorTest : public ::testing::TestWithParam<UsageCase> {};

TEST_P(UsageErrorTest, NamesTheFlagAndValue) {
  const UsageCase& c = GetParam();
  PolicyFlags flags;
  FlagParser parser;
  RegisterPolicyFlags(&parser, &flags);
  absl::StatusOr<FlagParser::Result> r = parser.Parse(c.args);
  absl::Status s = r.status();
  if (s.ok()) s = FinishPolicyFlags(r->positionals, &flags);
  ASSERT_FALSE(s.ok()) << c.title;
  EXPECT_THAT(s.message(), HasSubstr(c.message_part)) << c.title;
}

INSTANTIATE_TEST_SUITE_P(
    Flags, UsageErrorTest,
    ::testing::Values(
        UsageCase{
            "unknown flag", {"p", "--modle", "x"}, "unknown flag \"--modle\""},
        UsageCase{"single-dash flag", {"p", "-m"}, "unknown flag \"-m\""},
        UsageCase{"budget that is no number",
                  {"p", "--egress-budget-bytes", "1MiB"},
                  "--egress-budget-bytes \"1MiB\": not a positive whole "
                  "number"},
        UsageCase{"missing value", {"p", "--model"}, "--model needs a value"},
        UsageCase{"bool flag with a value",
                  {"p", "--own-netns=yes"},
                  "--own-netns takes no value"},
        UsageCase{"single-valued flag twice",
                  {"p", "--phase", "a", "--phase", "b"},
                  "--phase is given more than once"},
        UsageCase{"bad model scheme",
                  {"p", "--model", "ftp://m"},
                  "--model \"ftp://m\": scheme \"ftp\""},
        UsageCase{"model without scheme",
                  {"p", "--model", "m:8000"},
                  "--model \"m:8000\": \"m:8000\" is not a URL"},
        UsageCase{"bad tool URL",
                  {"p", "--tool", "search=http://*"},
                  "--tool \"search=http://*\": host \"*\" matches every name"},
        UsageCase{"model wildcard",
                  {"p", "--model", "http://*.m.test"},
                  "--model \"http://*.m.test\": host \"*.m.test\" is a "
                  "wildcard"},
        UsageCase{"bad required tool URL",
                  {"p", "--required-tool", "x"},
                  "--required-tool \"x\""},
        UsageCase{"unknown mode",
                  {"--network-access", "open"},
                  "--network-access \"open\": not a mode"},
        UsageCase{"resolver by name",
                  {"p", "--resolver", "dns.local"},
                  "--resolver \"dns.local\""},
        UsageCase{"answers may point at a name",
                  {"p", "--dns-answers-may-point-at", "localhost"},
                  "--dns-answers-may-point-at \"localhost\""},
        UsageCase{"allow without port",
                  {"p", "--allow", "10.0.0.1"},
                  "--allow \"10.0.0.1\": expected HOST:PORT"},
        UsageCase{"allow port 0",
                  {"p", "--allow", "10.0.0.1:0"},
                  "port \"0\" is not in 1..65535"},
        UsageCase{"allow backwards range",
                  {"p", "--allow", "h:90-80"},
                  "port range \"90-80\" is empty"},
        UsageCase{"allow unbracketed IPv6",
                  {"p", "--allow", "fd00::1:443"},
                  "written in brackets"},
        UsageCase{"allow wildcard not leading",
                  {"p", "--allow", "a.*.x:443"},
                  "wildcard"},
        UsageCase{"allow wildcard alone",
                  {"p", "--allow", "*:443"},
                  "matches every name"},
        UsageCase{"allow bad protocol",
                  {"p", "--allow", "h:53/sctp"},
                  "--allow \"h:53/sctp\""},
        UsageCase{"two policy files", {"a", "b"}, "one policy file at most"},
        UsageCase{"no policy at all", {"--model", "http://m"}, "no policy"},
        UsageCase{"file and inline mode",
                  {"p", "--network-access", "model_only"},
                  "use one or the other"}),
    CaseName);

struct AllowCase {
  const char* text;
  const char* host;
  uint32_t first;
  uint32_t last;  // == first for a single port
  v1::Protocol protocol;
};

TEST(ParseAllowFlag, Syntaxes) {
  for (const AllowCase& c : std::vector<AllowCase>{
           {"10.0.0.1:443", "10.0.0.1", 443, 443, v1::TCP},
           {"search.internal:443/udp", "search.internal", 443, 443, v1::UDP},
           {"h:53/ANY", "h", 53, 53, v1::ANY},
           {"h:8000-8010", "h", 8000, 8010, v1::TCP},
           {"h:8000-8010/tcp", "h", 8000, 8010, v1::TCP},
           {"[fd00::1]:443", "fd00::1", 443, 443, v1::TCP},
           {"[fd00::/8]:443/udp", "fd00::/8", 443, 443, v1::UDP},
           {"10.0.0.0/8:443", "10.0.0.0/8", 443, 443, v1::TCP},
           {"10.0.0.0/8:1-1024/any", "10.0.0.0/8", 1, 1024, v1::ANY},
           {"*.tool.test:9004", "*.tool.test", 9004, 9004, v1::TCP},
       }) {
    absl::StatusOr<v1::AllowRule> r = ParseAllowFlag(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status();
    EXPECT_EQ(r->host(), c.host) << c.text;
    EXPECT_EQ(r->protocol(), c.protocol) << c.text;
    if (c.first == c.last) {
      EXPECT_EQ(r->port(), c.first) << c.text;
      EXPECT_FALSE(r->has_port_range()) << c.text;
    } else {
      EXPECT_EQ(r->port(), 0u) << c.text;
      EXPECT_EQ(r->port_range().first(), c.first) << c.text;
      EXPECT_EQ(r->port_range().last(), c.last) << c.text;
    }
  }
}

TEST(ParseToolFlag, NameIsOptional) {
  absl::StatusOr<v1::ToolGrant> t =
      ParseToolFlag("search=https://search.internal/q?a=b", true);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->name(), "search");
  EXPECT_EQ(t->url(), "https://search.internal/q?a=b");
  EXPECT_TRUE(t->required());

  // An '=' inside the URL does not make a name.
  t = ParseToolFlag("https://search.internal/q?a=b", false);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->name(), "");
  EXPECT_EQ(t->url(), "https://search.internal/q?a=b");
  EXPECT_FALSE(t->required());
}

// A tool's host may be a wildcard (issue 14); the compiler asks for dns
// FILTERED (tests/compile).
TEST(ParseToolFlag, HostMayBeAWildcard) {
  absl::StatusOr<v1::ToolGrant> t =
      ParseToolFlag("cdn=https://*.cdn.test:8443/mcp", false);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->name(), "cdn");
  EXPECT_EQ(t->url(), "https://*.cdn.test:8443/mcp");
  EXPECT_FALSE(ParseToolFlag("https://a.*.test/", false).ok());
}

TEST(FlagParser, HelpStopsParsingAndListsEveryFlag) {
  PolicyFlags flags;
  FlagParser parser;
  RegisterPolicyFlags(&parser, &flags);
  // Flags are read in order: an unknown one before --help is an error ...
  absl::StatusOr<FlagParser::Result> r = parser.Parse({"--bogus", "--help"});
  EXPECT_FALSE(r.ok());
  // ... and nothing after --help is looked at.
  r = parser.Parse({"--help", "--bogus"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->help);
  std::string help = parser.Help();
  for (const char* flag :
       {"--network-access MODE", "--phase NAME", "--model URL",
        "--tool [NAME=]URL", "--required-tool [NAME=]URL", "--allow HOST:PORT",
        "--own-netns", "--borrowed", "--resolver IP[:PORT]"}) {
    EXPECT_THAT(help, HasSubstr(flag));
  }
}

// Every --allow host the policy language takes, the flag takes, and the
// other way round (issue 38): each value compiled once through the flag and
// once as the same field of a policy, with the same model, the same mode
// and dns FILTERED (the default).
TEST(PolicyFlagsAgreeWithThePolicyLanguage, AllowHosts) {
  struct Row {
    const char* host;  // as written in the flag, before ":443"
    bool accepted;
  };
  for (const Row& row : std::vector<Row>{
           {"*.tool.test", true},
           {"10.0.0.0/8", true},
           {"192.0.2.7", true},
           {"[fd00::1]", true},
           {"[fd00::/8]", true},
           {"a.*.test", false},
           {"*", false},
           {"*.", false},
           {"*.*.test", false},
           {"h..", false},
       }) {
    const std::vector<std::string> base = {
        "--network-access", "model_only", "--model", "http://127.0.0.2:8000/v1"};
    FakeResolver resolver;
    PolicyCompiler compiler(&resolver, std::vector<HostPort>{});

    // Through --allow.
    absl::Status by_flag;
    {
      PolicyFlags flags;
      FlagParser parser;
      RegisterPolicyFlags(&parser, &flags);
      std::vector<std::string> args = base;
      args.insert(args.end(), {"--allow", absl::StrCat(row.host, ":443")});
      absl::StatusOr<FlagParser::Result> r = parser.Parse(args);
      by_flag = r.status();
      if (by_flag.ok()) by_flag = FinishPolicyFlags(r->positionals, &flags);
      if (by_flag.ok()) {
        absl::StatusOr<v1::PolicySet> p = LoadPolicyFromFlags(flags);
        ASSERT_TRUE(p.ok()) << p.status();
        by_flag = compiler.Compile(*p, flags.endpoints, {}).status();
      }
    }
    // As the policy's own allow field.
    absl::Status by_policy;
    {
      PolicyFlags flags;
      FlagParser parser;
      RegisterPolicyFlags(&parser, &flags);
      absl::StatusOr<FlagParser::Result> r = parser.Parse(base);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_TRUE(FinishPolicyFlags(r->positionals, &flags).ok());
      absl::StatusOr<v1::PolicySet> p = LoadPolicyFromFlags(flags);
      ASSERT_TRUE(p.ok()) << p.status();
      std::string host = row.host;
      if (host.front() == '[') host = host.substr(1, host.size() - 2);
      v1::AllowRule* rule = p->mutable_phase(0)->add_allow();
      rule->set_host(host);
      rule->set_port(443);
      by_policy = compiler.Compile(*p, flags.endpoints, {}).status();
    }
    EXPECT_EQ(by_flag.ok(), row.accepted) << row.host << ": " << by_flag;
    EXPECT_EQ(by_policy.ok(), row.accepted) << row.host << ": " << by_policy;
  }
}

// --tools-any-port is the policy's tool { any_port: true } for every tool
// flag, given before or after them: the same rules, "(any port)" in their
// origin. Alone, it is a usage error (it would silently open nothing).
TEST(PolicyFlagsAgreeWithThePolicyLanguage, ToolsAnyPort) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, std::vector<HostPort>{});
  for (const bool first : {true, false}) {
    PolicyFlags flags;
    FlagParser parser;
    RegisterPolicyFlags(&parser, &flags);
    std::vector<std::string> args = {"--network-access", "model_and_tools",
                                     "--model", "http://127.0.0.2:8000/v1",
                                     "--tool", "http://127.0.0.3:9000/",
                                     "--required-tool",
                                     "grader=http://127.0.0.4:9001/"};
    args.insert(first ? args.begin() : args.end(), "--tools-any-port");
    absl::StatusOr<FlagParser::Result> r = parser.Parse(args);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(FinishPolicyFlags(r->positionals, &flags).ok());
    ASSERT_EQ(flags.endpoints.tools.size(), 2u);
    for (const v1::ToolGrant& t : flags.endpoints.tools) {
      EXPECT_TRUE(t.any_port()) << t.url();
    }
    absl::StatusOr<v1::PolicySet> p = LoadPolicyFromFlags(flags);
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<CompiledPolicy> compiled =
        compiler.Compile(*p, flags.endpoints, {});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    int wide = 0;
    for (const Rule& rule : compiled->phases[0].rules) {
      if (rule.port_first == 1 && rule.port_last == 65535) {
        ++wide;
        EXPECT_THAT(rule.origin, HasSubstr("(any port)"));
      }
    }
    EXPECT_EQ(wide, 2);
  }
  PolicyFlags flags;
  FlagParser parser;
  RegisterPolicyFlags(&parser, &flags);
  absl::StatusOr<FlagParser::Result> r =
      parser.Parse({"--network-access", "model_only", "--tools-any-port"});
  ASSERT_TRUE(r.ok()) << r.status();
  absl::Status s = FinishPolicyFlags(r->positionals, &flags);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("--tools-any-port"));
}

// --dns-answers-may-point-at is dns.answers_may_point_at, for the phases
// whose DNS is filtered (an inherit phase has no filter to tell).
TEST(PolicyFlagsAgreeWithThePolicyLanguage, DnsAnswersMayPointAt) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, std::vector<HostPort>{});
  for (const char* access : {"model_only", "inherit"}) {
    PolicyFlags flags;
    FlagParser parser;
    RegisterPolicyFlags(&parser, &flags);
    absl::StatusOr<FlagParser::Result> r = parser.Parse(
        {"--network-access", access, "--model", "http://127.0.0.2:8000/v1",
         "--dns-answers-may-point-at", "127.0.0.0/8",
         "--dns-answers-may-point-at=::1"});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(FinishPolicyFlags(r->positionals, &flags).ok());
    absl::StatusOr<v1::PolicySet> p = LoadPolicyFromFlags(flags);
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<CompiledPolicy> compiled =
        compiler.Compile(*p, flags.endpoints, {});
    ASSERT_TRUE(compiled.ok()) << access << ": " << compiled.status();
    if (std::string(access) == "inherit") {
      EXPECT_THAT(compiled->phases[0].dns_answers_may_point_at,
                  ::testing::IsEmpty());
      continue;
    }
    EXPECT_THAT(compiled->phases[0].dns_answers_may_point_at,
                ElementsAre(*IpPrefix::Parse("127.0.0.0/8"),
                            *IpPrefix::Parse("::1")));
  }
}

// The flags set the policy set's egress_budget field by field: a flag
// replaces its field, the fields no flag names stay the policy's.
TEST(PolicyFlagsAgreeWithThePolicyLanguage, EgressBudget) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, std::vector<HostPort>{});
  PolicyFlags flags;
  FlagParser parser;
  RegisterPolicyFlags(&parser, &flags);
  absl::StatusOr<FlagParser::Result> r = parser.Parse(
      {"--network-access", "model_only", "--model", "http://127.0.0.2:8000/v1",
       "--egress-budget-connections", "10", "--egress-budget-bytes=1048576",
       "--egress-budget-bytes-per-address", "65536"});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(FinishPolicyFlags(r->positionals, &flags).ok());
  absl::StatusOr<v1::PolicySet> p = LoadPolicyFromFlags(flags);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<CompiledPolicy> from_flags =
      compiler.Compile(*p, flags.endpoints, {});
  ASSERT_TRUE(from_flags.ok()) << from_flags.status();

  v1::PolicySet written = *p;
  written.mutable_egress_budget()->set_connections(10);
  written.mutable_egress_budget()->set_bytes(1048576);
  written.mutable_egress_budget()->set_bytes_per_address(65536);
  RolloutEndpoints model;
  model.model = flags.endpoints.model;
  absl::StatusOr<CompiledPolicy> from_policy =
      compiler.Compile(written, model, {});
  ASSERT_TRUE(from_policy.ok()) << from_policy.status();
  EXPECT_EQ(from_flags->egress_budget, from_policy->egress_budget);
  EXPECT_EQ(from_flags->egress_budget, (EgressBudget{10, 1048576, 65536}));
  EXPECT_EQ(from_flags->phases[0].egress_budget, from_flags->egress_budget);
  EXPECT_TRUE(from_flags->phases[0].budget_enforced());

  // One flag over a policy's budget replaces that field only.
  RolloutEndpoints bytes_only = model;
  bytes_only.egress_budget.set_bytes(5);
  absl::StatusOr<CompiledPolicy> overlaid =
      compiler.Compile(written, bytes_only, {});
  ASSERT_TRUE(overlaid.ok()) << overlaid.status();
  EXPECT_EQ(overlaid->egress_budget, (EgressBudget{10, 5, 65536}));
}

TEST(FinishPolicyFlags, InlinePolicyFromTheMode) {
  PolicyFlags flags;
  FlagParser parser;
  RegisterPolicyFlags(&parser, &flags);
  absl::StatusOr<FlagParser::Result> r =
      parser.Parse({"--network-access", "model-and-tools"});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(FinishPolicyFlags(r->positionals, &flags).ok());
  absl::StatusOr<v1::PolicySet> p = LoadPolicyFromFlags(flags);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->phase_size(), 1);
  EXPECT_EQ(p->phase(0).name(), "default");
  EXPECT_EQ(p->phase(0).network_access(), v1::MODEL_AND_TOOLS);
}

}  // namespace
}  // namespace sandfence
