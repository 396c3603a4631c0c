// The egress decision logic, run in the kernel through the raw_tp harness
// (BPF_PROG_TEST_RUN cannot run cgroup sock_addr programs). The harness
// calls the same inline functions as the hooks, against maps programmed by
// the same BuildRuleEntries the controller uses.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "common/bpf_handles.h"
#include "egress/learned_entries.h"
#include "egress/rule_entries.h"
#include "egress/egress_abi.h"
#include "sf_egress_harness.skel.h"
#include "support/test_env.h"
#include "tests/egress/egress_fixture.h"

namespace sandfence::testing {
namespace {

constexpr uint32_t kGen = 5;

template <typename K, typename V>
void Write(bpf_map* map, const std::vector<MapEntry<K, V>>& entries) {
  for (const auto& e : entries) {
    ASSERT_EQ(bpf_map_update_elem(bpf_map__fd(map), &e.key, &e.value, BPF_ANY),
              0);
  }
}

struct Query {
  const char* name;
  const char* addr;  // as the hook sees it (IPv6 may be v4-mapped)
  uint8_t protocol;
  uint16_t port;
  bool own_netns;
  uint8_t verdict;
  uint8_t reason;
  uint32_t rule_id;
};

class EgressVerdictTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    skel_.reset(sf_egress_harness::open_and_load());
    ASSERT_NE(skel_, nullptr) << "harness failed to load: " << strerror(errno);
  }

  void Program(const CompiledPhase& phase) {
    auto e = BuildRuleEntries(phase, kGen);
    ASSERT_TRUE(e.ok()) << e.status();
    Write(skel_->maps.sf_exact4, e->exact4);
    Write(skel_->maps.sf_exact6, e->exact6);
    Write(skel_->maps.sf_cidr4, e->cidr4);
    Write(skel_->maps.sf_cidr6, e->cidr6);
    flags_ = SandboxFlags(phase);
  }

  void Check(const Query& q, uint32_t generation = kGen) {
    auto& in = skel_->bss->sf_in;
    in = {};
    in.sandbox.generation = generation;
    in.sandbox.flags = flags_;
    in.protocol = q.protocol;
    in.port = q.port;
    in.own_netns = q.own_netns;
    auto ip = IpAddress::Parse(q.addr);
    ASSERT_TRUE(ip) << q.name;
    in.family = ip->family();
    std::memcpy(in.addr, ip->bytes(), ip->is_v4() ? 4 : 16);
    LIBBPF_OPTS(bpf_test_run_opts, opts);
    ASSERT_EQ(bpf_prog_test_run_opts(
                  bpf_program__fd(skel_->progs.sf_harness), &opts),
              0);
    const auto& out = skel_->bss->sf_out;
    EXPECT_EQ(out.verdict, q.verdict) << q.name;
    EXPECT_EQ(out.reason, q.reason) << q.name;
    EXPECT_EQ(out.rule_id, q.rule_id) << q.name;
  }

  Skeleton<sf_egress_harness> skel_;
  uint32_t flags_ = 0;
};

constexpr uint8_t kTcp = IPPROTO_TCP, kUdp = IPPROTO_UDP;
constexpr uint8_t A = SF_VERDICT_ALLOW, D = SF_VERDICT_DENY;

TEST_F(EgressVerdictTest, Table) {
  Program(Phase(v1::MODEL_AND_TOOLS,
                {TcpRule("10.1.2.3", 8000),              // 0
                 TcpRule("10.0.0.0/8", 443),             // 1
                 TcpRule("10.9.9.9", 9000, 9010),        // 2
                 UdpRule("192.0.2.53", 53),              // 3
                 TcpRule("2001:db8::1", 443),            // 4
                 TcpRule("2001:db8:1::/48", 80, 81)}));  // 5
  const Query table[] = {
      {"exact host and port", "10.1.2.3", kTcp, 8000, false, A,
       SF_REASON_RULE, 0},
      {"exact host, other port", "10.1.2.3", kTcp, 8001, false, D,
       SF_REASON_NO_RULE, SF_NO_RULE},
      {"exact host, UDP instead of TCP", "10.1.2.3", kUdp, 8000, false, D,
       SF_REASON_NO_RULE, SF_NO_RULE},
      {"host inside an allowed CIDR", "10.200.0.1", kTcp, 443, false, A,
       SF_REASON_RULE, 1},
      {"exact host also gets its CIDR's port", "10.1.2.3", kTcp, 443, false,
       A, SF_REASON_RULE, 1},
      {"port range, low end", "10.9.9.9", kTcp, 9000, false, A,
       SF_REASON_RULE, 2},
      {"port range, high end", "10.9.9.9", kTcp, 9010, false, A,
       SF_REASON_RULE, 2},
      {"port range, one past", "10.9.9.9", kTcp, 9011, false, D,
       SF_REASON_NO_RULE, SF_NO_RULE},
      {"range host still gets the covering /8 port", "10.9.9.9", kTcp, 443,
       false, A, SF_REASON_RULE, 1},
      {"outside every CIDR", "11.0.0.1", kTcp, 443, false, D,
       SF_REASON_NO_RULE, SF_NO_RULE},
      {"UDP DNS rule", "192.0.2.53", kUdp, 53, false, A, SF_REASON_RULE, 3},
      {"IPv4-mapped IPv6 to an allowed IPv4", "::ffff:10.1.2.3", kTcp, 8000,
       false, A, SF_REASON_RULE, 0},
      {"IPv4-mapped IPv6 to a forbidden IPv4", "::ffff:11.0.0.1", kTcp, 443,
       false, D, SF_REASON_NO_RULE, SF_NO_RULE},
      {"IPv6 exact", "2001:db8::1", kTcp, 443, false, A, SF_REASON_RULE, 4},
      {"IPv6 exact, other port", "2001:db8::1", kTcp, 80, false, D,
       SF_REASON_NO_RULE, SF_NO_RULE},
      {"IPv6 CIDR range", "2001:db8:1:2::3", kTcp, 81, false, A,
       SF_REASON_RULE, 5},
      {"IPv6 outside the CIDR", "2001:db8:2::3", kTcp, 81, false, D,
       SF_REASON_NO_RULE, SF_NO_RULE},
      {"ICMP is never allowed in a restricted sandbox", "10.1.2.3",
       IPPROTO_ICMP, 0, false, D, SF_REASON_PROTOCOL, SF_NO_RULE},
      {"host loopback without a rule", "127.0.0.1", kTcp, 80, false, D,
       SF_REASON_NO_RULE, SF_NO_RULE},
      {"own netns loopback is free", "127.0.0.1", kTcp, 80, true, A,
       SF_REASON_OWN_LOOPBACK, SF_NO_RULE},
      {"own netns IPv6 loopback is free", "::1", kUdp, 53, true, A,
       SF_REASON_OWN_LOOPBACK, SF_NO_RULE},
      {"own netns, 0.0.0.0 is the local host", "0.0.0.0", kTcp, 80, true, A,
       SF_REASON_OWN_LOOPBACK, SF_NO_RULE},
      {"own netns, other hosts still need rules", "11.0.0.1", kTcp, 443,
       true, D, SF_REASON_NO_RULE, SF_NO_RULE},
  };
  for (const Query& q : table) Check(q);
}

TEST_F(EgressVerdictTest, AnotherGenerationsRulesNeverApply) {
  Program(Phase(v1::MODEL_ONLY, {TcpRule("10.1.2.3", 8000)}));
  Check({"rules of generation 5 seen from 6", "10.1.2.3", kTcp, 8000, false,
         D, SF_REASON_NO_RULE, SF_NO_RULE},
        kGen + 1);
}

TEST_F(EgressVerdictTest, InheritAllowsEverything) {
  Program(Phase(v1::INHERIT, {}));
  Check({"inherit", "11.0.0.1", kTcp, 443, false, A, SF_REASON_UNRESTRICTED,
         SF_NO_RULE});
  Check({"inherit, ICMP", "11.0.0.1", IPPROTO_ICMP, 0, false, A,
         SF_REASON_UNRESTRICTED, SF_NO_RULE});
}

TEST_F(EgressVerdictTest, DenyAllWithNoRules) {
  Program(Phase(v1::MODEL_ONLY, {}));
  Check({"no rules at all", "10.1.2.3", kTcp, 8000, false, D,
         SF_REASON_NO_RULE, SF_NO_RULE});
}

TEST_F(EgressVerdictTest, RulesOnlyLoopbackInOwnNetns) {
  Program(Phase(v1::MODEL_ONLY, {TcpRule("127.0.0.1", 8000)},
                v1::LOOPBACK_RULES_ONLY));
  Check({"own netns, rules only, no rule", "127.0.0.1", kTcp, 80, true, D,
         SF_REASON_NO_RULE, SF_NO_RULE});
  Check({"own netns, rules only, rule", "127.0.0.1", kTcp, 8000, true, A,
         SF_REASON_RULE, 0});
}

// The filters' range is closed before any rule or loopback freedom: a
// policy that allows all of loopback, or a private netns's own loopback,
// does not open it.
TEST_F(EgressVerdictTest, TheDnsFilterRangeIsClosedWhateverTheRules) {
  Program(Phase(v1::MODEL_ONLY, {TcpRule("127.0.0.0/8", 1, 65535)}));
  Check({"a rule for all of loopback", "127.83.0.1", kTcp, 5353, false, D,
         SF_REASON_DNS_FILTER_RANGE, SF_NO_RULE});
  Check({"IPv4-mapped", "::ffff:127.83.200.1", kTcp, 53, false, D,
         SF_REASON_DNS_FILTER_RANGE, SF_NO_RULE});
  Check({"own netns loopback", "127.83.0.1", kTcp, 53, true, D,
         SF_REASON_DNS_FILTER_RANGE, SF_NO_RULE});
  Check({"just outside the range", "127.84.0.1", kTcp, 53, false, A,
         SF_REASON_RULE, 0});
}

TEST_F(EgressVerdictTest, LearnedAddressesOfTheGenerationUntilTheyExpire) {
  CompiledPhase phase = Phase(v1::MODEL_ONLY, {TcpRule("10.1.2.3", 8000)});
  phase.dns_filtered = true;
  Program(phase);
  auto learn = [&](const char* addr, L4 proto, uint16_t first, uint16_t last,
                   uint32_t rule_id, uint64_t expires, uint32_t gen = kGen) {
    LearnedEntry e{
        *IpAddress::Parse(addr), proto, {{first, last, rule_id}}, expires};
    auto v = MergeLearned(nullptr, e);
    ASSERT_TRUE(v.ok()) << v.status();
    const LearnedKey key = LearnedKeyOf(gen, e);
    if (key.is_v4()) {
      const sf_learned4_key k = key.Key4();
      ASSERT_EQ(bpf_map_update_elem(bpf_map__fd(skel_->maps.sf_learned4), &k,
                                    &*v, BPF_ANY),
                0);
    } else {
      const sf_learned6_key k = key.Key6();
      ASSERT_EQ(bpf_map_update_elem(bpf_map__fd(skel_->maps.sf_learned6), &k,
                                    &*v, BPF_ANY),
                0);
    }
  };
  constexpr uint64_t kNever = ~0ull;
  learn("10.7.7.7", L4::kTcp, 443, 443, 11, kNever);
  learn("2001:db8::7", L4::kUdp, 5000, 5100, 12, kNever);
  learn("10.8.8.8", L4::kTcp, 443, 443, 13, 1);  // expired at boot + 1 ns
  learn("10.9.9.9", L4::kTcp, 443, 443, 14, kNever, kGen + 1);
  const Query table[] = {
      {"a rule still wins", "10.1.2.3", kTcp, 8000, false, A, SF_REASON_RULE,
       0},
      {"learned address and port", "10.7.7.7", kTcp, 443, false, A,
       SF_REASON_LEARNED, 11},
      {"learned, IPv4-mapped", "::ffff:10.7.7.7", kTcp, 443, false, A,
       SF_REASON_LEARNED, 11},
      {"learned address, other port", "10.7.7.7", kTcp, 444, false, D,
       SF_REASON_NO_RULE, SF_NO_RULE},
      {"learned address, other protocol", "10.7.7.7", kUdp, 443, false, D,
       SF_REASON_NO_RULE, SF_NO_RULE},
      {"learned IPv6 range", "2001:db8::7", kUdp, 5100, false, A,
       SF_REASON_LEARNED, 12},
      {"expired is absent", "10.8.8.8", kTcp, 443, false, D, SF_REASON_NO_RULE,
       SF_NO_RULE},
      {"another generation's", "10.9.9.9", kTcp, 443, false, D,
       SF_REASON_NO_RULE, SF_NO_RULE},
  };
  for (const Query& q : table) Check(q);
  // The same entries do nothing for a phase that does not filter DNS.
  flags_ &= ~SF_SB_DNS_FILTER;
  Check({"unfiltered phase ignores learned", "10.7.7.7", kTcp, 443, false, D,
         SF_REASON_NO_RULE, SF_NO_RULE});
}

}  // namespace
}  // namespace sandfence::testing
