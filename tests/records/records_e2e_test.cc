// Records end to end: real sandboxes (cgroups), the real egress programs,
// real sockets to loopback listeners, net_probe children, a reader thread
// feeding the router, and the record file read back. Needs root.
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <thread>
#include <tuple>

#include "absl/strings/str_join.h"
#include "egress/net_event.h"
#include "records/journal.h"
#include "records/recorder.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "support/test_files.h"
#include "tests/egress/egress_fixture.h"

namespace sandfence::testing {
namespace {

std::string Port(uint16_t p) { return std::to_string(p); }

// A reader thread: polls the ring buffer into the router until stopped,
// then the owner drains what is left on its own thread.
class ReaderThread {
 public:
  ReaderThread(NetEventReader* reader, RecordRouter* router)
      : reader_(reader), router_(router) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        absl::StatusOr<int> n = reader_->Poll(5);
        EXPECT_TRUE(n.ok()) << n.status();
        EXPECT_TRUE(router_->Tick().ok());
      }
    });
  }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  ~ReaderThread() { Stop(); }

 private:
  NetEventReader* reader_;
  RecordRouter* router_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class RecordsE2eTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    if (!TestCgroupRoot().empty()) rmdir(TestCgroupRoot().c_str());
  }

  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    SANDFENCE_REQUIRE_HOST(HostIpv6Loopback());
    auto dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_.emplace(*std::move(dir));
    model_ = Listen("127.0.0.2");
    forbidden_ = Listen("127.0.0.4");
    v6_ = Listen("::1");
    v6_other_ = Listen("::1");
  }

  static CompiledPhase MakePhase(const char* name, std::vector<Rule> rules,
                                 v1::Audit::Allowed audit) {
    CompiledPhase p;
    p.name = name;
    p.access = v1::MODEL_ONLY;
    p.rules = std::move(rules);
    p.audit_allowed = audit;
    return p;
  }

  // Starts net_probe in the sandbox; its pid.
  static pid_t Start(const Cgroup& sb, std::vector<std::string> args) {
    SpawnOptions o;
    o.cgroup_fd = sb.fd();
    o.argv = {NetProbePath()};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    auto pid = SpawnInCgroup(o);
    EXPECT_TRUE(pid.ok()) << pid.status();
    return pid.ok() ? *pid : -1;
  }
  // net_probe --repeat N --want E ...: exit 0 iff every attempt got E.
  static int Repeat(const Cgroup& sb, int n, int want,
                    std::vector<std::string> op) {
    std::vector<std::string> args = {"--repeat", std::to_string(n), "--want",
                                     std::to_string(want)};
    args.insert(args.end(), op.begin(), op.end());
    pid_t pid = Start(sb, args);
    if (pid < 0) return -1;
    auto status = WaitForExit(pid);
    return status.ok() ? *status : -1;
  }

  std::optional<ScopedTempDir> dir_;
  Listener model_, forbidden_, v6_, v6_other_;
};

struct Expected {
  const char* phase;
  v1::Verdict verdict;
  const char* protocol;
  const char* address;
  uint16_t port;
  uint64_t count;
  const char* hook;
};

std::string Describe(const v1::NetAttempt& a) {
  return absl::StrCat(a.phase(), " ", v1::Verdict_Name(a.verdict()), " ",
                      a.protocol(), " ", a.address(), ":", a.port(), " x",
                      a.count(), " ", a.hook(), " ", a.command());
}

TEST_F(RecordsE2eTest, TheRecordHoldsExactlyTheAttemptsMade) {
  auto controller = EgressController::Create(PrivateHost());
  ASSERT_TRUE(controller.ok()) << controller.status();
  EgressController& c = **controller;
  auto sb = Cgroup::Create(absl::StrCat(TestCgroupRoot(), "/known"));
  ASSERT_TRUE(sb.ok()) << sb.status();

  CompiledPolicy policy;
  policy.name = "records-e2e";
  policy.content_hash = "0123";
  Rule model = TcpRule("127.0.0.2", model_.port);
  model.source = RuleSource::kModel;
  model.origin = "model.test";
  Rule v6 = TcpRule("::1", v6_.port);
  v6.origin = "v6.test";
  policy.phases = {
      MakePhase("setup", {model}, v1::Audit::ALL),
      MakePhase("agent", {model, v6}, v1::Audit::FIRST_PER_DESTINATION)};

  RecordRouter router;
  RolloutInfo info;
  info.rollout_id = "e2e-known";
  info.cgroup_path = sb->path();
  info.cgroup_id = sb->id();
  const uint64_t id = sb->id();
  RecorderOptions options;
  options.counters = [&c, id] { return c.Counters(id); };
  const std::string path = dir_->Path("known.sfrec");
  auto rec = router.Open(path, info, policy, options);
  ASSERT_TRUE(rec.ok()) << rec.status();
  auto reader = NetEventReader::Create(
      c.events_fd(), [&](const NetEvent& e) { router.OnEvent(e); });
  ASSERT_TRUE(reader.ok());
  ReaderThread thread(reader->get(), &router);

  const std::string m = Port(model_.port), f = Port(forbidden_.port);
  ASSERT_TRUE((*rec)->BeginPhase("setup").ok());
  ASSERT_TRUE(c.AddSandbox(sb->fd(), sb->ref(), policy.phases[0]).ok());
  (*rec)->BindGeneration(*c.Generation(id));
  EXPECT_EQ(Repeat(*sb, 3, 0, {"tcp-connect", "127.0.0.2", m}), 0);
  EXPECT_EQ(Repeat(*sb, 2, EPERM, {"tcp-connect", "127.0.0.4", f}), 0);

  ASSERT_TRUE((*rec)->BeginPhase("agent").ok());
  ASSERT_TRUE(c.SwitchPhase(id, policy.phases[1]).ok());
  (*rec)->BindGeneration(*c.Generation(id));
  EXPECT_EQ(Repeat(*sb, 5, 0, {"tcp-connect", "127.0.0.2", m}), 0);
  EXPECT_EQ(Repeat(*sb, 7, EPERM, {"tcp-connect", "127.0.0.4", f}), 0);
  EXPECT_EQ(Repeat(*sb, 4, EPERM, {"udp-sendto", "127.0.0.4", f}), 0);
  EXPECT_EQ(Repeat(*sb, 2, EPERM, {"tcp-connect", "::1", Port(v6_other_.port)}),
            0);
  EXPECT_EQ(Repeat(*sb, 1, 0, {"tcp-connect", "::1", Port(v6_.port)}), 0);

  // The end, in order: the children are gone; stop and drain the reader;
  // then the kernel's counters.
  thread.Stop();
  ASSERT_TRUE((*reader)->Drain().ok());
  auto counters = c.RemoveSandbox(id);
  ASSERT_TRUE(counters.ok());
  auto outcome = router.Close(
      id, {.kernel = *counters, .decode_errors = (*reader)->decode_errors()});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->lossy) << absl::StrJoin(outcome->warnings, "\n");

  auto r = ReadRecordFile(path);
  ASSERT_TRUE(r.ok()) << r.status();
  const Expected expected[] = {
      {"setup", v1::VERDICT_ALLOW, "tcp", "127.0.0.2", model_.port, 3,
       "connect4"},
      {"setup", v1::VERDICT_DENY, "tcp", "127.0.0.4", forbidden_.port, 2,
       "connect4"},
      // First per destination: five connects, one reported.
      {"agent", v1::VERDICT_ALLOW, "tcp", "127.0.0.2", model_.port, 1,
       "connect4"},
      {"agent", v1::VERDICT_DENY, "tcp", "127.0.0.4", forbidden_.port, 7,
       "connect4"},
      {"agent", v1::VERDICT_DENY, "udp", "127.0.0.4", forbidden_.port, 4,
       "sendmsg4"},
      {"agent", v1::VERDICT_DENY, "tcp", "::1", v6_other_.port, 2, "connect6"},
      {"agent", v1::VERDICT_ALLOW, "tcp", "::1", v6_.port, 1, "connect6"},
  };
  std::vector<std::string> seen;
  for (const v1::NetAttempt& a : r->net_attempt()) seen.push_back(Describe(a));
  const std::string all = absl::StrJoin(seen, "\n");
  EXPECT_EQ(r->net_attempt_size(), static_cast<int>(std::size(expected)))
      << all;
  for (const Expected& e : expected) {
    const v1::NetAttempt* found = nullptr;
    for (const v1::NetAttempt& a : r->net_attempt()) {
      if (a.phase() == e.phase && a.verdict() == e.verdict &&
          a.protocol() == e.protocol && a.address() == e.address &&
          a.port() == e.port) {
        found = &a;
      }
    }
    const std::string what =
        absl::StrCat(e.phase, " ", e.protocol, " ", e.address, ":", e.port);
    ASSERT_NE(found, nullptr) << what << " missing from:\n" << all;
    EXPECT_EQ(found->count(), e.count) << what;
    EXPECT_EQ(found->hook(), e.hook) << what;
    EXPECT_EQ(found->command(), "net_probe") << what;
    if (e.verdict == v1::VERDICT_ALLOW &&
        std::string(e.address) == "127.0.0.2") {
      EXPECT_EQ(found->allowed_as(), "model.test") << what;
      EXPECT_EQ(found->rule(), absl::StrCat("tcp 127.0.0.2:", model_.port));
    }
  }

  // The timeline and the balance: 9 allowed (4 not reported), 15 denied.
  ASSERT_EQ(r->timeline_size(), 2);
  EXPECT_NE(r->timeline(0).generation(), r->timeline(1).generation());
  const v1::LossAccounting& l = r->loss();
  EXPECT_EQ(l.kernel_allowed(), 9u);
  EXPECT_EQ(l.kernel_allowed_unreported(), 4u);
  EXPECT_EQ(l.kernel_denied(), 15u);
  EXPECT_EQ(l.kernel_events_lost(), 0u);
  EXPECT_EQ(l.events_recorded(), 20u);
  EXPECT_EQ(EventsToRecord(l), EventsAccountedFor(l));
  EXPECT_TRUE(r->complete());
  EXPECT_FALSE(r->lossy());
}

TEST_F(RecordsE2eTest, AFloodThroughASmallRingBufferIsAccountedExactly) {
  // One page of ring buffer against three children hammering as fast as
  // they can while a reader thread drains it: every verdict stays what it
  // must be, the folded counts equal the events read, and the kernel's
  // attempts = recorded + lost, exactly.
  EgressOptions small_ring;
  small_ring.ring_bytes = 4096;
  auto controller = EgressController::Create(PrivateHost(), small_ring);
  ASSERT_TRUE(controller.ok()) << controller.status();
  EgressController& c = **controller;
  auto sb = Cgroup::Create(absl::StrCat(TestCgroupRoot(), "/flood"));
  ASSERT_TRUE(sb.ok()) << sb.status();
  const uint64_t id = sb->id();

  CompiledPolicy policy;
  policy.name = "records-flood";
  policy.phases = {MakePhase("agent", {TcpRule("127.0.0.2", model_.port)},
                             v1::Audit::FIRST_PER_DESTINATION)};
  RecordRouter router;
  RolloutInfo info;
  info.cgroup_path = sb->path();
  info.cgroup_id = id;
  const std::string path = dir_->Path("flood.sfrec");
  auto rec = router.Open(path, info, policy);
  ASSERT_TRUE(rec.ok()) << rec.status();
  // What the reader saw, per (verdict, protocol): the truth for the counts.
  std::map<std::pair<int, int>, uint64_t> read;
  auto reader = NetEventReader::Create(c.events_fd(), [&](const NetEvent& e) {
    if (e.sandbox == id) ++read[{e.verdict, e.protocol}];
    router.OnEvent(e);
  });
  ASSERT_TRUE(reader.ok());
  ReaderThread thread(reader->get(), &router);

  ASSERT_TRUE((*rec)->BeginPhase("agent").ok());
  ASSERT_TRUE(c.AddSandbox(sb->fd(), sb->ref(), policy.phases[0]).ok());
  (*rec)->BindGeneration(*c.Generation(id));

  constexpr int kUdp = 20000, kTcp = 10000, kAllowed = 2000;
  const std::string f = Port(forbidden_.port);
  const pid_t children[] = {
      Start(*sb, {"--repeat", std::to_string(kUdp), "--want",
                  std::to_string(EPERM), "udp-sendto", "127.0.0.4", f}),
      Start(*sb, {"--repeat", std::to_string(kTcp), "--want",
                  std::to_string(EPERM), "tcp-connect", "127.0.0.4", f}),
      Start(*sb, {"--repeat", std::to_string(kAllowed), "--want", "0",
                  "tcp-connect", "127.0.0.2", Port(model_.port)}),
  };
  for (pid_t pid : children) {
    ASSERT_GT(pid, 0);
    EXPECT_EQ(*WaitForExit(pid), 0) << "a verdict changed under the flood";
  }

  thread.Stop();
  ASSERT_TRUE((*reader)->Drain().ok());
  auto counters = c.RemoveSandbox(id);
  ASSERT_TRUE(counters.ok());
  auto outcome = router.Close(
      id, {.kernel = *counters, .decode_errors = (*reader)->decode_errors()});
  ASSERT_TRUE(outcome.ok()) << outcome.status();

  EXPECT_EQ(counters->denied, static_cast<uint64_t>(kUdp + kTcp));
  EXPECT_EQ(counters->allowed, static_cast<uint64_t>(kAllowed));
  EXPECT_EQ(counters->allowed_unreported, static_cast<uint64_t>(kAllowed - 1));

  auto r = ReadRecordFile(path);
  ASSERT_TRUE(r.ok()) << r.status();
  std::map<std::pair<int, int>, uint64_t> recorded;
  for (const v1::NetAttempt& a : r->net_attempt()) {
    EXPECT_FALSE(a.overflow());
    recorded[{
        a.verdict() == v1::VERDICT_ALLOW ? SF_VERDICT_ALLOW : SF_VERDICT_DENY,
        a.protocol() == "udp" ? IPPROTO_UDP : IPPROTO_TCP}] += a.count();
  }
  EXPECT_EQ(recorded, read) << "folded counts differ from the events read";
  EXPECT_LE(r->net_attempt_size(), 3) << "one entry per destination";

  const v1::LossAccounting& l = r->loss();
  uint64_t total_read = 0;
  for (const auto& [key, n] : read) total_read += n;
  EXPECT_EQ(l.events_recorded(), total_read);
  EXPECT_EQ(l.kernel_events_lost(), counters->events_lost);
  EXPECT_EQ(EventsToRecord(l), static_cast<uint64_t>(kUdp + kTcp + 1));
  EXPECT_EQ(l.events_recorded() + l.kernel_events_lost() + l.reader_dropped(),
            EventsToRecord(l))
      << "attempts = recorded + lost";
  EXPECT_EQ(r->lossy(), l.kernel_events_lost() > 0);
  std::printf(
      "[ measured ] flood: %llu events read, %llu lost in the kernel "
      "(ring buffer of 4096 bytes)\n",
      static_cast<unsigned long long>(l.events_recorded()),
      static_cast<unsigned long long>(l.kernel_events_lost()));
}

}  // namespace
}  // namespace sandfence::testing
