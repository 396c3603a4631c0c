// Synthetic events, policies and clocks for the records tests: everything a
// record is made of, without a kernel. Addresses are documentation ranges
// (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32); no test
// here sends a packet.
#ifndef SANDFENCE_TESTS_RECORDS_RECORDS_TEST_UTIL_H_
#define SANDFENCE_TESTS_RECORDS_RECORDS_TEST_UTIL_H_

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compile/compiled_policy.h"
#include "egress/net_event.h"
#include "records/boot_clock.h"
#include "records/recorder.h"

namespace sandfence::testing {

inline constexpr uint64_t kSandboxId = 4242;
// 2024-05-01T12:00:00Z on the wall clock is boot time 1000 s.
inline constexpr int64_t kWallAtBoot1000s = 1714564800LL * 1000000000;
inline constexpr uint64_t kBootStart = 1000ull * 1000000000;
inline constexpr int64_t kBootOffset =
    kWallAtBoot1000s - static_cast<int64_t>(kBootStart);

inline uint64_t Ms(uint64_t ms) { return kBootStart + ms * 1000000; }

// One attempt as the kernel would report it.
struct Attempt {
  const char* addr = "203.0.113.9";
  uint16_t port = 443;
  sf_verdict verdict = SF_VERDICT_DENY;
  sf_reason reason = SF_REASON_NO_RULE;
  uint8_t protocol = IPPROTO_TCP;
  uint8_t sock_type = SOCK_STREAM;
  sf_hook hook = SF_HOOK_CONNECT4;
  const char* comm = "curl";
  uint32_t tgid = 100;
  uint32_t uid = 1000;
  uint32_t rule_id = SF_NO_RULE;
  uint32_t generation = 1;
  uint64_t boot_ns = kBootStart;
  uint64_t sandbox = kSandboxId;
};

inline NetEvent MakeEvent(const Attempt& a) {
  NetEvent e;
  e.hook = a.hook;
  e.verdict = a.verdict;
  e.reason = a.reason;
  e.protocol = a.protocol;
  e.sock_type = a.sock_type;
  e.port = a.port;
  e.rule_id = a.rule_id;
  e.generation = a.generation;
  e.pid = a.tgid;
  e.tgid = a.tgid;
  e.uid = a.uid;
  e.gid = a.uid;
  e.boot_ns = a.boot_ns;
  e.sandbox = a.sandbox;
  e.cgroup = a.sandbox;
  e.addr = *IpAddress::Parse(a.addr);
  e.comm = a.comm;
  return e;
}

// A boot clock whose "now" the test moves.
struct FakeTime {
  std::shared_ptr<uint64_t> now = std::make_shared<uint64_t>(kBootStart);
  BootClock clock() const {
    auto n = now;
    return BootClock(kBootOffset, [n] { return *n; });
  }
  void Set(uint64_t boot_ns) const { *now = boot_ns; }
};

inline Rule MakeRule(L4 protocol, const char* dest, uint16_t port,
                     RuleSource source, const char* origin) {
  Rule r;
  r.protocol = protocol;
  r.dest = *IpPrefix::Parse(dest);
  r.port_first = r.port_last = port;
  r.source = source;
  r.origin = origin;
  return r;
}

// setup: inherit, every allow recorded; agent: model and tools, first allow
// per destination recorded; verify: model only.
// audit_agent: the agent phase is audit only (enforce: AUDIT).
inline CompiledPolicy GymPolicy(bool audit_agent = false) {
  CompiledPolicy p;
  p.name = "gym-default";
  p.content_hash =
      "3f2a9c1e5b7d4f60a8e2c3b1d9f07e6a5c4b3a2918f7e6d5c4b3a29180f7e6d5";
  CompiledPhase setup;
  setup.name = "setup";
  setup.access = v1::INHERIT;
  setup.audit_allowed = v1::Audit::ALL;
  CompiledPhase agent;
  agent.name = "agent";
  agent.access = v1::MODEL_AND_TOOLS;
  agent.rules = {
      MakeRule(L4::kTcp, "192.0.2.10", 8000, RuleSource::kModel,
               "model.internal"),
      MakeRule(L4::kTcp, "192.0.2.20", 443, RuleSource::kTool, "search"),
      MakeRule(L4::kUdp, "192.0.2.53", 53, RuleSource::kDns, "dns"),
  };
  agent.dropped = {DroppedGrant{"https://browser.internal/", "browser",
                                "model_and_tools drops an optional grant it "
                                "cannot reach",
                                RuleSource::kTool}};
  agent.audit_allowed = v1::Audit::FIRST_PER_DESTINATION;
  agent.audit_only = audit_agent;
  CompiledPhase verify;
  verify.name = "verify";
  verify.access = v1::MODEL_ONLY;
  verify.rules = {agent.rules[0]};
  verify.audit_allowed = v1::Audit::NO_ALLOWED;
  p.phases = {setup, agent, verify};
  return p;
}

inline RolloutInfo GymInfo() {
  RolloutInfo info;
  info.rollout_id = "rollout-7f3c";
  info.cgroup_path = "/sys/fs/cgroup/sandfence/run-4242";
  info.cgroup_id = kSandboxId;
  info.host = "node-a";
  info.sandfence_version = "0.1.0";
  return info;
}

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_RECORDS_RECORDS_TEST_UTIL_H_
