// The DNS filter end to end on loopback: raw clients and dnsmasq (or a
// scripted upstream) around a real FilterServer running on its own thread.
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dns/fake_upstream.h"
#include "dns/filter_server.h"
#include "dns/wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/dns_server.h"
#include "support/host_probe.h"

namespace sandfence::dns {
namespace {

using ::sandfence::dns::testing::FakeName;
using ::sandfence::dns::testing::FakeUpstream;
using ::sandfence::dns::testing::Query;
using ::sandfence::dns::testing::TcpExchange;
using ::sandfence::dns::testing::TcpExchangeMany;
using ::sandfence::dns::testing::UdpAnswer;
using ::sandfence::dns::testing::UdpExchange;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

constexpr absl::Duration kWait = absl::Seconds(10);
const NameGrant kModelPort{L4::kTcp, 8000, 8000};
const NameGrant kHttps{L4::kTcp, 443, 443};

IpAddress Ip(const char* s) { return *IpAddress::Parse(s); }

std::vector<IpAddress> Addresses(const Message& m) {
  std::vector<IpAddress> out;
  for (const ResourceRecord& rr : m.answers) {
    if (rr.type == kTypeA || rr.type == kTypeAaaa) {
      out.push_back(IpAddress::FromBytes(
          rr.type == kTypeA ? AF_INET : AF_INET6,
          reinterpret_cast<const uint8_t*>(rr.rdata.data())));
    }
  }
  return out;
}

Message MustParse(const std::string& wire) {
  absl::StatusOr<Message> m = ParseMessage(wire);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : Message{};
}

std::shared_ptr<const SandboxDnsPolicy> Policy(std::vector<NameRule> rules,
                                               uint64_t generation = 1,
                                               std::string phase = "agent") {
  auto p = std::make_shared<SandboxDnsPolicy>();
  absl::StatusOr<PhaseNameRules> r = PhaseNameRules::Build(rules);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) p->rules = *std::move(r);
  p->generation = generation;
  p->phase = std::move(phase);
  return p;
}

// A FilterServer on its own thread. Listeners: UDP and TCP on one
// 127.0.0.1 port for sandbox 1, and a UDP one for sandbox 2.
class Filter {
 public:
  static constexpr SandboxId kSandbox1 = 1;
  static constexpr SandboxId kSandbox2 = 2;

  explicit Filter(ForwarderOptions fwd,
                  std::function<void(FilterServerOptions&)> tweak = nullptr) {
    FilterServerOptions options;
    options.forwarder = std::move(fwd);
    if (tweak) tweak(options);
    FilterHooks hooks;
    hooks.identify = [this](const QueryOrigin& o) -> std::optional<SandboxId> {
      if (o.listener == udp_ || o.listener == tcp_ || o.listener == udp6_) {
        return kSandbox1;
      }
      if (o.listener == udp2_) return kSandbox2;
      return std::nullopt;
    };
    hooks.learn = [this](const LearnRequest& r) {
      absl::MutexLock lock(&mu_);
      learned_.push_back(r);
      return learn_ ? learn_(r) : absl::OkStatus();
    };
    hooks.outcome = [this](const QueryOutcome& o) {
      absl::MutexLock lock(&mu_);
      outcomes_.push_back(o);
    };
    absl::StatusOr<std::unique_ptr<FilterServer>> s =
        FilterServer::Create(std::move(options), std::move(hooks));
    if (!s.ok()) {
      status_ = s.status();
      return;
    }
    server_ = *std::move(s);
    status_ = Listen();
    if (status_.ok()) {
      thread_ = std::thread([this] { (void)server_->Run(); });
    }
  }
  ~Filter() {
    if (thread_.joinable()) {
      server_->Stop();
      thread_.join();
    }
  }

  const absl::Status& status() const { return status_; }
  FilterServer& server() { return *server_; }
  HostPort udp() const { return udp_addr_; }
  HostPort udp2() const { return udp2_addr_; }
  HostPort unserved() const { return udp3_addr_; }
  HostPort tcp() const { return tcp_addr_; }
  // A UDP listener on [::1] for sandbox 1; call before the queries to it.
  absl::StatusOr<HostPort> ListenUdp6() {
    absl::StatusOr<ListenerId> id =
        server_->ListenUdp({*IpAddress::Parse("::1"), 0});
    if (!id.ok()) return id.status();
    udp6_ = *id;
    return server_->local_address(*id);
  }

  // Set before queries run; called on the filter's thread under mu_.
  void set_learn(std::function<absl::Status(const LearnRequest&)> f) {
    absl::MutexLock lock(&mu_);
    learn_ = std::move(f);
  }
  std::vector<LearnRequest> learned() {
    absl::MutexLock lock(&mu_);
    return learned_;
  }
  // The outcome hook runs right after the reply is sent, so a client can
  // have its answer a moment before the outcome is in: wait for `n` (at
  // most kWait), then return what is there.
  std::vector<QueryOutcome> outcomes(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return outcomes_.size() >= n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    return outcomes_;
  }

 private:
  absl::Status Listen() {
    const IpAddress lo = IpAddress::V4(0x7f000001);
    for (int attempt = 0; attempt < 20; ++attempt) {
      absl::StatusOr<ListenerId> udp = server_->ListenUdp({lo, 0});
      if (!udp.ok()) return udp.status();
      udp_addr_ = *server_->local_address(*udp);
      absl::StatusOr<ListenerId> tcp = server_->ListenTcp(udp_addr_);
      if (!tcp.ok()) continue;  // that port's TCP side was taken
      udp_ = *udp;
      tcp_ = *tcp;
      tcp_addr_ = udp_addr_;
      break;
    }
    if (tcp_ == 0) return absl::UnavailableError("no UDP+TCP port");
    {
      absl::StatusOr<ListenerId> udp2 = server_->ListenUdp({lo, 0});
      if (!udp2.ok()) return udp2.status();
      udp2_ = *udp2;
      udp2_addr_ = *server_->local_address(udp2_);
      absl::StatusOr<ListenerId> udp3 = server_->ListenUdp({lo, 0});
      if (!udp3.ok()) return udp3.status();
      udp3_addr_ = *server_->local_address(*udp3);
    }
    return absl::OkStatus();
  }

  absl::Status status_;
  std::unique_ptr<FilterServer> server_;
  std::thread thread_;
  ListenerId udp_ = 0, tcp_ = 0, udp2_ = 0;
  std::atomic<ListenerId> udp6_{0};
  HostPort udp_addr_, tcp_addr_, udp2_addr_, udp3_addr_;
  absl::Mutex mu_;
  std::function<absl::Status(const LearnRequest&)> learn_ ABSL_GUARDED_BY(mu_);
  std::vector<LearnRequest> learned_ ABSL_GUARDED_BY(mu_);
  std::vector<QueryOutcome> outcomes_ ABSL_GUARDED_BY(mu_);
};

FakeName Answers(std::vector<std::string> addrs) {
  FakeName n;
  n.addrs = std::move(addrs);
  return n;
}
FakeName Tc(std::vector<std::string> addrs) {
  FakeName n = Answers(std::move(addrs));
  n.tc_over_udp = true;
  return n;
}
FakeName Alias(std::string cname, std::vector<std::string> addrs) {
  FakeName n = Answers(std::move(addrs));
  n.cname = std::move(cname);
  return n;
}
FakeName Silent() {
  FakeName n;
  n.silent = true;
  return n;
}

ForwarderOptions To(const HostPort& upstream) {
  ForwarderOptions f;
  f.servers = {upstream};
  f.attempt_timeout = absl::Milliseconds(500);
  f.query_timeout = absl::Seconds(2);
  return f;
}

class DnsmasqFilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_DNSMASQ();
    absl::StatusOr<std::unique_ptr<TestDnsServer>> dns =
        TestDnsServer::Start({{"model.test", {"10.1.2.3"}},
                              {"a.b.tool.test", {"10.7.7.7", "fd00::7"}},
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
              UnorderedElementsAre(Ip("fd00::7")))
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
  EXPECT_EQ(learned[0].addresses[0].addr, Ip("fd00::7"));
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
  EXPECT_THAT(Addresses(by_id[3]), UnorderedElementsAre(Ip("10.7.7.7")));
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
