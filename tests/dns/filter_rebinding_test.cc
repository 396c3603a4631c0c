// DNS rebinding through the filter: a name the phase allows, whose upstream
// answers with the host itself or its link, opens nothing unless the phase
// grants that range (dns.answers_may_point_at). Written as the agent would
// try it: through a wildcard it chooses names under, a CNAME to a name
// outside every grant, an IPv4-mapped AAAA, an answer that mixes a remote
// address with loopback, and the host's own interface address.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dns/fake_upstream.h"
#include "dns/filter_fixture.h"
#include "dns/filter_server.h"
#include "dns/rebinding.h"
#include "dns/wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandfence::dns {
namespace {

using ::sandfence::dns::testing::Addresses;
using ::sandfence::dns::testing::Alias;
using ::sandfence::dns::testing::Answers;
using ::sandfence::dns::testing::FakeName;
using ::sandfence::dns::testing::FakeUpstream;
using ::sandfence::dns::testing::Filter;
using ::sandfence::dns::testing::Ip;
using ::sandfence::dns::testing::kHttps;
using ::sandfence::dns::testing::kWait;
using ::sandfence::dns::testing::MustParse;
using ::sandfence::dns::testing::Policy;
using ::sandfence::dns::testing::Query;
using ::sandfence::dns::testing::To;
using ::sandfence::dns::testing::UdpAnswer;
using ::sandfence::dns::testing::UdpExchange;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr uint16_t kRefused = static_cast<uint16_t>(Rcode::kRefused);

// An address of this host that no range protects by itself (an eth0
// address, say): only the host-address check can catch it. Not connected
// to: it only appears in a scripted answer.
std::string OwnOrdinaryAddress() {
  absl::StatusOr<std::vector<IpAddress>> all = ReadHostAddresses();
  if (!all.ok()) return "";
  for (const IpAddress& a : *all) {
    if (!ProtectedRange(a, {}).has_value()) return a.ToString();
  }
  return "";
}

struct Asked {
  uint16_t rcode = 0xffff;
  std::vector<IpAddress> addresses;
  std::string ede;
};

Asked Ask(Filter& filter, const std::string& name, uint16_t type) {
  Asked out;
  absl::StatusOr<UdpAnswer> a =
      UdpExchange(filter.udp(), Query(name, type, 7, 1232), kWait);
  EXPECT_TRUE(a.ok()) << name << ": " << a.status();
  if (!a.ok()) return out;
  const Message m = MustParse(a->wire);
  out.rcode = m.rcode();
  out.addresses = Addresses(m);
  const std::vector<Ede> ede = EdeOptions(m);
  if (!ede.empty()) {
    out.ede = ede[0].text;
    EXPECT_EQ(ede[0].code, EdeCode::kBlocked) << name;
  }
  return out;
}

class DnsFilterRebinding : public ::testing::Test {
 protected:
  void SetUp() override {
    own_ = OwnOrdinaryAddress();
    std::map<std::string, FakeName> names = {
        {"ok.tool.test", Answers({"192.0.2.8"})},
        {"evil.tool.test", Answers({"127.0.0.1"})},
        {"meta.tool.test", Answers({"169.254.169.254"})},
        {"six.tool.test", Answers({"::1"})},
        {"mapped.tool.test", Answers({"::ffff:127.0.0.1"})},
        {"linklocal.tool.test", Answers({"fe80::1"})},
        {"zero.tool.test", Answers({"0.0.0.0"})},
        {"mixed.tool.test", Answers({"192.0.2.9", "127.0.0.1"})},
        {"hop.tool.test", Alias("inner.attacker.test", {"127.0.0.2"})},
        // The agent's pick under a wildcard, as sslip.io answers it.
        {"10-0-0-1.tool.test", Answers({"10.0.0.1"})},
        {"ula.tool.test", Answers({"fd00::1"})},
        // The operator's own exact name may point at the cluster.
        {"api.tool.test", Answers({"10.0.0.2"})},
    };
    if (!own_.empty()) names["own.tool.test"] = Answers({own_});
    absl::StatusOr<std::unique_ptr<FakeUpstream>> up =
        FakeUpstream::Start(names);
    ASSERT_TRUE(up.ok()) << up.status();
    up_ = *std::move(up);
    filter_ = std::make_unique<Filter>(To(up_->address()));
    ASSERT_TRUE(filter_->status().ok()) << filter_->status();
  }

  std::shared_ptr<SandboxDnsPolicy> Wildcard() {
    return std::make_shared<SandboxDnsPolicy>(
        *Policy({{"*.tool.test", {kHttps}, "tool:search"},
                 {"api.tool.test", {kHttps}, "tool:search"}}));
  }

  std::string own_;
  std::unique_ptr<FakeUpstream> up_;
  std::unique_ptr<Filter> filter_;
};

TEST_F(DnsFilterRebinding,
       AnAnswerPointingAtTheHostIsRefusedWholeAndOpensNothing) {
  filter_->server().SetPolicy(Filter::kSandbox1, Wildcard());
  struct Case {
    const char* name;
    uint16_t type;
    const char* range;
  };
  std::vector<Case> cases = {
      {"evil.tool.test", kTypeA, "loopback"},
      {"meta.tool.test", kTypeA, "link-local"},
      {"six.tool.test", kTypeAaaa, "loopback"},
      {"mapped.tool.test", kTypeAaaa, "loopback"},
      {"linklocal.tool.test", kTypeAaaa, "link-local"},
      {"zero.tool.test", kTypeA, "this network"},
      {"mixed.tool.test", kTypeA, "loopback"},
      {"hop.tool.test", kTypeA, "loopback"},
      {"10-0-0-1.tool.test", kTypeA, "private (10.0.0.0/8)"},
      {"ula.tool.test", kTypeAaaa, "private (fc00::/7"},
  };
  if (!own_.empty()) {
    cases.push_back({"own.tool.test",
                     own_.find(':') == std::string::npos ? kTypeA : kTypeAaaa,
                     "the host's own address"});
  } else {
    ADD_FAILURE() << "this host has no address outside the protected "
                     "ranges; the own-address case did not run";
  }
  for (const Case& c : cases) {
    const Asked a = Ask(*filter_, c.name, c.type);
    EXPECT_EQ(a.rcode, kRefused) << c.name;
    EXPECT_THAT(a.addresses, IsEmpty()) << c.name << ": released";
    EXPECT_THAT(a.ede, HasSubstr("rebinding")) << c.name;
    EXPECT_THAT(a.ede, HasSubstr("dns.answers_may_point_at")) << c.name;
  }
  // Nothing of any of them was opened, not even the mixed answer's
  // remote address.
  EXPECT_THAT(filter_->learned(), IsEmpty());
  const std::vector<QueryOutcome> out = filter_->outcomes(cases.size());
  ASSERT_EQ(out.size(), cases.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].verdict, Verdict::kRebinding) << out[i].name;
    EXPECT_THAT(out[i].detail, HasSubstr(cases[i].range)) << out[i].name;
    EXPECT_FALSE(out[i].addresses.empty()) << "the record lists them";
  }
  // The CNAME hop is named: the address came from outside every grant.
  EXPECT_THAT(out[7].detail, HasSubstr("inner.attacker.test"));
  EXPECT_THAT(out[6].addresses,
              UnorderedElementsAre(Ip("192.0.2.9"), Ip("127.0.0.1")));
  // An ordinary answer under the same wildcard still opens, and the
  // exact name the operator listed may point into the cluster's network.
  const Asked ok = Ask(*filter_, "ok.tool.test", kTypeA);
  EXPECT_THAT(ok.addresses, UnorderedElementsAre(Ip("192.0.2.8")));
  const Asked api = Ask(*filter_, "api.tool.test", kTypeA);
  EXPECT_THAT(api.addresses, UnorderedElementsAre(Ip("10.0.0.2")));
  EXPECT_EQ(filter_->learned().size(), 2u);
}

TEST_F(DnsFilterRebinding, AGrantedRangeOpensAndOnlyThatRange) {
  auto rules = Wildcard();
  rules->answers_may_point_at = {*IpPrefix::Parse("127.0.0.0/8")};
  filter_->server().SetPolicy(Filter::kSandbox1, rules);
  const Asked evil = Ask(*filter_, "evil.tool.test", kTypeA);
  EXPECT_THAT(evil.addresses, UnorderedElementsAre(Ip("127.0.0.1")));
  const Asked mapped = Ask(*filter_, "mapped.tool.test", kTypeAaaa);
  EXPECT_NE(mapped.rcode, kRefused) << "::ffff:127.0.0.1 is 127.0.0.1";
  const Asked mixed = Ask(*filter_, "mixed.tool.test", kTypeA);
  EXPECT_THAT(mixed.addresses,
              UnorderedElementsAre(Ip("192.0.2.9"), Ip("127.0.0.1")));
  // Not granted: still refused.
  EXPECT_EQ(Ask(*filter_, "meta.tool.test", kTypeA).rcode, kRefused);
  EXPECT_EQ(Ask(*filter_, "six.tool.test", kTypeAaaa).rcode, kRefused);
  std::vector<std::string> opened;
  for (const LearnRequest& r : filter_->learned()) {
    for (const LearnedAddress& a : r.addresses) {
      opened.push_back(a.addr.Unmapped().ToString());
    }
  }
  EXPECT_THAT(opened, UnorderedElementsAre("127.0.0.1", "127.0.0.1",
                                           "192.0.2.9", "127.0.0.1"));
}

TEST_F(DnsFilterRebinding, AnAuditPhaseAnswersButOpensNothingAndSaysSo) {
  auto rules = Wildcard();
  rules->audit_only = true;
  filter_->server().SetPolicy(Filter::kSandbox1, rules);
  const Asked evil = Ask(*filter_, "evil.tool.test", kTypeA);
  EXPECT_THAT(evil.addresses, UnorderedElementsAre(Ip("127.0.0.1")));
  EXPECT_THAT(filter_->learned(), IsEmpty());
  const std::vector<QueryOutcome> out = filter_->outcomes(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].verdict, Verdict::kWouldBlock);
  EXPECT_THAT(out[0].detail, HasSubstr("rebinding"));
}

}  // namespace
}  // namespace sandfence::dns
