// Audit-only phases through the daemon (issue 15): the real `sandfence
// daemon` over gRPC, real sandboxes, loopback only. StartRollout refuses an
// audit policy unless the request says allow_audit (FAILED_PRECONDITION,
// nothing attached); with it, the kernel's entry carries the audit bit, a
// forbidden connect goes through, the reply, Health and the metrics say
// audit only, and the record holds the would-deny.
#include <bpf/bpf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"
#include "egress/egress_abi.h"
#include "gtest/gtest.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "tests/daemon/daemon_fixture.h"
#include "tests/egress/egress_fixture.h"

namespace sandfence::testing {
namespace {

class DaemonAuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    SANDFENCE_REQUIRE_HOST(HostKernelRunsEgress());
    model_ = Listen("127.0.0.2");
    forbidden_ = Listen("127.0.0.4");
    daemon_ = std::make_unique<DaemonProcess>(
        MakeDaemonDirs("audit"),
        std::vector<std::string>{"--metrics-port", "0"});
    daemon_->Start();
  }

  // agent: audit only; grade: the same rules, enforced.
  v1::StartRolloutRequest Request(const std::string& id) const {
    v1::StartRolloutRequest req;
    req.set_rollout_id(id);
    req.mutable_sandbox()->set_create(true);
    req.set_policy_text(
        "name: \"audit\"\n"
        "phase { name: \"agent\" network_access: MODEL_ONLY enforce: AUDIT\n"
        "  dns { mode: NONE } }\n"
        "phase { name: \"grade\" network_access: MODEL_ONLY\n"
        "  dns { mode: NONE } }\n");
    req.mutable_endpoints()->add_model(
        absl::StrCat("http://127.0.0.2:", model_.port, "/v1"));
    return req;
  }

  // The flags of the cgroup's sf_sandboxes entry (nullopt: none).
  std::optional<uint32_t> KernelFlags(uint64_t cgroup_id) const {
    const std::string path =
        PinsOf(daemon_->dirs().pin_dir).Map("sf_sandboxes");
    UniqueFd map(bpf_obj_get(path.c_str()));
    if (!map) return std::nullopt;
    sf_sandbox v{};
    if (bpf_map_lookup_elem(map.get(), &cgroup_id, &v) != 0) {
      return std::nullopt;
    }
    return v.flags;
  }

  v1::HealthResponse Health() {
    grpc::ClientContext ctx;
    v1::HealthResponse h;
    EXPECT_TRUE(daemon_->stub()->Health(&ctx, {}, &h).ok());
    return h;
  }

  Listener model_, forbidden_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(DaemonAuditTest, WithoutAllowAuditAnAuditPolicyIsRefused) {
  v1::StartRolloutResponse resp;
  grpc::Status s = daemon_->Start(Request("refused"), &resp);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "phase \"agent\""))
      << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "allow_audit"))
      << s.error_message();
  struct stat st {};
  EXPECT_NE(stat((daemon_->dirs().cgroups + "/refused").c_str(), &st), 0)
      << "a sandbox was created for a refused start";
  EXPECT_EQ(daemon_->List().rollout_size(), 0);
  EXPECT_EQ(Health().audit_only_rollouts(), 0u);
}

TEST_F(DaemonAuditTest, WithAllowAuditAForbiddenConnectGoesThroughAndIsLoud) {
  const uint16_t metrics = daemon_->MetricsPort();
  v1::StartRolloutRequest req = Request("audited");
  req.set_allow_audit(true);
  v1::StartRolloutResponse started;
  grpc::Status s = daemon_->Start(req, &started);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(started.phase(), "agent");
  EXPECT_TRUE(started.audit_only());
  ASSERT_EQ(started.audit_only_phase_size(), 1);
  EXPECT_EQ(started.audit_only_phase(0), "agent");
  std::optional<uint32_t> flags = KernelFlags(started.cgroup_id());
  ASSERT_TRUE(flags.has_value());
  EXPECT_TRUE(*flags & SF_SB_AUDIT);

  EXPECT_EQ(ProbeIn(started.cgroup_path(), "tcp-connect", "127.0.0.4",
                    forbidden_.port),
            0)
      << "the audit-only phase denied the forbidden connect";
  v1::HealthResponse health = Health();
  EXPECT_EQ(health.audit_only_rollouts(), 1u);
  ASSERT_EQ(health.audit_only_rollout_size(), 1);
  EXPECT_EQ(health.audit_only_rollout(0), "audited");
  v1::ListRolloutsResponse list = daemon_->List();
  ASSERT_EQ(list.rollout_size(), 1);
  EXPECT_TRUE(list.rollout(0).audit_only());
  EXPECT_EQ(list.rollout(0).would_deny(), 1u);
  EXPECT_TRUE(absl::StrContains(HttpGetMetrics(metrics),
                                "\nsandfence_audit_only_sandboxes 1\n"));

  // The enforced phase: the same connect is denied, nothing says audit.
  v1::SetPhaseResponse grade;
  s = daemon_->SetPhase("audited", "grade", &grade);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(grade.audit_only());
  flags = KernelFlags(started.cgroup_id());
  ASSERT_TRUE(flags.has_value());
  EXPECT_FALSE(*flags & SF_SB_AUDIT);
  EXPECT_EQ(ProbeIn(started.cgroup_path(), "tcp-connect", "127.0.0.4",
                    forbidden_.port),
            EPERM);
  EXPECT_EQ(Health().audit_only_rollouts(), 0u);
  EXPECT_TRUE(absl::StrContains(HttpGetMetrics(metrics),
                                "\nsandfence_audit_only_sandboxes 0\n"));

  v1::EndRolloutResponse ended;
  s = daemon_->End("audited", &ended);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::RolloutRecord& r = ended.record();
  ASSERT_EQ(r.audit_only_phase_size(), 1);
  EXPECT_EQ(r.audit_only_phase(0), "agent");
  const std::string forbidden = "127.0.0.4";
  int would = 0, denied = 0;
  for (const v1::NetAttempt& a : r.net_attempt()) {
    if (a.address() != forbidden || a.port() != forbidden_.port) continue;
    if (a.verdict() == v1::VERDICT_AUDIT_DENY) {
      ++would;
      EXPECT_EQ(a.phase(), "agent");
      EXPECT_EQ(a.reason(), "no rule");
    } else if (a.verdict() == v1::VERDICT_DENY) {
      ++denied;
      EXPECT_EQ(a.phase(), "grade");
    }
  }
  EXPECT_EQ(would, 1) << r.DebugString();
  EXPECT_EQ(denied, 1) << r.DebugString();
  EXPECT_EQ(r.loss().kernel_audit_denied(), 1u);
  EXPECT_FALSE(r.lossy()) << r.DebugString();
}

}  // namespace
}  // namespace sandfence::testing
