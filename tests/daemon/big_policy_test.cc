// A 40,000-rule policy started through RolloutManager (issue 12, item 9):
// the start succeeds and enforces its last rule, and the calls that concern
// other rollouts (List, Health, SetPhase of another rollout) return while it
// is still in progress (held there by a gate: the start itself is fast).
// Correctness only: how long the start takes is bench/'s question
// (bench/start_suite.cc), never asserted here.
//
// Every rule names loopback: 127.0.0.0/8 and ::1. Only 127.0.0.3 (allowed,
// the last rule) and 127.0.0.4 (denied) are ever connected to.
#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/daemon_fixture.h"
#include "daemon/rollout_manager.h"
#include "egress/egress_fixture.h"
#include "gtest/gtest.h"
#include "sandbox/gated_enforcement.h"
#include "support/test_env.h"

namespace sandfence::testing {
namespace {

constexpr int kRules = 40000;

// kRules allow rules: exact IPv4 hosts in 127.1/16, ::1 ports, and /24
// blocks in 127.2/16 - 127.41/16 with port ranges, over tcp, udp and any; none
// of them reaches 127.0.0.3 or 127.0.0.4. The last rule is the one the test
// connects through.
v1::Phase BigPhase(uint16_t last_port) {
  v1::Phase phase;
  phase.set_name("agent");
  phase.set_network_access(v1::MODEL_ONLY);
  phase.mutable_dns()->set_mode(v1::Dns::NONE);
  const v1::Protocol protocols[] = {v1::TCP, v1::UDP, v1::ANY};
  for (int i = 0; i < kRules - 1; ++i) {
    v1::AllowRule* rule = phase.add_allow();
    rule->set_protocol(protocols[i % 3]);
    const int k = i / 4;
    switch (i % 4) {
      case 0:
      case 1:
        rule->set_host(absl::StrFormat("127.1.%d.%d", (i >> 8) & 255, i & 255));
        rule->set_port(1024 + i % 40000);
        break;
      case 2:
        rule->set_host("::1");
        rule->set_port(1024 + k);
        break;
      default:
        rule->set_host(
            absl::StrFormat("127.%d.%d.0/24", 2 + (k >> 8), k & 255));
        rule->mutable_port_range()->set_first(2000 + k);
        rule->mutable_port_range()->set_last(2000 + k + (k % 7));
        break;
    }
  }
  v1::AllowRule* last = phase.add_allow();
  last->set_host("127.0.0.3");
  last->set_port(last_port);
  last->set_name("the last rule");
  return phase;
}

bool Lists(const v1::ListRolloutsResponse& list, const std::string& id) {
  for (const v1::RolloutSummary& r : list.rollout()) {
    if (r.rollout_id() == id) return true;
  }
  return false;
}

class BigPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    model_ = Listen("127.0.0.2");
    dirs_ = MakeDaemonDirs("big");
    options_.pin_dir = dirs_.pin_dir;
    options_.state_dir = dirs_.state();
    options_.records_dir = dirs_.records();
    options_.cgroup_parent = dirs_.cgroups;
    options_.resolvers = {*HostPort::Parse("127.0.0.1:9", 53)};
    // The daemon's kernel enforcement behind a gate at AttachEgress, so
    // that the test holds the big start in the window it checks.
    absl::StatusOr<std::unique_ptr<HostEnforcement>> kernel =
        RolloutManager::KernelEnforcementFor(options_);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    auto gated = std::make_unique<GatedEnforcement>(*std::move(kernel));
    gate_ = gated.get();
    absl::StatusOr<std::unique_ptr<RolloutManager>> m =
        RolloutManager::CreateWith(options_, std::move(gated));
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
    manager_->AdoptAndStart();
  }
  void TearDown() override {
    manager_.reset();
    if (!dirs_.root.empty()) {
      EXPECT_TRUE(RolloutManager::Cleanup(options_).ok());
      rmdir(dirs_.cgroups.c_str());
      std::error_code ignored;
      std::filesystem::remove_all(dirs_.root, ignored);
    }
  }

  v1::StartRolloutRequest Request(const std::string& id) {
    v1::StartRolloutRequest req;
    req.set_rollout_id(id);
    req.mutable_sandbox()->set_create(true);
    req.mutable_endpoints()->add_model(
        absl::StrCat("http://127.0.0.2:", model_.port));
    return req;
  }

  Listener model_;
  DaemonDirs dirs_;
  ManagerOptions options_;
  std::unique_ptr<RolloutManager> manager_;
  GatedEnforcement* gate_ = nullptr;  // owned by manager_
};

TEST_F(BigPolicyTest, OtherCallsReturnDuringTheStartWhichThenEnforces) {
  Listener allowed = Listen("127.0.0.3");
  Listener denied = Listen("127.0.0.4");

  // An unrelated rollout, open before the big one starts.
  v1::StartRolloutRequest small = Request("small");
  small.set_policy_text(R"pb(
    phase {
      name: "a"
      network_access: MODEL_ONLY
      dns { mode: NONE }
    }
    phase { name: "b" network_access: INHERIT }
  )pb");
  ASSERT_TRUE(manager_->Start(small).ok());

  v1::StartRolloutRequest big = Request("big");
  *big.mutable_policy_set()->add_phase() = BigPhase(allowed.port);
  ASSERT_LE(big.ByteSizeLong(), options_.max_request_bytes)
      << "the test's policy must fit in one request";

  std::atomic<bool> done{false};
  absl::StatusOr<v1::StartRolloutResponse> started;
  gate_->Close();
  std::thread starter([&] {
    started = manager_->Start(big);
    done = true;
  });

  // The start holds at the gate once its policy is compiled and its
  // cgroup made, before it attaches, writes its maps and saves its state.
  // Calls issued in that window must not wait for it (one that did would
  // wait for the gate's limit, and `done` would say so).
  const bool held = gate_->WaitingFor(absl::Seconds(60));
  EXPECT_TRUE(held) << "the start never reached AttachEgress";
  if (held) {
    v1::ListRolloutsResponse list = manager_->List();
    EXPECT_FALSE(done) << "List waited for the start of another rollout";
    EXPECT_TRUE(Lists(list, "small"));
    EXPECT_FALSE(Lists(list, "big"))
        << "List showed a rollout whose start is still in progress";
    v1::HealthResponse health = manager_->Health();
    EXPECT_FALSE(done) << "Health waited for the start of another rollout";
    EXPECT_EQ(health.open_rollouts(), 1u);
    absl::StatusOr<v1::SetPhaseResponse> switched =
        manager_->SetPhase("small", "b");
    EXPECT_TRUE(switched.ok()) << switched.status();
    EXPECT_FALSE(done) << "SetPhase of another rollout waited for the start";
  }
  gate_->Open();
  starter.join();
  ASSERT_TRUE(started.ok()) << started.status();

  EXPECT_TRUE(Lists(manager_->List(), "big"));
  EXPECT_EQ(manager_->Health().open_rollouts(), 2u);
  const std::string cg = started->cgroup_path();
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.3", allowed.port), 0)
      << "the last of " << kRules << " rules is not enforced";
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.4", denied.port), 1)
      << "a destination no rule names was not denied";
  EXPECT_EQ(ProbeIn(cg, "tcp-connect", "127.0.0.2", model_.port), 0);
  EXPECT_TRUE(manager_->End("big").ok());
  EXPECT_TRUE(manager_->End("small").ok());
}

}  // namespace
}  // namespace sandfence::testing
