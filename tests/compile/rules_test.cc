// The order and merging of rules: equal policies give equal rule lists.
#include "compile/rules.h"

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

}  // namespace
}  // namespace sandfence
