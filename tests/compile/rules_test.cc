// The order and merging of rules: equal policies give equal rule lists.
#include "compile/rules.h"

#include <random>
#include <string>
#include <vector>

#include "compile/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandfence {
namespace {

using ::testing::ElementsAre;

Rule R(L4 p, const char* prefix, uint16_t first, uint16_t last,
       RuleSource source = RuleSource::kAllow, const char* origin = "o") {
  return Rule{p, *IpPrefix::Parse(prefix), first, last, source, origin};
}

std::vector<std::string> Show(const std::vector<Rule>& rules) {
  std::vector<std::string> out;
  for (const Rule& r : rules) {
    out.push_back(std::string(L4Name(r.protocol)) + " " + FormatDestination(r) +
                  " " + r.origin);
  }
  return out;
}

TEST(SortAndMergeRules, OrdersByProtocolFamilyAddressPrefixPort) {
  std::vector<Rule> rules = {
      R(L4::kUdp, "10.0.0.1", 53, 53), R(L4::kTcp, "fd00::1", 80, 80),
      R(L4::kTcp, "10.0.0.2", 80, 80), R(L4::kTcp, "10.0.0.1", 443, 443),
      R(L4::kTcp, "10.0.0.1", 80, 80), R(L4::kTcp, "9.0.0.0/8", 1, 1),
  };
  SortAndMergeRules(&rules);
  EXPECT_THAT(Show(rules),
              ElementsAre("tcp 9.0.0.0/8:1 o", "tcp 10.0.0.1:80 o",
                          "tcp 10.0.0.1:443 o", "tcp 10.0.0.2:80 o",
                          "tcp [fd00::1]:80 o", "udp 10.0.0.1:53 o"));
}

TEST(SortAndMergeRules, ExactDuplicatesKeepTheFirstSource) {
  std::vector<Rule> rules = {
      R(L4::kTcp, "10.0.0.1", 80, 80, RuleSource::kAllow, "allow"),
      R(L4::kTcp, "10.0.0.1", 80, 80, RuleSource::kModel, "model"),
      R(L4::kTcp, "10.0.0.1", 80, 80, RuleSource::kTool, "tool"),
  };
  SortAndMergeRules(&rules);
  EXPECT_THAT(Show(rules), ElementsAre("tcp 10.0.0.1:80 model"));
}

TEST(SortAndMergeRules, CoveredRulesGo) {
  std::vector<Rule> rules = {
      R(L4::kTcp, "10.1.2.3", 8000, 8000, RuleSource::kModel, "m"),
      R(L4::kTcp, "10.1.0.0/16", 8000, 8010, RuleSource::kAllow, "net"),
      R(L4::kUdp, "10.1.2.3", 8000, 8000, RuleSource::kAllow, "udp"),
      R(L4::kTcp, "10.1.2.3", 7999, 7999, RuleSource::kAllow, "outside"),
  };
  SortAndMergeRules(&rules);
  EXPECT_THAT(Show(rules), ElementsAre("tcp 10.1.0.0/16:8000-8010 net",
                                       "tcp 10.1.2.3:7999 outside",
                                       "udp 10.1.2.3:8000 udp"));
}

TEST(SortAndMergeRules, IPv4AndIPv6NeverCoverEachOther) {
  std::vector<Rule> rules = {R(L4::kTcp, "0.0.0.0/0", 80, 80),
                             R(L4::kTcp, "::/0", 80, 80),
                             R(L4::kTcp, "fd00::1", 80, 80)};
  SortAndMergeRules(&rules);
  EXPECT_THAT(Show(rules),
              ElementsAre("tcp 0.0.0.0/0:80 o", "tcp [::/0]:80 o"));
}

// The definition, pair by pair, as SortAndMergeRules was first written: a
// rule goes when another covers it and is not equal in effect, or is equal
// in effect and earlier in order.
std::vector<Rule> MergeByDefinition(std::vector<Rule> rules) {
  std::sort(rules.begin(), rules.end(), RuleLess);
  std::vector<Rule> kept;
  for (size_t i = 0; i < rules.size(); ++i) {
    bool covered = false;
    for (size_t j = 0; j < rules.size() && !covered; ++j) {
      if (j == i || !RuleCovers(rules[j], rules[i])) continue;
      covered = !RuleCovers(rules[i], rules[j]) || j < i;
    }
    if (!covered) kept.push_back(rules[i]);
  }
  return kept;
}

TEST(SortAndMergeRules, KeepsWhatTheDefinitionKeepsOnRandomPolicies) {
  // Few addresses, lengths and ports, so that blocks nest, ranges overlap
  // and duplicates of every kind occur.
  std::mt19937 rng(12);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  const char* v4[] = {"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24",
                      "10.1.2.3",   "10.1.2.4",    "10.2.0.0/16",
                      "0.0.0.0/0",  "10.1.2.2/31"};
  const char* v6[] = {"fd00::/8", "fd00::/64", "fd00::1",   "fd00::2",
                      "::/0",     "fd01::/16", "fd00::/127"};
  const RuleSource sources[] = {RuleSource::kModel, RuleSource::kTool,
                                RuleSource::kAllow, RuleSource::kDns};
  for (int round = 0; round < 300; ++round) {
    std::vector<Rule> rules;
    const int n = 1 + pick(40);
    for (int i = 0; i < n; ++i) {
      const uint16_t first = static_cast<uint16_t>(pick(6) * 10);
      const uint16_t last =
          static_cast<uint16_t>(first + (pick(3) == 0 ? 0 : pick(4) * 10));
      const char* prefix = pick(3) == 0 ? v6[pick(7)] : v4[pick(8)];
      rules.push_back(R(pick(2) ? L4::kTcp : L4::kUdp, prefix, first, last,
                        sources[pick(4)], pick(2) ? "a" : "b"));
    }
    std::vector<Rule> want = MergeByDefinition(rules);
    SortAndMergeRules(&rules);
    ASSERT_EQ(Show(rules), Show(want)) << "round " << round;
    ASSERT_EQ(rules, want) << "round " << round;
  }
}

}  // namespace
}  // namespace sandfence
