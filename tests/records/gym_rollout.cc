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
  options.max_dns_entries = run.max_dns_entries;
  options.flush_interval = absl::ZeroDuration();  // deterministic bytes
  options.loss_snapshot_interval = absl::InfiniteDuration();
  options.sync = false;
  options.counters = [kernel]() -> absl::StatusOr<SandboxCounters> {
    return *kernel;
  };
  absl::StatusOr<std::shared_ptr<RolloutRecorder>> rec =
      router.Open(path, GymInfo(), GymPolicy(run.audit_agent), options);
  if (!rec.ok()) return rec.status();

  uint64_t withheld = 0;
  auto send = [&](Attempt a, int times = 1, uint32_t tgid_step = 0) {
    // The audit-only agent phase lets its denials through as would-denies.
    if (run.audit_agent && a.generation == 2 && a.verdict == SF_VERDICT_DENY) {
      a.verdict = SF_VERDICT_AUDIT_DENY;
    }
    for (int i = 0; i < times; ++i) {
      if (a.verdict == SF_VERDICT_ALLOW) {
        ++kernel->allowed;
      } else if (a.verdict == SF_VERDICT_AUDIT_DENY) {
        ++kernel->allowed;
        ++kernel->audit_denied;
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

  auto dns = [&](DnsQueryInfo q, int times = 1) {
    if (run.audit_agent && q.generation == 2 && q.verdict == "blocked") {
      q.verdict = "would_block";
      q.rcode = 0;
      q.addresses = {*IpAddress::Parse("198.51.100.66")};
      q.detail = "audit only: phase \"agent\" would block this name";
    }
    for (int i = 0; i < times; ++i) {
      (*rec)->AddDnsQuery(q);
      q.boot_ns += 250000000;  // 250 ms apart
    }
  };
  const IpAddress model = *IpAddress::Parse("192.0.2.10");
  if (run.dns) {
    dns({.boot_ns = Ms(2010),
         .generation = 2,
         .name = "api.model.test",
         .type = 1,
         .verdict = "allowed",
         .transport = "udp",
         .addresses = {model},
         .matched = "api.model.test",
         .detail = "allowed by api.model.test"},
        5);
    dns({.boot_ns = Ms(2011),
         .generation = 2,
         .name = "api.model.test",
         .type = 28,
         .verdict = "allowed",
         .transport = "udp",
         .matched = "api.model.test",
         .detail = "allowed by api.model.test"},
        5);
    DnsQueryInfo tool = {.boot_ns = Ms(2500),
                         .generation = 2,
                         .name = "x.tool.test",
                         .type = 65,
                         .verdict = "allowed",
                         .transport = "udp",
                         .addresses = {*IpAddress::Parse("192.0.2.20")},
                         .matched = "*.tool.test",
                         .detail = "allowed by *.tool.test"};
    dns(tool);
    tool.boot_ns = Ms(2600);
    tool.transport = "tcp";  // truncated over UDP, asked again over TCP
    tool.addresses.push_back(*IpAddress::Parse("2001:db8::20"));
    dns(tool);
    dns({.boot_ns = Ms(3100),
         .generation = 2,
         .name = "c2vjcmv0.exfil.test",
         .type = 16,
         .verdict = "blocked",
         .rcode = 3,
         .transport = "udp",
         .detail = "no name rule matches"},
        4);
    dns({.boot_ns = Ms(3200),
         .generation = 2,
         .verdict = "malformed",
         .rcode = 1,
         .transport = "udp",
         .detail = "question section cut short"});
    dns({.boot_ns = Ms(3300),
         .generation = 2,
         .name = "flood.test",
         .type = 1,
         .verdict = "rate_limited",
         .replied = false,
         .transport = "udp",
         .detail = "over 2000 queries per second"},
        3);
  }

  // verify: model only; no allows recorded.
  time.Set(Ms(10000));
  if (absl::Status s = (*rec)->BeginPhase("verify"); !s.ok()) return s;
  if (run.dns) {
    // Decided in agent just before the switch, handed over just after it.
    dns({.boot_ns = Ms(9990),
         .generation = 2,
         .name = "c2vjcmv0.exfil.test",
         .type = 16,
         .verdict = "blocked",
         .rcode = 3,
         .transport = "udp",
         .detail = "no name rule matches"});
  }
  (*rec)->BindGeneration(3);
  if (run.dns) {
    dns({.boot_ns = Ms(10100),
         .generation = 3,
         .name = "api.model.test",
         .type = 1,
         .verdict = "allowed",
         .transport = "udp",
         .addresses = {model},
         .matched = "api.model.test",
         .detail = "allowed by api.model.test"},
        2);
  }
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
