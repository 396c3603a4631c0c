// Which addresses an upstream answer opens (CNAME chains from the
// question's name only) and for how long (TTL clamps plus grace).
#include "dns/answer.h"

#include <string>

#include "dns/wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandfence::dns {
namespace {

using ::sandfence::dns::testing::NameBytes;
using ::sandfence::dns::testing::V4;
using ::sandfence::dns::testing::V6;
using ::sandfence::dns::testing::Wire;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

IpAddress Ip(const char* s) { return *IpAddress::Parse(s); }

// An answer to "q.test" with the given records (owner, type, ttl, rdata).
struct Rec {
  std::string owner;
  uint16_t type;
  uint32_t ttl;
  std::string rdata;
};

Message Answer(const std::vector<Rec>& recs) {
  Wire w;
  w.Header(1, 0x8180, 1, static_cast<uint16_t>(recs.size()), 0, 0)
      .Question("q.test", kTypeA);
  for (const Rec& r : recs) w.Rr(r.owner, r.type, r.ttl, r.rdata);
  absl::StatusOr<Message> m = ParseMessage(w.str());
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

TEST(FollowChain, DirectAddresses) {
  ChainAddresses c =
      FollowChain(Answer({{"q.test", kTypeA, 30, V4("10.0.0.1")},
                          {"Q.TEST", kTypeAaaa, 40, V6("fd00::1")}}),
                  "q.test");
  EXPECT_THAT(c.chain, ElementsAre("q.test"));
  EXPECT_THAT(c.addresses,
              UnorderedElementsAre(AnswerAddress{Ip("10.0.0.1"), 30},
                                   AnswerAddress{Ip("fd00::1"), 40}));
}

TEST(FollowChain, AMappedIpv6AnswerIsItsIpv4Address) {
  ChainAddresses c = FollowChain(
      Answer({{"q.test", kTypeAaaa, 30, V6("::ffff:10.0.0.9")}}), "q.test");
  EXPECT_THAT(c.addresses, ElementsAre(AnswerAddress{Ip("10.0.0.9"), 30}));
}

TEST(FollowChain, ThroughCnamesWithTheSmallestTtlAlongTheChain) {
  ChainAddresses c = FollowChain(
      Answer({{"q.test", kTypeCname, 20, NameBytes("a.cdn.test")},
              {"a.cdn.test", kTypeCname, 300, NameBytes("b.cdn.test")},
              {"b.cdn.test", kTypeA, 100, V4("10.0.0.2")}}),
      "q.test");
  EXPECT_THAT(c.chain, ElementsAre("q.test", "a.cdn.test", "b.cdn.test"));
  EXPECT_THAT(c.addresses, ElementsAre(AnswerAddress{Ip("10.0.0.2"), 20}));
  EXPECT_FALSE(c.loop);
}

TEST(FollowChain, IgnoresRecordsOffTheChain) {
  ChainAddresses c = FollowChain(
      Answer({{"q.test", kTypeCname, 60, NameBytes("a.cdn.test")},
              {"a.cdn.test", kTypeA, 60, V4("10.0.0.3")},
              // A server slipping in an address for a name nobody asked:
              {"evil.test", kTypeA, 60, V4("10.6.6.6")},
              {"other.test", kTypeCname, 60, NameBytes("evil2.test")},
              {"evil2.test", kTypeA, 60, V4("10.6.6.7")}}),
      "q.test");
  EXPECT_THAT(c.addresses, ElementsAre(AnswerAddress{Ip("10.0.0.3"), 60}));
}

TEST(FollowChain, StopsAtALoop) {
  ChainAddresses c =
      FollowChain(Answer({{"q.test", kTypeCname, 60, NameBytes("a.test")},
                          {"a.test", kTypeCname, 60, NameBytes("q.test")},
                          {"a.test", kTypeA, 60, V4("10.0.0.4")}}),
                  "q.test");
  EXPECT_TRUE(c.loop);
  EXPECT_THAT(c.chain, ElementsAre("q.test", "a.test"));
  // The addresses of names on the chain still count; nothing loops forever.
  EXPECT_THAT(c.addresses, ElementsAre(AnswerAddress{Ip("10.0.0.4"), 60}));
}

TEST(FollowChain, ASelfLoop) {
  ChainAddresses c = FollowChain(
      Answer({{"q.test", kTypeCname, 60, NameBytes("q.test")}}), "q.test");
  EXPECT_TRUE(c.loop);
  EXPECT_TRUE(c.addresses.empty());
}

TEST(FollowChain, BoundedLength) {
  std::vector<Rec> recs;
  for (int i = 0; i < 40; ++i) {
    const std::string owner =
        i == 0 ? "q.test" : "c" + std::to_string(i) + ".test";
    recs.push_back({owner, kTypeCname, 60,
                    NameBytes("c" + std::to_string(i + 1) + ".test")});
  }
  recs.push_back({"c40.test", kTypeA, 60, V4("10.0.0.5")});
  ChainAddresses c = FollowChain(Answer(recs), "q.test", 16);
  EXPECT_TRUE(c.truncated);
  EXPECT_EQ(c.chain.size(), 16u);
  EXPECT_TRUE(c.addresses.empty()) << "the address lies beyond the bound";
}

TEST(FollowChain, DuplicateAddressKeepsTheLargestTtl) {
  ChainAddresses c =
      FollowChain(Answer({{"q.test", kTypeA, 10, V4("10.0.0.6")},
                          {"q.test", kTypeA, 90, V4("10.0.0.6")}}),
                  "q.test");
  EXPECT_THAT(c.addresses, ElementsAre(AnswerAddress{Ip("10.0.0.6"), 90}));
}

TEST(LearnedLifetime, ClampsThenAddsGrace) {
  TtlPolicy p;
  p.min = absl::Seconds(30);
  p.max = absl::Seconds(300);
  p.grace = absl::Seconds(60);
  EXPECT_EQ(LearnedLifetime(0, p), absl::Seconds(90));
  EXPECT_EQ(LearnedLifetime(100, p), absl::Seconds(160));
  EXPECT_EQ(LearnedLifetime(86400, p), absl::Seconds(360));
  EXPECT_EQ(LearnedLifetime(UINT32_MAX, p), absl::Seconds(360));
  EXPECT_EQ(ClientTtlCap(p), 300u);
  // A max below the min is read as the min.
  p.max = absl::Seconds(10);
  EXPECT_EQ(LearnedLifetime(5, p), absl::Seconds(90));
  EXPECT_EQ(ClientTtlCap(p), 30u);
}

}  // namespace
}  // namespace sandfence::dns
