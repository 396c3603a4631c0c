// What `sandfence oci-hook` reads: the container state a runtime passes on
// stdin, and the sandfence.dev/ annotations as the StartRollout request they
// ask for. Bad input is refused naming the field or annotation and value.
#include "cli/oci_annotations.h"

#include "absl/strings/match.h"
#include "common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oci/container.h"

namespace sandfence {
namespace {

TEST(ParseOciState, ReadsWhatRuncAndPodmanPass) {
  absl::StatusOr<OciState> s = ParseOciState(R"({
    "ociVersion": "1.0.2", "id": "c1", "status": "creating", "pid": 4242,
    "bundle": "/run/b", "annotations": {"sandfence.dev/model": "http://m/v1",
    "io.podman.x": "y"}, "someRuntimeExtra": [1, 2]})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->id, "c1");
  EXPECT_EQ(s->status, "creating");
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->bundle, "/run/b");
  EXPECT_EQ(s->annotations.at("sandfence.dev/model"), "http://m/v1");
  EXPECT_EQ(s->annotations.size(), 2u);
  // poststop: no pid, no annotations.
  s = ParseOciState(R"({"ociVersion": "1.0.2", "id": "c1", "status": "stopped"})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->pid, 0);
  EXPECT_TRUE(s->annotations.empty());
}

TEST(ParseOciState, RefusesWhatIsNotAState) {
  const struct {
    const char* json;
    const char* names;
  } cases[] = {
      {"", "not a JSON object"},
      {"[1]", "not a JSON object"},
      {R"({"pid": 1})", "no \"id\""},
      {R"({"id": ""})", "\"id\" is empty"},
      {R"({"id": 7})", "\"id\" is not a string"},
      {R"({"id": "c", "pid": "12"})", "\"pid\" is not a process id"},
      {R"({"id": "c", "pid": 1.5})", "\"pid\" is not a process id"},
      {R"({"id": "c", "pid": -3})", "\"pid\" is not a process id"},
      {R"({"id": "c", "annotations": []})", "\"annotations\" is not an object"},
      {R"({"id": "c", "annotations": {"a": 1}})",
       "annotation \"a\" is not a string"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<OciState> s = ParseOciState(c.json);
    ASSERT_FALSE(s.ok()) << c.json;
    EXPECT_EQ(RefusalOf(s.status()), Refusal::kMalformed) << c.json;
    EXPECT_TRUE(absl::StrContains(s.status().message(), c.names))
        << c.json << ": " << s.status();
  }
}

const ContainerPlacement kPlacement{"/sys/fs/cgroup/unified/c1", true,
                                    "/proc/4242/ns/net"};

TEST(StartRequestFromAnnotations, TheFlagsOfRunWrittenAsAnnotations) {
  const std::map<std::string, std::string> a = {
      {"sandfence.dev/network-access", "model_and_tools"},
      {"sandfence.dev/model", "http://127.0.0.2:8000/v1, http://[::1]:8000/v1"},
      {"sandfence.dev/tool", "search=http://127.0.0.3:9000"},
      {"sandfence.dev/required-tool", "http://127.0.0.5:9001/x"},
      {"sandfence.dev/allow", "127.0.0.6:53/udp,[::1]:443"},
      {"sandfence.dev/phase", "agent"},
      {"io.kubernetes.pod.name", "p"},
  };
  absl::StatusOr<v1::StartRolloutRequest> r =
      StartRequestFromAnnotations(a, "c1", kPlacement);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rollout_id(), "c1");
  EXPECT_EQ(r->sandbox().cgroup_path(), "/sys/fs/cgroup/unified/c1");
  EXPECT_TRUE(r->own_netns());
  EXPECT_EQ(r->netns_path(), "/proc/4242/ns/net");
  EXPECT_EQ(r->network_access(), v1::MODEL_AND_TOOLS);
  EXPECT_EQ(r->initial_phase(), "agent");
  ASSERT_EQ(r->endpoints().model_size(), 2);
  EXPECT_EQ(r->endpoints().model(1), "http://[::1]:8000/v1");
  ASSERT_EQ(r->endpoints().tool_size(), 2);
  EXPECT_EQ(r->endpoints().tool(0).name(), "search");
  EXPECT_FALSE(r->endpoints().tool(0).required());
  EXPECT_TRUE(r->endpoints().tool(1).required());
  ASSERT_EQ(r->endpoints().allow_size(), 2);
  EXPECT_EQ(r->endpoints().allow(0).protocol(), v1::UDP);
  EXPECT_EQ(r->endpoints().allow(1).host(), "::1");
  EXPECT_FALSE(r->endpoints().tool(0).any_port());

  // tools-any-port, as run's --tools-any-port: every tool's whole host.
  std::map<std::string, std::string> wide = a;
  wide["sandfence.dev/tools-any-port"] = "true";
  r = StartRequestFromAnnotations(wide, "c1", kPlacement);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->endpoints().tool(0).any_port());
  EXPECT_TRUE(r->endpoints().tool(1).any_port());
  wide["sandfence.dev/tools-any-port"] = "yes";
  r = StartRequestFromAnnotations(wide, "c1", kPlacement);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("tools-any-port"));

  // A policy file and a rollout id of its own; the host's network.
  r = StartRequestFromAnnotations({{"sandfence.dev/policy", "eval.textproto"},
                                   {"sandfence.dev/rollout-id", "r-7"}},
                                  "c1", {"/sys/fs/cgroup/c1", false, ""});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rollout_id(), "r-7");
  EXPECT_EQ(r->policy_file(), "eval.textproto");
  EXPECT_FALSE(r->own_netns());
  EXPECT_TRUE(r->netns_path().empty());
}

TEST(StartRequestFromAnnotations, RefusesNamingTheAnnotationAndValue) {
  const struct {
    std::map<std::string, std::string> a;
    const char* names;
  } cases[] = {
      {{{"sandfence.dev/model", "http://m/v1"}}, "neither"},
      {{{"sandfence.dev/network-access", "inherit"},
        {"sandfence.dev/policy", "p"}},
       "both"},
      {{{"sandfence.dev/network-access", "sideways"}},
       "sandfence.dev/network-access=\"sideways\""},
      {{{"sandfence.dev/policy", "../etc/p"}},
       "sandfence.dev/policy=\"../etc/p\""},
      {{{"sandfence.dev/network-access", "model_only"},
        {"sandfence.dev/netwrok-access", "x"}},
       "unknown annotation sandfence.dev/netwrok-access"},
      {{{"sandfence.dev/network-access", "model_only"},
        {"sandfence.dev/allow", "127.0.0.1"}},
       "sandfence.dev/allow=\"127.0.0.1\""},
      {{{"sandfence.dev/network-access", "model_only"},
        {"sandfence.dev/tool", "search=ftp//x"}},
       "sandfence.dev/tool=\"search=ftp//x\""},
      {{{"sandfence.dev/network-access", "model_only"},
        {"sandfence.dev/phase", ""}},
       "sandfence.dev/phase=\"\""},
  };
  for (const auto& c : cases) {
    absl::StatusOr<v1::StartRolloutRequest> r =
        StartRequestFromAnnotations(c.a, "c1", kPlacement);
    ASSERT_FALSE(r.ok()) << c.names;
    EXPECT_EQ(RefusalOf(r.status()), Refusal::kMalformed) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), c.names))
        << r.status();
  }
}

TEST(HasSandfenceAnnotations, OnlyItsOwnPrefix) {
  EXPECT_FALSE(HasSandfenceAnnotations({}));
  EXPECT_FALSE(HasSandfenceAnnotations({{"io.podman.sandfence.dev/x", "1"}}));
  EXPECT_TRUE(HasSandfenceAnnotations({{"sandfence.dev/policy", "p"}}));
}

// CRI-O and containerd give a pod's infrastructure container the pod's
// annotations: the hook leaves it alone (else it would take the pod's
// rollout id, and the pod's real container would be refused).
TEST(IsPodInfraContainer, TheCriRuntimesSandboxContainer) {
  EXPECT_TRUE(IsPodInfraContainer(
      {{"io.kubernetes.cri-o.ContainerType", "sandbox"},
       {"sandfence.dev/network-access", "model_only"}}));
  EXPECT_TRUE(
      IsPodInfraContainer({{"io.kubernetes.cri.container-type", "sandbox"}}));
  EXPECT_FALSE(IsPodInfraContainer(
      {{"io.kubernetes.cri-o.ContainerType", "container"}}));
  EXPECT_FALSE(IsPodInfraContainer({{"sandfence.dev/policy", "p"}}));
}

}  // namespace
}  // namespace sandfence
