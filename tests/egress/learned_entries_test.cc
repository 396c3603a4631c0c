// Learned addresses -> sf_learned4/6 values: validation, expiry and the
// union of port ranges. Pure: no kernel.
#include "egress/learned_entries.h"

#include "gtest/gtest.h"

namespace sandfence {
namespace {

LearnedEntry Entry(const char* addr, std::vector<PortRangeRef> ranges,
                   uint64_t expires = 1000) {
  return LearnedEntry{*IpAddress::Parse(addr), L4::kTcp, std::move(ranges),
                      expires};
}

TEST(LearnedEntries, ANewEntryTakesItsRangesAndExpiry) {
  auto v =
      MergeLearned(nullptr, Entry("10.0.0.1", {{443, 443, 3}, {80, 80, 2}}));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->expires_ns, 1000u);
  ASSERT_EQ(v->nranges, 2u);
  EXPECT_EQ(v->ranges[0].first, 80);  // sorted
  EXPECT_EQ(v->ranges[0].rule_id, 2u);
  EXPECT_EQ(v->ranges[1].first, 443);
}

TEST(LearnedEntries, AnUpdateKeepsTheLaterExpiryAndUnionsRanges) {
  auto old = MergeLearned(nullptr, Entry("10.0.0.1", {{80, 80, 1}}, 5000));
  ASSERT_TRUE(old.ok());
  auto v = MergeLearned(&*old,
                        Entry("10.0.0.1", {{81, 90, 2}, {443, 443, 3}}, 2000));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->expires_ns, 5000u) << "an update never shortens the life";
  ASSERT_EQ(v->nranges, 2u) << "80 and 81-90 touch: one range";
  EXPECT_EQ(v->ranges[0].first, 80);
  EXPECT_EQ(v->ranges[0].last, 90);
  EXPECT_EQ(v->ranges[0].rule_id, 1u);
  EXPECT_EQ(v->ranges[1].first, 443);
  auto later = MergeLearned(&*v, Entry("10.0.0.1", {{80, 80, 1}}, 9000));
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->expires_ns, 9000u);
  EXPECT_EQ(later->nranges, 2u);
}

TEST(LearnedEntries, MoreRangesThanTheKernelHoldsAreRejected) {
  std::vector<PortRangeRef> eight;
  for (uint16_t p = 1; p <= SF_MAX_PORT_RANGES; ++p) {
    eight.push_back({uint16_t(p * 10), uint16_t(p * 10), p});
  }
  auto full = MergeLearned(nullptr, Entry("10.0.0.1", eight));
  ASSERT_TRUE(full.ok()) << full.status();
  auto over = MergeLearned(&*full, Entry("10.0.0.1", {{1000, 1000, 9}}));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(over.status().message().find("10.0.0.1"), std::string::npos);
  EXPECT_NE(over.status().message().find("9 distinct port ranges"),
            std::string::npos)
      << over.status();
}

TEST(LearnedEntries, BadEntriesAreMalformedByName) {
  struct Case {
    LearnedEntry entry;
    const char* names;
  };
  const Case cases[] = {
      {Entry("0.0.0.0", {{80, 80, 0}}), "0.0.0.0"},
      {Entry("::", {{80, 80, 0}}), "::"},
      {Entry("127.83.1.2", {{80, 80, 0}}), "127.83.1.2"},
      {Entry("::ffff:127.83.1.2", {{80, 80, 0}}), "127.83.1.2"},
      {Entry("10.0.0.1", {}), "no port ranges"},
      {Entry("10.0.0.1", {{90, 80, 0}}), "90-80"},
      {Entry("10.0.0.1", {{80, 80, 0}}, 0), "expires_boot_ns"},
  };
  for (const Case& c : cases) {
    absl::Status s = ValidateLearned(c.entry);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.names;
    EXPECT_NE(s.message().find(c.names), std::string::npos) << s;
  }
}

TEST(LearnedEntries, AMappedAddressIsLearnedAsIpv4) {
  const LearnedKey k = LearnedKeyOf(7, Entry("::ffff:10.0.0.1", {{80, 80, 0}}));
  EXPECT_TRUE(k.is_v4());
  EXPECT_EQ(k.generation, 7u);
  EXPECT_EQ(k.addr.ToString(), "10.0.0.1");
  EXPECT_EQ(LearnedKeyOf(k.Key4()), k);
  const LearnedKey k6 = LearnedKeyOf(7, Entry("2001:db8::1", {{80, 80, 0}}));
  EXPECT_EQ(LearnedKeyOf(k6.Key6()), k6);
}

}  // namespace
}  // namespace sandfence
