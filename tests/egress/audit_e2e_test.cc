// Audit-only phases in the kernel (issue 15): a sandbox whose phase says
// enforce: AUDIT judges every attempt as it would under ENFORCE, lets it
// through, and reports each one it would have denied as a would-deny
// (SF_VERDICT_AUDIT_DENY) with the denial's reason, counted apart. What an
// audit phase never relaxes: another sandbox's denial (an enforcing
// ancestor or descendant still denies), and the DNS filters' range. Real
// cgroups, programs, sockets and child processes; loopback only.
#include <sys/stat.h>

#include <cerrno>
#include <deque>
#include <string>
#include <vector>

#include "common/status.h"
#include "egress/net_event.h"
#include "support/egress_kernel_fixture.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "tests/egress/egress_fixture.h"

namespace sandfence::testing {
namespace {

class AuditE2eTest : public EgressKernelTest {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_HOST(HostIpv6Loopback());
    EgressKernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    model_ = Listen("127.0.0.2");
    tool_ = Listen("127.0.0.3");
    forbidden_ = Listen("127.0.0.4");
    v6_ = Listen("::1");
    v6_other_ = Listen("::1");
    ReadEvents();
  }

  void TearDown() override {
    EgressKernelTest::TearDown();
    // Innermost (last) first: a cgroup with a child cannot be removed.
    while (!sandboxes_.empty()) sandboxes_.pop_back();
  }

  // The model at 127.0.0.2 and ::1 on v6_'s port (TCP and UDP), plus
  // `more`; audit only or enforcing.
  CompiledPhase ModelOnly(bool audit_only, std::vector<Rule> more = {}) {
    std::vector<Rule> rules = {TcpRule("127.0.0.2", model_.port),
                               TcpRule("::1", v6_.port),
                               UdpRule("::1", v6_.port)};
    rules.insert(rules.end(), more.begin(), more.end());
    CompiledPhase p = Phase(v1::MODEL_ONLY, std::move(rules));
    p.name = audit_only ? "audit" : "enforce";
    p.audit_only = audit_only;
    return p;
  }

  // A sandbox at `parent`/name (parent "": the test root), with `phase`;
  // kept until TearDown.
  const Cgroup& NewSandbox(const CompiledPhase& phase,
                           const std::string& parent = "") {
    sandboxes_.push_back(EgressKernelTest::NewSandbox(phase, parent));
    return sandboxes_.back();
  }

  // The events since the last call (earlier tests' are dropped).
  std::vector<NetEvent> TakeEvents() {
    EXPECT_TRUE(reader_->Drain().ok());
    std::vector<NetEvent> out = std::move(events_);
    events_.clear();
    return out;
  }

  static std::string Describe(const std::vector<NetEvent>& events) {
    std::string out;
    for (const NetEvent& e : events) {
      absl::StrAppend(&out, "\n  ", HookName(e.hook), " ",
                      VerdictName(e.verdict), " (", ReasonName(e.reason),
                      ") sandbox ", e.sandbox);
    }
    return out.empty() ? " none" : out;
  }

  static std::string Port(uint16_t p) { return std::to_string(p); }

  Listener model_, tool_, forbidden_, v6_, v6_other_;
  std::deque<Cgroup> sandboxes_;  // references stay valid as it grows
};

// Each row: an attempt an enforcing phase denies (the table of
// egress_e2e_test), which the audit phase lets through, reported once as a
// would-deny by the hook that would have denied it.
TEST_F(AuditE2eTest, AnAuditPhaseLetsForbiddenAttemptsThroughAsWouldDeny) {
  const Cgroup& sb = NewSandbox(ModelOnly(/*audit_only=*/true));
  struct Case {
    const char* name;
    std::vector<std::string> args;
    sf_hook hook;
    sf_reason reason;
    const Listener* arrives = nullptr;  // a datagram must reach it
    bool keep_caps = false;
  };
  const std::string f = Port(forbidden_.port), v6o = Port(v6_other_.port);
  // clang-format off
  const Case cases[] = {
      {"TCP connect to a forbidden host", {"tcp-connect", "127.0.0.4", f},
       SF_HOOK_CONNECT4, SF_REASON_NO_RULE},
      {"IPv4-mapped IPv6 to a forbidden host",
       {"tcp-connect", "::ffff:127.0.0.4", f}, SF_HOOK_CONNECT6,
       SF_REASON_NO_RULE},
      {"IPv6 to a port no rule allows", {"tcp-connect", "::1", v6o},
       SF_HOOK_CONNECT6, SF_REASON_NO_RULE},
      {"UDP sendto a forbidden host", {"udp-sendto", "127.0.0.4", f},
       SF_HOOK_SENDMSG4, SF_REASON_NO_RULE, &forbidden_},
      {"IPv6 UDP sendto a forbidden port", {"udp-sendto", "::1", v6o},
       SF_HOOK_SENDMSG6, SF_REASON_NO_RULE, &v6_other_},
      {"a raw socket, with CAP_NET_RAW", {"raw-socket", "127.0.0.4", "0"},
       SF_HOOK_SOCK_CREATE, SF_REASON_SOCKET_TYPE, nullptr, true},
  };
  // clang-format on
  TakeEvents();
  uint64_t would_deny = 0;
  for (const Case& c : cases) {
    if (c.arrives) DrainDatagrams(*c.arrives);
    const int got = Probe(sb, c.args, /*new_netns=*/false, c.keep_caps);
    EXPECT_EQ(got, 0) << c.name << ": " << ProbeOutcome(got)
                      << " instead of going through";
    if (c.arrives) {
      EXPECT_TRUE(DatagramArrived(*c.arrives))
          << c.name << ": the datagram did not arrive (the backstop?)";
    }
    const std::vector<NetEvent> events = TakeEvents();
    ASSERT_EQ(events.size(), 1u) << c.name << ":" << Describe(events);
    const NetEvent& e = events[0];
    EXPECT_EQ(e.verdict, SF_VERDICT_AUDIT_DENY) << c.name;
    EXPECT_TRUE(e.would_deny() && !e.denied()) << c.name;
    EXPECT_EQ(e.hook, c.hook) << c.name << ":" << Describe(events);
    EXPECT_EQ(e.reason, c.reason) << c.name;
    EXPECT_EQ(e.rule_id, SF_NO_RULE) << c.name;
    EXPECT_EQ(e.sandbox, sb.id()) << c.name;
    ++would_deny;
  }
  // What the phase allows is an ordinary allow, not a would-deny.
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", Port(model_.port)}), 0);
  const std::vector<NetEvent> allowed = TakeEvents();
  ASSERT_EQ(allowed.size(), 1u) << Describe(allowed);
  EXPECT_EQ(allowed[0].verdict, SF_VERDICT_ALLOW);
  EXPECT_EQ(allowed[0].reason, SF_REASON_RULE);
  EXPECT_EQ(allowed[0].rule_id, 0u);

  // Never relaxed: the DNS filters' range (another sandbox's filter would
  // take this sandbox's queries for its own).
  EXPECT_TRUE(IsEperm(Probe(sb, {"tcp-connect", "127.83.0.1", "53"})));
  const std::vector<NetEvent> range = TakeEvents();
  ASSERT_EQ(range.size(), 1u) << Describe(range);
  EXPECT_EQ(range[0].verdict, SF_VERDICT_DENY);
  EXPECT_EQ(range[0].reason, SF_REASON_DNS_FILTER_RANGE);

  auto counters = controller_->Counters(sb.id());
  ASSERT_TRUE(counters.ok()) << counters.status();
  EXPECT_EQ(counters->audit_denied, would_deny);
  EXPECT_EQ(counters->denied, 1u) << "the filters' range only";
  EXPECT_EQ(counters->allowed, would_deny + 1)
      << "a would-deny is an allowed attempt";
  EXPECT_EQ(counters->events_lost, 0u);
}

// The same sandbox switched to an enforcing phase denies again, and back:
// the audit bit is part of the phase, flipped with the generation.
TEST_F(AuditE2eTest, SwitchingBetweenAuditAndEnforceFlipsTheVerdict) {
  const Cgroup& sb = NewSandbox(ModelOnly(/*audit_only=*/false));
  const std::vector<std::string> forbidden = {"tcp-connect", "127.0.0.4",
                                              Port(forbidden_.port)};
  EXPECT_TRUE(IsEperm(Probe(sb, forbidden)));
  ASSERT_TRUE(
      controller_->SwitchPhase(sb.id(), ModelOnly(/*audit_only=*/true)).ok());
  EXPECT_EQ(Probe(sb, forbidden), 0);
  ASSERT_TRUE(
      controller_->SwitchPhase(sb.id(), ModelOnly(/*audit_only=*/false)).ok());
  EXPECT_TRUE(IsEperm(Probe(sb, forbidden)));
  std::vector<sf_verdict> verdicts;
  for (const NetEvent& e : TakeEvents()) {
    if (e.sandbox == sb.id()) verdicts.push_back(e.verdict);
  }
  EXPECT_EQ(verdicts,
            (std::vector<sf_verdict>{SF_VERDICT_DENY, SF_VERDICT_AUDIT_DENY,
                                     SF_VERDICT_DENY}));
}

// Audit never widens an enforcing sandbox around it (or inside it): the
// outer allows the model and the tool, the inner the model only.
TEST_F(AuditE2eTest, AnEnforcingSandboxStillDeniesAroundOrInsideAnAuditOne) {
  struct Nesting {
    const char* what;
    bool outer_audit, inner_audit;
  };
  const Nesting nestings[] = {
      {"enforcing outer, audit inner", false, true},
      {"audit outer, enforcing inner", true, false},
  };
  const std::string t = Port(tool_.port), f = Port(forbidden_.port),
                    m = Port(model_.port);
  for (const Nesting& n : nestings) {
    SCOPED_TRACE(n.what);
    const Cgroup& outer = NewSandbox(
        ModelOnly(n.outer_audit, {TcpRule("127.0.0.3", tool_.port)}));
    const Cgroup& inner = NewSandbox(ModelOnly(n.inner_audit), outer.path());
    TakeEvents();

    // The forbidden host: the enforcing one denies, wherever it sits.
    EXPECT_TRUE(IsEperm(Probe(inner, {"tcp-connect", "127.0.0.4", f})));
    std::vector<NetEvent> events = TakeEvents();
    ASSERT_FALSE(events.empty());
    for (const NetEvent& e : events) {
      EXPECT_EQ(e.verdict, SF_VERDICT_DENY) << Describe(events);
      EXPECT_EQ(e.sandbox, n.outer_audit ? inner.id() : outer.id())
          << Describe(events);
    }

    // The tool: the outer allows it, the inner does not.
    const int tool = Probe(inner, {"tcp-connect", "127.0.0.3", t});
    events = TakeEvents();
    if (n.inner_audit) {
      EXPECT_EQ(tool, 0) << ProbeOutcome(tool);
      ASSERT_FALSE(events.empty());
      for (const NetEvent& e : events) {
        EXPECT_EQ(e.verdict, SF_VERDICT_AUDIT_DENY) << Describe(events);
        EXPECT_EQ(e.sandbox, inner.id()) << Describe(events);
      }
    } else {
      EXPECT_TRUE(IsEperm(tool)) << "the enforcing inner narrows";
      ASSERT_FALSE(events.empty());
      for (const NetEvent& e : events) {
        EXPECT_EQ(e.verdict, SF_VERDICT_DENY) << Describe(events);
        EXPECT_EQ(e.sandbox, inner.id()) << Describe(events);
      }
    }

    // The model: both allow.
    EXPECT_EQ(Probe(inner, {"tcp-connect", "127.0.0.2", m}), 0);
    for (const NetEvent& e : TakeEvents()) {
      EXPECT_EQ(e.verdict, SF_VERDICT_ALLOW) << HookName(e.hook);
    }

    // In the outer alone: its own verdicts.
    const int outer_forbidden = Probe(outer, {"tcp-connect", "127.0.0.4", f});
    if (n.outer_audit) {
      EXPECT_EQ(outer_forbidden, 0) << ProbeOutcome(outer_forbidden);
    } else {
      EXPECT_TRUE(IsEperm(outer_forbidden));
    }
    TakeEvents();
    TearDown();
  }
}

// A switch into an audit-only phase cuts nothing: its hooks would let those
// connections be opened, so the cut leaves them open (they are the
// would-denies the record shows). The same connection is cut at the switch
// to the enforcing phase after it.
TEST_F(AuditE2eTest, ASwitchIntoAnAuditPhaseCutsNothing) {
  if (!KernelCanCutSockets()) {
    GTEST_SKIP() << "not cut here: " << controller_->cut_unavailable();
  }
  const Cgroup& sb = NewSandbox(Phase(v1::INHERIT, {}));
  absl::StatusOr<HeldProbe> held = HeldProbe::Start(
      sb.fd(), {"tcp-connected-send", "127.0.0.4", Port(forbidden_.port)});
  ASSERT_TRUE(held.ok()) << "not connected in the inherit phase: "
                         << held.status();

  ASSERT_TRUE(
      controller_->SwitchPhase(sb.id(), ModelOnly(/*audit_only=*/true)).ok());
  absl::StatusOr<std::vector<CutConnection>> cut =
      controller_->CutConnections(sb.ref());
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_TRUE(cut->empty()) << "cut by an audit-only phase: "
                            << (cut->empty() ? "" : cut->front().peer.ToString());

  ASSERT_TRUE(
      controller_->SwitchPhase(sb.id(), ModelOnly(/*audit_only=*/false)).ok());
  cut = controller_->CutConnections(sb.ref());
  ASSERT_TRUE(cut.ok()) << cut.status();
  ASSERT_EQ(cut->size(), 1u) << "the enforcing phase cuts it";
  EXPECT_EQ(cut->front().peer.ToString(), "127.0.0.4");
  EXPECT_EQ(cut->front().port, forbidden_.port);
  absl::StatusOr<int> status = held->Resume();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, ECONNABORTED) << ProbeOutcome(*status);
}

}  // namespace
}  // namespace sandfence::testing
