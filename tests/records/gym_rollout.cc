#include "tests/records/gym_rollout.h"

#include "tests/records/records_test_util.h"

namespace sandfence::testing {

absl::StatusOr<RecordOutcome> RecordGymRollout(const std::string& path,
                                               const GymRun& run) {
  FakeTime time;
  RecordRouter router(time.clock());
  // What the kernel has counted so far, for loss snapshots.
  auto kernel = std::make_shared<SandboxCounters>();
  RecorderOptions options;
  options.max_entries = run.max_entries;
  options.flush_interval = absl::ZeroDuration();  // deterministic bytes
  options.loss_snapshot_interval = absl::InfiniteDuration();
  options.sync = false;
  options.counters = [kernel]() -> absl::StatusOr<SandboxCounters> {
    return *kernel;
  };
  absl::StatusOr<std::shared_ptr<RolloutRecorder>> rec =
      router.Open(path, GymInfo(), GymPolicy(), options);
  if (!rec.ok()) return rec.status();

  uint64_t withheld = 0;
  auto send = [&](Attempt a, int times = 1, uint32_t tgid_step = 0) {
    for (int i = 0; i < times; ++i) {
      if (a.verdict == SF_VERDICT_ALLOW) {
        ++kernel->allowed;
      } else {
        ++kernel->denied;
      }
      if (a.verdict == SF_VERDICT_DENY && withheld < run.events_lost) {
        ++withheld;
        ++kernel->events_lost;
      } else {
        router.OnEvent(MakeEvent(a));
      }
      a.boot_ns += 6500000;  // 6.5 ms apart
      a.tgid += tgid_step;
    }
  };
  auto unreported = [&](uint64_t n) {
    kernel->allowed += n;
    kernel->allowed_unreported += n;
  };

  // setup: inherit, every allow recorded.
  time.Set(Ms(0));
  if (absl::Status s = (*rec)->BeginPhase("setup"); !s.ok()) return s;
  (*rec)->BindGeneration(1);
  send({.addr = "198.51.100.53",
        .port = 53,
        .verdict = SF_VERDICT_ALLOW,
        .reason = SF_REASON_UNRESTRICTED,
        .protocol = IPPROTO_UDP,
        .sock_type = SOCK_DGRAM,
        .hook = SF_HOOK_SENDMSG4,
        .comm = "pip",
        .tgid = 200,
        .boot_ns = Ms(90)});
  const Attempt pypi = {.addr = "198.51.100.10",
                        .verdict = SF_VERDICT_ALLOW,
                        .reason = SF_REASON_UNRESTRICTED,
                        .comm = "pip",
                        .tgid = 200,
                        .boot_ns = Ms(100)};
  send(pypi, 3);
  // An event for a sandbox with no open rollout.
  router.OnEvent(MakeEvent({.sandbox = 9999}));

  // agent: model and tools; first allow per destination recorded.
  time.Set(Ms(2000));
  if (absl::Status s = (*rec)->BeginPhase("agent"); !s.ok()) return s;
  // Judged in setup just before the switch, read just after it.
  Attempt late = pypi;
  late.boot_ns = Ms(1990);
  send(late);
  (*rec)->BindGeneration(2);
  send({.addr = "192.0.2.10",
        .port = 8000,
        .verdict = SF_VERDICT_ALLOW,
        .reason = SF_REASON_RULE,
        .comm = "python3",
        .tgid = 300,
        .rule_id = 0,
        .generation = 2,
        .boot_ns = Ms(2050)});
  unreported(6);
  send({.comm = "curl", .tgid = 4321, .generation = 2, .boot_ns = Ms(2100)},
       1200, 1);
  send({.comm = "wget", .tgid = 5000, .generation = 2, .boot_ns = Ms(2200)}, 7);
  send({.addr = "192.0.2.99",
        .port = 53,
        .protocol = IPPROTO_UDP,
        .sock_type = SOCK_DGRAM,
        .hook = SF_HOOK_SENDMSG4,
        .comm = "python3",
        .tgid = 300,
        .generation = 2,
        .boot_ns = Ms(3000)},
       4);
  send({.addr = "0.0.0.0",
        .port = 0,
        .reason = SF_REASON_SOCKET_TYPE,
        .protocol = IPPROTO_ICMP,
        .sock_type = SOCK_RAW,
        .hook = SF_HOOK_SOCK_CREATE,
        .comm = "ping",
        .tgid = 310,
        .generation = 2,
        .boot_ns = Ms(4000)});
  send({.addr = "2001:db8::5",
        .hook = SF_HOOK_CONNECT6,
        .comm = "python3",
        .tgid = 300,
        .generation = 2,
        .boot_ns = Ms(5000)},
       2);

  // verify: model only; no allows recorded.
  time.Set(Ms(10000));
  if (absl::Status s = (*rec)->BeginPhase("verify"); !s.ok()) return s;
  (*rec)->BindGeneration(3);
  unreported(2);
  send({.comm = "pytest", .tgid = 400, .generation = 3, .boot_ns = Ms(10500)});

  time.Set(Ms(12500));
  if (!run.finalize) {
    if (absl::Status s = router.Tick(); !s.ok()) return s;
    return RecordOutcome{};
  }
  FinalCounts counts;
  if (run.read_counters) counts.kernel = *kernel;
  counts.decode_errors = run.decode_errors;
  return router.Close(kSandboxId, counts);
}

}  // namespace sandfence::testing
