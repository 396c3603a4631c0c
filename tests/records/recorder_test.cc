// The recorder and the router without a kernel: routing by sandbox, phase
// attribution by generation, loss accounting, bounded memory and disk under
// a flood, and JSON that parses back into the same record.
#include "records/recorder.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "records/journal.h"
#include "records/report.h"
#include "support/test_files.h"
#include "tests/records/gym_rollout.h"
#include "tests/records/records_test_util.h"

namespace sandfence::testing {
namespace {

class RecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_.emplace(*std::move(dir));
  }
  std::string Path(absl::string_view name) { return dir_->Path(name); }

  static RecorderOptions Quiet() {
    RecorderOptions o;
    o.sync = false;
    return o;
  }

  std::optional<ScopedTempDir> dir_;
};

RolloutInfo Info(uint64_t id) {
  RolloutInfo info = GymInfo();
  info.cgroup_id = id;
  info.rollout_id = absl::StrCat("rollout-", id);
  return info;
}

TEST_F(RecorderTest, EventsGoToTheRolloutOfTheirSandbox) {
  FakeTime time;
  RecordRouter router(time.clock());
  auto a = router.Open(Path("a.sfrec"), Info(1), GymPolicy(), Quiet());
  auto b = router.Open(Path("b.sfrec"), Info(2), GymPolicy(), Quiet());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(router.open_rollouts(), 2u);
  EXPECT_EQ(router.Open(Path("a2.sfrec"), Info(1), GymPolicy()).status().code(),
            absl::StatusCode::kAlreadyExists)
      << "one open rollout per sandbox";
  ASSERT_TRUE((*a)->BeginPhase("agent").ok());
  ASSERT_TRUE((*b)->BeginPhase("agent").ok());

  for (int i = 0; i < 5; ++i) router.OnEvent(MakeEvent({.sandbox = 1}));
  for (int i = 0; i < 3; ++i) router.OnEvent(MakeEvent({.sandbox = 2}));
  router.OnEvent(MakeEvent({.sandbox = 3}));  // no open rollout
  EXPECT_EQ(router.unrouted_events(), 1u);

  auto closed = router.Close(1, {.kernel = SandboxCounters{.denied = 5}});
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(closed->loss.events_recorded(), 5u);
  EXPECT_EQ(closed->loss.unrouted_events(), 1u);
  EXPECT_FALSE(closed->lossy) << absl::StrJoin(closed->warnings, "\n");
  // A closed rollout's events are unrouted, not lost silently.
  router.OnEvent(MakeEvent({.sandbox = 1}));
  EXPECT_EQ(router.unrouted_events(), 2u);
  EXPECT_EQ(router.Close(1, {}).status().code(), absl::StatusCode::kNotFound);

  auto closed_b = router.Close(2, {.kernel = SandboxCounters{.denied = 3}});
  ASSERT_TRUE(closed_b.ok());
  EXPECT_EQ(closed_b->loss.events_recorded(), 3u);
  EXPECT_EQ(closed_b->loss.unrouted_events(), 2u);
  EXPECT_EQ(router.open_rollouts(), 0u);

  auto ra = ReadRecordFile(Path("a.sfrec"));
  auto rb = ReadRecordFile(Path("b.sfrec"));
  ASSERT_TRUE(ra.ok() && rb.ok());
  ASSERT_EQ(ra->net_attempt_size(), 1);
  EXPECT_EQ(ra->net_attempt(0).count(), 5u);
  ASSERT_EQ(rb->net_attempt_size(), 1);
  EXPECT_EQ(rb->net_attempt(0).count(), 3u);
}

TEST_F(RecorderTest, EventsLandInThePhaseWhoseGenerationJudgedThem) {
  FakeTime time;
  auto rec = RolloutRecorder::Create(Path("r.sfrec"), GymInfo(), GymPolicy(),
                                     time.clock(), Quiet());
  ASSERT_TRUE(rec.ok());
  RolloutRecorder& r = **rec;
  struct Step {
    const char* begin_phase;     // or nullptr
    uint32_t bind_generation;    // or 0
    uint32_t event_generation;   // or 0: no event
    const char* expected_phase;  // of that event
  };
  const Step steps[] = {
      {"setup", 0, 0, nullptr},
      {nullptr, 0, 7, "setup"},  // not bound yet: the newest span
      {nullptr, 7, 7, "setup"},
      {"agent", 0, 7, "setup"},  // read after the switch: still setup's
      {nullptr, 0, 8, "agent"},  // the switch's generation, before binding
      {nullptr, 8, 8, "agent"},
      {"verify", 9, 8, "agent"},
      {nullptr, 0, 9, "verify"},
  };
  std::vector<std::string> expected;
  uint16_t port = 1;
  for (const Step& s : steps) {
    if (s.begin_phase) {
      ASSERT_TRUE(r.BeginPhase(s.begin_phase).ok());
    }
    if (s.bind_generation) r.BindGeneration(s.bind_generation);
    if (s.event_generation) {
      // A distinct port per step: one entry each.
      r.Add(MakeEvent({.port = port++, .generation = s.event_generation}));
      expected.push_back(s.expected_phase);
    }
  }
  ASSERT_TRUE(r.Finalize({}).ok());
  auto read = ReadRecordFile(Path("r.sfrec"));
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->net_attempt_size(), static_cast<int>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(read->net_attempt(static_cast<int>(i)).phase(), expected[i])
        << "event " << i;
  }
}

TEST_F(RecorderTest, AnUnknownPhaseIsRefused) {
  FakeTime time;
  auto rec = RolloutRecorder::Create(Path("r.sfrec"), GymInfo(), GymPolicy(),
                                     time.clock(), Quiet());
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ((*rec)->BeginPhase("deploy").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RecorderTest, ARuleIdOutsideThePhaseGivesNoRuleName) {
  FakeTime time;
  auto rec = RolloutRecorder::Create(Path("r.sfrec"), GymInfo(), GymPolicy(),
                                     time.clock(), Quiet());
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE((*rec)->BeginPhase("agent").ok());
  (*rec)->Add(MakeEvent(
      {.verdict = SF_VERDICT_ALLOW, .reason = SF_REASON_RULE, .rule_id = 17}));
  ASSERT_TRUE((*rec)->Finalize({}).ok());
  auto read = ReadRecordFile(Path("r.sfrec"));
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->net_attempt_size(), 1);
  EXPECT_FALSE(read->net_attempt(0).has_rule_index());
  EXPECT_EQ(read->net_attempt(0).allowed_as(), "");
}

TEST_F(RecorderTest, FinalizeIsOnceAndLaterEventsAreRefused) {
  FakeTime time;
  auto rec = RolloutRecorder::Create(Path("r.sfrec"), GymInfo(), GymPolicy(),
                                     time.clock(), Quiet());
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE((*rec)->Finalize({}).ok());
  EXPECT_FALSE((*rec)->Add(MakeEvent({})));
  EXPECT_EQ((*rec)->Finalize({}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(RecorderTest, CountsReachTheFileWhileTheRolloutRuns) {
  // A crash between flushes loses at most the unflushed tail: after Tick
  // (the interval has passed: zero), the file already has the exact count.
  FakeTime time;
  RecorderOptions o = Quiet();
  o.flush_interval = absl::ZeroDuration();
  auto rec = RolloutRecorder::Create(Path("r.sfrec"), GymInfo(), GymPolicy(),
                                     time.clock(), o);
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE((*rec)->BeginPhase("agent").ok());
  for (int i = 0; i < 250; ++i) (*rec)->Add(MakeEvent({}));
  ASSERT_TRUE((*rec)->Tick().ok());
  auto read = ReadRecordFile(Path("r.sfrec"));  // never finalized
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->complete());
  ASSERT_EQ(read->net_attempt_size(), 1);
  EXPECT_EQ(read->net_attempt(0).count(), 250u);
  EXPECT_EQ(read->loss().events_recorded(), 250u);
}

struct FloodCase {
  const char* name;
  bool distinct;  // every attempt to a new destination
};

TEST_F(RecorderTest, AMillionAttemptsStayBounded) {
  constexpr uint64_t kEvents = 1000000;
  constexpr size_t kCap = 10000;
  const FloodCase cases[] = {{"one destination, a million times", false},
                             {"a million destinations", true}};
  for (const FloodCase& c : cases) {
    const std::string path = Path(absl::StrCat(c.distinct, ".sfrec"));
    FakeTime time;
    RecorderOptions o = Quiet();
    o.max_entries = kCap;
    auto rec =
        RolloutRecorder::Create(path, GymInfo(), GymPolicy(), time.clock(), o);
    ASSERT_TRUE(rec.ok());
    ASSERT_TRUE((*rec)->BeginPhase("agent").ok());
    NetEvent e = MakeEvent({.generation = 0});
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < kEvents; ++i) {
      if (c.distinct) {
        const uint32_t host = 0xcb007100u + static_cast<uint32_t>(i >> 16);
        e.addr = IpAddress::V4(host);  // 203.0.113.0 and up
        e.port = static_cast<uint16_t>(i);
      }
      e.boot_ns = Ms(i / 1000);
      (*rec)->Add(e);
    }
    auto outcome =
        (*rec)->Finalize({.kernel = SandboxCounters{.denied = kEvents}});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    ASSERT_TRUE(outcome.ok()) << c.name << ": " << outcome.status();
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    std::printf(
        "[ measured ] %s: %.0f events/s into the journal, %zu "
        "entries, %lld bytes\n",
        c.name, static_cast<double>(kEvents) / seconds, outcome->entries,
        static_cast<long long>(st.st_size));

    // Memory: the table never holds more than the cap (+ overflow entries).
    EXPECT_LE(outcome->entries, kCap + 1) << c.name;
    // Disk: each entry once, plus count updates; far from one per event.
    EXPECT_LT(st.st_size, 8 << 20) << c.name;
    auto read = ReadRecordFile(path);
    ASSERT_TRUE(read.ok()) << c.name;
    uint64_t sum = 0;
    for (const v1::NetAttempt& a : read->net_attempt()) sum += a.count();
    EXPECT_EQ(sum, kEvents) << c.name << ": every attempt is counted";
    EXPECT_EQ(read->loss().events_recorded(), kEvents) << c.name;
    EXPECT_EQ(EventsToRecord(read->loss()), EventsAccountedFor(read->loss()))
        << c.name;
    if (c.distinct) {
      EXPECT_EQ(read->loss().overflowed(), kEvents - kCap) << c.name;
      EXPECT_TRUE(read->lossy()) << c.name << ": destinations were not kept";
      ASSERT_EQ(read->net_attempt_size(), static_cast<int>(kCap + 1));
      EXPECT_TRUE(read->net_attempt(kCap).overflow());
      EXPECT_EQ(read->net_attempt(kCap).count(), kEvents - kCap);
    } else {
      ASSERT_EQ(read->net_attempt_size(), 1) << c.name;
      EXPECT_EQ(read->net_attempt(0).count(), kEvents);
      EXPECT_FALSE(read->lossy()) << c.name;
    }
  }
}

TEST_F(RecorderTest, AReaderThreadAndPhaseChangesTogether) {
  // Events on one thread while another begins phases: every event is in the
  // record, each in a phase that existed when it was added.
  FakeTime time;
  RecordRouter router(time.clock());
  auto rec = router.Open(Path("r.sfrec"), GymInfo(), GymPolicy(), Quiet());
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE((*rec)->BeginPhase("setup").ok());
  constexpr int kEvents = 200000;
  std::thread reader([&] {
    for (int i = 0; i < kEvents; ++i) {
      router.OnEvent(MakeEvent({.port = static_cast<uint16_t>(i % 7)}));
    }
  });
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE((*rec)->BeginPhase(i % 2 ? "agent" : "verify").ok());
  }
  reader.join();
  auto outcome =
      router.Close(kSandboxId, {.kernel = SandboxCounters{.denied = kEvents}});
  ASSERT_TRUE(outcome.ok());
  EXPECT_FALSE(outcome->lossy) << absl::StrJoin(outcome->warnings, "\n");
  auto read = ReadRecordFile(Path("r.sfrec"));
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->timeline_size(), 51);
  uint64_t sum = 0;
  for (const v1::NetAttempt& a : read->net_attempt()) sum += a.count();
  EXPECT_EQ(sum, static_cast<uint64_t>(kEvents));
}

TEST_F(RecorderTest, JsonParsesBackIntoTheSameRecord) {
  for (const bool dns : {false, true}) {
    const std::string path = Path(absl::StrCat("gym-", dns, ".sfrec"));
    ASSERT_TRUE(RecordGymRollout(path, {.dns = dns}).ok());
    auto record = ReadRecordFile(path);
    ASSERT_TRUE(record.ok());
    EXPECT_EQ(record->dns_query_size(), dns ? kGymDnsEntries : 0);
    auto json = FormatRecordJson(*record);
    ASSERT_TRUE(json.ok()) << json.status();
    v1::RolloutRecord parsed;
    auto status = google::protobuf::util::JsonStringToMessage(*json, &parsed);
    ASSERT_TRUE(status.ok()) << status.ToString();
    EXPECT_TRUE(
        google::protobuf::util::MessageDifferencer::Equals(parsed, *record))
        << "dns " << dns;
    // The proto's own names (snake_case, as every --json), which jq users
    // write.
    std::vector<const char*> keys = {"\"net_attempt\"",
                                     "\"timeline\"",
                                     "\"lossy\": false",
                                     "\"complete\": true",
                                     "\"verdict\": \"VERDICT_DENY\"",
                                     "\"allowed_as\": \"model.internal\"",
                                     "\"dns_query\": ["};
    if (dns) {
      keys.insert(keys.end(),
                  {"\"name\": \"api.model.test\"", "\"type_name\": \"HTTPS\"",
                   "\"verdict\": \"blocked\"", "\"transport\": \"udp,tcp\"",
                   "\"address\": [", "\"dns_queries\": \"23\""});
    }
    for (const char* key : keys) {
      EXPECT_TRUE(absl::StrContains(*json, key))
          << "dns " << dns << ": " << key;
    }
  }
}

// Past the DNS budget the names are what the agent chose to send: 1,744 of
// them make one entry per wildcard (and type), named by the wildcard, its
// detail naming the first; the record stays small and exact.
TEST_F(RecorderTest, NamesPastTheDnsBudgetFoldIntoOneEntryPerWildcard) {
  FakeTime time;
  auto rec = RolloutRecorder::Create(Path("r.sfrec"), GymInfo(), GymPolicy(),
                                     time.clock(), Quiet());
  ASSERT_TRUE(rec.ok());
  RolloutRecorder& r = **rec;
  ASSERT_TRUE(r.BeginPhase("agent").ok());
  r.BindGeneration(7);
  for (int i = 256; i < 2000; ++i) {
    ASSERT_TRUE(r.AddDnsQuery(DnsQueryInfo{
        .boot_ns = Ms(1),
        .generation = 7,
        .name = absl::StrCat("n", i, ".tool.test"),
        .type = 1,
        .verdict = "over_budget",
        .rcode = 5,
        .matched = "*.tool.test",
        .detail = "256 distinct names (dns.budget.wildcard_names)"}));
  }
  auto outcome = r.Finalize({.kernel = SandboxCounters{}});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->lossy) << absl::StrJoin(outcome->warnings, "\n");
  auto read = ReadRecordFile(Path("r.sfrec"));
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->dns_query_size(), 1);
  const v1::DnsQuery& q = read->dns_query(0);
  EXPECT_EQ(q.name(), "*.tool.test");
  EXPECT_EQ(q.verdict(), "over_budget");
  EXPECT_EQ(q.count(), 2000u - 256u);
  EXPECT_TRUE(absl::StartsWith(q.detail(), "first: n256.tool.test: "))
      << q.detail();
  EXPECT_TRUE(absl::StrContains(q.detail(), "dns.budget.wildcard_names"));
}

// The kernel's egress budget counts travel with its counters into the
// record, and `records show` prints them against the limits.
TEST_F(RecorderTest, TheEgressBudgetsCountsAreRecordedAndShown) {
  FakeTime time;
  auto rec = RolloutRecorder::Create(Path("r.sfrec"), GymInfo(), GymPolicy(),
                                     time.clock(), Quiet());
  ASSERT_TRUE(rec.ok());
  SandboxCounters kernel;
  kernel.budget = EgressBudgetCounts{.limits = {10, 1048576, 0},
                                     .connections = 3,
                                     .bytes = 1048000,
                                     .dropped_packets = 12,
                                     .dropped_bytes = 700000};
  auto outcome = (*rec)->Finalize({.kernel = kernel});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  auto read = ReadRecordFile(Path("r.sfrec"));
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(read->loss().has_egress_budget());
  const v1::EgressBudgetUse& b = read->loss().egress_budget();
  EXPECT_EQ(b.max_connections(), 10u);
  EXPECT_EQ(b.max_bytes(), 1048576u);
  EXPECT_EQ(b.bytes(), 1048000u);
  EXPECT_EQ(b.dropped_packets(), 12u);
  EXPECT_TRUE(absl::StrContains(
      FormatRecordText(*read),
      "3 of 10 connections, 1048000 of 1048576 bytes (12 packets dropped "
      "past it, 700000 bytes)"))
      << FormatRecordText(*read);

  // Without a budget the record says nothing of one.
  auto none = RolloutRecorder::Create(Path("n.sfrec"), GymInfo(), GymPolicy(),
                                      time.clock(), Quiet());
  ASSERT_TRUE(none.ok());
  ASSERT_TRUE((*none)->Finalize({.kernel = SandboxCounters{}}).ok());
  auto plain = ReadRecordFile(Path("n.sfrec"));
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->loss().has_egress_budget());
  EXPECT_FALSE(absl::StrContains(FormatRecordText(*plain), "egress budget"));
}

TEST_F(RecorderTest, DnsQueriesLandInThePhaseWhoseGenerationJudgedThem) {
  FakeTime time;
  auto rec = RolloutRecorder::Create(Path("r.sfrec"), GymInfo(), GymPolicy(),
                                     time.clock(), Quiet());
  ASSERT_TRUE(rec.ok());
  RolloutRecorder& r = **rec;
  auto query = [](uint32_t generation) {
    return DnsQueryInfo{.boot_ns = Ms(1),
                        .generation = generation,
                        .name = "api.model.test",
                        .type = 1,
                        .verdict = "allowed"};
  };
  ASSERT_TRUE(r.BeginPhase("agent").ok());
  r.BindGeneration(7);
  ASSERT_TRUE(r.AddDnsQuery(query(7)));
  ASSERT_TRUE(r.BeginPhase("verify").ok());
  // Not bound yet: a query of the new generation goes to the newest span;
  // one of the old generation stays in the old span.
  ASSERT_TRUE(r.AddDnsQuery(query(8)));
  ASSERT_TRUE(r.AddDnsQuery(query(7)));
  r.BindGeneration(8);
  ASSERT_TRUE(r.AddDnsQuery(query(8)));
  ASSERT_TRUE(r.AddDnsQuery(query(7)));
  auto outcome = r.Finalize({.kernel = SandboxCounters{}});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->lossy) << absl::StrJoin(outcome->warnings, "\n");
  EXPECT_EQ(outcome->loss.dns_queries(), 5u);
  auto read = ReadRecordFile(Path("r.sfrec"));
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->dns_query_size(), 2);
  EXPECT_EQ(read->dns_query(0).phase(), "agent");
  EXPECT_EQ(read->dns_query(0).count(), 3u);
  EXPECT_EQ(read->dns_query(1).phase(), "verify");
  EXPECT_EQ(read->dns_query(1).phase_index(), 1u);
  EXPECT_EQ(read->dns_query(1).count(), 2u);
  EXPECT_FALSE(r.AddDnsQuery(query(8))) << "finalized: the caller counts it";
}

TEST_F(RecorderTest, BadDnsInputIsRecordedSafelyNeverACrash) {
  struct Case {
    const char* name;
    DnsQueryInfo query;
    const char* recorded_name;
    const char* recorded_verdict;
  };
  const Case cases[] = {
      {"an empty verdict", {.name = "a.test", .type = 1}, "a.test", "unknown"},
      {"upper case folds with lower case",
       {.name = "API.Model.TEST", .type = 1, .verdict = "allowed"},
       "api.model.test",
       "allowed"},
      {"bytes that are not UTF-8 or not printable",
       {.name = std::string("x\xff\x00y\n.test", 10),
        .type = 1,
        .verdict = "blo\x80"
                   "cked"},
       "x\\255\\000y\\010.test",
       "blo\\128cked"},
      {"the filter's own escapes pass through",
       {.name = "a\\.b.test", .type = 16, .verdict = "blocked"},
       "a\\.b.test",
       "blocked"},
      {"no question at all",
       {.verdict = "malformed", .replied = false},
       "",
       "malformed"},
  };
  for (const Case& c : cases) {
    const std::string path = Path(absl::StrCat(c.name, ".sfrec"));
    FakeTime time;
    auto rec = RolloutRecorder::Create(path, GymInfo(), GymPolicy(),
                                       time.clock(), Quiet());
    ASSERT_TRUE(rec.ok()) << c.name;
    // No BeginPhase: a misuse the recorder survives, as for events.
    ASSERT_TRUE((*rec)->AddDnsQuery(c.query)) << c.name;
    ASSERT_TRUE((*rec)->Finalize({.kernel = SandboxCounters{}}).ok()) << c.name;
    auto read = ReadRecordFile(path);
    ASSERT_TRUE(read.ok()) << c.name << ": " << read.status();
    EXPECT_TRUE(read->complete()) << c.name << ": the record parses whole";
    ASSERT_EQ(read->dns_query_size(), 1) << c.name;
    EXPECT_EQ(read->dns_query(0).name(), c.recorded_name) << c.name;
    EXPECT_EQ(read->dns_query(0).verdict(), c.recorded_verdict) << c.name;
    EXPECT_FALSE(FormatRecordText(*read).empty()) << c.name;
    EXPECT_TRUE(FormatRecordJson(*read).ok()) << c.name;
  }
  // However long the text, the entry stays bounded.
  FakeTime time;
  auto rec = RolloutRecorder::Create(Path("long.sfrec"), GymInfo(), GymPolicy(),
                                     time.clock(), Quiet());
  ASSERT_TRUE(rec.ok());
  const std::string huge(1 << 20, '\x01');
  ASSERT_TRUE((*rec)->AddDnsQuery({.name = huge,
                                   .verdict = huge,
                                   .transport = huge,
                                   .matched = huge,
                                   .detail = huge}));
  ASSERT_TRUE((*rec)->Finalize({.kernel = SandboxCounters{}}).ok());
  struct stat st {};
  ASSERT_EQ(stat(Path("long.sfrec").c_str(), &st), 0);
  EXPECT_LT(st.st_size, 16 << 10);
  auto read = ReadRecordFile(Path("long.sfrec"));
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->dns_query_size(), 1);
  EXPECT_LE(read->dns_query(0).name().size(), 1024u);
}

TEST_F(RecorderTest, DnsOverflowIsCountedExactlyAndMakesTheRecordLossy) {
  constexpr uint64_t kQueries = 100000;
  constexpr size_t kCap = 100;
  FakeTime time;
  RecorderOptions o = Quiet();
  o.max_dns_entries = kCap;
  auto rec = RolloutRecorder::Create(Path("r.sfrec"), GymInfo(), GymPolicy(),
                                     time.clock(), o);
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE((*rec)->BeginPhase("agent").ok());
  for (uint64_t i = 0; i < kQueries; ++i) {
    ASSERT_TRUE(
        (*rec)->AddDnsQuery({.boot_ns = Ms(i / 100),
                             .name = absl::StrCat("q", i % 1000, ".exfil.test"),
                             .type = 16,
                             .verdict = "blocked",
                             .rcode = 3}));
  }
  auto outcome = (*rec)->Finalize({.kernel = SandboxCounters{}});
  ASSERT_TRUE(outcome.ok());
  EXPECT_TRUE(outcome->lossy);
  EXPECT_EQ(outcome->dns_entries, kCap + 1);
  // The first kCap names fold; every other query is in the overflow entry.
  const uint64_t overflowed = kQueries - kCap * (kQueries / 1000);
  EXPECT_EQ(outcome->loss.dns_overflowed(), overflowed);
  auto read = ReadRecordFile(Path("r.sfrec"));
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->dns_query_size(), static_cast<int>(kCap + 1));
  const v1::DnsQuery& over = read->dns_query(kCap);
  EXPECT_TRUE(over.overflow());
  EXPECT_EQ(over.count(), overflowed);
  EXPECT_EQ(over.name(), "");
  EXPECT_EQ(over.verdict(), "blocked");
  uint64_t sum = 0;
  for (const v1::DnsQuery& q : read->dns_query()) sum += q.count();
  EXPECT_EQ(sum, kQueries);
  EXPECT_EQ(read->loss().dns_queries(), kQueries);
  EXPECT_TRUE(read->lossy());
  bool warned = false;
  for (const v1::RecordWarning& w : read->warning()) {
    if (w.kind() == v1::WARNING_DNS_OVERFLOW) warned = true;
    EXPECT_NE(w.kind(), v1::WARNING_IMBALANCE) << w.text();
  }
  EXPECT_TRUE(warned);
}

TEST_F(RecorderTest, DnsQueriesFromAnotherThreadWhilePhasesChange) {
  FakeTime time;
  auto rec = RolloutRecorder::Create(Path("r.sfrec"), GymInfo(), GymPolicy(),
                                     time.clock(), Quiet());
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE((*rec)->BeginPhase("setup").ok());
  constexpr int kQueries = 50000;
  std::thread filter([&] {
    for (int i = 0; i < kQueries; ++i) {
      (*rec)->AddDnsQuery({.name = absl::StrCat("n", i % 5, ".test"),
                           .type = 1,
                           .verdict = "allowed"});
    }
  });
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE((*rec)->BeginPhase(i % 2 ? "agent" : "verify").ok());
  }
  filter.join();
  auto outcome = (*rec)->Finalize({.kernel = SandboxCounters{}});
  ASSERT_TRUE(outcome.ok());
  EXPECT_FALSE(outcome->lossy) << absl::StrJoin(outcome->warnings, "\n");
  auto read = ReadRecordFile(Path("r.sfrec"));
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->lossy());
  uint64_t sum = 0;
  for (const v1::DnsQuery& q : read->dns_query()) sum += q.count();
  EXPECT_EQ(sum, static_cast<uint64_t>(kQueries));
}

// A DNS-filtered phase survives the trip through the record's (and the
// daemon state's) PhasePolicy: adoption re-enforces what was compiled.
TEST(PhasePolicy, DnsFilterRoundTripsAndBadGrantsAreRefused) {
  CompiledPhase phase;
  phase.name = "agent";
  phase.access = v1::MODEL_ONLY;
  phase.dns_filtered = true;
  phase.name_rules = {
      {"api.model.test", {{L4::kTcp, 8000, 8000}}, "model"},
      {"*.tool.test", {{L4::kTcp, 443, 443}, {L4::kUdp, 443, 443}}, "allow"}};
  phase.dns_upstreams = {*HostPort::Parse("127.0.0.1:5353", 53),
                         *HostPort::Parse("[::1]:53", 53)};
  phase.dns_ttl = {1, 2, 3};
  phase.dns_budget = {4, 5, 6, 7, 8};
  phase.dns_answers_may_point_at = {*IpPrefix::Parse("127.0.0.0/8"),
                                    *IpPrefix::Parse("fe80::/10")};
  v1::PhasePolicy p = ToPhasePolicy(phase);
  absl::StatusOr<CompiledPhase> back = FromPhasePolicy(p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->dns_filtered);
  EXPECT_EQ(back->name_rules, phase.name_rules);
  EXPECT_EQ(back->dns_upstreams, phase.dns_upstreams);
  EXPECT_EQ(back->dns_ttl, phase.dns_ttl);
  EXPECT_EQ(back->dns_budget, phase.dns_budget);
  EXPECT_EQ(back->dns_answers_may_point_at, phase.dns_answers_may_point_at);
  {
    // A record of a build before budgets: the defaults.
    v1::PhasePolicy old = p;
    old.mutable_dns_filter()->clear_budget();
    absl::StatusOr<CompiledPhase> older = FromPhasePolicy(old);
    ASSERT_TRUE(older.ok()) << older.status();
    EXPECT_EQ(older->dns_budget, DnsBudget{});
  }

  phase.dns_filtered = false;
  EXPECT_FALSE(ToPhasePolicy(phase).has_dns_filter());

  p.mutable_dns_filter()->mutable_name_rule(1)->mutable_grant(0)->set_port_first(
      0);
  back = FromPhasePolicy(p);
  ASSERT_FALSE(back.ok());
  EXPECT_TRUE(absl::StrContains(back.status().message(),
                                "name rule \"*.tool.test\" grant tcp 0-443"))
      << back.status();
}

// A process names itself (prctl PR_SET_NAME) with any bytes. proto3 strings
// must be UTF-8: unescaped, such a command made its entry unparseable, and
// the reader stopped there, so an agent could cut its own record short.
TEST_F(RecorderTest, ACommandThatIsNotUtf8CannotCutTheRecord) {
  FakeTime time;
  auto rec = RolloutRecorder::Create(Path("r.sfrec"), GymInfo(), GymPolicy(),
                                     time.clock(), Quiet());
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE((*rec)->BeginPhase("agent").ok());
  (*rec)->Add(MakeEvent({.comm = "cu\xff\xfe"}));
  (*rec)->Add(MakeEvent({.port = 80}));
  v1::GuardEntry g;
  g.set_action("killed");
  g.mutable_actor()->set_command("gdb\xc3");
  g.mutable_target()->set_command("\x80");
  g.set_detail("environ\xff");
  (*rec)->AddGuardEntry(g);
  auto outcome = (*rec)->Finalize({.kernel = SandboxCounters{.denied = 2}});
  ASSERT_TRUE(outcome.ok());
  auto read = ReadRecordFile(Path("r.sfrec"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->complete()) << absl::StrJoin(WarningTexts(*read), "\n");
  EXPECT_FALSE(read->lossy()) << absl::StrJoin(WarningTexts(*read), "\n");
  ASSERT_EQ(read->net_attempt_size(), 2);
  EXPECT_EQ(read->net_attempt(0).command(), "cu\\255\\254");
  ASSERT_EQ(read->guard_event_size(), 1);
  EXPECT_EQ(read->guard_event(0).actor().command(), "gdb\\195");
  EXPECT_EQ(read->guard_event(0).target().command(), "\\128");
  EXPECT_EQ(read->guard_event(0).detail(), "environ\\255");
}

}  // namespace
}  // namespace sandfence::testing
