// Name rules of a phase: exact names, "*.suffix" wildcards, normalization
// shared with the compile module, grants as the union of matching rules.
#include "dns/name_rules.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandfence::dns {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const NameGrant kHttps{L4::kTcp, 443, 443};
const NameGrant kModel{L4::kTcp, 8000, 8000};
const NameGrant kDnsUdp{L4::kUdp, 53, 53};

PhaseNameRules MustBuild(const std::vector<NameRule>& rules) {
  absl::StatusOr<PhaseNameRules> r = PhaseNameRules::Build(rules);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : PhaseNameRules();
}

struct MatchCase {
  const char* title;
  const char* query;  // as the DNS parser gives it
  std::vector<NameGrant> grants;
};

TEST(PhaseNameRules, MatchesExactNamesAndWildcardsBelowTheSuffix) {
  PhaseNameRules rules = MustBuild({
      {"Model.Internal.", {kModel}, "model"},
      {"*.Tool.Test", {kHttps}, "tool:search"},
      {"*.githubusercontent.com", {kHttps}, "allow"},
      {"*.api.tool.test", {kDnsUdp}, "allow"},
      {"exact.tool.test", {kModel}, "allow"},
      {"*.bücher.example", {kHttps}, "allow"},
  });
  const std::vector<MatchCase> cases = {
      {"the model host", "model.internal", {kModel}},
      {"a subdomain of an exact name is not allowed", "x.model.internal", {}},
      {"the wildcard's one-label child", "a.tool.test", {kHttps}},
      {"the wildcard's deeper descendant", "a.b.tool.test", {kHttps}},
      {"the wildcard's apex is not allowed", "tool.test", {}},
      {"a name that only ends in the suffix's text", "eviltool.test", {}},
      {"nested wildcards add up", "x.api.tool.test", {kDnsUdp, kHttps}},
      {"the inner apex matches only the outer wildcard",
       "api.tool.test",
       {kHttps}},
      {"an exact rule and a wildcard add up",
       "exact.tool.test",
       {kModel, kHttps}},
      {"raw.githubusercontent.com", "raw.githubusercontent.com", {kHttps}},
      {"an IDN wildcard matches its punycode",
       "a.xn--bcher-kva.example",
       {kHttps}},
      {"an unrelated name", "secret.attacker.example", {}},
      {"the root", "", {}},
      {"an escaped dot cannot fake a label boundary", "a\\.tool.test", {}},
      {"a binary byte", "a\\001.tool.test", {}},
  };
  for (const MatchCase& c : cases) {
    NameMatch m = rules.Match(c.query);
    std::vector<NameGrant> want = c.grants;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(m.grants, want) << c.title;
    EXPECT_EQ(rules.Allows(c.query), !c.grants.empty()) << c.title;
  }
  EXPECT_THAT(rules.Match("x.api.tool.test").patterns,
              ElementsAre("*.api.tool.test", "*.tool.test"));
}

TEST(PhaseNameRules, AnEmptyPhaseAllowsNothing) {
  PhaseNameRules none;
  EXPECT_FALSE(none.Allows("model.internal"));
  EXPECT_EQ(none.size(), 0u);
}

struct BadRule {
  const char* title;
  NameRule rule;
  const char* error_part;
};

TEST(PhaseNameRules, RefusesBadRulesNamingThem) {
  const std::vector<BadRule> cases = {
      {"a bare star", {"*", {kHttps}, "allow"}, "matches every name"},
      {"a star in the middle", {"a.*.test", {kHttps}, "allow"}, "wildcard"},
      {"a partial-label star", {"*x.test", {kHttps}, "allow"}, "wildcard"},
      {"a wildcard with no port",
       {"*.tool.test", {}, "allow"},
       "a wildcard needs a port"},
      {"a name with no port", {"a.test", {}, "allow"}, "opens no port"},
      {"port zero", {"a.test", {{L4::kTcp, 0, 0}}, "allow"}, "not in 1..65535"},
      {"a reversed range",
       {"a.test", {{L4::kTcp, 90, 80}}, "allow"},
       "not in 1..65535"},
      {"two trailing dots", {"a.test..", {kHttps}, "allow"}, "two dots"},
  };
  for (const BadRule& c : cases) {
    absl::StatusOr<PhaseNameRules> r = PhaseNameRules::Build({c.rule});
    ASSERT_FALSE(r.ok()) << c.title;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.title;
    EXPECT_THAT(r.status().message(), HasSubstr(c.error_part)) << c.title;
    EXPECT_THAT(r.status().message(), HasSubstr(c.rule.pattern)) << c.title;
  }
}

TEST(PhaseNameRules, ManyRulesStillMatch) {
  std::vector<NameRule> rules;
  for (int i = 0; i < 20000; ++i) {
    rules.push_back({"h" + std::to_string(i) + ".test", {kHttps}, "allow"});
    rules.push_back({"*.w" + std::to_string(i) + ".test", {kModel}, "allow"});
  }
  PhaseNameRules r = MustBuild(rules);
  EXPECT_EQ(r.size(), 40000u);
  EXPECT_TRUE(r.Allows("h19999.test"));
  EXPECT_TRUE(r.Allows("a.b.w12345.test"));
  EXPECT_FALSE(r.Allows("w12345.test"));
  EXPECT_FALSE(r.Allows("h20000.test"));
}

}  // namespace
}  // namespace sandfence::dns
