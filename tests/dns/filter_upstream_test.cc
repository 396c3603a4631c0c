// The DNS filter's upstream side and its limits, end to end on loopback:
// a changed answer, TC and TCP, a silent upstream, a flooding sandbox, the
// rate limit, an IPv6 listener. Upstreams: dnsmasq or a scripted server
// (fake_upstream.h).
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <set>
#include <tuple>
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
using ::sandfence::dns::testing::SeenQuery;
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

// Issue 40: the names a wildcard allows are the agent's to choose, so each
// carries data out. An agent that asks 2,000 fresh names under one wildcard
// (what an exfiltration through DNS looks like) gets the budget's worth
// answered; the rest are refused, never reach the upstream, and say why.
std::vector<Ede> EdesOf(const std::string& wire) {
  absl::StatusOr<Message> m = ParseMessage(wire);
  return m.ok() ? EdeOptions(*m) : std::vector<Ede>{};
}

TEST(DnsFilterBudget, TwoThousandNamesUnderAWildcardGetTheBudgetAndNoMore) {
  absl::StatusOr<std::unique_ptr<FakeUpstream>> up = FakeUpstream::Start(
      {{"api.tool.test", Answers({"10.7.7.7"})},
       {"n0.tool.test", Answers({"192.0.2.1"})}});
  ASSERT_TRUE(up.ok()) << up.status();
  Filter filter(To((*up)->address()));
  ASSERT_TRUE(filter.status().ok()) << filter.status();
  // The exact name is the tool's host; the wildcard lets the agent choose.
  auto rules = Policy({{"*.tool.test", {kHttps}, "tool:search"},
                       {"api.tool.test", {kHttps}, "tool:search"}});
  ASSERT_EQ(rules->budget.wildcard_names, 256u) << "the default";
  filter.server().SetPolicy(Filter::kSandbox1, rules);
  filter.server().SetPolicy(Filter::kSandbox2, rules);

  int answered = 0, refused = 0;
  for (int i = 0; i < 2000; ++i) {
    absl::StatusOr<UdpAnswer> a = UdpExchange(
        filter.udp(),
        Query(absl::StrCat("n", i, ".tool.test"), kTypeA,
              static_cast<uint16_t>(i), 1232),
        kWait);
    ASSERT_TRUE(a.ok()) << i << ": " << a.status();
    const Message m = MustParse(a->wire);
    if (m.rcode() == static_cast<uint16_t>(Rcode::kRefused)) {
      ++refused;
      if (refused == 1) {
        const std::vector<Ede> ede = EdesOf(a->wire);
        ASSERT_EQ(ede.size(), 1u);
        EXPECT_EQ(ede[0].code, EdeCode::kProhibited);
        EXPECT_THAT(ede[0].text, HasSubstr("budget"));
        EXPECT_THAT(ede[0].text, HasSubstr("dns.budget.wildcard_names"));
      }
    } else {
      ++answered;
    }
  }
  EXPECT_EQ(answered, 256);
  EXPECT_EQ(refused, 2000 - 256);
  // Only the answered names ever left the host.
  std::set<std::string> upstream_names;
  for (const SeenQuery& q : (*up)->seen()) upstream_names.insert(q.name);
  EXPECT_EQ(upstream_names.size(), 256u);
  EXPECT_FALSE(upstream_names.contains("n256.tool.test"));

  // A name asked before is free (another type too); the tool's own host
  // is never counted; another sandbox has its own budget.
  absl::StatusOr<UdpAnswer> again =
      UdpExchange(filter.udp(), Query("n0.tool.test", kTypeAaaa, 1), kWait);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(MustParse(again->wire).rcode(),
            static_cast<uint16_t>(Rcode::kRefused));
  absl::StatusOr<UdpAnswer> tool =
      UdpExchange(filter.udp(), Query("api.tool.test", kTypeA, 2), kWait);
  ASSERT_TRUE(tool.ok()) << tool.status();
  EXPECT_THAT(Addresses(MustParse(tool->wire)),
              UnorderedElementsAre(Ip("10.7.7.7")));
  absl::StatusOr<UdpAnswer> other =
      UdpExchange(filter.udp2(), Query("n0.tool.test", kTypeA, 3), kWait);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(Addresses(MustParse(other->wire)),
              UnorderedElementsAre(Ip("192.0.2.1")));

  // Every refusal is an outcome that says which budget, for the record.
  std::vector<QueryOutcome> out = filter.outcomes(2003);
  int over = 0;
  for (const QueryOutcome& o : out) {
    if (o.verdict != Verdict::kOverBudget) continue;
    ++over;
    EXPECT_EQ(o.sandbox, Filter::kSandbox1);
    EXPECT_EQ(o.rcode, static_cast<uint16_t>(Rcode::kRefused));
    EXPECT_THAT(o.matched, ::testing::ElementsAre("*.tool.test"));
    EXPECT_THAT(o.detail, HasSubstr("dns.budget.wildcard_names"));
  }
  EXPECT_EQ(over, 2000 - 256);
}

TEST(DnsFilterBudget, LongNamesAndTheirCharactersAreBudgetedAndTheWindowEnds) {
  absl::StatusOr<std::unique_ptr<FakeUpstream>> up = FakeUpstream::Start({});
  ASSERT_TRUE(up.ok()) << up.status();
  Filter filter(To((*up)->address()));
  ASSERT_TRUE(filter.status().ok()) << filter.status();
  auto base = Policy({{"*.tool.test", {kHttps}, "tool:search"}});
  auto rules = std::make_shared<SandboxDnsPolicy>(*base);
  rules->budget.max_wildcard_name_length = 40;
  rules->budget.wildcard_name_bytes = 100;
  rules->budget.window_seconds = 1;
  filter.server().SetPolicy(Filter::kSandbox1, rules);
  auto ask = [&](const std::string& name) -> std::pair<uint16_t, std::string> {
    absl::StatusOr<UdpAnswer> a =
        UdpExchange(filter.udp(), Query(name, kTypeA, 9, 1232), kWait);
    EXPECT_TRUE(a.ok()) << name << ": " << a.status();
    if (!a.ok()) return {0xffff, ""};
    const std::vector<Ede> ede = EdesOf(a->wire);
    return {MustParse(a->wire).rcode(), ede.empty() ? "" : ede[0].text};
  };
  const uint16_t kRefusedCode = static_cast<uint16_t>(Rcode::kRefused);
  // 41 characters: refused whatever the counts, and says so.
  const std::string too_long = std::string(31, 'a') + ".tool.test";
  ASSERT_EQ(too_long.size(), 41u);
  auto [rc, text] = ask(too_long);
  EXPECT_EQ(rc, kRefusedCode);
  EXPECT_THAT(text, HasSubstr("dns.budget.max_wildcard_name_length"));
  // 30-character names: three fit in 100 characters, the fourth does not.
  auto name30 = [](char c) { return std::string(20, c) + ".tool.test"; };
  for (char c : {'b', 'c', 'd'}) {
    EXPECT_NE(ask(name30(c)).first, kRefusedCode) << c;
  }
  std::tie(rc, text) = ask(name30('e'));
  EXPECT_EQ(rc, kRefusedCode);
  EXPECT_THAT(text, HasSubstr("dns.budget.wildcard_name_bytes"));
  // The window ends: new names are counted from nothing again.
  absl::SleepFor(absl::Milliseconds(1100));
  EXPECT_NE(ask(name30('e')).first, kRefusedCode);
  // None of the refused names reached the upstream.
  for (const SeenQuery& q : (*up)->seen()) {
    EXPECT_NE(q.name, too_long);
  }
}

TEST(DnsFilterBudget, AnAuditPhaseIsNotBudgeted) {
  absl::StatusOr<std::unique_ptr<FakeUpstream>> up = FakeUpstream::Start({});
  ASSERT_TRUE(up.ok()) << up.status();
  Filter filter(To((*up)->address()));
  ASSERT_TRUE(filter.status().ok()) << filter.status();
  auto rules = std::make_shared<SandboxDnsPolicy>(
      *Policy({{"*.tool.test", {kHttps}, "tool:search"}}));
  rules->budget.wildcard_names = 2;
  rules->audit_only = true;
  filter.server().SetPolicy(Filter::kSandbox1, rules);
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<UdpAnswer> a = UdpExchange(
        filter.udp(), Query(absl::StrCat("a", i, ".tool.test"), kTypeA, 9),
        kWait);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_NE(MustParse(a->wire).rcode(),
              static_cast<uint16_t>(Rcode::kRefused));
  }
}

// The query's type can carry 16 bits each time a name is asked again: for
// a name only a wildcard allows, a type other than A, AAAA or HTTPS is a
// question of its own in the budget.
TEST(DnsFilterBudget, ATypeOtherThanAnAddressCountsAsANameOfItsOwn) {
  absl::StatusOr<std::unique_ptr<FakeUpstream>> up = FakeUpstream::Start({});
  ASSERT_TRUE(up.ok()) << up.status();
  Filter filter(To((*up)->address()));
  ASSERT_TRUE(filter.status().ok()) << filter.status();
  auto rules = std::make_shared<SandboxDnsPolicy>(
      *Policy({{"*.tool.test", {kHttps}, "tool:search"}}));
  rules->budget.wildcard_names = 3;
  filter.server().SetPolicy(Filter::kSandbox1, rules);
  auto rcode = [&](uint16_t type) {
    absl::StatusOr<UdpAnswer> a = UdpExchange(
        filter.udp(), Query("x.tool.test", type, 9, 1232), kWait);
    EXPECT_TRUE(a.ok()) << type << ": " << a.status();
    return a.ok() ? MustParse(a->wire).rcode() : uint16_t{0xffff};
  };
  const uint16_t kRefusedCode = static_cast<uint16_t>(Rcode::kRefused);
  constexpr uint16_t kTxt = 16, kMx = 15, kSrv = 33, kNull = 10;
  // A resolver's questions for one host: one entry.
  for (uint16_t type : {kTypeA, kTypeAaaa, kTypeHttps, kTypeA}) {
    EXPECT_NE(rcode(type), kRefusedCode) << type;
  }
  EXPECT_NE(rcode(kTxt), kRefusedCode);
  EXPECT_NE(rcode(kMx), kRefusedCode);
  EXPECT_NE(rcode(kTxt), kRefusedCode) << "asked before: free";
  EXPECT_EQ(rcode(kSrv), kRefusedCode);
  EXPECT_EQ(rcode(kNull), kRefusedCode);
  for (const SeenQuery& q : (*up)->seen()) {
    EXPECT_NE(q.type, kSrv);
    EXPECT_NE(q.type, kNull);
  }
}

// The header bits and EDNS of a client's query are its to choose: for a
// name only a wildcard allows the upstream sees fixed ones; for the tool's
// own name, the client's (a validating stub's CD and DO pass).
TEST(DnsFilterBudget, AWildcardNamesHeaderBitsAreFixedUpstream) {
  absl::StatusOr<std::unique_ptr<FakeUpstream>> up = FakeUpstream::Start(
      {{"api.tool.test", Answers({"10.7.7.7"})},
       {"x.tool.test", Answers({"192.0.2.7"})}});
  ASSERT_TRUE(up.ok()) << up.status();
  Filter filter(To((*up)->address()));
  ASSERT_TRUE(filter.status().ok()) << filter.status();
  filter.server().SetPolicy(
      Filter::kSandbox1, Policy({{"*.tool.test", {kHttps}, "tool:search"},
                                 {"api.tool.test", {kHttps}, "tool:search"}}));
  auto ask = [&](const char* name, bool edns) {
    std::string q = Query(name, kTypeA, 5, edns ? 1232 : 0, /*dnssec_ok=*/edns);
    q[3] = static_cast<char>(q[3] | 0x10 | 0x20);  // CD and AD
    if (!edns) q[2] = static_cast<char>(q[2] & ~0x01);  // no RD
    absl::StatusOr<UdpAnswer> a = UdpExchange(filter.udp(), q, kWait);
    ASSERT_TRUE(a.ok()) << name << ": " << a.status();
    EXPECT_EQ(MustParse(a->wire).rcode(), 0) << name;
    EXPECT_EQ(MustParse(a->wire).header.id, 5);
  };
  ask("x.tool.test", true);
  ask("x.tool.test", false);
  ask("api.tool.test", true);
  const std::vector<SeenQuery> seen = (*up)->seen();
  ASSERT_EQ(seen.size(), 3u);
  for (int i : {0, 1}) {
    EXPECT_EQ(seen[i].name, "x.tool.test");
    EXPECT_EQ(seen[i].flags, kFlagRd) << i;
    EXPECT_TRUE(seen[i].edns) << i;
    EXPECT_FALSE(seen[i].dnssec_ok) << i;
  }
  EXPECT_EQ(seen[2].flags, kFlagRd | kFlagCd | kFlagAd);
  EXPECT_TRUE(seen[2].dnssec_ok);
}

// A phase may ask for a lower rate than the filter's: its sandbox gets
// about its burst and refill; another sandbox keeps the filter's.
TEST(DnsFilterLimits, APhasesOwnRateDropsTheRest) {
  absl::StatusOr<std::unique_ptr<FakeUpstream>> up =
      FakeUpstream::Start({{"fast.test", Answers({"10.5.5.5"})}});
  ASSERT_TRUE(up.ok()) << up.status();
  Filter filter(To((*up)->address()));
  ASSERT_TRUE(filter.status().ok()) << filter.status();
  auto slow = std::make_shared<SandboxDnsPolicy>(
      *Policy({{"fast.test", {kHttps}, "allow"}}));
  slow->budget.queries_per_second = 20;
  filter.server().SetPolicy(Filter::kSandbox1, slow);
  filter.server().SetPolicy(Filter::kSandbox2,
                            Policy({{"fast.test", {kHttps}, "allow"}}));
  UniqueFd flood(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in to = {};
  to.sin_family = AF_INET;
  to.sin_port = htons(filter.udp().port);
  to.sin_addr.s_addr = htonl(0x7f000001);
  const std::string q = Query("fast.test", kTypeA, 3);
  const absl::Time start = absl::Now();
  for (int i = 0; i < 200; ++i) {
    ASSERT_GT(::sendto(flood.get(), q.data(), q.size(), 0,
                       reinterpret_cast<sockaddr*>(&to), sizeof(to)),
              0);
  }
  int answered = 0;
  std::string buf(512, '\0');
  for (;;) {
    pollfd p = {flood.get(), POLLIN, 0};
    if (::poll(&p, 1, 300) != 1) break;
    if (::recv(flood.get(), buf.data(), buf.size(), 0) >= 12) ++answered;
  }
  const double refill = absl::ToDoubleSeconds(absl::Now() - start) * 20;
  EXPECT_GE(answered, 40) << "the burst: twice the rate";
  EXPECT_LE(answered, 40 + static_cast<int>(refill) + 1);
  // The other sandbox is not slowed: 100 quick questions, all answered.
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<UdpAnswer> a = UdpExchange(
        filter.udp2(), Query("fast.test", kTypeA, static_cast<uint16_t>(i)),
        kWait);
    ASSERT_TRUE(a.ok()) << i << ": " << a.status();
  }
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
