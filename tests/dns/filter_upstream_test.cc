// The DNS filter's upstream side and its limits, end to end on loopback:
// a changed answer, TC and TCP, a silent upstream, a flooding sandbox, the
// rate limit, an IPv6 listener. Upstreams: dnsmasq or a scripted server
// (fake_upstream.h).
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dns/fake_upstream.h"
#include "dns/filter_fixture.h"
#include "dns/filter_server.h"
#include "dns/wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/dns_server.h"
#include "support/host_probe.h"

namespace sandfence::dns {
namespace {

using ::sandfence::dns::testing::Addresses;
using ::sandfence::dns::testing::Alias;
using ::sandfence::dns::testing::Answers;
using ::sandfence::dns::testing::FakeUpstream;
using ::sandfence::dns::testing::Filter;
using ::sandfence::dns::testing::Ip;
using ::sandfence::dns::testing::kHttps;
using ::sandfence::dns::testing::kWait;
using ::sandfence::dns::testing::MustParse;
using ::sandfence::dns::testing::Policy;
using ::sandfence::dns::testing::Query;
using ::sandfence::dns::testing::Silent;
using ::sandfence::dns::testing::Tc;
using ::sandfence::dns::testing::TcpExchange;
using ::sandfence::dns::testing::To;
using ::sandfence::dns::testing::UdpAnswer;
using ::sandfence::dns::testing::UdpExchange;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

TEST(DnsFilterUpstream, ChangedUpstreamAnswerGivesTheNewAddress) {
  SANDFENCE_REQUIRE_DNSMASQ();
  absl::StatusOr<std::unique_ptr<TestDnsServer>> dns =
      TestDnsServer::Start({{"cdn.test", {"10.0.0.1"}}});
  ASSERT_TRUE(dns.ok()) << dns.status();
  const HostPort upstream = (*dns)->address();
  Filter filter(To(upstream));
  ASSERT_TRUE(filter.status().ok()) << filter.status();
  filter.server().SetPolicy(Filter::kSandbox1,
                            Policy({{"cdn.test", {kHttps}, "allow"}}));
  absl::StatusOr<UdpAnswer> a =
      UdpExchange(filter.udp(), Query("cdn.test", kTypeA), kWait);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(Addresses(MustParse(a->wire)),
              UnorderedElementsAre(Ip("10.0.0.1")));

  dns->reset();  // the CDN moves: a new server on the same port
  dns = TestDnsServer::Start({{"cdn.test", {"10.0.0.2"}}}, upstream.port);
  ASSERT_TRUE(dns.ok()) << dns.status();
  absl::StatusOr<UdpAnswer> b =
      UdpExchange(filter.udp(), Query("cdn.test", kTypeA), kWait);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(Addresses(MustParse(b->wire)),
              UnorderedElementsAre(Ip("10.0.0.2")));
  std::vector<LearnRequest> learned = filter.learned();
  ASSERT_EQ(learned.size(), 2u);
  EXPECT_EQ(learned[0].addresses.at(0).addr, Ip("10.0.0.1"));
  EXPECT_EQ(learned[1].addresses.at(0).addr, Ip("10.0.0.2"));
}

TEST(DnsFilterUpstream, TruncatedDnsmasqAnswerIsRetriedOverTcp) {
  SANDFENCE_REQUIRE_DNSMASQ();
  // 100 A records: ~1.6 KB, more than the 1232 bytes the filter offers
  // upstream over UDP, so dnsmasq truncates and the filter asks over TCP.
  std::vector<std::string> many;
  for (int i = 0; i < 100; ++i) many.push_back(absl::StrCat("10.9.0.", i + 1));
  absl::StatusOr<std::unique_ptr<TestDnsServer>> dns =
      TestDnsServer::Start({{"big.test", many}});
  ASSERT_TRUE(dns.ok()) << dns.status();
  Filter filter(To((*dns)->address()));
  ASSERT_TRUE(filter.status().ok()) << filter.status();
  filter.server().SetPolicy(Filter::kSandbox1,
                            Policy({{"big.test", {kHttps}, "allow"}}));
  absl::StatusOr<UdpAnswer> a =
      UdpExchange(filter.udp(), Query("big.test", kTypeA, 9, 4096), kWait);
  ASSERT_TRUE(a.ok()) << a.status();
  Message m = MustParse(a->wire);
  EXPECT_FALSE(m.header.tc());
  EXPECT_EQ(Addresses(m).size(), 100u) << (*dns)->log();
  ASSERT_EQ(filter.learned().size(), 1u);
  EXPECT_EQ(filter.learned()[0].addresses.size(), 100u);

  // A client without EDNS can take 512 bytes: it is told to retry over TCP
  // (the addresses are learned all the same), and over TCP it gets them.
  absl::StatusOr<UdpAnswer> small =
      UdpExchange(filter.udp(), Query("big.test", kTypeA, 10), kWait);
  ASSERT_TRUE(small.ok()) << small.status();
  Message s = MustParse(small->wire);
  EXPECT_TRUE(s.header.tc());
  EXPECT_LE(small->wire.size(), 512u);
  absl::StatusOr<std::string> t =
      TcpExchange(filter.tcp(), Query("big.test", kTypeA, 11), kWait);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Addresses(MustParse(*t)).size(), 100u);
}

TEST(DnsFilterUpstream, TcAnswerIsAskedAgainOverTcp) {
  absl::StatusOr<std::unique_ptr<FakeUpstream>> up =
      FakeUpstream::Start({{"tc.test", Tc({"10.3.3.3"})},
                           {"alias.test", Alias("edge.test", {"10.4.4.4"})}});
  ASSERT_TRUE(up.ok()) << up.status();
  Filter filter(To((*up)->address()));
  ASSERT_TRUE(filter.status().ok()) << filter.status();
  filter.server().SetPolicy(Filter::kSandbox1,
                            Policy({{"tc.test", {kHttps}, "allow"},
                                    {"alias.test", {kHttps}, "allow"}}));
  absl::StatusOr<UdpAnswer> a =
      UdpExchange(filter.udp(), Query("tc.test", kTypeA, 9, 1232), kWait);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(Addresses(MustParse(a->wire)),
              UnorderedElementsAre(Ip("10.3.3.3")));
  std::vector<testing::SeenQuery> seen = (*up)->seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_FALSE(seen[0].tcp);
  EXPECT_TRUE(seen[1].tcp);

  absl::StatusOr<UdpAnswer> b =
      UdpExchange(filter.udp(), Query("alias.test", kTypeA, 9, 1232), kWait);
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<LearnRequest> learned = filter.learned();
  ASSERT_EQ(learned.size(), 2u);
  EXPECT_THAT(learned[1].chain,
              ::testing::ElementsAre("alias.test", "edge.test"));
  EXPECT_EQ(learned[1].addresses.at(0).addr, Ip("10.4.4.4"));
}

TEST(DnsFilterUpstream, SilentUpstreamIsServfailInBoundedTime) {
  absl::StatusOr<std::unique_ptr<TestSilentDnsServer>> silent =
      TestSilentDnsServer::Start();
  ASSERT_TRUE(silent.ok()) << silent.status();
  ForwarderOptions f = To((*silent)->address());
  f.attempt_timeout = absl::Milliseconds(200);
  f.query_timeout = absl::Seconds(1);
  Filter filter(f);
  ASSERT_TRUE(filter.status().ok()) << filter.status();
  filter.server().SetPolicy(Filter::kSandbox1,
                            Policy({{"model.test", {kHttps}, "model"}}));
  for (bool tcp : {false, true}) {
    const std::string q = Query("model.test", kTypeA, 4, 1232);
    std::string wire;
    if (tcp) {
      absl::StatusOr<std::string> t = TcpExchange(filter.tcp(), q, kWait);
      ASSERT_TRUE(t.ok()) << t.status();
      wire = *t;
    } else {
      absl::StatusOr<UdpAnswer> u = UdpExchange(filter.udp(), q, kWait);
      ASSERT_TRUE(u.ok()) << u.status();
      wire = u->wire;
    }
    Message m = MustParse(wire);
    EXPECT_EQ(m.rcode(), static_cast<uint16_t>(Rcode::kServFail));
    std::vector<Ede> ede = EdeOptions(m);
    ASSERT_EQ(ede.size(), 1u);
    EXPECT_EQ(ede[0].code, EdeCode::kNoReachableAuthority);
  }
  EXPECT_TRUE(filter.learned().empty());
  std::vector<QueryOutcome> out = filter.outcomes(2);
  ASSERT_EQ(out.size(), 2u);
  for (const QueryOutcome& o : out) {
    EXPECT_EQ(o.verdict, Verdict::kUpstreamFailed);
  }
}

TEST(DnsFilterUpstream, FloodingSandboxDoesNotStarveAnother) {
  absl::StatusOr<std::unique_ptr<FakeUpstream>> up = FakeUpstream::Start(
      {{"slow.test", Silent()}, {"fast.test", Answers({"10.5.5.5"})}});
  ASSERT_TRUE(up.ok()) << up.status();
  ForwarderOptions f = To((*up)->address());
  f.max_in_flight_per_client = 16;
  f.max_in_flight = 64;
  f.attempt_timeout = absl::Seconds(5);
  f.query_timeout = absl::Seconds(5);
  Filter filter(f);
  ASSERT_TRUE(filter.status().ok()) << filter.status();
  auto rules = Policy(
      {{"slow.test", {kHttps}, "allow"}, {"fast.test", {kHttps}, "allow"}});
  filter.server().SetPolicy(Filter::kSandbox1, rules);
  filter.server().SetPolicy(Filter::kSandbox2, rules);

  // Sandbox 1 floods with queries the upstream never answers, in bursts
  // small enough for the sockets' buffers (what is measured is the filter's
  // limit, not the kernel's queue).
  constexpr int kFlood = 500;
  constexpr int kBurst = 50;
  UniqueFd flood(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in to = {};
  to.sin_family = AF_INET;
  to.sin_port = htons(filter.udp().port);
  to.sin_addr.s_addr = htonl(0x7f000001);
  int refused = 0;
  int other = 0;
  std::string buf(512, '\0');
  for (int sent = 0; sent < kFlood;) {
    for (int i = 0; i < kBurst; ++i, ++sent) {
      const std::string q =
          Query("slow.test", kTypeA, static_cast<uint16_t>(sent));
      ASSERT_GT(::sendto(flood.get(), q.data(), q.size(), 0,
                         reinterpret_cast<sockaddr*>(&to), sizeof(to)),
                0);
    }
    // Its excess is refused at once.
    for (;;) {
      pollfd p = {flood.get(), POLLIN, 0};
      if (::poll(&p, 1, 300) != 1) break;
      const ssize_t n = ::recv(flood.get(), buf.data(), buf.size(), 0);
      if (n < 12) break;
      if ((buf[3] & 0xf) == static_cast<int>(Rcode::kRefused)) {
        ++refused;
      } else {
        ++other;
      }
    }
  }
  EXPECT_EQ(refused, kFlood - 16);
  EXPECT_EQ(other, 0);

  // Sandbox 2 still gets its answer, while sandbox 1's 16 hang upstream.
  absl::StatusOr<UdpAnswer> a =
      UdpExchange(filter.udp2(), Query("fast.test", kTypeA, 1), kWait);
  ASSERT_TRUE(a.ok()) << a.status();
  Message m = MustParse(a->wire);
  EXPECT_EQ(m.rcode(), 0);
  EXPECT_THAT(Addresses(m), UnorderedElementsAre(Ip("10.5.5.5")));
  // And so does sandbox 1 once under its limit again? No: its 16 are still
  // waiting, so a further query of its own is refused too.
  absl::StatusOr<UdpAnswer> b =
      UdpExchange(filter.udp(), Query("fast.test", kTypeA, 2), kWait);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(MustParse(b->wire).rcode(), static_cast<uint16_t>(Rcode::kRefused));
}

TEST(DnsFilterLimits, AFloodOverTheRateIsDroppedAndOthersAreServed) {
  absl::StatusOr<std::unique_ptr<FakeUpstream>> up =
      FakeUpstream::Start({{"fast.test", Answers({"10.5.5.5"})}});
  ASSERT_TRUE(up.ok()) << up.status();
  Filter filter(To((*up)->address()), [](FilterServerOptions& o) {
    o.max_queries_per_second = 50;
    o.query_burst = 100;
  });
  ASSERT_TRUE(filter.status().ok()) << filter.status();
  auto rules = Policy({{"fast.test", {kHttps}, "allow"}});
  filter.server().SetPolicy(Filter::kSandbox1, rules);
  filter.server().SetPolicy(Filter::kSandbox2, rules);
  // 400 blocked names as fast as they go: about the burst gets answered.
  UniqueFd flood(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in to = {};
  to.sin_family = AF_INET;
  to.sin_port = htons(filter.udp().port);
  to.sin_addr.s_addr = htonl(0x7f000001);
  int answered = 0;
  std::string buf(512, '\0');
  const absl::Time start = absl::Now();
  for (int sent = 0; sent < 400;) {
    for (int i = 0; i < 50; ++i, ++sent) {
      const std::string q = Query(absl::StrCat("n", sent, ".attacker.test"),
                                  kTypeA, static_cast<uint16_t>(sent));
      ASSERT_GT(::sendto(flood.get(), q.data(), q.size(), 0,
                         reinterpret_cast<sockaddr*>(&to), sizeof(to)),
                0);
    }
    for (;;) {
      pollfd p = {flood.get(), POLLIN, 0};
      if (::poll(&p, 1, 100) != 1) break;
      if (::recv(flood.get(), buf.data(), buf.size(), 0) >= 12) ++answered;
    }
  }
  // The burst, plus at most what 50/s refilled while the flood ran.
  const double refill = absl::ToDoubleSeconds(absl::Now() - start) * 50;
  EXPECT_GE(answered, 100);
  EXPECT_LE(answered, 100 + static_cast<int>(refill) + 1);
  EXPECT_LT(answered, 400);
  absl::StatusOr<UdpAnswer> a =
      UdpExchange(filter.udp2(), Query("fast.test", kTypeA, 1), kWait);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(Addresses(MustParse(a->wire)),
              UnorderedElementsAre(Ip("10.5.5.5")));
  std::vector<QueryOutcome> out = filter.outcomes(401);
  ASSERT_EQ(out.size(), 401u);
  int limited = 0;
  for (const QueryOutcome& o : out) {
    if (o.verdict == Verdict::kRateLimited) {
      ++limited;
      EXPECT_FALSE(o.replied);
      EXPECT_EQ(o.sandbox, Filter::kSandbox1);
      EXPECT_EQ(o.name, "") << "a dropped query is not even parsed";
    }
  }
  EXPECT_EQ(limited + answered, 400);
}

TEST(DnsFilterUpstream, Ipv6ListenerRepliesFromItsAddress) {
  SANDFENCE_REQUIRE_HOST(::sandfence::testing::HostIpv6Loopback());
  absl::StatusOr<std::unique_ptr<FakeUpstream>> up =
      FakeUpstream::Start({{"v6.test", Answers({"fd00::6", "10.6.0.6"})}});
  ASSERT_TRUE(up.ok()) << up.status();
  Filter filter(To((*up)->address()));
  ASSERT_TRUE(filter.status().ok()) << filter.status();
  filter.server().SetPolicy(Filter::kSandbox1,
                            Policy({{"v6.test", {kHttps}, "allow"}}));
  absl::StatusOr<HostPort> six = filter.ListenUdp6();
  ASSERT_TRUE(six.ok()) << six.status();
  absl::StatusOr<UdpAnswer> a =
      UdpExchange(*six, Query("v6.test", kTypeAaaa, 6, 1232), kWait);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->from, *six);
  EXPECT_THAT(Addresses(MustParse(a->wire)),
              UnorderedElementsAre(Ip("fd00::6")));
  std::vector<QueryOutcome> out = filter.outcomes(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].origin.local, *six);
  EXPECT_EQ(out[0].verdict, Verdict::kAllowed);
}

}  // namespace
}  // namespace sandfence::dns
