// Egress budgets (issue 40) end to end: real sandboxes, the real programs,
// a real child that tries to carry more out than its budget allows through
// what its phase allows (the model's own address). Written as the agent
// would: a large upload on one connection, a datagram flood, many
// connections, a second address once the first is spent, and the budget's
// counts surviving a phase switch. Every target is on loopback.
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <thread>

#include "common/status.h"
#include "egress/net_event.h"
#include "support/egress_kernel_fixture.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "tests/egress/egress_fixture.h"

namespace sandfence::testing {
namespace {

constexpr uint64_t kUploadBudget = 1u << 20;

class BudgetE2eTest : public EgressKernelTest {
 protected:
  void SetUp() override {
    EgressKernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    model_ = Listen("127.0.0.2");
    other_ = Listen("127.0.0.3");
    ReadEvents();
  }

  // Both listeners' addresses, TCP and UDP, on their ports, and the budget.
  CompiledPhase Allowed(const EgressBudget& budget) const {
    CompiledPhase p = Phase(v1::MODEL_ONLY,
                            {TcpRule("127.0.0.2", model_.port),
                             UdpRule("127.0.0.2", model_.port),
                             TcpRule("127.0.0.3", other_.port),
                             UdpRule("127.0.0.3", other_.port)});
    p.egress_budget = budget;
    return p;
  }

  // The sandbox's denials since the last call with `reason`.
  std::vector<NetEvent> Denials(uint64_t sandbox, sf_reason reason) {
    EXPECT_TRUE(reader_->Drain().ok());
    std::vector<NetEvent> out;
    for (const NetEvent& e : events_) {
      if (e.sandbox == sandbox && e.denied() && e.reason == reason) {
        out.push_back(e);
      }
    }
    return out;
  }

  EgressBudgetCounts Budget(uint64_t sandbox) {
    absl::StatusOr<SandboxCounters> c = controller_->Counters(sandbox);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok() || !c->budget) {
      ADD_FAILURE() << "sandbox " << sandbox << " has no budget entry";
      return {};
    }
    return *c->budget;
  }

  Listener model_, other_;
};

// Accepts one connection on l and reads everything until it has been idle
// for idle_ms; returns the bytes read.
uint64_t ReadOneUpload(const Listener& l, int idle_ms) {
  pollfd a{.fd = l.tcp.get(), .events = POLLIN, .revents = 0};
  if (poll(&a, 1, 10000) != 1) return 0;
  UniqueFd c(accept(l.tcp.get(), nullptr, nullptr));
  if (!c) return 0;
  uint64_t total = 0;
  static char buf[256 * 1024];
  for (;;) {
    pollfd p{.fd = c.get(), .events = POLLIN, .revents = 0};
    if (poll(&p, 1, idle_ms) != 1) break;
    ssize_t n = recv(c.get(), buf, sizeof(buf), 0);
    if (n <= 0) break;
    total += static_cast<uint64_t>(n);
  }
  return total;
}

// Datagrams queued on l's UDP socket, consumed.
int CountDatagrams(const Listener& l) {
  int n = 0;
  char buf[2048];
  pollfd p{.fd = l.udp.get(), .events = POLLIN, .revents = 0};
  while (poll(&p, 1, 200) == 1 &&
         recv(l.udp.get(), buf, sizeof(buf), MSG_DONTWAIT) >= 0) {
    ++n;
  }
  return n;
}

TEST_F(BudgetE2eTest, AByteBudgetStopsALargeUploadAtTheBudget) {
  Cgroup sb = NewSandbox(Allowed({.bytes = kUploadBudget}));
  uint64_t received = 0;
  std::thread server([&] { received = ReadOneUpload(model_, 1500); });
  // 8 MiB through an allowed connection: the budget's packets go, the rest
  // are dropped, and the sender stalls with its socket buffer full.
  const int status =
      Probe(sb, {"tcp-upload", "127.0.0.2", std::to_string(model_.port)});
  server.join();
  EXPECT_EQ(status, EAGAIN) << ProbeOutcome(status)
                            << ": the upload should stall at the budget";
  EXPECT_LE(received, kUploadBudget);
  // Within one packet (a 64 KiB segment on loopback) of the budget.
  EXPECT_GE(received, kUploadBudget - (64u << 10)) << received;

  const EgressBudgetCounts b = Budget(sb.id());
  EXPECT_EQ(b.limits.bytes, kUploadBudget);
  EXPECT_LE(b.bytes, kUploadBudget);
  EXPECT_GE(b.bytes, received);
  EXPECT_GT(b.dropped_packets, 0u);
  EXPECT_EQ(b.connections, 1u);
  // Recorded once, by the backstop, with the destination.
  std::vector<NetEvent> over = Denials(sb.id(), SF_REASON_BUDGET_BYTES);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].hook, SF_HOOK_SKB_EGRESS);
  EXPECT_EQ(over[0].addr.ToString(), "127.0.0.2");
  EXPECT_EQ(over[0].port, model_.port);

  // Spent: a new connection, even to another allowed address, is denied.
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.3",
                       std::to_string(other_.port)}),
            EPERM);
  std::vector<NetEvent> denied = Denials(sb.id(), SF_REASON_BUDGET_BYTES);
  ASSERT_EQ(denied.size(), 2u);
  EXPECT_EQ(denied[1].hook, SF_HOOK_CONNECT4);
}

TEST_F(BudgetE2eTest, DatagramsStopAtTheByteBudget) {
  // 50 of the flood's 1000-byte datagrams fit exactly.
  Cgroup sb = NewSandbox(Allowed({.bytes = 50000}));
  EXPECT_EQ(Probe(sb, {"udp-flood", "127.0.0.2", std::to_string(model_.port)}),
            EPERM);
  EXPECT_EQ(CountDatagrams(model_), 50);
  EXPECT_EQ(Budget(sb.id()).bytes, 50000u);
  EXPECT_FALSE(Denials(sb.id(), SF_REASON_BUDGET_BYTES).empty());
}

TEST_F(BudgetE2eTest, AConnectionBudgetHoldsAcrossAPhaseSwitch) {
  Cgroup sb = NewSandbox(Allowed({.connections = 3}));
  const std::string port = std::to_string(model_.port);
  EXPECT_EQ(Probe(sb, {"--repeat", "2", "--want", "0", "tcp-connect",
                       "127.0.0.2", port}),
            0);
  // The budget is the rollout's: a new phase does not refill it.
  ASSERT_TRUE(controller_->SwitchPhase(sb.id(), Allowed({.connections = 3}))
                  .ok());
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", port}), 0);
  EXPECT_EQ(Probe(sb, {"tcp-connect", "127.0.0.2", port}), EPERM);
  EXPECT_EQ(Budget(sb.id()).connections, 3u);
  EXPECT_EQ(Denials(sb.id(), SF_REASON_BUDGET_CONNECTIONS).size(), 1u);
}

TEST_F(BudgetE2eTest, ASpentAddressLeavesTheOthersTheirOwnBudget) {
  Cgroup sb = NewSandbox(Allowed({.bytes_per_address = 20000}));
  EXPECT_EQ(Probe(sb, {"udp-flood", "127.0.0.2", std::to_string(model_.port)}),
            EPERM);
  EXPECT_EQ(CountDatagrams(model_), 20);
  EXPECT_EQ(Probe(sb, {"udp-flood", "127.0.0.3", std::to_string(other_.port)}),
            EPERM);
  EXPECT_EQ(CountDatagrams(other_), 20);
  const EgressBudgetCounts b = Budget(sb.id());
  EXPECT_EQ(b.bytes, 40000u);
  EXPECT_EQ(b.addresses, 2u);
  EXPECT_FALSE(Denials(sb.id(), SF_REASON_BUDGET_DEST_BYTES).empty());

  // Everything of the budget goes with the sandbox.
  ASSERT_TRUE(controller_->RemoveSandbox(sb.id()).ok());
  sandbox_ids_.clear();
  EXPECT_FALSE(controller_->Counters(sb.id()).ok());
  EXPECT_EQ(controller_->BudgetAddressesForTest(sb.id()), 0u);
}

// The agent opens its connection while the phase restricts nothing, and
// sends through it once a budgeted phase is in force: its socket carries
// the rollout's budget from its creation, so those bytes count all the same.
TEST_F(BudgetE2eTest, AConnectionOpenedBeforeTheBudgetedPhaseIsCounted) {
  CompiledPhase setup = Phase(v1::INHERIT, {});
  setup.egress_budget = {.bytes = 4};
  Cgroup sb = NewSandbox(setup);
  absl::StatusOr<HeldProbe> held = HeldProbe::Start(
      sb.fd(),
      {"tcp-connected-send", "127.0.0.2", std::to_string(model_.port)});
  ASSERT_TRUE(held.ok()) << held.status();
  // "first" (5 bytes) went in the inherit phase: not counted.
  ASSERT_TRUE(
      controller_->SwitchPhase(sb.id(), Allowed({.bytes = 4})).ok());
  absl::StatusOr<int> status = held->Resume();
  ASSERT_TRUE(status.ok()) << status.status();
  // "second" (6 bytes) is queued (the send succeeds) and never leaves.
  EXPECT_EQ(*status, 0) << ProbeOutcome(*status);
  EXPECT_EQ(ReadOneUpload(model_, 1000), 5u);
  const EgressBudgetCounts b = Budget(sb.id());
  EXPECT_EQ(b.bytes, 0u);
  EXPECT_GT(b.dropped_packets, 0u);
}

TEST_F(BudgetE2eTest, ASandboxWithoutABudgetIsNotCounted) {
  // Another sandbox's budget turns counting on for the host.
  Cgroup budgeted = NewSandbox(Allowed({.bytes = 1000}));
  Cgroup free = NewSandbox(Allowed({}));
  uint64_t received = 0;
  std::thread server([&] { received = ReadOneUpload(model_, 1500); });
  const int status =
      Probe(free, {"tcp-upload", "127.0.0.2", std::to_string(model_.port)});
  server.join();
  EXPECT_EQ(status, 0) << ProbeOutcome(status);
  EXPECT_EQ(received, 8u << 20);
  absl::StatusOr<SandboxCounters> c = controller_->Counters(free.id());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->budget.has_value());
  EXPECT_EQ(Budget(budgeted.id()).bytes, 0u);
}

TEST_F(BudgetE2eTest, AnAuditOnlyPhaseNeitherCountsNorDenies) {
  CompiledPhase audit = Allowed({.connections = 1});
  audit.audit_only = true;
  Cgroup sb = NewSandbox(audit);
  const std::string port = std::to_string(model_.port);
  EXPECT_EQ(Probe(sb, {"--repeat", "3", "--want", "0", "tcp-connect",
                       "127.0.0.2", port}),
            0);
  EXPECT_EQ(Budget(sb.id()).connections, 0u);
}

}  // namespace
}  // namespace sandfence::testing
