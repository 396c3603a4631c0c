// The folding rule of proto/sandfence/v1/record.proto, case by case: which
// attempts are "the same" (one entry, counted) and which are not, and what
// happens when the table is full.
#include "records/folding.h"

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

}  // namespace
}  // namespace sandfence::testing
