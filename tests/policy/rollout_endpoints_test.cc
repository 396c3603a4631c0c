// Per-rollout endpoints laid over a policy file, and inline policies.
#include "policy/rollout_endpoints.h"

#include "gtest/gtest.h"

namespace sandfence {
namespace {

TEST(ApplyRolloutEndpoints, AddsToEveryPhaseAfterItsOwn) {
  v1::PolicySet file;
  v1::Phase* setup = file.add_phase();
  setup->set_name("setup");
  setup->set_network_access(v1::INHERIT);
  v1::Phase* agent = file.add_phase();
  agent->set_name("agent");
  agent->set_network_access(v1::MODEL_ONLY);
  agent->add_model("http://file-model:1");

  RolloutEndpoints endpoints;
  endpoints.model = {"http://cli-model:2"};
  v1::ToolGrant tool;
  tool.set_url("http://tool");
  tool.set_required(true);
  endpoints.tools = {tool};
  v1::AllowRule allow;
  allow.set_host("10.0.0.1");
  allow.set_port(80);
  endpoints.allow = {allow};

  v1::PolicySet out = ApplyRolloutEndpoints(file, endpoints);
  ASSERT_EQ(out.phase_size(), 2);
  for (const v1::Phase& phase : out.phase()) {
    EXPECT_EQ(phase.model(phase.model_size() - 1), "http://cli-model:2")
        << phase.name();
    ASSERT_EQ(phase.tool_size(), 1) << phase.name();
    EXPECT_TRUE(phase.tool(0).required());
    ASSERT_EQ(phase.allow_size(), 1) << phase.name();
  }
  EXPECT_EQ(out.phase(1).model(0), "http://file-model:1");
}

TEST(ApplyRolloutEndpoints, NoEndpointsLeavesThePolicyAsIs) {
  v1::PolicySet file;
  file.set_name("x");
  file.add_phase()->set_name("a");
  v1::PolicySet out = ApplyRolloutEndpoints(file, RolloutEndpoints{});
  EXPECT_EQ(out.SerializeAsString(), file.SerializeAsString());
}

TEST(InlinePolicySet, IsOnePhaseNamedDefault) {
  v1::PolicySet p = InlinePolicySet(v1::MODEL_AND_TOOLS);
  EXPECT_EQ(p.name(), "inline");
  ASSERT_EQ(p.phase_size(), 1);
  EXPECT_EQ(p.phase(0).name(), "default");
  EXPECT_EQ(p.phase(0).network_access(), v1::MODEL_AND_TOOLS);
}

TEST(AccessNames, RoundTripAndAcceptCommonSpellings) {
  for (v1::NetworkAccess a :
       {v1::INHERIT, v1::MODEL_ONLY, v1::MODEL_AND_TOOLS}) {
    EXPECT_EQ(ParseAccessName(AccessName(a)), a) << AccessName(a);
  }
  EXPECT_EQ(ParseAccessName("MODEL_ONLY"), v1::MODEL_ONLY);
  EXPECT_EQ(ParseAccessName("model-and-tools"), v1::MODEL_AND_TOOLS);
  EXPECT_EQ(ParseAccessName("unspecified"), std::nullopt);
  EXPECT_EQ(ParseAccessName("everything"), std::nullopt);
}

}  // namespace
}  // namespace sandfence
