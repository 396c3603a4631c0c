// Compiled rules -> kernel map entries, without a kernel.
#include "egress/rule_entries.h"

#include <arpa/inet.h>

#include "gtest/gtest.h"
#include "tests/egress/egress_fixture.h"

namespace sandfence::testing {
namespace {

// A path's key is its bytes (len 0: it ends at its NUL, as the hook reads
// it whatever address length the caller gave); an abstract name's is its
// exact bytes and length. Only a phase that checks Unix sockets has them.
TEST(RuleEntries, UnixNamesAreKeyedAsTheHookReadsThem) {
  CompiledPhase p = Phase(v1::MODEL_ONLY, {});
  p.unix_checked = true;
  p.unix_names = {UnixName{"/run/m.sock", false},
                  UnixName{std::string("a\0b", 3), true}};
  auto e = BuildRuleEntries(p, 7);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->unix_names.size(), 2u);
  const sf_unix_key& path = e->unix_names[0].key;
  EXPECT_EQ(path.scope, 7u);
  EXPECT_EQ(path.len, 0u);
  EXPECT_EQ(path.abstract, 0u);
  EXPECT_EQ(std::string(path.name), "/run/m.sock");
  EXPECT_EQ(path.name[11], 0);
  EXPECT_EQ(e->unix_names[0].value.rule_id, 0u);
  const sf_unix_key& abs = e->unix_names[1].key;
  EXPECT_EQ(abs.len, 3u);
  EXPECT_EQ(abs.abstract, 1u);
  EXPECT_EQ(std::string(abs.name, 3), std::string("a\0b", 3));
  EXPECT_EQ(e->unix_names[1].value.rule_id, 1u);
  EXPECT_EQ(SandboxFlags(p) & SF_SB_UNIX_CHECKED, SF_SB_UNIX_CHECKED);

  p.unix_checked = false;
  p.unix_unchecked = true;
  e = BuildRuleEntries(p, 7);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->unix_names.empty());
  EXPECT_EQ(SandboxFlags(p) & SF_SB_UNIX_CHECKED, 0u);
}

TEST(RuleEntries, SinglePortOnAHostIsOneExactEntry) {
  auto e = BuildRuleEntries(Phase(v1::MODEL_ONLY, {TcpRule("10.1.2.3", 8000)}),
                            7);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->exact4.size(), 1u);
  EXPECT_TRUE(e->cidr4.empty());
  const auto& k = e->exact4[0].key;
  EXPECT_EQ(k.generation, 7u);
  EXPECT_EQ(k.protocol, IPPROTO_TCP);
  EXPECT_EQ(k.port, 8000);
  EXPECT_EQ(k.addr, inet_addr("10.1.2.3"));
  EXPECT_EQ(e->exact4[0].value.rule_id, 0u);
}

TEST(RuleEntries, PortRangeAndCidrGoToTheLpmTrie) {
  auto e = BuildRuleEntries(
      Phase(v1::MODEL_ONLY,
            {TcpRule("10.0.0.0/8", 443), TcpRule("10.1.2.3", 8000, 8100),
             UdpRule("fd00::/8", 53)}),
      1);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->exact4.empty());
  ASSERT_EQ(e->cidr4.size(), 2u);
  ASSERT_EQ(e->cidr6.size(), 1u);
  // The /32 entry carries its own range and the covering /8's port, since
  // an LPM lookup stops at the longest prefix.
  for (const auto& entry : e->cidr4) {
    if (entry.key.prefixlen == SF_LPM_FIXED_BITS + 32) {
      ASSERT_EQ(entry.value.nranges, 2u);
      EXPECT_EQ(entry.value.ranges[0].first, 443);
      EXPECT_EQ(entry.value.ranges[1].first, 8000);
      EXPECT_EQ(entry.value.ranges[1].last, 8100);
    } else {
      EXPECT_EQ(entry.key.prefixlen, SF_LPM_FIXED_BITS + 8u);
      ASSERT_EQ(entry.value.nranges, 1u);
    }
  }
  EXPECT_EQ(e->cidr6[0].key.prefixlen, SF_LPM_FIXED_BITS + 8u);
  EXPECT_EQ(e->cidr6[0].key.protocol, IPPROTO_UDP);
}

TEST(RuleEntries, OverlappingRangesCoalesce) {
  auto e = BuildRuleEntries(
      Phase(v1::MODEL_ONLY, {TcpRule("10.0.0.0/24", 100, 200),
                             TcpRule("10.0.0.0/24", 150, 300),
                             TcpRule("10.0.0.0/24", 301, 310)}),
      1);
  ASSERT_TRUE(e.ok());
  ASSERT_EQ(e->cidr4.size(), 1u);
  EXPECT_EQ(e->cidr4[0].value.nranges, 1u);
  EXPECT_EQ(e->cidr4[0].value.ranges[0].first, 100);
  EXPECT_EQ(e->cidr4[0].value.ranges[0].last, 310);
}

TEST(RuleEntries, TooManyRangesForOnePrefixIsRefused) {
  std::vector<Rule> rules;
  for (int i = 0; i <= SF_MAX_PORT_RANGES; ++i) {
    rules.push_back(TcpRule("10.0.0.0/24", 1000 + 10 * i, 1001 + 10 * i));
  }
  auto e = BuildRuleEntries(Phase(v1::MODEL_ONLY, rules), 1);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(e.status().message().find("10.0.0.0/24"), absl::string_view::npos)
      << e.status();
}

TEST(RuleEntries, GenerationKeysEveryEntry) {
  auto e = BuildRuleEntries(
      Phase(v1::MODEL_ONLY, {TcpRule("::1", 1), TcpRule("10.0.0.0/8", 2)}),
      42);
  ASSERT_TRUE(e.ok());
  for (const auto& x : e->exact6) EXPECT_EQ(x.key.generation, 42u);
  for (const auto& x : e->cidr4) EXPECT_EQ(x.key.generation, 42u);
}

TEST(SandboxFlags, FollowThePhase) {
  EXPECT_EQ(SandboxFlags(Phase(v1::INHERIT, {})) & SF_SB_RESTRICTED, 0u);
  EXPECT_NE(SandboxFlags(Phase(v1::MODEL_ONLY, {})) & SF_SB_RESTRICTED, 0u);
  EXPECT_NE(SandboxFlags(Phase(v1::MODEL_ONLY, {})) & SF_SB_OWN_LOOPBACK, 0u);
  EXPECT_EQ(SandboxFlags(Phase(v1::MODEL_ONLY, {}, v1::LOOPBACK_RULES_ONLY)) &
                SF_SB_OWN_LOOPBACK,
            0u);
}

}  // namespace
}  // namespace sandfence::testing
