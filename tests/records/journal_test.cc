// The record file: what is written reads back the same, and a file cut
// short anywhere is read up to its last whole entry, with a warning, and
// said to be incomplete and lossy.
#include "records/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "records/merged_record.h"
#include "support/test_files.h"
#include "tests/records/gym_rollout.h"
#include "tests/records/records_test_util.h"

namespace sandfence::testing {
namespace {

using google::protobuf::util::MessageDifferencer;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Byte offsets where the journal's entries start, and its size at the end.
std::vector<size_t> EntryOffsets(const std::string& bytes) {
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(bytes.data()),
      static_cast<int>(bytes.size()));
  std::vector<size_t> offsets;
  for (;;) {
    const size_t at = static_cast<size_t>(in.CurrentPosition());
    uint32_t len;
    if (!in.ReadVarint32(&len) || !in.Skip(static_cast<int>(len))) break;
    offsets.push_back(at);
  }
  return offsets;
}

bool HasWarning(const v1::RolloutRecord& r, absl::string_view part) {
  for (const std::string& w : WarningTexts(r)) {
    if (absl::StrContains(w, part)) return true;
  }
  return false;
}

std::string Warnings(const v1::RolloutRecord& r) {
  return absl::StrJoin(WarningTexts(r), "\n");
}

const v1::NetAttempt* Find(const v1::RolloutRecord& r, absl::string_view phase,
                           absl::string_view command,
                           absl::string_view address) {
  for (const v1::NetAttempt& a : r.net_attempt()) {
    if (a.phase() == phase && a.command() == command &&
        a.address() == address) {
      return &a;
    }
  }
  return nullptr;
}

class JournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_.emplace(*std::move(dir));
  }
  std::string Path(absl::string_view name) { return dir_->Path(name); }

  std::optional<ScopedTempDir> dir_;
};

TEST_F(JournalTest, AFinalizedRecordReadsBackWhole) {
  const std::string path = Path("gym.sfrec");
  auto outcome = RecordGymRollout(path, {});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->lossy) << absl::StrJoin(outcome->warnings, "\n");

  auto r = ReadRecordFile(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->complete());
  EXPECT_FALSE(r->lossy()) << Warnings(*r);
  EXPECT_EQ(r->warning_size(), 0) << Warnings(*r);

  EXPECT_EQ(r->rollout_id(), "rollout-7f3c");
  EXPECT_EQ(r->sandbox().cgroup_id(), kSandboxId);
  EXPECT_EQ(r->sandbox().cgroup_path(), "/sys/fs/cgroup/sandfence/run-4242");
  EXPECT_EQ(r->host(), "node-a");
  EXPECT_EQ(r->policy().name(), "gym-default");
  ASSERT_EQ(r->phase_policy_size(), 3);
  ASSERT_EQ(r->phase_policy(1).rule_size(), 3);
  EXPECT_EQ(r->phase_policy(1).rule(0).origin(), "model.internal");
  EXPECT_EQ(r->phase_policy(1).rule(2).protocol(), "udp");
  EXPECT_EQ(r->phase_policy(1).dropped(0).name(), "browser");
  EXPECT_EQ(r->enforcement().egress(), "cgroup-bpf");

  // The timeline: three spans, end to end, each with its generation.
  ASSERT_EQ(r->timeline_size(), 3);
  const char* names[] = {"setup", "agent", "verify"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r->timeline(i).name(), names[i]);
    EXPECT_EQ(r->timeline(i).generation(), static_cast<uint32_t>(i + 1));
    EXPECT_TRUE(r->timeline(i).has_end_time()) << names[i];
    if (i > 0) {
      EXPECT_EQ(TimestampToUnixNs(r->timeline(i).start_time()),
                TimestampToUnixNs(r->timeline(i - 1).end_time()));
    }
  }
  EXPECT_EQ(TimestampToUnixNs(r->timeline(0).start_time()), kWallAtBoot1000s);
  EXPECT_EQ(TimestampToUnixNs(r->end_time()),
            kWallAtBoot1000s + 12500LL * 1000000);

  // Folded entries with exact counts and the rule that allowed them.
  const v1::NetAttempt* curl = Find(*r, "agent", "curl", "203.0.113.9");
  ASSERT_NE(curl, nullptr);
  EXPECT_EQ(curl->count(), 1200u);
  EXPECT_EQ(curl->verdict(), v1::VERDICT_DENY);
  EXPECT_EQ(curl->reason(), "no rule");
  EXPECT_EQ(curl->tgid(), 4321u);
  EXPECT_EQ(curl->last_tgid(), 4321u + 1199u);
  EXPECT_FALSE(curl->has_rule_index());
  const v1::NetAttempt* model = Find(*r, "agent", "python3", "192.0.2.10");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->verdict(), v1::VERDICT_ALLOW);
  EXPECT_EQ(model->allowed_as(), "model.internal");
  EXPECT_EQ(model->rule(), "tcp 192.0.2.10:8000");
  ASSERT_TRUE(model->has_rule_index());
  EXPECT_EQ(model->rule_index(), 0u);
  // Judged in setup, read after agent began: it stays in setup.
  const v1::NetAttempt* pypi = Find(*r, "setup", "pip", "198.51.100.10");
  ASSERT_NE(pypi, nullptr);
  EXPECT_EQ(pypi->count(), 4u);
  EXPECT_EQ(Find(*r, "agent", "pip", "198.51.100.10"), nullptr);
  const v1::NetAttempt* v6 = Find(*r, "agent", "python3", "2001:db8::5");
  ASSERT_NE(v6, nullptr);
  EXPECT_EQ(v6->hook(), "connect6");
  EXPECT_EQ(v6->count(), 2u);
  const v1::NetAttempt* raw = Find(*r, "agent", "ping", "");
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(raw->socket_type(), "raw");
  EXPECT_EQ(raw->protocol(), "icmp");

  uint64_t sum = 0;
  for (const v1::NetAttempt& a : r->net_attempt()) sum += a.count();
  EXPECT_EQ(sum, kGymEvents);
  const v1::LossAccounting& l = r->loss();
  EXPECT_TRUE(l.kernel_counters_read());
  EXPECT_EQ(l.kernel_allowed(), kGymAllowed);
  EXPECT_EQ(l.kernel_denied(), kGymDenied);
  EXPECT_EQ(l.kernel_allowed_unreported(), kGymAllowedUnreported);
  EXPECT_EQ(l.events_recorded(), kGymEvents);
  EXPECT_EQ(l.unrouted_events(), 1u);
  EXPECT_EQ(EventsToRecord(l), EventsAccountedFor(l));
}

TEST_F(JournalTest, EveryKindOfLossMakesTheRecordLossy) {
  struct Case {
    const char* name;
    GymRun run;
    const char* warning;
  };
  const Case cases[] = {
      {"ring buffer full in the kernel",
       {.events_lost = 5},
       "lost in the kernel"},
      {"undecodable events", {.decode_errors = 2}, "could not be decoded"},
      {"folding table overflowed", {.max_entries = 3}, "overflow entries"},
      {"kernel counters never read",
       {.read_counters = false},
       "counters were not read"},
      {"DNS folding table overflowed",
       {.dns = true, .max_dns_entries = 2},
       "DNS queries past the folding table's capacity"},
  };
  for (const Case& c : cases) {
    const std::string path = Path(absl::StrCat(c.name, ".sfrec"));
    auto outcome = RecordGymRollout(path, c.run);
    ASSERT_TRUE(outcome.ok()) << c.name << ": " << outcome.status();
    EXPECT_TRUE(outcome->lossy) << c.name;
    auto r = ReadRecordFile(path);
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.status();
    EXPECT_TRUE(r->complete()) << c.name;
    EXPECT_TRUE(r->lossy()) << c.name;
    EXPECT_TRUE(HasWarning(*r, c.warning)) << c.name << ":\n" << Warnings(*r);
    EXPECT_FALSE(HasWarning(*r, "balance is off"))
        << c.name << ": the loss is accounted for:\n"
        << Warnings(*r);
  }
}

TEST_F(JournalTest, AnImbalanceIsReported) {
  // The kernel counted more than the record and its losses explain.
  const std::string path = Path("gym.sfrec");
  ASSERT_TRUE(RecordGymRollout(path, {}).ok());
  std::string bytes = ReadAll(path);
  auto r = ReadRecord(bytes);
  ASSERT_TRUE(r.ok());
  v1::RolloutRecord changed = *r;
  changed.clear_warning();
  changed.mutable_loss()->set_kernel_denied(kGymDenied + 3);
  EvaluateLoss(&changed);
  EXPECT_TRUE(changed.lossy());
  EXPECT_TRUE(HasWarning(changed, "balance is off")) << Warnings(changed);
}

// Cuts a record at every byte inside one of its entries.
struct CutCase {
  const char* name;
  bool finalize;
  int entries_lost;  // net attempts missing after the cut
};

TEST_F(JournalTest, ACutAtAnyByteOfTheLastEntryKeepsEverythingBefore) {
  const CutCase cases[] = {
      {"crashed rollout cut inside its last event", false, 1},
      {"finalized rollout cut inside its trailer", true, 0},
  };
  for (const CutCase& c : cases) {
    const std::string path = Path(absl::StrCat(c.name, ".sfrec"));
    ASSERT_TRUE(RecordGymRollout(path, {.finalize = c.finalize}).ok())
        << c.name;
    const std::string bytes = ReadAll(path);
    auto whole = ReadRecord(bytes);
    ASSERT_TRUE(whole.ok()) << c.name;
    EXPECT_EQ(whole->complete(), c.finalize) << c.name;
    const std::vector<size_t> offsets = EntryOffsets(bytes);
    ASSERT_GE(offsets.size(), 2u) << c.name;
    const size_t start = offsets.back();

    // Cut exactly before the last entry: no partial entry, but not final.
    auto before = ReadRecord(absl::string_view(bytes).substr(0, start));
    ASSERT_TRUE(before.ok()) << c.name;
    EXPECT_FALSE(before->complete()) << c.name;
    EXPECT_TRUE(before->lossy()) << c.name;
    EXPECT_FALSE(HasWarning(*before, "cut short")) << c.name;
    EXPECT_TRUE(HasWarning(*before, "not finalized")) << c.name;
    EXPECT_EQ(before->net_attempt_size(),
              whole->net_attempt_size() - c.entries_lost)
        << c.name;
    v1::RolloutRecord expected = *before;
    expected.clear_warning();

    for (size_t cut = start + 1; cut < bytes.size(); ++cut) {
      auto r = ReadRecord(absl::string_view(bytes).substr(0, cut));
      ASSERT_TRUE(r.ok()) << c.name << ", cut at byte " << cut << ": "
                          << r.status();
      EXPECT_TRUE(HasWarning(*r, absl::StrCat("cut short: the file ends "
                                              "inside the entry that starts "
                                              "at byte ",
                                              start)))
          << c.name << ", cut at byte " << cut << ":\n"
          << Warnings(*r);
      EXPECT_FALSE(r->complete()) << c.name << ", cut at byte " << cut;
      EXPECT_TRUE(r->lossy()) << c.name << ", cut at byte " << cut;
      v1::RolloutRecord got = *r;
      got.clear_warning();
      EXPECT_TRUE(MessageDifferencer::Equals(got, expected))
          << c.name << ", cut at byte " << cut;
    }
  }
}

TEST_F(JournalTest, WhatIsNotARecordIsRefused) {
  const std::string gym = Path("gym.sfrec");
  ASSERT_TRUE(RecordGymRollout(gym, {}).ok());
  const std::string bytes = ReadAll(gym);
  const size_t header_end = EntryOffsets(bytes)[1];
  struct Case {
    const char* name;
    std::string bytes;
  };
  const Case cases[] = {
      {"an empty file", ""},
      {"a text file", "policy { name: \"x\" }\n"},
      {"a record cut inside its header", bytes.substr(0, header_end - 1)},
      {"a journal entry that is not a header",
       bytes.substr(header_end, bytes.size() - header_end)},
  };
  for (const Case& c : cases) {
    auto r = ReadRecord(c.bytes);
    EXPECT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name << ": " << r.status();
  }
}

// `records show` reads what every part of sandfence writes: a journal, and
// the daemon's final <id>.record.pb (one merged RolloutRecord message).
TEST_F(JournalTest, TheDaemonsMergedRecordFileReadsBackToo) {
  const std::string journal = Path("gym.sfrec");
  ASSERT_TRUE(RecordGymRollout(journal, {}).ok());
  auto from_journal = ReadRecordFile(journal);
  ASSERT_TRUE(from_journal.ok()) << from_journal.status();
  const std::string merged = Path("rollout-7f3c.record.pb");
  std::ofstream(merged) << from_journal->SerializeAsString();
  auto r = ReadRecordFile(merged);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      *r, *from_journal));

  // What is neither still is refused, by name.
  const std::string text = Path("text.record.pb");
  std::ofstream(text) << "policy { name: \"x\" }\n";
  auto bad = ReadRecordFile(text);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), text))
      << bad.status();
}

TEST_F(JournalTest, ACorruptEntryEndsTheReadingThere) {
  const std::string path = Path("gym.sfrec");
  ASSERT_TRUE(RecordGymRollout(path, {}).ok());
  std::string bytes = ReadAll(path);
  const std::vector<size_t> offsets = EntryOffsets(bytes);
  // An entry in the middle whose length prefix is one byte.
  size_t victim = 0;
  for (size_t i = offsets.size() / 2; i < offsets.size(); ++i) {
    if (static_cast<uint8_t>(bytes[offsets[i]]) < 0x80) {
      victim = offsets[i];
      break;
    }
  }
  ASSERT_GT(victim, 0u);
  // An entry whose body is a field with wire type 7: no parser accepts it.
  bytes[victim + 1] = static_cast<char>(0x0f);
  auto r = ReadRecord(bytes);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->complete());
  EXPECT_TRUE(r->lossy());
  EXPECT_TRUE(
      HasWarning(*r, absl::StrCat("entry at byte ", victim, " does not parse")))
      << Warnings(*r);
}

TEST_F(JournalTest, EntriesAfterTheTrailerAreIgnoredWithAWarning) {
  const std::string path = Path("gym.sfrec");
  ASSERT_TRUE(RecordGymRollout(path, {}).ok());
  std::string bytes = ReadAll(path);
  const std::vector<size_t> offsets = EntryOffsets(bytes);
  // A copy of an earlier entry, appended after the trailer.
  const std::string copy = bytes.substr(offsets[3], offsets[4] - offsets[3]);
  auto r = ReadRecord(bytes + copy);
  ASSERT_TRUE(r.ok());
  auto whole = ReadRecord(bytes);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(r->net_attempt_size(), whole->net_attempt_size());
  EXPECT_TRUE(HasWarning(*r, "after the trailer")) << Warnings(*r);
}

TEST_F(JournalTest, ARecordIsNeverWrittenOverUnlessAsked) {
  const std::string path = Path("exists.sfrec");
  ASSERT_TRUE(RecordJournal::Create(path).ok());
  auto again = RecordJournal::Create(path);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(RecordJournal::Create(path, /*overwrite=*/true).ok());
}

TEST_F(JournalTest, AnUnreadableFileIsAnErrnoError) {
  auto r = ReadRecordFile(Path("missing.sfrec"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
}

const v1::DnsQuery* FindDns(const v1::RolloutRecord& r, absl::string_view phase,
                            absl::string_view name, absl::string_view type) {
  for (const v1::DnsQuery& q : r.dns_query()) {
    if (q.phase() == phase && q.name() == name && q.type_name() == type) {
      return &q;
    }
  }
  return nullptr;
}

TEST_F(JournalTest, DnsQueriesReadBackWholeInThePhaseThatDecidedThem) {
  const std::string path = Path("gym-dns.sfrec");
  auto outcome = RecordGymRollout(path, {.dns = true});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->lossy) << absl::StrJoin(outcome->warnings, "\n");
  EXPECT_EQ(outcome->dns_entries, static_cast<size_t>(kGymDnsEntries));
  EXPECT_EQ(outcome->loss.dns_queries(), kGymDnsQueries);

  auto r = ReadRecordFile(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->complete());
  EXPECT_FALSE(r->lossy()) << Warnings(*r);
  ASSERT_EQ(r->dns_query_size(), kGymDnsEntries);
  uint64_t sum = 0;
  for (const v1::DnsQuery& q : r->dns_query()) sum += q.count();
  EXPECT_EQ(sum, kGymDnsQueries);
  EXPECT_EQ(r->loss().dns_queries(), kGymDnsQueries);
  EXPECT_EQ(r->loss().dns_overflowed(), 0u);
  EXPECT_EQ(r->loss().dns_dropped(), 0u);
  // The network attempts are what they were without DNS.
  EXPECT_EQ(r->loss().events_recorded(), kGymEvents);

  const v1::DnsQuery* a = FindDns(*r, "agent", "api.model.test", "A");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->count(), 5u);
  EXPECT_EQ(a->type(), 1u);
  EXPECT_EQ(a->verdict(), "allowed");
  EXPECT_EQ(a->rcode(), 0u);
  EXPECT_EQ(a->transport(), "udp");
  EXPECT_EQ(std::vector<std::string>(a->address().begin(), a->address().end()),
            std::vector<std::string>{"192.0.2.10"});
  EXPECT_EQ(a->matched(), "api.model.test");
  EXPECT_EQ(a->phase_index(), 1u);
  EXPECT_EQ(TimestampToUnixNs(a->first_time()),
            kWallAtBoot1000s + 2010LL * 1000000);
  EXPECT_EQ(TimestampToUnixNs(a->last_time()),
            kWallAtBoot1000s + (2010LL + 4 * 250) * 1000000);
  const v1::DnsQuery* aaaa = FindDns(*r, "agent", "api.model.test", "AAAA");
  ASSERT_NE(aaaa, nullptr);
  EXPECT_EQ(aaaa->count(), 5u);
  EXPECT_EQ(aaaa->address_size(), 0);
  // An answer over UDP, then the same question over TCP with one more
  // address: one entry, both transports, the union of the addresses (the
  // count update carries them).
  const v1::DnsQuery* tool = FindDns(*r, "agent", "x.tool.test", "HTTPS");
  ASSERT_NE(tool, nullptr);
  EXPECT_EQ(tool->count(), 2u);
  EXPECT_EQ(tool->transport(), "udp,tcp");
  EXPECT_EQ(
      std::vector<std::string>(tool->address().begin(), tool->address().end()),
      (std::vector<std::string>{"192.0.2.20", "2001:db8::20"}));
  EXPECT_EQ(tool->matched(), "*.tool.test");
  // Decided in agent, handed over after verify began: it stays in agent.
  const v1::DnsQuery* exfil =
      FindDns(*r, "agent", "c2vjcmv0.exfil.test", "TXT");
  ASSERT_NE(exfil, nullptr);
  EXPECT_EQ(exfil->count(), 5u);
  EXPECT_EQ(exfil->verdict(), "blocked");
  EXPECT_EQ(exfil->rcode(), 3u);
  EXPECT_EQ(exfil->detail(), "no name rule matches");
  EXPECT_EQ(FindDns(*r, "verify", "c2vjcmv0.exfil.test", "TXT"), nullptr);
  const v1::DnsQuery* bad = FindDns(*r, "agent", "", "TYPE0");
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->verdict(), "malformed");
  EXPECT_EQ(bad->rcode(), 1u);
  const v1::DnsQuery* flood = FindDns(*r, "agent", "flood.test", "A");
  ASSERT_NE(flood, nullptr);
  EXPECT_EQ(flood->verdict(), "rate_limited");
  EXPECT_EQ(flood->unreplied(), 3u);
  const v1::DnsQuery* later = FindDns(*r, "verify", "api.model.test", "A");
  ASSERT_NE(later, nullptr);
  EXPECT_EQ(later->count(), 2u);
  EXPECT_EQ(later->phase_index(), 2u);
}

TEST_F(JournalTest, DnsQueriesFlushedBeforeACrashSurviveIt) {
  // A crash is the recorder gone without Finalize: what reached the file
  // stays, what was still buffered is lost, and the record says it is not
  // whole.
  const std::string path = Path("crash.sfrec");
  FakeTime time;
  RecorderOptions o;
  o.sync = false;
  o.flush_interval = absl::InfiniteDuration();  // only explicit flushes
  auto rec =
      RolloutRecorder::Create(path, GymInfo(), GymPolicy(), time.clock(), o);
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_TRUE((*rec)->BeginPhase("agent").ok());
  (*rec)->BindGeneration(2);
  DnsQueryInfo q = {.boot_ns = Ms(10),
                    .generation = 2,
                    .name = "api.model.test",
                    .type = 1,
                    .verdict = "allowed",
                    .transport = "udp",
                    .addresses = {*IpAddress::Parse("192.0.2.10")}};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*rec)->AddDnsQuery(q));
  q.addresses = {*IpAddress::Parse("192.0.2.11")};
  ASSERT_TRUE((*rec)->AddDnsQuery(q));
  // A phase change flushes: these four are on disk from here on.
  ASSERT_TRUE((*rec)->BeginPhase("verify").ok());
  (*rec)->BindGeneration(3);
  // Buffered only: a fifth of the same, and a new name.
  q.generation = 3;
  ASSERT_TRUE((*rec)->AddDnsQuery(q));
  q.name = "unflushed.test";
  ASSERT_TRUE((*rec)->AddDnsQuery(q));
  rec->reset();  // the crash

  auto r = ReadRecordFile(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->complete());
  EXPECT_TRUE(r->lossy());
  ASSERT_EQ(r->dns_query_size(), 1) << "the unflushed entries are gone";
  const v1::DnsQuery& d = r->dns_query(0);
  EXPECT_EQ(d.phase(), "agent");
  EXPECT_EQ(d.count(), 4u);
  EXPECT_EQ(std::vector<std::string>(d.address().begin(), d.address().end()),
            (std::vector<std::string>{"192.0.2.10", "192.0.2.11"}));
  EXPECT_EQ(r->loss().dns_queries(), 4u) << "the best knowledge: the entries";
}

// The daemon's DNS metrics (issue 14) come from the recorder: every query
// it was given counts by verdict, and its filter latency lands in the
// bucket whose bound is the first at or above it.
TEST_F(JournalTest, DnsStatsCountVerdictsAndLatencyBuckets) {
  FakeTime time;
  auto rec = RolloutRecorder::Create(Path("stats.sfrec"), GymInfo(),
                                     GymPolicy(), time.clock(), {});
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_TRUE((*rec)->BeginPhase("agent").ok());
  (*rec)->BindGeneration(2);
  DnsQueryInfo q = {.generation = 2, .name = "api.model.test", .type = 1};
  struct Query {
    const char* verdict;
    uint64_t latency_ns;
  };
  for (const Query& x :
       {Query{"allowed", 30'000}, Query{"allowed", 50'000},
        Query{"blocked", 2'000'000}, Query{"malformed", 0},
        Query{"upstream_failed", 3'000'000'000}, Query{"", 1}}) {
    q.verdict = x.verdict;
    q.latency_ns = x.latency_ns;
    ASSERT_TRUE((*rec)->AddDnsQuery(q));
  }
  const DnsQueryStats s = (*rec)->dns_stats();
  EXPECT_EQ(s.by_verdict,
            (std::map<std::string, uint64_t>{{"allowed", 2},
                                             {"blocked", 1},
                                             {"malformed", 1},
                                             {"unknown", 1},
                                             {"upstream_failed", 1}}));
  // 0 is "not known": five latencies, in 50us (three: 1ns, 30us, 50us),
  // 2.5ms and +Inf.
  EXPECT_EQ(s.latency_count, 5u);
  std::array<uint64_t, DnsQueryStats::kLatencyBounds.size() + 1> want{};
  want[0] = 3;
  want[5] = 1;
  want[want.size() - 1] = 1;
  EXPECT_EQ(s.latency_buckets, want);
  EXPECT_NEAR(s.latency_sum_seconds, 3.002080001, 1e-9);
  ASSERT_TRUE((*rec)->Finalize({}).ok());
  // Finalized: nothing more counts.
  EXPECT_FALSE((*rec)->AddDnsQuery(q));
  EXPECT_EQ((*rec)->dns_stats().latency_count, 5u);
}

// Writes a journal of hand-made entries after the gym rollout's header.
std::string HandMadeJournal(
    const std::string& gym_bytes,
    const std::vector<v1::RecordJournalEntry>& entries) {
  const std::vector<size_t> offsets = EntryOffsets(gym_bytes);
  std::string out = gym_bytes.substr(0, offsets[1]);  // the header
  for (const v1::RecordJournalEntry& e : entries) {
    std::string body = e.SerializeAsString();
    uint8_t prefix[10];
    uint8_t* end =
        google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(
            static_cast<uint32_t>(body.size()), prefix);
    out.append(reinterpret_cast<const char*>(prefix), end - prefix);
    out += body;
  }
  return out;
}

TEST_F(JournalTest, DnsEntriesThatDoNotFitAndAnImbalanceAreReported) {
  const std::string path = Path("gym.sfrec");
  ASSERT_TRUE(RecordGymRollout(path, {}).ok());
  const std::string gym = ReadAll(path);

  std::vector<v1::RecordJournalEntry> entries(5);
  v1::DnsQuery* q = entries[0].mutable_dns_query()->mutable_query();
  entries[0].mutable_dns_query()->set_id(0);
  q->set_name("a.test");
  q->set_count(1);
  entries[1].mutable_dns_query()->set_id(5);  // out of order
  entries[1].mutable_dns_query()->mutable_query()->set_count(7);
  v1::DnsQueryCount* c = entries[2].mutable_dns_counts()->add_count();
  c->set_id(0);
  c->set_count(2);
  c->add_address("192.0.2.1");
  c->set_transport("tcp");
  entries[3].mutable_dns_counts()->add_count()->set_id(9);  // unknown
  v1::LossAccounting* loss = entries[4].mutable_trailer()->mutable_loss();
  loss->set_kernel_counters_read(true);
  loss->set_dns_queries(3);  // one more than the entries count

  auto r = ReadRecord(HandMadeJournal(gym, entries));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->complete());
  ASSERT_EQ(r->dns_query_size(), 1);
  EXPECT_EQ(r->dns_query(0).count(), 2u);
  EXPECT_EQ(r->dns_query(0).transport(), "tcp");
  EXPECT_EQ(r->dns_query(0).address_size(), 1);
  EXPECT_TRUE(HasWarning(*r, "dns query 5 out of order (expected 1)"))
      << Warnings(*r);
  EXPECT_TRUE(HasWarning(*r, "count for unknown dns query 9")) << Warnings(*r);
  EXPECT_TRUE(HasWarning(
      *r, "the dns entries count 2 queries but the recorder received 3"))
      << Warnings(*r);
  EXPECT_TRUE(r->lossy());

  // Balanced, the same record is whole.
  loss->set_dns_queries(2);
  entries.erase(entries.begin() + 1);
  entries.erase(entries.begin() + 2);
  r = ReadRecord(HandMadeJournal(gym, entries));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->lossy()) << Warnings(*r);
}

// A rollout whose record spans two journals (a daemon died and another
// adopted it): the DNS entries of both, their phases shifted to the merged
// timeline, and the DNS counts summed so that they still balance.
TEST_F(JournalTest, MergedSegmentsKeepEveryDnsQuery) {
  std::vector<RecordSegment> segments(2);
  for (int k = 0; k < 2; ++k) {
    const std::string path = Path(absl::StrCat("seg", k, ".sfrec"));
    ASSERT_TRUE(RecordGymRollout(path, {.dns = true}).ok());
    auto r = ReadRecordFile(path);
    ASSERT_TRUE(r.ok());
    segments[k] = {path, *r, std::nullopt, kWallAtBoot1000s};
  }
  const v1::RolloutRecord merged = MergeRecordSegments(segments);
  ASSERT_EQ(merged.dns_query_size(), 2 * kGymDnsEntries);
  EXPECT_EQ(merged.loss().dns_queries(), 2 * kGymDnsQueries);
  const v1::DnsQuery& later = merged.dns_query(kGymDnsEntries);
  EXPECT_EQ(later.phase_index(),
            segments[0].record.dns_query(0).phase_index() +
                static_cast<uint32_t>(segments[0].record.timeline_size()));
  EXPECT_EQ(merged.timeline(static_cast<int>(later.phase_index())).name(),
            later.phase());
  uint64_t sum = 0;
  for (const v1::DnsQuery& q : merged.dns_query()) sum += q.count();
  EXPECT_EQ(sum, merged.loss().dns_queries());
}

}  // namespace
}  // namespace sandfence::testing
