// The DNS filter end to end on loopback against dnsmasq: raw clients
// around a real FilterServer running on its own thread (filter_fixture.h).
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

namespace sandfence::dns {
namespace {

using ::sandfence::dns::testing::Addresses;
using ::sandfence::dns::testing::Answers;
using ::sandfence::dns::testing::Filter;
using ::sandfence::dns::testing::Ip;
using ::sandfence::dns::testing::kHttps;
using ::sandfence::dns::testing::kModelPort;
using ::sandfence::dns::testing::kWait;
using ::sandfence::dns::testing::MustParse;
using ::sandfence::dns::testing::Policy;
using ::sandfence::dns::testing::Query;
using ::sandfence::dns::testing::Tc;
using ::sandfence::dns::testing::TcpExchange;
using ::sandfence::dns::testing::TcpExchangeMany;
using ::sandfence::dns::testing::To;
using ::sandfence::dns::testing::UdpAnswer;
using ::sandfence::dns::testing::UdpExchange;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

class DnsmasqFilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_DNSMASQ();
    absl::StatusOr<std::unique_ptr<TestDnsServer>> dns =
        TestDnsServer::Start({{"model.test", {"10.1.2.3"}},
                              {"a.b.tool.test", {"198.51.100.7", "2001:db8::7"}},
                              {"tool.test", {"10.7.7.1"}},
                              {"secret.attacker.test", {"10.6.6.6"}}});
    ASSERT_TRUE(dns.ok()) << dns.status();
    dns_ = *std::move(dns);
    filter_ = std::make_unique<Filter>(To(dns_->address()));
    ASSERT_TRUE(filter_->status().ok()) << filter_->status();
    filter_->server().SetPolicy(Filter::kSandbox1,
                                Policy({{"model.test", {kModelPort}, "model"},
                                        {"*.tool.test", {kHttps}, "tool:t"}}));
  }

  std::unique_ptr<TestDnsServer> dns_;
  std::unique_ptr<Filter> filter_;
};

TEST_F(DnsmasqFilterTest, BlockedNameIsNxdomainWithEdeAndNeverReachesUpstream) {
  for (const char* name : {"secret.attacker.test", "tool.test"}) {
    absl::StatusOr<UdpAnswer> a =
        UdpExchange(filter_->udp(), Query(name, kTypeA, 31, 1232), kWait);
    ASSERT_TRUE(a.ok()) << a.status();
    Message m = MustParse(a->wire);
    EXPECT_EQ(m.header.id, 31);
    EXPECT_EQ(m.rcode(), static_cast<uint16_t>(Rcode::kNxDomain)) << name;
    std::vector<Ede> ede = EdeOptions(m);
    ASSERT_EQ(ede.size(), 1u) << name;
    EXPECT_EQ(ede[0].code, EdeCode::kBlocked);
    EXPECT_THAT(ede[0].text, HasSubstr("sandbox's network policy"));
    EXPECT_THAT(ede[0].text, HasSubstr("\"agent\""));
  }
  // Without EDNS the client gets plain NXDOMAIN (no OPT may be added).
  absl::StatusOr<UdpAnswer> plain = UdpExchange(
      filter_->udp(), Query("secret.attacker.test", kTypeAaaa), kWait);
  ASSERT_TRUE(plain.ok()) << plain.status();
  Message m = MustParse(plain->wire);
  EXPECT_EQ(m.rcode(), static_cast<uint16_t>(Rcode::kNxDomain));
  EXPECT_FALSE(m.edns.has_value());

  EXPECT_THAT(dns_->log(), Not(HasSubstr("attacker")));
  EXPECT_THAT(dns_->log(), Not(HasSubstr("query[A] tool.test")));
  EXPECT_TRUE(filter_->learned().empty());
  std::vector<QueryOutcome> out = filter_->outcomes(3);
  ASSERT_EQ(out.size(), 3u);
  for (const QueryOutcome& o : out) {
    EXPECT_EQ(o.verdict, Verdict::kBlocked);
    EXPECT_EQ(o.sandbox, Filter::kSandbox1);
    EXPECT_EQ(o.rcode, 3);
    EXPECT_EQ(o.phase, "agent");
    EXPECT_EQ(o.origin.local, filter_->udp());
    EXPECT_TRUE(o.origin.client.addr.IsLoopback());
  }
  EXPECT_EQ(out[0].name, "secret.attacker.test");
  EXPECT_EQ(out[2].type, kTypeAaaa);
}

// Issue 15: an audit-only phase answers the names it would block from the
// upstream, opens none of their addresses, and says would_block with the
// addresses; allowed names are answered and learned as ever.
TEST_F(DnsmasqFilterTest, AnAuditPhaseAnswersWhatItWouldBlockAndOpensNothing) {
  auto audit = std::make_shared<SandboxDnsPolicy>(
      *Policy({{"model.test", {kModelPort}, "model"}}));
  audit->audit_only = true;
  filter_->server().SetPolicy(Filter::kSandbox1, audit);
  absl::StatusOr<UdpAnswer> a = UdpExchange(
      filter_->udp(), Query("secret.attacker.test", kTypeA, 41, 1232), kWait);
  ASSERT_TRUE(a.ok()) << a.status();
  Message m = MustParse(a->wire);
  EXPECT_EQ(m.rcode(), 0);
  EXPECT_THAT(Addresses(m), UnorderedElementsAre(Ip("10.6.6.6")));
  EXPECT_TRUE(EdeOptions(m).empty()) << "no Blocked EDE: it was not blocked";
  EXPECT_THAT(dns_->log(), HasSubstr("query[A] secret.attacker.test"));
  EXPECT_TRUE(filter_->learned().empty()) << "a would-block name opens nothing";

  absl::StatusOr<UdpAnswer> b =
      UdpExchange(filter_->udp(), Query("model.test", kTypeA), kWait);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(filter_->learned().size(), 1u);
  EXPECT_EQ(filter_->learned()[0].name, "model.test");

  std::vector<QueryOutcome> out = filter_->outcomes(2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].verdict, Verdict::kWouldBlock);
  EXPECT_STREQ(VerdictName(out[0].verdict), "would_block");
  EXPECT_EQ(out[0].rcode, 0);
  EXPECT_THAT(out[0].addresses, UnorderedElementsAre(Ip("10.6.6.6")));
  EXPECT_THAT(out[0].detail, HasSubstr("would block"));
  EXPECT_TRUE(out[0].matched.empty());
  EXPECT_EQ(out[1].verdict, Verdict::kAllowed);
}

TEST_F(DnsmasqFilterTest, AllowedNameIsLearnedBeforeTheClientGetsTheAnswer) {
  // The client's socket, so that the learn hook can check that nothing has
  // been sent to it yet.
  UniqueFd client(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(client.valid());
  std::atomic<int> peeks_before_release{-1};
  filter_->set_learn([&](const LearnRequest&) {
    char b;
    const ssize_t n = ::recv(client.get(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
    peeks_before_release = (n < 0 && errno == EAGAIN) ? 0 : 1;
    return absl::OkStatus();
  });
  sockaddr_in to = {};
  to.sin_family = AF_INET;
  to.sin_port = htons(filter_->udp().port);
  to.sin_addr.s_addr = htonl(0x7f000001);
  const std::string q = Query("Model.Test", kTypeA, 77, 1232);
  ASSERT_EQ(::sendto(client.get(), q.data(), q.size(), 0,
                     reinterpret_cast<sockaddr*>(&to), sizeof(to)),
            static_cast<ssize_t>(q.size()));
  pollfd p = {client.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
  std::string buf(4096, '\0');
  const ssize_t n = ::recv(client.get(), buf.data(), buf.size(), 0);
  ASSERT_GT(n, 0);
  buf.resize(static_cast<size_t>(n));
  EXPECT_EQ(peeks_before_release.load(), 0)
      << "the learn hook ran after the answer was sent (1) or never (-1)";

  Message m = MustParse(buf);
  EXPECT_EQ(m.header.id, 77);
  EXPECT_EQ(m.rcode(), 0);
  EXPECT_EQ(m.questions[0].name_wire,
            ::sandfence::dns::testing::NameBytes("Model.Test"))
      << "the client's case is echoed";
  EXPECT_THAT(Addresses(m), UnorderedElementsAre(Ip("10.1.2.3")));

  std::vector<LearnRequest> learned = filter_->learned();
  ASSERT_EQ(learned.size(), 1u);
  EXPECT_EQ(learned[0].sandbox, Filter::kSandbox1);
  EXPECT_EQ(learned[0].generation, 1u);
  EXPECT_EQ(learned[0].name, "model.test");
  EXPECT_THAT(learned[0].grants, UnorderedElementsAre(kModelPort));
  ASSERT_EQ(learned[0].addresses.size(), 1u);
  EXPECT_EQ(learned[0].addresses[0].addr, Ip("10.1.2.3"));
  // dnsmasq gives local records TTL 0: the policy minimum plus grace.
  const absl::Duration left = learned[0].addresses[0].expires - absl::Now();
  EXPECT_GT(left, absl::Seconds(80));
  EXPECT_LE(left, absl::Seconds(90));
  EXPECT_THAT(dns_->log(), HasSubstr("query[A] model.test"));

  std::vector<QueryOutcome> out = filter_->outcomes(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].verdict, Verdict::kAllowed);
  EXPECT_THAT(out[0].addresses, UnorderedElementsAre(Ip("10.1.2.3")));
}

TEST_F(DnsmasqFilterTest, WildcardNamesAndOtherTypesAreForwarded) {
  absl::StatusOr<UdpAnswer> a =
      UdpExchange(filter_->udp(), Query("A.B.Tool.Test", kTypeAaaa), kWait);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(Addresses(MustParse(a->wire)),
              UnorderedElementsAre(Ip("2001:db8::7")))
      << dns_->log();
  // NODATA: NOERROR without addresses, and nothing to learn.
  absl::StatusOr<UdpAnswer> nodata =
      UdpExchange(filter_->udp(), Query("model.test", kTypeAaaa), kWait);
  ASSERT_TRUE(nodata.ok()) << nodata.status();
  Message m = MustParse(nodata->wire);
  EXPECT_EQ(m.rcode(), 0);
  EXPECT_TRUE(m.answers.empty());
  // Another type for an allowed name goes upstream too.
  absl::StatusOr<UdpAnswer> https =
      UdpExchange(filter_->udp(), Query("model.test", kTypeHttps), kWait);
  ASSERT_TRUE(https.ok()) << https.status();
  EXPECT_THAT(dns_->log(), HasSubstr("query[HTTPS] model.test"));
  std::vector<LearnRequest> learned = filter_->learned();
  ASSERT_EQ(learned.size(), 1u);
  EXPECT_THAT(learned[0].grants, UnorderedElementsAre(kHttps));
  EXPECT_EQ(learned[0].addresses[0].addr, Ip("2001:db8::7"));
}

TEST_F(DnsmasqFilterTest, ALearnFailureIsServfailAndReleasesNoAddress) {
  filter_->set_learn(
      [](const LearnRequest&) { return absl::UnavailableError("map full"); });
  absl::StatusOr<UdpAnswer> a =
      UdpExchange(filter_->udp(), Query("model.test", kTypeA, 5, 1232), kWait);
  ASSERT_TRUE(a.ok()) << a.status();
  Message m = MustParse(a->wire);
  EXPECT_EQ(m.rcode(), static_cast<uint16_t>(Rcode::kServFail));
  EXPECT_TRUE(m.answers.empty());
  std::vector<QueryOutcome> out = filter_->outcomes(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].verdict, Verdict::kLearnFailed);
  EXPECT_THAT(out[0].detail, HasSubstr("map full"));
}

TEST_F(DnsmasqFilterTest, APhaseSwitchAppliesToTheNextQuery) {
  filter_->server().SetPolicy(
      Filter::kSandbox1,
      Policy({{"*.tool.test", {kHttps}, "tool"}}, 2, "verify"));
  absl::StatusOr<UdpAnswer> a =
      UdpExchange(filter_->udp(), Query("model.test", kTypeA, 5, 1232), kWait);
  ASSERT_TRUE(a.ok()) << a.status();
  Message m = MustParse(a->wire);
  EXPECT_EQ(m.rcode(), static_cast<uint16_t>(Rcode::kNxDomain));
  EXPECT_THAT(EdeOptions(m).at(0).text, HasSubstr("\"verify\""));
  absl::StatusOr<UdpAnswer> b = UdpExchange(
      filter_->udp(), Query("a.b.tool.test", kTypeA, 5, 1232), kWait);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(filter_->learned().size(), 1u);
  EXPECT_EQ(filter_->learned()[0].generation, 2u);
  EXPECT_EQ(filter_->learned()[0].phase, "verify");
}

TEST_F(DnsmasqFilterTest, UnknownSandboxOrNoPolicyIsRefused) {
  absl::StatusOr<UdpAnswer> a = UdpExchange(
      filter_->unserved(), Query("model.test", kTypeA, 5, 1232), kWait);
  ASSERT_TRUE(a.ok()) << a.status();
  Message m = MustParse(a->wire);
  EXPECT_EQ(m.rcode(), static_cast<uint16_t>(Rcode::kRefused));
  EXPECT_EQ(EdeOptions(m).at(0).code, EdeCode::kProhibited);
  // Sandbox 2 is known but has no policy.
  absl::StatusOr<UdpAnswer> b =
      UdpExchange(filter_->udp2(), Query("model.test", kTypeA, 5, 1232), kWait);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(MustParse(b->wire).rcode(), static_cast<uint16_t>(Rcode::kRefused));
  EXPECT_THAT(dns_->log(), Not(HasSubstr("query[A] model.test")));
  std::vector<QueryOutcome> out = filter_->outcomes(2);
  ASSERT_EQ(out.size(), 2u);
  for (const QueryOutcome& o : out) {
    EXPECT_EQ(o.verdict, Verdict::kRefused);
  }
  EXPECT_EQ(out[0].sandbox, std::nullopt);
  EXPECT_EQ(out[1].sandbox, Filter::kSandbox2);
}

TEST_F(DnsmasqFilterTest, MalformedQueriesGetFormerrAndAreRecorded) {
  using ::sandfence::dns::testing::Wire;
  // A loop in the question's name.
  const std::string loop =
      Wire().Header(0xabcd, 0x0100, 1, 0, 0, 0).Ptr(12).U16(1).U16(1).str();
  absl::StatusOr<UdpAnswer> a = UdpExchange(filter_->udp(), loop, kWait);
  ASSERT_TRUE(a.ok()) << a.status();
  Message m = MustParse(a->wire);
  EXPECT_EQ(m.header.id, 0xabcd);
  EXPECT_EQ(m.rcode(), static_cast<uint16_t>(Rcode::kFormErr));
  // Too short for a header: nothing to answer, but recorded. Then a good
  // query still works.
  absl::StatusOr<UdpAnswer> none =
      UdpExchange(filter_->udp(), "abc", absl::Milliseconds(300));
  EXPECT_FALSE(none.ok());
  absl::StatusOr<UdpAnswer> ok =
      UdpExchange(filter_->udp(), Query("model.test", kTypeA), kWait);
  ASSERT_TRUE(ok.ok()) << ok.status();
  std::vector<QueryOutcome> out = filter_->outcomes(3);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].verdict, Verdict::kMalformed);
  EXPECT_THAT(out[0].detail, HasSubstr("does not point backwards"));
  EXPECT_EQ(out[1].verdict, Verdict::kMalformed);
  EXPECT_FALSE(out[1].replied);
  EXPECT_EQ(out[2].verdict, Verdict::kAllowed);
}

TEST_F(DnsmasqFilterTest, DnsOverTcpPipelined) {
  absl::StatusOr<std::vector<std::string>> answers =
      TcpExchangeMany(filter_->tcp(),
                      {Query("model.test", kTypeA, 1, 1232),
                       Query("secret.attacker.test", kTypeA, 2, 1232),
                       Query("a.b.tool.test", kTypeA, 3)},
                      kWait);
  ASSERT_TRUE(answers.ok()) << answers.status();
  ASSERT_EQ(answers->size(), 3u);
  std::map<uint16_t, Message> by_id;
  for (const std::string& w : *answers) {
    Message m = MustParse(w);
    by_id[m.header.id] = m;
  }
  EXPECT_THAT(Addresses(by_id[1]), UnorderedElementsAre(Ip("10.1.2.3")));
  EXPECT_EQ(by_id[2].rcode(), static_cast<uint16_t>(Rcode::kNxDomain));
  EXPECT_THAT(Addresses(by_id[3]), UnorderedElementsAre(Ip("198.51.100.7")));
  std::vector<QueryOutcome> out = filter_->outcomes(3);
  ASSERT_EQ(out.size(), 3u);
  for (const QueryOutcome& o : out) {
    EXPECT_EQ(o.origin.transport, Transport::kTcp);
    EXPECT_EQ(o.sandbox, Filter::kSandbox1);
  }
}

TEST_F(DnsmasqFilterTest, TcpClientThatShutsDownItsSideStillGetsAnswers) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in to = {};
  to.sin_family = AF_INET;
  to.sin_port = htons(filter_->tcp().port);
  to.sin_addr.s_addr = htonl(0x7f000001);
  ASSERT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)),
            0);
  std::string out;
  for (const std::string& q : {Query("model.test", kTypeA, 1),
                               Query("secret.attacker.test", kTypeA, 2)}) {
    out.push_back(static_cast<char>(q.size() >> 8));
    out.push_back(static_cast<char>(q.size() & 0xff));
    out += q;
  }
  ASSERT_EQ(::send(fd.get(), out.data(), out.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(out.size()));
  ASSERT_EQ(::shutdown(fd.get(), SHUT_WR), 0);
  std::string in;
  char buf[4096];
  for (;;) {
    pollfd p = {fd.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10000), 1) << "no answer, no close";
    const ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n <= 0) break;  // the filter closes after the last answer
    in.append(buf, static_cast<size_t>(n));
  }
  std::vector<uint16_t> rcodes;
  while (in.size() >= 2) {
    const size_t len =
        (static_cast<uint8_t>(in[0]) << 8) | static_cast<uint8_t>(in[1]);
    ASSERT_GE(in.size(), 2 + len);
    rcodes.push_back(MustParse(in.substr(2, len)).rcode());
    in.erase(0, 2 + len);
  }
  EXPECT_THAT(rcodes, UnorderedElementsAre(0, 3));
}

}  // namespace
}  // namespace sandfence::dns
