// The folding rules of proto/sandfence/v1/record.proto, case by case: which
// attempts (and DNS queries) are "the same" (one entry, counted) and which
// are not, and what happens when the table is full.
#include "records/folding.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/records/records_test_util.h"

namespace sandfence::testing {
namespace {

struct FoldCase {
  const char* name;
  Attempt first;
  Attempt second;
  uint32_t second_phase;  // timeline span of the second attempt
  bool folds;
};

TEST(FoldingTest, WhatFoldsAndWhatDoesNot) {
  const Attempt base;
  auto with = [&](auto change) {
    Attempt a = base;
    change(a);
    return a;
  };
  const FoldCase cases[] = {
      {"the same denial again", base, base, 0, true},
      {"the same denial a second later", base,
       with([](Attempt& a) { a.boot_ns += 1000000000; }), 0, true},
      {"another process running the same command", base,
       with([](Attempt& a) { a.tgid = 101; }), 0, true},
      {"another port", base, with([](Attempt& a) { a.port = 80; }), 0, false},
      {"another address", base,
       with([](Attempt& a) { a.addr = "203.0.113.10"; }), 0, false},
      {"UDP instead of TCP", base,
       with([](Attempt& a) { a.protocol = IPPROTO_UDP; }), 0, false},
      {"allowed instead of denied", base, with([](Attempt& a) {
         a.verdict = SF_VERDICT_ALLOW;
         a.reason = SF_REASON_RULE;
       }),
       0, false},
      {"another reason", base,
       with([](Attempt& a) { a.reason = SF_REASON_NO_SANDBOX; }), 0, false},
      {"sendto instead of connect", base,
       with([](Attempt& a) { a.hook = SF_HOOK_SENDMSG4; }), 0, false},
      {"another command", base, with([](Attempt& a) { a.comm = "wget"; }), 0,
       false},
      {"another user", base, with([](Attempt& a) { a.uid = 0; }), 0, false},
      {"the same attempt in the next phase", base, base, 1, false},
      {"the same bytes as IPv6", with([](Attempt& a) { a.addr = "::"; }),
       with([](Attempt& a) { a.addr = "0.0.0.0"; }), 0, false},
  };
  for (const FoldCase& c : cases) {
    AttemptFolder folder(100);
    const NetEvent a = MakeEvent(c.first), b = MakeEvent(c.second);
    folder.Add(a, 0, static_cast<int64_t>(a.boot_ns));
    folder.Add(b, c.second_phase, static_cast<int64_t>(b.boot_ns));
    EXPECT_EQ(folder.size(), c.folds ? 1u : 2u) << c.name;
    EXPECT_EQ(folder.total(), 2u) << c.name;
    if (c.folds) {
      const FoldedEntry& f = folder.entry(0);
      EXPECT_EQ(f.count, 2u) << c.name;
      EXPECT_EQ(f.first_unix_ns, static_cast<int64_t>(a.boot_ns)) << c.name;
      EXPECT_EQ(f.last_unix_ns, static_cast<int64_t>(b.boot_ns)) << c.name;
      EXPECT_EQ(f.first.tgid, a.tgid) << c.name;
      EXPECT_EQ(f.last_tgid, b.tgid) << c.name;
    }
  }
}

TEST(FoldingTest, AnEarlierEventReadLaterMovesFirstTimeBack) {
  AttemptFolder folder(10);
  folder.Add(MakeEvent({.boot_ns = Ms(500)}), 0, 500);
  folder.Add(MakeEvent({.boot_ns = Ms(200)}), 0, 200);
  EXPECT_EQ(folder.entry(0).first_unix_ns, 200);
  EXPECT_EQ(folder.entry(0).last_unix_ns, 500);
}

TEST(FoldingTest, PastTheCapAttemptsGoToOneOverflowEntryPerPhaseAndVerdict) {
  AttemptFolder folder(2);
  auto deny = [](uint16_t port) { return MakeEvent({.port = port}); };
  auto allow = [](uint16_t port) {
    return MakeEvent({.port = port,
                      .verdict = SF_VERDICT_ALLOW,
                      .reason = SF_REASON_UNRESTRICTED});
  };
  EXPECT_TRUE(folder.Add(deny(1), 0, 1).added);
  EXPECT_TRUE(folder.Add(deny(2), 0, 2).added);
  // Full: a third destination opens the overflow entry of (phase 0, deny)...
  AttemptFolder::Result r = folder.Add(deny(3), 0, 3);
  EXPECT_TRUE(r.added);
  EXPECT_TRUE(folder.entry(r.id).overflow);
  // ...and every further new destination of that phase and verdict lands in
  // it, without growing the table.
  for (uint16_t port = 4; port < 1000; ++port) {
    EXPECT_EQ(folder.Add(deny(port), 0, port).id, r.id);
  }
  EXPECT_EQ(folder.entry(r.id).count, 997u);
  // Known destinations still fold into their own entries.
  EXPECT_EQ(folder.Add(deny(1), 0, 5000).id, 0u);
  EXPECT_EQ(folder.entry(0).count, 2u);
  // Other verdicts and phases get their own overflow entries.
  AttemptFolder::Result a = folder.Add(allow(7), 0, 6000);
  EXPECT_TRUE(folder.entry(a.id).overflow);
  EXPECT_NE(a.id, r.id);
  AttemptFolder::Result p = folder.Add(deny(8), 1, 7000);
  EXPECT_TRUE(folder.entry(p.id).overflow);
  EXPECT_NE(p.id, r.id);
  EXPECT_EQ(folder.size(), 5u);
  EXPECT_EQ(folder.overflowed(), 997u + 2u);
  EXPECT_EQ(folder.total(), 2u + 997u + 1u + 2u);
}

TEST(FoldingTest, DirtyListsEntriesFoldedIntoSinceTheLastCall) {
  AttemptFolder folder(10);
  folder.Add(MakeEvent({.port = 1}), 0, 1);
  folder.Add(MakeEvent({.port = 2}), 0, 2);
  EXPECT_TRUE(folder.TakeDirty().empty()) << "new entries carry their count";
  folder.Add(MakeEvent({.port = 2}), 0, 3);
  folder.Add(MakeEvent({.port = 2}), 0, 4);
  folder.Add(MakeEvent({.port = 1}), 0, 5);
  EXPECT_EQ(folder.TakeDirty(), (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(folder.TakeDirty().empty());
}

// --- DNS queries: (phase span, name, type, verdict) ---

DnsQueryInfo Query(const char* name = "api.model.test", uint16_t type = 1,
                   const char* verdict = "allowed") {
  return {.boot_ns = Ms(0),
          .generation = 1,
          .name = name,
          .type = type,
          .verdict = verdict,
          .transport = "udp",
          .matched = "api.model.test",
          .detail = "allowed by api.model.test"};
}

struct DnsFoldCase {
  const char* name;
  DnsQueryInfo first;
  DnsQueryInfo second;
  uint32_t second_phase;
  bool folds;
};

TEST(DnsFoldingTest, WhatFoldsAndWhatDoesNot) {
  auto with = [](auto change) {
    DnsQueryInfo q = Query();
    change(q);
    return q;
  };
  const DnsFoldCase cases[] = {
      {"the same query again", Query(), Query(), 0, true},
      {"the same query a second later", Query(),
       with([](DnsQueryInfo& q) { q.boot_ns += 1000000000; }), 0, true},
      {"the same query over TCP", Query(),
       with([](DnsQueryInfo& q) { q.transport = "tcp"; }), 0, true},
      {"the same query with another answer", Query(), with([](DnsQueryInfo& q) {
         q.addresses = {*IpAddress::Parse("192.0.2.11")};
       }),
       0, true},
      {"AAAA instead of A", Query(), Query("api.model.test", 28), 0, false},
      {"another name", Query(), Query("api2.model.test"), 0, false},
      {"blocked instead of allowed", Query(),
       Query("api.model.test", 1, "blocked"), 0, false},
      {"the upstream failed this time", Query(),
       Query("api.model.test", 1, "upstream_failed"), 0, false},
      {"the same query in the next phase", Query(), Query(), 1, false},
  };
  for (const DnsFoldCase& c : cases) {
    DnsQueryFolder folder(100);
    const DnsQueryFolder::Result a =
        folder.Add(c.first, 0, static_cast<int64_t>(c.first.boot_ns));
    const DnsQueryFolder::Result b = folder.Add(
        c.second, c.second_phase, static_cast<int64_t>(c.second.boot_ns));
    EXPECT_TRUE(a.added) << c.name;
    EXPECT_EQ(b.added, !c.folds) << c.name;
    EXPECT_EQ(folder.size(), c.folds ? 1u : 2u) << c.name;
    EXPECT_EQ(folder.total(), 2u) << c.name;
    if (c.folds) {
      const DnsFoldedEntry& f = folder.entry(0);
      EXPECT_EQ(f.count, 2u) << c.name;
      EXPECT_EQ(f.first_unix_ns, static_cast<int64_t>(c.first.boot_ns))
          << c.name;
      EXPECT_EQ(f.last_unix_ns, static_cast<int64_t>(c.second.boot_ns))
          << c.name;
    }
  }
}

TEST(DnsFoldingTest, AnEntryKeepsTheFirstDetailTheLastRcodeAndEveryTransport) {
  DnsQueryFolder folder(10);
  DnsQueryInfo q = Query("x.tool.test", 65, "upstream_failed");
  q.rcode = 2;
  q.detail = "no upstream answer in 2s";
  folder.Add(q, 0, 100);
  q.detail = "another detail";
  q.rcode = 5;  // later: the rcode the client got last
  q.transport = "tcp";
  q.replied = false;
  folder.Add(q, 0, 300);
  q.rcode = 0;  // read late, decided earlier: not the last rcode
  q.transport = "udp";
  q.replied = true;
  folder.Add(q, 0, 200);
  const DnsFoldedEntry& f = folder.entry(0);
  EXPECT_EQ(f.count, 3u);
  EXPECT_EQ(f.detail, "no upstream answer in 2s");
  EXPECT_EQ(f.rcode, 5);
  EXPECT_EQ(f.transport, "udp,tcp");
  EXPECT_EQ(f.unreplied, 1u);
  EXPECT_EQ(f.first_unix_ns, 100);
  EXPECT_EQ(f.last_unix_ns, 300);
}

TEST(DnsFoldingTest, AnswerAddressesAreAUnionBoundedWithTheRestCounted) {
  DnsQueryFolder folder(10);
  auto addr = [](int i) {
    return IpAddress::V4(0xc6336400u +
                         static_cast<uint32_t>(i));  // 198.51.100.i
  };
  // Each answer carries 5 addresses, overlapping the previous by 2: 3 new
  // addresses per answer after the first.
  uint64_t distinct = 0;
  for (int k = 0; k < 10; ++k) {
    DnsQueryInfo q = Query("cdn.tool.test");
    for (int i = 3 * k; i < 3 * k + 5; ++i) q.addresses.push_back(addr(i));
    folder.Add(q, 0, k);
    distinct = static_cast<uint64_t>(3 * k + 5);
  }
  const DnsFoldedEntry& f = folder.entry(0);
  ASSERT_EQ(f.addresses.size(), kDnsAddressesKept);
  for (size_t i = 0; i < kDnsAddressesKept; ++i) {
    EXPECT_EQ(f.addresses[i], addr(static_cast<int>(i)))
        << "the first seen are kept, in order";
  }
  // Past the bound, every address not kept counts each time it is seen:
  // answers 5..9 carry 2 not-kept overlaps each (answer 5 overlaps 15..16,
  // of which 15 is kept).
  uint64_t more = 0;
  for (int k = 0; k < 10; ++k) {
    for (int i = 3 * k; i < 3 * k + 5; ++i) {
      if (static_cast<size_t>(i) >= kDnsAddressesKept) ++more;
    }
  }
  EXPECT_EQ(f.addresses_more, more);
  EXPECT_GT(distinct, kDnsAddressesKept);
  // Repeats of kept addresses never count as more.
  DnsQueryInfo again = Query("cdn.tool.test");
  again.addresses = {addr(0), addr(15)};
  folder.Add(again, 0, 11);
  EXPECT_EQ(folder.entry(0).addresses_more, more);
}

TEST(DnsFoldingTest, PastTheCapQueriesGoToOneOverflowEntryPerPhaseAndVerdict) {
  DnsQueryFolder folder(2);
  auto name = [](int i) { return absl::StrCat("n", i, ".evil.test"); };
  auto blocked = [&](int i) {
    DnsQueryInfo q = Query("", 1, "blocked");
    q.name = name(i);
    q.addresses = {*IpAddress::Parse("192.0.2.1")};
    return q;
  };
  EXPECT_TRUE(folder.Add(blocked(1), 0, 1).added);
  EXPECT_TRUE(folder.Add(blocked(2), 0, 2).added);
  const DnsQueryFolder::Result r = folder.Add(blocked(3), 0, 3);
  EXPECT_TRUE(r.added);
  ASSERT_TRUE(folder.entry(r.id).overflow);
  EXPECT_EQ(folder.entry(r.id).name, "");
  EXPECT_EQ(folder.entry(r.id).verdict, "blocked");
  for (int i = 4; i < 1000; ++i) {
    EXPECT_EQ(folder.Add(blocked(i), 0, i).id, r.id);
  }
  EXPECT_EQ(folder.entry(r.id).count, 997u);
  EXPECT_TRUE(folder.entry(r.id).addresses.empty())
      << "an overflow entry keeps no addresses";
  // Known names still fold into their own entries.
  EXPECT_EQ(folder.Add(blocked(1), 0, 5000).id, 0u);
  EXPECT_EQ(folder.entry(0).count, 2u);
  // Other verdicts and phases get their own overflow entries.
  const DnsQueryFolder::Result a =
      folder.Add(Query("new.test", 1, "allowed"), 0, 6000);
  EXPECT_TRUE(folder.entry(a.id).overflow);
  EXPECT_NE(a.id, r.id);
  const DnsQueryFolder::Result p = folder.Add(blocked(7), 1, 7000);
  EXPECT_TRUE(folder.entry(p.id).overflow);
  EXPECT_NE(p.id, r.id);
  EXPECT_EQ(folder.size(), 5u);
  EXPECT_EQ(folder.overflowed(), 997u + 2u);
  EXPECT_EQ(folder.total(), 2u + 997u + 1u + 2u);
  uint64_t sum = 0;
  for (size_t i = 0; i < folder.size(); ++i) {
    sum += folder.entry(static_cast<uint32_t>(i)).count;
  }
  EXPECT_EQ(sum, folder.total()) << "counts are exact past the cap";
}

TEST(DnsFoldingTest, InventedVerdictsCannotGrowTheOverflowEntriesWithoutBound) {
  DnsQueryFolder folder(1);
  folder.Add(Query("a.test"), 0, 0);
  for (int i = 0; i < 100000; ++i) {
    folder.Add(Query("b.test", 1, absl::StrCat("verdict-", i).c_str()), 0, i);
  }
  EXPECT_LE(folder.size(), 1u + 256u);
  EXPECT_EQ(folder.overflowed(), 100000u);
  uint64_t sum = 0;
  for (size_t i = 0; i < folder.size(); ++i) {
    sum += folder.entry(static_cast<uint32_t>(i)).count;
  }
  EXPECT_EQ(sum, 100001u);
}

TEST(DnsFoldingTest, DirtyListsEntriesFoldedIntoSinceTheLastCall) {
  DnsQueryFolder folder(10);
  folder.Add(Query("a.test"), 0, 1);
  folder.Add(Query("b.test"), 0, 2);
  EXPECT_TRUE(folder.TakeDirty().empty()) << "new entries carry their count";
  folder.Add(Query("b.test"), 0, 3);
  folder.Add(Query("a.test"), 0, 4);
  EXPECT_EQ(folder.TakeDirty(), (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(folder.TakeDirty().empty());
}

TEST(DnsFoldingTest, TypeNames) {
  EXPECT_EQ(DnsTypeName(1), "A");
  EXPECT_EQ(DnsTypeName(28), "AAAA");
  EXPECT_EQ(DnsTypeName(65), "HTTPS");
  EXPECT_EQ(DnsTypeName(16), "TXT");
  EXPECT_EQ(DnsTypeName(65534), "TYPE65534");
  EXPECT_EQ(DnsTypeName(0), "TYPE0");
}

}  // namespace
}  // namespace sandfence::testing
