// The compiler, as a specification: each row a phase a user writes, the
// sandbox it runs in, and the exact rules -- or the refusal -- it becomes.
// Names are answered by an in-memory resolver (fake_resolver.h).
#include "compile/compiler.h"

#include <cctype>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "compile/fake_resolver.h"
#include "compile/format.h"
#include "compile/rules.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace sandfence {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr CompileContext kHostNetns{.own_netns = false, .borrowed = false};
constexpr CompileContext kOwnNetns{.own_netns = true, .borrowed = false};
constexpr CompileContext kBorrowed{.own_netns = false, .borrowed = true};

void AddFixedAnswers(FakeResolver* r) {
  r->Add("model.internal", {"10.1.2.3", "fd00::3"})
      .Add("search.internal", {"10.0.0.9"})
      .Add("mapped.internal", {"::ffff:10.0.0.11"})
      .Add("loop.internal", {"127.0.0.1", "::1"})
      .Add("zero.internal", {"0.0.0.0"})
      .Add("part.internal", {"127.0.0.1", "10.0.0.12"})
      .Add("xn--bcher-kva.example", {"10.0.0.13"})
      .Fail("slow.internal",
            Unavailable("DNS timeout: no answer to the A query for "
                        "\"slow.internal\"; retry later"));
}

std::vector<HostPort> SystemResolvers() {
  return {*HostPort::Parse("10.0.0.53", 53),
          *HostPort::Parse("127.0.0.53", 53)};
}

// A compiled phase as lines: "tcp 10.1.2.3:8000 model.internal" per rule,
// then "drop URL" per dropped grant.
std::vector<std::string> Lines(const CompiledPhase& phase) {
  std::vector<std::string> out;
  for (const Rule& r : phase.rules) {
    out.push_back(absl::StrCat(L4Name(r.protocol), " ", FormatDestination(r),
                               " ", r.origin));
  }
  for (const DroppedGrant& d : phase.dropped) {
    out.push_back(absl::StrCat("drop ", d.url));
  }
  return out;
}

struct Case {
  const char* title;
  // Phase text without its name (it is "agent"). Without any "dns" in it,
  // `dns { mode: NONE }` is added, so that rows show only what they test.
  const char* phase;
  CompileContext context = kHostNetns;
  std::vector<std::string> expect = {};  // when the phase compiles
  Refusal refusal = Refusal::kNone;
  // Part of the refusal message, or of some dropped grant's reason.
  const char* message_part = "";
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.title; }

std::string CaseName(const ::testing::TestParamInfo<Case>& param) {
  std::string name;
  for (const char* p = param.param.title; *p; ++p) {
    name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  }
  return name;
}

const std::vector<std::string> kModelRules = {
    "tcp 10.1.2.3:8000 model.internal", "tcp [fd00::3]:8000 model.internal"};

std::vector<std::string> ModelRulesAnd(std::vector<std::string> more) {
  std::vector<std::string> out = kModelRules;
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

class CompilePhaseTest : public ::testing::TestWithParam<Case> {};

TEST_P(CompilePhaseTest, RulesOrRefusal) {
  const Case& c = GetParam();
  std::string text = absl::StrCat("name: \"agent\" ", c.phase);
  if (!absl::StrContains(text, "dns")) text += " dns { mode: NONE }";
  v1::PolicySet policy;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      absl::StrCat("phase { ", text, " }"), &policy))
      << "bad test text: " << text;

  FakeResolver resolver;
  AddFixedAnswers(&resolver);
  PolicyCompiler compiler(&resolver, SystemResolvers());
  absl::StatusOr<CompiledPolicy> out =
      compiler.Compile(policy, RolloutEndpoints{}, c.context);

  if (c.refusal != Refusal::kNone) {
    ASSERT_FALSE(out.ok()) << "compiled to:\n"
                           << absl::StrJoin(Lines(out->phases[0]), "\n");
    EXPECT_EQ(RefusalName(RefusalOf(out.status())), RefusalName(c.refusal))
        << out.status();
    EXPECT_THAT(out.status().message(), HasSubstr("phase \"agent\""));
    EXPECT_THAT(out.status().message(), HasSubstr(c.message_part));
    return;
  }
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->phases.size(), 1u);
  EXPECT_EQ(Lines(out->phases[0]), c.expect);
  if (c.message_part[0] != '\0') {
    std::vector<std::string> reasons;
    for (const DroppedGrant& d : out->phases[0].dropped) {
      reasons.push_back(d.reason);
    }
    EXPECT_THAT(absl::StrJoin(reasons, "\n"), HasSubstr(c.message_part));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, CompilePhaseTest,
    ::testing::Values(
        // --- host normalization, through the whole compiler -------------
        Case{.title = "a model name becomes every A and AAAA address",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://model.internal:8000/v1")",
             .expect = kModelRules},
        Case{.title = "an upper-case host is lower-cased",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://MODEL.Internal:8000")",
             .expect = kModelRules},
        Case{.title = "one trailing dot is stripped",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://model.internal.:8000")",
             .expect = kModelRules},
        Case{.title = "two trailing dots are malformed",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://model.internal..:8000")",
             .refusal = Refusal::kMalformed,
             .message_part = "model \"http://model.internal..:8000\""},
        Case{.title = "an IDN host is resolved as punycode",
             .phase = "network_access: MODEL_ONLY "
                      "model: \"http://B\xc3\x9c"
                      "cher.example/\"",
             .expect = {"tcp 10.0.0.13:80 xn--bcher-kva.example"}},
        Case{.title = "an IPv6 literal in brackets",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://[2001:db8::1]:8000/")",
             .expect = {"tcp [2001:db8::1]:8000 2001:db8::1"}},
        Case{.title = "an IPv4-mapped IPv6 literal becomes an IPv4 rule",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://[::ffff:10.0.0.5]:8000")",
             .expect = {"tcp 10.0.0.5:8000 10.0.0.5"}},
        Case{.title = "an IPv4-mapped AAAA answer becomes an IPv4 rule",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://mapped.internal")",
             .expect = {"tcp 10.0.0.11:80 mapped.internal"}},
        Case{.title = "userinfo is ignored",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://agent:secret@model.internal:8000")",
             .expect = kModelRules},
        Case{.title = "https without a port is 443",
             .phase = R"(network_access: MODEL_ONLY
                         model: "https://10.0.0.5/v1")",
             .expect = {"tcp 10.0.0.5:443 10.0.0.5"}},
        Case{.title = "a URL without a host is malformed",
             .phase = R"(network_access: MODEL_ONLY model: "http://:8000/")",
             .refusal = Refusal::kMalformed,
             .message_part = "model \"http://:8000/\": \"http://:8000/\" has "
                             "no host"},
        Case{.title = "an ftp URL is malformed",
             .phase = R"(network_access: MODEL_ONLY
                         model: "ftp://model.internal")",
             .refusal = Refusal::kMalformed,
             .message_part = "scheme \"ftp\" is not supported"},
        Case{.title = "a wildcard host is malformed",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://*.internal")",
             .refusal = Refusal::kMalformed,
             .message_part = "wildcard"},
        Case{.title = "a malformed optional tool is malformed even in "
                      "model_only",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://model.internal:8000"
                         tool { url: "gopher://x" })",
             .refusal = Refusal::kMalformed,
             .message_part = "tool \"gopher://x\""},
        Case{.title = "duplicates are merged",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://model.internal:8000"
                         model: "http://MODEL.internal.:8000/other"
                         allow { host: "10.1.2.3" port: 8000 })",
             .expect = kModelRules},
        Case{.title = "a rule inside a wider allowed block is merged",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://10.0.0.5"
                         allow { name: "net" host: "10.0.0.0/8" port: 443 }
                         allow { host: "10.0.0.9" port: 443 })",
             .expect = {"tcp 10.0.0.0/8:443 net", "tcp 10.0.0.5:80 10.0.0.5"}},

        // --- unreachable endpoints --------------------------------------
        Case{.title = "a model at 0.0.0.0 is refused",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://0.0.0.0:8000")",
             .refusal = Refusal::kRejected,
             .message_part = "model \"http://0.0.0.0:8000\" cannot be "
                             "reached: 0.0.0.0 is the unspecified address"},
        Case{.title = "a model at [::] is refused",
             .phase = R"(network_access: MODEL_ONLY model: "http://[::]:80")",
             .refusal = Refusal::kRejected,
             .message_part = ":: is the unspecified address"},
        Case{.title = "a model name that resolves to 0.0.0.0 is refused",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://zero.internal")",
             .refusal = Refusal::kRejected,
             .message_part = "\"zero.internal\" resolves only to addresses "
                             "the sandbox cannot reach"},
        Case{.title = "a loopback model is allowed in the host's netns",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://127.0.0.1:8000")",
             .expect = {"tcp 127.0.0.1:8000 127.0.0.1"}},
        Case{.title = "127.0.0.1 is refused from an own netns",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://127.0.0.1:8000")",
             .context = kOwnNetns,
             .refusal = Refusal::kRejected,
             .message_part = "127.0.0.1 is a loopback address, and a sandbox "
                             "with its own network namespace cannot reach "
                             "the host's loopback; the model server is "
                             "always required"},
        Case{.title = "127.1.2.3 is loopback too",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://127.1.2.3:8000")",
             .context = kOwnNetns,
             .refusal = Refusal::kRejected,
             .message_part = "127.1.2.3 is a loopback address"},
        Case{
            .title = "[::1] is refused from an own netns",
            .phase = R"(network_access: MODEL_ONLY model: "http://[::1]:8000")",
            .context = kOwnNetns,
            .refusal = Refusal::kRejected,
            .message_part = "::1 is a loopback address"},
        Case{.title = "mapped loopback is refused from an own netns",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://[::ffff:127.0.0.1]:8000")",
             .context = kOwnNetns,
             .refusal = Refusal::kRejected,
             .message_part = "127.0.0.1 is a loopback address"},
        Case{.title = "localhost is refused from an own netns",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://localhost:8000")",
             .context = kOwnNetns,
             .refusal = Refusal::kRejected,
             .message_part = "\"localhost\" resolves only to addresses the "
                             "sandbox cannot reach"},
        Case{.title = "LOCALHOST with a trailing dot is localhost",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://LOCALHOST.:8000")",
             .context = kOwnNetns,
             .refusal = Refusal::kRejected,
             .message_part = "loopback"},
        Case{.title = "localhost in the host's netns is both loopbacks",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://localhost:8000")",
             .expect = {"tcp 127.0.0.1:8000 localhost",
                        "tcp [::1]:8000 localhost"}},
        Case{.title = "a name that resolves to loopback is refused from an "
                      "own netns",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://loop.internal")",
             .context = kOwnNetns,
             .refusal = Refusal::kRejected,
             .message_part = "loopback"},
        Case{.title = "a name partly on loopback keeps its other addresses",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://part.internal")",
             .context = kOwnNetns,
             .expect = {"tcp 10.0.0.12:80 part.internal"}},

        // --- name resolution failures ------------------------------------
        Case{.title = "a model name that does not exist is rejected",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://nx.internal:8000")",
             .refusal = Refusal::kRejected,
             .message_part = "model \"http://nx.internal:8000\": name "
                             "\"nx.internal\" does not exist"},
        Case{.title = "a DNS timeout on the model is unavailable",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://slow.internal:8000")",
             .refusal = Refusal::kUnavailable,
             .message_part = "model \"http://slow.internal:8000\": DNS "
                             "timeout"},

        // --- model_only --------------------------------------------------
        Case{.title = "model_only drops an optional tool",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://model.internal:8000"
                         tool { name: "search" url: "https://search.internal" })",
             .expect = ModelRulesAnd({"drop https://search.internal"}),
             .message_part = "model_only drops optional tool grants"},
        Case{.title = "model_only refuses a required tool",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://model.internal:8000"
                         tool { name: "search" url: "https://search.internal"
                                required: true })",
             .refusal = Refusal::kRejected,
             .message_part = "phase \"agent\": tool \"search\" "
                             "(https://search.internal) is required, but "
                             "model_only allows only the model server"},
        Case{.title = "model_only without a model is refused",
             .phase = R"(network_access: MODEL_ONLY)",
             .refusal = Refusal::kRejected,
             .message_part = "network_access model_only needs the model "
                             "server's endpoint, and none is given"},
        Case{.title = "model_only keeps allow rules",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://10.0.0.5"
                         allow { host: "search.internal" port: 443 })",
             .expect = {"tcp 10.0.0.5:80 10.0.0.5",
                        "tcp 10.0.0.9:443 search.internal"}},

        // --- model_and_tools ---------------------------------------------
        Case{.title = "model_and_tools keeps a tool under its name",
             .phase = R"(network_access: MODEL_AND_TOOLS
                         model: "http://model.internal:8000"
                         tool { name: "search" url: "https://search.internal" })",
             .expect = {"tcp 10.0.0.9:443 search", kModelRules[0],
                        kModelRules[1]}},
        Case{.title = "a tool without a name is shown by its host",
             .phase = R"(network_access: MODEL_AND_TOOLS
                         model: "http://10.0.0.5"
                         tool { url: "http://search.internal:8080" })",
             .expect = {"tcp 10.0.0.5:80 10.0.0.5",
                        "tcp 10.0.0.9:8080 search.internal"}},
        Case{.title = "an optional tool at 0.0.0.0 is dropped",
             .phase = R"(network_access: MODEL_AND_TOOLS
                         model: "http://10.0.0.5"
                         tool { url: "http://0.0.0.0:9000" })",
             .expect = {"tcp 10.0.0.5:80 10.0.0.5", "drop http://0.0.0.0:9000"},
             .message_part = "cannot be reached: 0.0.0.0 is the unspecified "
                             "address"},
        Case{.title = "an optional loopback tool is dropped from an own "
                      "netns",
             .phase = R"(network_access: MODEL_AND_TOOLS
                         model: "http://10.0.0.5"
                         tool { url: "http://127.0.0.1:9000" })",
             .context = kOwnNetns,
             .expect = {"tcp 10.0.0.5:80 10.0.0.5",
                        "drop http://127.0.0.1:9000"},
             .message_part = "loopback"},
        Case{.title = "a required loopback tool is refused from an own netns",
             .phase = R"(network_access: MODEL_AND_TOOLS
                         model: "http://10.0.0.5"
                         tool { name: "fs" url: "http://127.0.0.1:9000"
                                required: true })",
             .context = kOwnNetns,
             .refusal = Refusal::kRejected,
             .message_part = "tool \"fs\" (http://127.0.0.1:9000) is "
                             "required, but it cannot be reached: 127.0.0.1 "
                             "is a loopback address"},
        Case{.title = "a required loopback tool is kept in the host's netns",
             .phase = R"(network_access: MODEL_AND_TOOLS
                         model: "http://10.0.0.5"
                         tool { name: "fs" url: "http://127.0.0.1:9000"
                                required: true })",
             .expect = {"tcp 10.0.0.5:80 10.0.0.5", "tcp 127.0.0.1:9000 fs"}},
        Case{.title = "an optional tool whose name does not exist is dropped",
             .phase = R"(network_access: MODEL_AND_TOOLS
                         model: "http://10.0.0.5"
                         tool { url: "https://nx.internal" })",
             .expect = {"tcp 10.0.0.5:80 10.0.0.5", "drop https://nx.internal"},
             .message_part = "\"nx.internal\" does not exist"},
        Case{.title = "a required tool whose name does not exist is rejected",
             .phase = R"(network_access: MODEL_AND_TOOLS
                         model: "http://10.0.0.5"
                         tool { url: "https://nx.internal" required: true })",
             .refusal = Refusal::kRejected,
             .message_part = "tool \"https://nx.internal\": name "
                             "\"nx.internal\" does not exist"},
        Case{.title = "a DNS timeout on an optional tool is unavailable",
             .phase = R"(network_access: MODEL_AND_TOOLS
                         model: "http://10.0.0.5"
                         tool { url: "https://slow.internal" })",
             .refusal = Refusal::kUnavailable,
             .message_part = "tool \"https://slow.internal\": DNS timeout"},
        Case{.title = "model_and_tools without a model is refused",
             .phase = R"(network_access: MODEL_AND_TOOLS
                         tool { url: "https://search.internal" })",
             .refusal = Refusal::kRejected,
             .message_part = "model_and_tools needs the model server's "
                             "endpoint"},

        // --- borrowed sandboxes and inherit ------------------------------
        Case{.title = "a borrowed sandbox refuses model_only",
             .phase = R"(network_access: MODEL_ONLY
                         model: "http://10.0.0.5")",
             .context = kBorrowed,
             .refusal = Refusal::kRejected,
             .message_part = "network_access model_only cannot be enforced "
                             "on a borrowed sandbox"},
        Case{.title = "a borrowed sandbox refuses model_and_tools",
             .phase = R"(network_access: MODEL_AND_TOOLS
                         model: "http://10.0.0.5")",
             .context = kBorrowed,
             .refusal = Refusal::kRejected,
             .message_part = "only inherit is allowed"},
        Case{.title = "a borrowed sandbox accepts inherit",
             .phase = R"(network_access: INHERIT)",
             .context = kBorrowed,
             .expect = {}},
        Case{.title = "inherit compiles to no rules and resolves nothing",
             .phase = R"(network_access: INHERIT
                         model: "http://nx.internal"
                         tool { url: "http://slow.internal" required: true })",
             .expect = {}},

        Case{.title = "a malformed URL in an inherit phase is malformed",
             .phase = R"(network_access: INHERIT model: "ftp://model")",
             .refusal = Refusal::kMalformed,
             .message_part = "model \"ftp://model\""},

        // --- DNS ---------------------------------------------------------
        Case{.title = "dns SYSTEM allows the host's resolvers over udp and "
                      "tcp",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         dns { mode: SYSTEM })",
             .expect = {"tcp 10.0.0.5:80 10.0.0.5", "tcp 10.0.0.53:53 dns",
                        "tcp 127.0.0.53:53 dns", "udp 10.0.0.53:53 dns",
                        "udp 127.0.0.53:53 dns"}},
        Case{.title = "dns unset is FILTERED: no resolver is reachable",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         dns { })",
             .expect = {"tcp 10.0.0.5:80 10.0.0.5"}},
        Case{.title = "a loopback host resolver is dropped from an own netns",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         dns { mode: SYSTEM })",
             .context = kOwnNetns,
             .expect = {"tcp 10.0.0.5:80 10.0.0.5", "tcp 10.0.0.53:53 dns",
                        "udp 10.0.0.53:53 dns", "drop 127.0.0.53:53"},
             .message_part = "the host's resolver cannot be reached: "
                             "127.0.0.53 is a loopback address"},
        Case{.title = "dns LISTED allows the listed resolvers and ports",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         dns { mode: LISTED resolver: "[fd00::53]:5353"
                               resolver: "10.0.0.54" })",
             .expect = {"tcp 10.0.0.5:80 10.0.0.5", "tcp 10.0.0.54:53 dns",
                        "tcp [fd00::53]:5353 dns", "udp 10.0.0.54:53 dns",
                        "udp [fd00::53]:5353 dns"}},
        Case{.title = "a listed loopback resolver is refused from an own "
                      "netns",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         dns { mode: LISTED resolver: "127.0.0.1" })",
             .context = kOwnNetns,
             .refusal = Refusal::kRejected,
             .message_part = "dns.resolver \"127.0.0.1\" cannot be reached"},
        Case{.title = "dns NONE allows no resolver",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         dns { mode: NONE })",
             .expect = {"tcp 10.0.0.5:80 10.0.0.5"}},

        // --- allow rules -------------------------------------------------
        Case{.title = "allow ANY is tcp and udp",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         allow { host: "10.0.0.7" port: 53 protocol: ANY })",
             .expect = {"tcp 10.0.0.5:80 10.0.0.5", "tcp 10.0.0.7:53 10.0.0.7",
                        "udp 10.0.0.7:53 10.0.0.7"}},
        Case{.title = "allow with a port range",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         allow { host: "10.0.0.7"
                                 port_range { first: 8000 last: 8010 }
                                 protocol: UDP })",
             .expect = {"tcp 10.0.0.5:80 10.0.0.5",
                        "udp 10.0.0.7:8000-8010 10.0.0.7"}},
        Case{.title = "allow 0.0.0.0 is refused",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         allow { host: "0.0.0.0" port: 22 })",
             .refusal = Refusal::kRejected,
             .message_part = "allow \"0.0.0.0\" cannot be reached"},
        Case{.title = "allow loopback is refused from an own netns",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         allow { host: "127.0.0.1" port: 8080 })",
             .context = kOwnNetns,
             .refusal = Refusal::kRejected,
             .message_part = "allow \"127.0.0.1\" cannot be reached"},
        Case{.title = "allow loopback is the namespace's own with "
                      "LOOPBACK_RULES_ONLY",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         loopback: LOOPBACK_RULES_ONLY
                         allow { host: "127.0.0.1" port: 8080 })",
             .context = kOwnNetns,
             .expect = {"tcp 10.0.0.5:80 10.0.0.5",
                        "tcp 127.0.0.1:8080 127.0.0.1"}},
        Case{.title = "an IPv4-mapped allowed block becomes IPv4",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         allow { host: "::ffff:10.0.0.0/104" port: 443 })",
             .expect = {"tcp 10.0.0.0/8:443 10.0.0.0/8",
                        "tcp 10.0.0.5:80 10.0.0.5"}},
        Case{.title = "an allowed block with host bits set is malformed",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         allow { host: "10.0.0.1/8" port: 443 })",
             .refusal = Refusal::kMalformed,
             .message_part = "allow \"10.0.0.1/8\""},
        Case{.title = "an allowed wildcard is malformed",
             .phase = R"(network_access: MODEL_ONLY model: "http://10.0.0.5"
                         allow { host: "*.internal" port: 443 })",
             .refusal = Refusal::kMalformed,
             .message_part = "wildcard"},
        Case{.title = "an unset network_access is malformed, not inherit",
             .phase = R"(model: "http://10.0.0.5")",
             .refusal = Refusal::kMalformed,
             .message_part = "network_access is not set"}),
    CaseName);

v1::PolicySet Parse(const std::string& text) {
  v1::PolicySet p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

TEST(Compile, ModelOnlyDoesNotResolveDroppedTools) {
  FakeResolver resolver;
  AddFixedAnswers(&resolver);
  PolicyCompiler compiler(&resolver, SystemResolvers());
  absl::StatusOr<CompiledPolicy> out =
      compiler.Compile(Parse(R"(phase { name: "a" network_access: MODEL_ONLY
                       model: "http://10.0.0.5" dns { mode: NONE }
                       tool { url: "http://slow.internal" } })"),
                       RolloutEndpoints{}, kHostNetns);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(resolver.asked(), IsEmpty());
}

TEST(Compile, EachNameIsResolvedOncePerCompile) {
  FakeResolver resolver;
  AddFixedAnswers(&resolver);
  PolicyCompiler compiler(&resolver, SystemResolvers());
  absl::StatusOr<CompiledPolicy> out = compiler.Compile(
      Parse(R"(phase { name: "a" network_access: MODEL_ONLY dns { mode: NONE } }
               phase { name: "b" network_access: MODEL_AND_TOOLS
                       dns { mode: NONE } })"),
      RolloutEndpoints{.model = {"http://model.internal:8000"}}, kHostNetns);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(resolver.asked(), ElementsAre("model.internal"));
  ASSERT_EQ(out->phases.size(), 2u);
  EXPECT_EQ(out->phases[0].rules, out->phases[1].rules);
}

TEST(Compile, RolloutEndpointsReachEveryRestrictedPhase) {
  FakeResolver resolver;
  AddFixedAnswers(&resolver);
  PolicyCompiler compiler(&resolver, SystemResolvers());
  v1::ToolGrant tool;
  tool.set_url("https://search.internal");
  absl::StatusOr<CompiledPolicy> out = compiler.Compile(
      Parse(R"(name: "p"
               phase { name: "setup" network_access: INHERIT }
               phase { name: "agent" network_access: MODEL_AND_TOOLS
                       dns { mode: NONE } })"),
      RolloutEndpoints{.model = {"http://10.0.0.5"}, .tools = {tool}},
      kHostNetns);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->phases.size(), 2u);
  EXPECT_FALSE(out->phases[0].restricted());
  EXPECT_THAT(out->phases[0].rules, IsEmpty());
  EXPECT_THAT(Lines(out->phases[1]),
              ElementsAre("tcp 10.0.0.5:80 10.0.0.5",
                          "tcp 10.0.0.9:443 search.internal"));
}

// Gym's seed opens every port of a tool's host; any_port says the same,
// and the rule's origin says it is wider than the URL (check and records
// print the origin). Without it, the URL's port only.
TEST(Compile, AnyPortOpensTheWholeHostAndSaysSo) {
  FakeResolver resolver;
  AddFixedAnswers(&resolver);
  PolicyCompiler compiler(&resolver, SystemResolvers());
  absl::StatusOr<CompiledPolicy> out = compiler.Compile(
      Parse(R"(phase { name: "a" network_access: MODEL_AND_TOOLS
                       model: "http://10.0.0.5" dns { mode: NONE }
                       tool { url: "https://search.internal" any_port: true }
                       tool { name: "grader" url: "http://10.0.0.7:8001"
                              any_port: true }
                       tool { url: "http://10.0.0.8:8002" } })"),
      RolloutEndpoints{}, kHostNetns);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Lines(out->phases[0]),
              ElementsAre("tcp 10.0.0.5:80 10.0.0.5",
                          "tcp 10.0.0.7:1-65535 grader (any port)",
                          "tcp 10.0.0.8:8002 10.0.0.8",
                          "tcp 10.0.0.9:1-65535 search.internal (any port)"));
}

// Every refusal of a compiled field carries its phase, field and value as
// data (common/status.h), and a reason that is the message's own tail:
// the daemon sends them as the status's Refusal, so no client parses text.
TEST(Compile, RefusalsNameTheirFieldAsData) {
  struct Refused {
    const char* policy;
    const char* phase;
    const char* field;
    const char* value;
  };
  const Refused cases[] = {
      {R"(phase { name: "a" network_access: MODEL_ONLY dns { mode: NONE }
                  model: "http://10.0.0.5"
                  tool { name: "g" url: "http://10.0.0.7:1" required: true } })",
       "a", "tool", "http://10.0.0.7:1"},
      {R"(phase { name: "b" network_access: MODEL_ONLY dns { mode: NONE }
                  model: "http://0.0.0.0:8000" })",
       "b", "model", "http://0.0.0.0:8000"},
      {R"(phase { name: "c" network_access: MODEL_ONLY model: "gopher://x" })",
       "c", "model", "gopher://x"},
      {R"(phase { name: "d" network_access: MODEL_AND_TOOLS dns { mode: NONE }
                  model: "http://10.0.0.5"
                  allow { host: "*.tool.test" port: 1 } })",
       "d", "allow", "*.tool.test"},
      {R"(phase { name: "e" network_access: MODEL_ONLY dns { mode: NONE } })",
       "e", "network_access", "model_only"},
      {R"(phase { name: "f" network_access: MODEL_ONLY model: "http://10.0.0.5"
                  dns { mode: LISTED resolver: "0.0.0.0" } })",
       "f", "dns.resolver", "0.0.0.0"},
      {R"(phase { name: "g" })", "g", "network_access", ""},
  };
  FakeResolver resolver;
  AddFixedAnswers(&resolver);
  for (const Refused& c : cases) {
    PolicyCompiler compiler(&resolver, SystemResolvers());
    absl::StatusOr<CompiledPolicy> out =
        compiler.Compile(Parse(c.policy), RolloutEndpoints{}, kHostNetns);
    ASSERT_FALSE(out.ok()) << c.policy;
    std::optional<RefusalSubject> subject = SubjectOf(out.status());
    ASSERT_TRUE(subject.has_value()) << out.status();
    EXPECT_EQ(subject->phase, c.phase) << out.status();
    EXPECT_EQ(subject->field, c.field) << out.status();
    EXPECT_EQ(subject->value, c.value) << out.status();
    EXPECT_FALSE(subject->reason.empty()) << out.status();
    EXPECT_THAT(out.status().message(), HasSubstr(subject->reason));
  }
}

// The subject rides as a payload any byte can be in; an outer site fills
// in only what the inner one left empty.
TEST(RefusalSubject, RoundTripsAnyBytesAndTheInnerSiteWins) {
  const RefusalSubject odd{"p:1", std::string("a\0b:", 4), "3:xyz", ""};
  absl::Status s = WithSubject(Malformed("m"), odd);
  ASSERT_TRUE(SubjectOf(s).has_value());
  EXPECT_EQ(*SubjectOf(s), odd);
  s = WithSubject(s, {"outer", "other", "v", "why"});
  EXPECT_EQ(SubjectOf(s)->phase, "p:1");
  EXPECT_EQ(SubjectOf(s)->field, odd.field);
  EXPECT_EQ(SubjectOf(s)->reason, "why");
  EXPECT_FALSE(SubjectOf(Malformed("none")).has_value());
  EXPECT_TRUE(WithSubject(absl::OkStatus(), odd).ok());
  EXPECT_FALSE(SubjectOf(WithSubject(absl::OkStatus(), odd)).has_value());
}

TEST(Compile, TheFirstRefusalInPhaseOrderWins) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, SystemResolvers());
  absl::StatusOr<CompiledPolicy> out = compiler.Compile(
      Parse(R"(phase { name: "first" network_access: MODEL_ONLY }
               phase { name: "second" network_access: MODEL_ONLY
                       model: "http://0.0.0.0" })"),
      RolloutEndpoints{}, kHostNetns);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("phase \"first\""));
}

TEST(Compile, OnlyPhaseCompilesThatPhase) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, SystemResolvers());
  v1::PolicySet p = Parse(R"(phase { name: "broken" network_access: MODEL_ONLY }
                             phase { name: "setup" network_access: INHERIT })");
  absl::StatusOr<CompiledPolicy> out =
      compiler.Compile(p, RolloutEndpoints{}, kHostNetns, "setup");
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->phases.size(), 1u);
  EXPECT_EQ(out->phases[0].name, "setup");

  out = compiler.Compile(p, RolloutEndpoints{}, kHostNetns, "nope");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(RefusalOf(out.status()), Refusal::kMalformed);
}

TEST(Compile, UnknownSystemResolversMatterOnlyWhereAModeAsksForThem) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver,
                          Unavailable("cannot read the nameservers from x"));
  absl::StatusOr<CompiledPolicy> out =
      compiler.Compile(Parse(R"(phase { name: "a" network_access: MODEL_ONLY
                       model: "http://10.0.0.5" dns { mode: NONE } })"),
                       RolloutEndpoints{}, kHostNetns);
  EXPECT_TRUE(out.ok()) << out.status();
  // Said explicitly, SYSTEM and FILTERED need them.
  for (const char* mode : {"SYSTEM", "FILTERED"}) {
    out = compiler.Compile(
        Parse(absl::StrCat(R"(phase { name: "a" network_access: MODEL_ONLY
                                      model: "http://10.0.0.5" dns { mode: )",
                           mode, " } }")),
        RolloutEndpoints{}, kHostNetns);
    ASSERT_FALSE(out.ok()) << mode;
    EXPECT_EQ(RefusalOf(out.status()), Refusal::kUnavailable) << mode;
    EXPECT_THAT(out.status().message(), HasSubstr("host's nameservers"))
        << mode;
  }
  // The default is not refused for them: the filter blocks as ever and
  // answers allowed names SERVFAIL (no upstream), which check shows.
  out = compiler.Compile(Parse(R"(phase { name: "a" network_access: MODEL_ONLY
                                          model: "http://10.0.0.5" })"),
                         RolloutEndpoints{}, kHostNetns);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->phases[0].dns_filtered);
  EXPECT_TRUE(out->phases[0].dns_mode_default);
  EXPECT_TRUE(out->phases[0].dns_upstreams.empty());
  EXPECT_THAT(FormatCompiledPolicyText(*out),
              HasSubstr("dns   filtered (the default): upstream none known"));
}

TEST(Compile, DnsFilteredIsTheDefaultOfRestrictedPhasesOnly) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, SystemResolvers());
  absl::StatusOr<CompiledPolicy> out =
      compiler.Compile(Parse(R"(phase { name: "a" network_access: MODEL_ONLY
                       model: "http://10.0.0.5" }
               phase { name: "b" network_access: MODEL_AND_TOOLS
                       model: "http://10.0.0.5" dns { min_ttl_seconds: 1 } }
               phase { name: "c" network_access: MODEL_ONLY
                       model: "http://10.0.0.5" dns { mode: SYSTEM } }
               phase { name: "d" network_access: INHERIT })"),
                       RolloutEndpoints{}, kHostNetns);
  ASSERT_TRUE(out.ok()) << out.status();
  for (int i : {0, 1}) {
    const CompiledPhase& p = out->phases[i];
    EXPECT_TRUE(p.dns_filtered) << p.name;
    EXPECT_TRUE(p.dns_mode_default) << p.name;
    EXPECT_EQ(p.dns_mode, v1::Dns::FILTERED) << p.name;
    EXPECT_EQ(p.dns_upstreams, SystemResolvers()) << p.name;
  }
  EXPECT_EQ(out->phases[1].dns_ttl.min_seconds, 1u);
  EXPECT_FALSE(out->phases[2].dns_filtered);
  EXPECT_FALSE(out->phases[2].dns_mode_default);
  EXPECT_FALSE(out->phases[3].dns_filtered);
  const std::string text = FormatCompiledPolicyText(*out);
  EXPECT_THAT(text, HasSubstr("a  dns   filtered (the default): upstream"));
  EXPECT_THAT(text, HasSubstr("c  dns   system: the resolvers allowed above"));
}

TEST(Compile, PhaseSettingsAreCarriedWithDefaultsFilledIn) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, SystemResolvers());
  absl::StatusOr<CompiledPolicy> out =
      compiler.Compile(Parse(R"(phase { name: "a" network_access: INHERIT }
               phase { name: "b" network_access: INHERIT
                       loopback: LOOPBACK_RULES_ONLY guard { mode: LSM }
                       audit { allowed: ALL } })"),
                       RolloutEndpoints{}, kHostNetns);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->phases[0].guard, v1::Guard::AUTO);
  EXPECT_EQ(out->phases[0].audit_allowed, v1::Audit::FIRST_PER_DESTINATION);
  EXPECT_EQ(out->phases[0].loopback, v1::LOOPBACK_DEFAULT);
  EXPECT_EQ(out->phases[1].guard, v1::Guard::LSM);
  EXPECT_EQ(out->phases[1].audit_allowed, v1::Audit::ALL);
  EXPECT_EQ(out->phases[1].loopback, v1::LOOPBACK_RULES_ONLY);
}

// enforce: AUDIT (issue 15): the policy set's value applies where a phase
// sets none, inherit phases are never audit only, and `check` says so
// before any rule and again where the phase would deny.
TEST(CompileAudit, AuditOnlyPhasesAreCarriedAndLoudInCheck) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, SystemResolvers());
  absl::StatusOr<CompiledPolicy> out =
      compiler.Compile(Parse(R"(name: "rollout-audit" enforce: AUDIT
               phase { name: "setup" network_access: INHERIT }
               phase { name: "agent" network_access: MODEL_ONLY
                       model: "http://10.0.0.5" }
               phase { name: "verify" network_access: MODEL_ONLY
                       model: "http://10.0.0.5" enforce: AUDIT })"),
                       RolloutEndpoints{}, kHostNetns);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->phases[0].audit_only) << "inherit denies nothing";
  EXPECT_TRUE(out->phases[1].audit_only) << "from the policy set";
  EXPECT_TRUE(out->phases[2].audit_only);
  EXPECT_TRUE(out->HasAuditOnly());
  const std::string text = FormatCompiledPolicyText(*out);
  const std::vector<std::string> lines = absl::StrSplit(text, '\n');
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[1],
            "AUDIT ONLY: phases \"agent\", \"verify\" deny nothing (enforce: "
            "AUDIT); what the rules below would deny is allowed and recorded "
            "as \"would deny\"")
      << text;
  EXPECT_THAT(text, HasSubstr("agent   mode model_only  AUDIT ONLY: nothing "
                              "is denied"));
  EXPECT_THAT(text, HasSubstr("agent   audit all other traffic: allowed, "
                              "recorded as would deny (enforce: AUDIT)"));
  EXPECT_THAT(text, HasSubstr("agent   name  every other name: answered, "
                              "recorded as would_block (audit only)"));
  EXPECT_THAT(text, Not(HasSubstr("deny  all other traffic")));
  const std::string json = FormatCompiledPolicyJson(*out);
  EXPECT_THAT(json, HasSubstr("\"enforce\": \"AUDIT\""));
  EXPECT_THAT(json, HasSubstr("\"enforce\": \"ENFORCE\""));

  // The same phases, enforced: no audit line anywhere, the deny stated.
  absl::StatusOr<CompiledPolicy> enforced =
      compiler.Compile(Parse(R"(phase { name: "agent" network_access: MODEL_ONLY
                       model: "http://10.0.0.5" enforce: ENFORCE }
               phase { name: "other" network_access: MODEL_ONLY
                       model: "http://10.0.0.5" })"),
                       RolloutEndpoints{}, kHostNetns);
  ASSERT_TRUE(enforced.ok()) << enforced.status();
  EXPECT_FALSE(enforced->HasAuditOnly());
  const std::string etext = FormatCompiledPolicyText(*enforced);
  EXPECT_THAT(etext, Not(HasSubstr("AUDIT")));
  EXPECT_THAT(etext, HasSubstr("agent  deny  all other traffic"));
}

TEST(CompileAudit, ContradictionsAreMalformedNamingTheField) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, SystemResolvers());
  absl::StatusOr<CompiledPolicy> out =
      compiler.Compile(Parse(R"(name: "p" enforce: AUDIT
               phase { name: "agent" network_access: MODEL_ONLY
                       model: "http://10.0.0.5" enforce: ENFORCE })"),
                       RolloutEndpoints{}, kHostNetns);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(RefusalOf(out.status()), Refusal::kMalformed);
  EXPECT_THAT(out.status().message(),
              HasSubstr("phase \"agent\": enforce: ENFORCE contradicts the "
                        "policy's enforce: AUDIT"));
  // A different enforce is a different policy: the hash says so.
  absl::StatusOr<CompiledPolicy> audit =
      compiler.Compile(Parse(R"(phase { name: "agent" network_access: MODEL_ONLY
                       model: "http://10.0.0.5" enforce: AUDIT })"),
                       RolloutEndpoints{}, kHostNetns);
  absl::StatusOr<CompiledPolicy> plain =
      compiler.Compile(Parse(R"(phase { name: "agent" network_access: MODEL_ONLY
                       model: "http://10.0.0.5" })"),
                       RolloutEndpoints{}, kHostNetns);
  ASSERT_TRUE(audit.ok() && plain.ok());
  EXPECT_NE(audit->content_hash, plain->content_hash);
}

// DNS FILTERED (issue 14): name rules for every name the phase grants,
// wildcards as name rules only, no resolver rule for the sandbox.
std::vector<std::string> NameLines(const CompiledPhase& phase) {
  std::vector<std::string> out;
  for (const NameRule& r : phase.name_rules) {
    std::vector<std::string> grants;
    for (const NameGrant& g : r.grants) {
      grants.push_back(absl::StrCat(L4Name(g.protocol), ":", g.port_first, "-",
                                    g.port_last));
    }
    out.push_back(absl::StrCat(r.pattern, " ", absl::StrJoin(grants, ","), " ",
                               r.origin));
  }
  return out;
}

TEST(CompileDnsFiltered, NamesAndWildcardsBecomeNameRulesAndNoResolverRule) {
  FakeResolver resolver;
  AddFixedAnswers(&resolver);
  PolicyCompiler compiler(&resolver, SystemResolvers());
  absl::StatusOr<CompiledPolicy> out = compiler.Compile(
      Parse(R"(phase { name: "a" network_access: MODEL_AND_TOOLS
                       model: "http://Model.Internal.:8000/v1"
                       tool { name: "search" url: "https://search.internal" }
                       allow { host: "*.Tool.Test" port: 443 protocol: ANY }
                       allow { host: "10.0.0.7" port: 22 }
                       allow { host: "search.internal" port: 8443 }
                       dns { mode: FILTERED max_ttl_seconds: 600 } })"),
      RolloutEndpoints{}, kHostNetns);
  ASSERT_TRUE(out.ok()) << out.status();
  const CompiledPhase& p = out->phases[0];
  EXPECT_TRUE(p.dns_filtered);
  // The names are still resolved at start (a rollout that connects before
  // it asks works); the wildcard opens only what is learned; the sandbox
  // gets no rule to any resolver.
  EXPECT_THAT(Lines(p),
              ElementsAre("tcp 10.0.0.7:22 10.0.0.7", "tcp 10.0.0.9:443 search",
                          "tcp 10.0.0.9:8443 search.internal",
                          "tcp 10.1.2.3:8000 model.internal",
                          "tcp [fd00::3]:8000 model.internal"));
  EXPECT_THAT(NameLines(p),
              ElementsAre("model.internal tcp:8000-8000 model",
                          "search.internal tcp:443-443,tcp:8443-8443 "
                          "tool:search,allow",
                          "*.tool.test tcp:443-443,udp:443-443 allow"));
  EXPECT_EQ(p.dns_upstreams, SystemResolvers());
  EXPECT_EQ(p.dns_ttl, (DnsTtl{30, 600, 60}));
  EXPECT_EQ(p.dns_budget, (DnsBudget{256, 600, 128, 16384, 100}))
      << "defaults";
  const std::string text = FormatCompiledPolicyText(*out);
  EXPECT_THAT(text, HasSubstr("dns   budget: names only a wildcard allows: "
                              "at most 256 distinct, 16384 characters in "
                              "all, per 600 s; each at most 128 characters"));
  EXPECT_THAT(text, HasSubstr("dns   filtered: upstream 10.0.0.53:53, "
                              "127.0.0.53:53"));
  EXPECT_THAT(text, HasSubstr("name  *.tool.test      tcp:443,udp:443  allow"));
  EXPECT_THAT(text, HasSubstr("every other name: NXDOMAIN"));
  EXPECT_THAT(FormatCompiledPolicyJson(*out), HasSubstr("\"dns_filter\""));
}

TEST(CompileDnsFiltered, ListedUpstreamsAndTtlLimits) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver,
                          Unavailable("cannot read the nameservers from x"));
  absl::StatusOr<CompiledPolicy> out =
      compiler.Compile(Parse(R"(phase { name: "a" network_access: MODEL_ONLY
                       model: "http://10.0.0.5"
                       dns { mode: FILTERED resolver: "127.0.0.1:5353"
                             min_ttl_seconds: 1 max_ttl_seconds: 2
                             grace_seconds: 3
                             budget { wildcard_names: 9
                                      max_wildcard_name_length: 40
                                      queries_per_second: 7 }
                             answers_may_point_at: "127.0.0.0/8"
                             answers_may_point_at: "::1" } })"),
                       RolloutEndpoints{}, kHostNetns);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->phases[0].dns_upstreams,
            std::vector<HostPort>{*HostPort::Parse("127.0.0.1:5353", 53)});
  EXPECT_EQ(out->phases[0].dns_ttl, (DnsTtl{1, 2, 3}));
  // Given fields are kept, the others take their defaults.
  EXPECT_EQ(out->phases[0].dns_budget, (DnsBudget{9, 600, 40, 16384, 7}));
  EXPECT_THAT(out->phases[0].dns_answers_may_point_at,
              ElementsAre(*IpPrefix::Parse("127.0.0.0/8"),
                          *IpPrefix::Parse("::1")));
  EXPECT_THAT(FormatCompiledPolicyText(*out),
              HasSubstr("dns   answers may point at: 127.0.0.0/8, ::1\n"));
  EXPECT_THAT(FormatCompiledPolicyJson(*out),
              HasSubstr("\"answers_may_point_at\": [\"127.0.0.0/8\", \"::1\"]"));
  EXPECT_THAT(FormatCompiledPolicyJson(*out),
              HasSubstr("\"budget\": {\"wildcard_names\": 9, "
                        "\"window_seconds\": 600, "
                        "\"max_wildcard_name_length\": 40, "
                        "\"wildcard_name_bytes\": 16384, "
                        "\"queries_per_second\": 7}"));
  EXPECT_THAT(NameLines(out->phases[0]), IsEmpty());  // the model is an IP

  // Without listed upstreams, the host's must be known.
  out = compiler.Compile(Parse(R"(phase { name: "a" network_access: MODEL_ONLY
                       model: "http://10.0.0.5" dns { mode: FILTERED } })"),
                         RolloutEndpoints{}, kHostNetns);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(RefusalOf(out.status()), Refusal::kUnavailable);
  EXPECT_THAT(out.status().message(), HasSubstr("dns FILTERED asks the host"));

  // A max below the default min, without a min: said plainly.
  out = compiler.Compile(Parse(R"(phase { name: "a" network_access: MODEL_ONLY
                       model: "http://10.0.0.5"
                       dns { mode: FILTERED resolver: "127.0.0.1"
                             max_ttl_seconds: 10 } })"),
                         RolloutEndpoints{}, kHostNetns);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(RefusalOf(out.status()), Refusal::kMalformed);
  EXPECT_THAT(out.status().message(), HasSubstr("min_ttl_seconds 30"));
}

TEST(CompileDnsFiltered, WildcardsAreRefusedWhereNothingLearnsAddresses) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, SystemResolvers());
  struct Bad {
    const char* phase;
    const char* message;
  };
  for (
      const Bad& b : {
          Bad{R"(allow { host: "*.tool.test" port: 443 } dns { mode: NONE })",
              "a wildcard needs dns { mode: FILTERED }"},
          Bad{R"(allow { host: "*.tool.test" port: 443 } dns { mode: SYSTEM })",
              "a wildcard needs dns { mode: FILTERED }"},
          Bad{R"(allow { host: "*" port: 443 } dns { mode: FILTERED })",
              "allow \"*\""},
          Bad{R"(allow { host: "a.*.test" port: 443 } dns { mode: FILTERED })",
              "allow \"a.*.test\""},
          Bad{R"(allow { host: "*.tool.test" } dns { mode: FILTERED })",
              "has no port"},
          Bad{R"(model: "http://*.model.test" dns { mode: FILTERED })",
              "model \"http://*.model.test\""},
      }) {
    absl::StatusOr<CompiledPolicy> out = compiler.Compile(
        Parse(absl::StrCat(R"(phase { name: "a" network_access: MODEL_ONLY
                              model: "http://10.0.0.5" )",
                           b.phase, " }")),
        RolloutEndpoints{}, kHostNetns);
    ASSERT_FALSE(out.ok()) << b.phase;
    EXPECT_EQ(RefusalOf(out.status()), Refusal::kMalformed) << b.phase;
    EXPECT_THAT(out.status().message(), HasSubstr(b.message)) << b.phase;
  }
}

// Tool hosts take wildcards as allow hosts do (issue 14, item 4): a name
// rule for the URL's port, no address rule, and `check` shows it.
TEST(CompileDnsFiltered, ToolWildcardsBecomeNameRulesOnly) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, SystemResolvers());
  absl::StatusOr<CompiledPolicy> out = compiler.Compile(
      Parse(R"(phase { name: "a" network_access: MODEL_AND_TOOLS
                       model: "http://10.0.0.5"
                       tool { name: "cdn" url: "https://*.CDN.Tool.Test.:8443/mcp"
                              required: true }
                       tool { url: "http://*.x.test/" }
                       dns { mode: FILTERED resolver: "127.0.0.1" } }
               phase { name: "m" network_access: MODEL_ONLY
                       model: "http://10.0.0.5"
                       tool { name: "cdn" url: "https://*.cdn.tool.test" }
                       dns { mode: FILTERED resolver: "127.0.0.1" } })"),
      RolloutEndpoints{}, kHostNetns);
  ASSERT_TRUE(out.ok()) << out.status();
  const CompiledPhase& p = out->phases[0];
  EXPECT_THAT(Lines(p), ElementsAre("tcp 10.0.0.5:80 10.0.0.5"));
  EXPECT_THAT(NameLines(p),
              ElementsAre("*.cdn.tool.test tcp:8443-8443 tool:cdn",
                          "*.x.test tcp:80-80 tool"));
  EXPECT_THAT(p.dropped, IsEmpty());
  // model_only drops an optional wildcard tool like any other.
  ASSERT_EQ(out->phases[1].dropped.size(), 1u);
  EXPECT_EQ(out->phases[1].dropped[0].reason,
            "model_only drops optional tool grants");
  EXPECT_THAT(NameLines(out->phases[1]), IsEmpty());
  const std::string text = FormatCompiledPolicyText(*out);
  EXPECT_THAT(text, HasSubstr("name  *.cdn.tool.test"));
  EXPECT_THAT(text, HasSubstr("tool:cdn"));
}

TEST(CompileDnsFiltered, ToolWildcardsAreRefusedAsAllowWildcardsAre) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, SystemResolvers());
  struct Bad {
    const char* phase;
    const char* message;
  };
  for (
      const Bad& b : {
          Bad{R"(tool { url: "https://*.tool.test" } dns { mode: NONE })",
              "tool \"https://*.tool.test\": a wildcard needs dns { mode: "
              "FILTERED }"},
          Bad{R"(tool { name: "t" url: "https://*.tool.test" }
                 dns { mode: SYSTEM })",
              "tool \"t\" (https://*.tool.test): a wildcard needs dns"},
          Bad{R"(tool { url: "https://*/" } dns { mode: FILTERED })",
              "host \"*\" matches every name"},
          Bad{R"(tool { url: "https://*.:443/" } dns { mode: FILTERED })",
              "matches every name"},
          Bad{R"(tool { url: "https://a.*.test/" } dns { mode: FILTERED })",
              "host \"a.*.test\" has a wildcard"},
          // A URL always names a port (its own or the scheme's); port 0,
          // the "no port" of a URL, is refused.
          Bad{R"(tool { url: "https://*.tool.test:0/" } dns { mode: FILTERED })",
              "port \"0\" is not in 1..65535"},
          Bad{R"(dns { mode: FILTERED })",  // the model below is a wildcard
              "model \"https://*.model.test/v1\": host \"*.model.test\" is a "
              "wildcard; this URL must name one host"},
      }) {
    const bool model_wildcard = absl::StrContains(b.message, "model");
    absl::StatusOr<CompiledPolicy> out = compiler.Compile(
        Parse(absl::StrCat(
            R"(phase { name: "a" network_access: MODEL_AND_TOOLS model: ")",
            model_wildcard ? "https://*.model.test/v1" : "http://10.0.0.5",
            "\" ", b.phase, " }")),
        RolloutEndpoints{}, kHostNetns);
    ASSERT_FALSE(out.ok()) << b.phase;
    EXPECT_EQ(RefusalOf(out.status()), Refusal::kMalformed) << b.phase;
    EXPECT_THAT(out.status().message(), HasSubstr(b.message)) << b.phase;
  }
}

TEST(CompileDnsFiltered, APrivateNetworkNamespaceIsFilteredToo) {
  // The filter listens in that namespace (the lifecycle's business); the
  // compiled phase is the same, and opens no resolver.
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, SystemResolvers());
  absl::StatusOr<CompiledPolicy> out =
      compiler.Compile(Parse(R"(phase { name: "a" network_access: MODEL_ONLY
                       model: "http://10.0.0.5" dns { mode: FILTERED } })"),
                       RolloutEndpoints{}, kOwnNetns);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->phases[0].dns_filtered);
  for (const Rule& r : out->phases[0].rules) {
    EXPECT_NE(r.source, RuleSource::kDns) << r.dest.ToString();
  }
}

TEST(CompileDnsFiltered, InheritPhasesCannotBeFiltered) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, SystemResolvers());
  absl::StatusOr<CompiledPolicy> out =
      compiler.Compile(Parse(R"(phase { name: "a" network_access: INHERIT
                       dns { mode: FILTERED } })"),
                       RolloutEndpoints{}, kHostNetns);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(RefusalOf(out.status()), Refusal::kMalformed);
  EXPECT_THAT(out.status().message(), HasSubstr("inherit phase"));
  // TTL limits without the filter are a mistake, not ignored.
  out = compiler.Compile(Parse(R"(phase { name: "a" network_access: MODEL_ONLY
                       model: "http://10.0.0.5"
                       dns { mode: NONE grace_seconds: 5 } })"),
                         RolloutEndpoints{}, kHostNetns);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("dns.grace_seconds 5 is given, but it applies only "
                        "with mode: FILTERED"));
}

TEST(ContentHash, DependsOnTheEffectivePolicyOnly) {
  FakeResolver resolver;
  PolicyCompiler compiler(&resolver, SystemResolvers());
  // The same policy written two ways hashes the same.
  absl::StatusOr<CompiledPolicy> a = compiler.Compile(
      Parse(R"(name: "x" phase { name: "a" network_access: INHERIT })"),
      RolloutEndpoints{}, kHostNetns);
  absl::StatusOr<CompiledPolicy> b = compiler.Compile(
      Parse("# a comment\nphase {\n network_access: INHERIT\n name: \"a\"\n}\n"
            "name: \"x\""),
      RolloutEndpoints{}, kHostNetns);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->content_hash, b->content_hash);
  EXPECT_EQ(a->content_hash.size(), 64u);
  // An endpoint from the command line is part of the effective policy.
  absl::StatusOr<CompiledPolicy> c = compiler.Compile(
      Parse(R"(name: "x" phase { name: "a" network_access: INHERIT })"),
      RolloutEndpoints{.model = {"http://10.0.0.5"}}, kHostNetns);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->content_hash, c->content_hash);
}

}  // namespace
}  // namespace sandfence

namespace sandfence {
namespace {

// Unix sockets (issue 21): CHECKED unless a restricted phase says otherwise.
absl::StatusOr<CompiledPolicy> CompileUnix(const std::string& phases,
                                           RolloutEndpoints endpoints = {}) {
  FakeResolver resolver;
  AddFixedAnswers(&resolver);
  PolicyCompiler compiler(&resolver, SystemResolvers());
  return compiler.Compile(Parse(phases), endpoints, kHostNetns);
}

TEST(CompileUnix, RestrictedPhasesCheckByDefaultAndInheritDoesNot) {
  absl::StatusOr<CompiledPolicy> out = CompileUnix(
      R"(phase { name: "a" network_access: MODEL_ONLY dns { mode: NONE }
                 model: "http://10.0.0.5" }
         phase { name: "b" network_access: INHERIT })");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->phases[0].unix_checked);
  EXPECT_FALSE(out->phases[0].unix_unchecked);
  EXPECT_TRUE(out->phases[0].unix_names.empty());
  EXPECT_FALSE(out->phases[1].unix_checked);
  EXPECT_FALSE(out->phases[1].unix_unchecked);
}

TEST(CompileUnix, ListedNamesAndUnchecked) {
  absl::StatusOr<CompiledPolicy> out = CompileUnix(
      R"(phase { name: "a" network_access: MODEL_ONLY dns { mode: NONE }
                 model: "http://10.0.0.5"
                 unix { allow: "/run/model.sock" allow: "@proxy"
                        allow: "/run/model.sock" } }
         phase { name: "b" network_access: MODEL_ONLY dns { mode: NONE }
                 model: "http://10.0.0.5" unix { mode: UNCHECKED } })");
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->phases[0].unix_names.size(), 2u);  // the duplicate once
  EXPECT_EQ(out->phases[0].unix_names[0].ToString(), "/run/model.sock");
  EXPECT_EQ(out->phases[0].unix_names[1].ToString(), "@proxy");
  EXPECT_TRUE(out->phases[0].unix_names[1].abstract);
  EXPECT_FALSE(out->phases[1].unix_checked);
  EXPECT_TRUE(out->phases[1].unix_unchecked);
  const std::string text = FormatCompiledPolicyText(*out);
  EXPECT_THAT(text, HasSubstr("a  unix  /run/model.sock"));
  EXPECT_THAT(text, HasSubstr("a  unix  @proxy"));
  EXPECT_THAT(text, HasSubstr("b  unix  UNCHECKED"));
}

TEST(CompileUnix, BadUnixBlocksAreMalformedNamingTheValue) {
  struct Row {
    const char* phase;
    const char* message_part;
  };
  for (const Row& row : std::vector<Row>{
           {R"(network_access: MODEL_ONLY unix { allow: "run/x.sock" })",
            "\"run/x.sock\": a Unix socket name is an absolute path"},
           {R"(network_access: MODEL_ONLY unix { allow: "@" })",
            "at least one byte after the @"},
           {R"(network_access: MODEL_ONLY unix { allow: "/run//x.sock" })",
            "as processes connect to it"},
           {R"(network_access: MODEL_ONLY unix { allow: "/run/x/" })",
            "no trailing"},
           {R"(network_access: MODEL_ONLY unix { mode: UNCHECKED
                                                 allow: "/run/x.sock" })",
            "with mode UNCHECKED"},
           {R"(network_access: INHERIT unix { allow: "/run/x.sock" })",
            "unix is given on an inherit phase"},
       }) {
    absl::StatusOr<CompiledPolicy> out = CompileUnix(absl::StrCat(
        R"(phase { name: "a" dns { mode: NONE } model: "http://10.0.0.5" )",
        row.phase, " }"));
    ASSERT_FALSE(out.ok()) << row.phase;
    EXPECT_EQ(RefusalOf(out.status()), Refusal::kMalformed) << row.phase;
    EXPECT_THAT(std::string(out.status().message()),
                HasSubstr(row.message_part))
        << row.phase;
  }
  absl::StatusOr<CompiledPolicy> long_name = CompileUnix(absl::StrCat(
      R"(phase { name: "a" network_access: MODEL_ONLY dns { mode: NONE }
                 unix { allow: "/)",
      std::string(107, 'x'), R"(" } })"));
  ASSERT_FALSE(long_name.ok());
  EXPECT_THAT(std::string(long_name.status().message()),
              HasSubstr("108 bytes; a sockaddr_un holds at most 107"));
}

TEST(CompileUnix, CommandLineOverlayAppliesToRestrictedPhasesOnly) {
  RolloutEndpoints e;
  e.model = {"http://10.0.0.5"};
  e.unix_mode = v1::Unix::CHECKED;
  e.unix_allow = {"@from-flags"};
  absl::StatusOr<CompiledPolicy> out = CompileUnix(
      R"(phase { name: "a" network_access: MODEL_ONLY dns { mode: NONE } }
         phase { name: "b" network_access: INHERIT })",
      e);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->phases[0].unix_names.size(), 1u);
  EXPECT_EQ(out->phases[0].unix_names[0].ToString(), "@from-flags");
  EXPECT_TRUE(out->phases[1].unix_names.empty());
}

TEST(UnixName, AbstractNamesShowTheirBytesEscaped) {
  UnixName n{std::string("a\0b\\\x7f", 5), true};
  EXPECT_EQ(n.ToString(), "@a\\x00b\\\\\\x7f");
}

}  // namespace
}  // namespace sandfence
