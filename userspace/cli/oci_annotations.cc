#include "cli/oci_annotations.h"

#include <functional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/policy_flags.h"
#include "common/status.h"
#include "policy/rollout_endpoints.h"

namespace sandfence {
namespace {

constexpr const char* kKeys[] = {
    "network-access", "policy",     "model", "tool",          "required-tool",
    "allow",          "rollout-id", "phase", "tools-any-port"};

std::vector<std::string> List(absl::string_view value) {
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (!item.empty()) out.emplace_back(item);
  }
  return out;
}

absl::Status Bad(absl::string_view key, absl::string_view value,
                 absl::string_view why) {
  return Malformed(absl::StrCat("annotation ", kAnnotationPrefix, key, "=\"",
                                value, "\": ", why));
}

}  // namespace

bool HasSandfenceAnnotations(const std::map<std::string, std::string>& a) {
  for (const auto& [key, value] : a) {
    if (absl::StartsWith(key, kAnnotationPrefix)) return true;
  }
  return false;
}

bool IsPodInfraContainer(const std::map<std::string, std::string>& a) {
  for (const char* key : {"io.kubernetes.cri-o.ContainerType",
                          "io.kubernetes.cri.container-type"}) {
    auto it = a.find(key);
    if (it != a.end() && it->second == "sandbox") return true;
  }
  return false;
}

std::string RolloutIdOf(const std::map<std::string, std::string>& a,
                        const std::string& container_id) {
  auto it = a.find(absl::StrCat(kAnnotationPrefix, "rollout-id"));
  return it == a.end() || it->second.empty() ? container_id : it->second;
}

absl::StatusOr<v1::StartRolloutRequest> StartRequestFromAnnotations(
    const std::map<std::string, std::string>& a,
    const std::string& container_id, const ContainerPlacement& placement) {
  std::map<std::string, std::string> ours;
  for (const auto& [key, value] : a) {
    absl::string_view name = key;
    if (!absl::ConsumePrefix(&name, kAnnotationPrefix)) continue;
    if (std::find(std::begin(kKeys), std::end(kKeys), name) ==
        std::end(kKeys)) {
      return Malformed(absl::StrCat(
          "unknown annotation ", key, " (known: ", kAnnotationPrefix,
          absl::StrJoin(kKeys, absl::StrCat(", ", kAnnotationPrefix)), ")"));
    }
    ours[std::string(name)] = value;
  }

  v1::StartRolloutRequest req;
  req.set_rollout_id(RolloutIdOf(a, container_id));
  // The container's own cgroup: the runtime made it and removes it, so the
  // daemon adopts it (never kills what runs there, never removes it).
  req.mutable_sandbox()->set_cgroup_path(placement.cgroup_path);
  req.set_own_netns(placement.own_netns);
  req.set_netns_path(placement.netns_path);

  const bool has_access = ours.count("network-access") > 0;
  const bool has_policy = ours.count("policy") > 0;
  if (has_access == has_policy) {
    return Malformed(absl::StrCat(
        has_access ? "both " : "neither ", kAnnotationPrefix,
        "network-access nor ", kAnnotationPrefix,
        "policy is set: exactly one says the container's policy"));
  }
  if (has_access) {
    const std::string& v = ours["network-access"];
    std::optional<v1::NetworkAccess> access = ParseAccessName(v);
    if (!access) {
      return Bad("network-access", v,
                 "expected inherit, model_only or model_and_tools");
    }
    req.set_network_access(*access);
  } else {
    const std::string& v = ours["policy"];
    if (v.empty() || absl::StrContains(v, '/')) {
      return Bad("policy", v,
                 "expected a file name in the daemon's --policy-dir");
    }
    req.set_policy_file(v);
  }
  if (auto it = ours.find("phase"); it != ours.end()) {
    if (it->second.empty()) return Bad("phase", it->second, "empty");
    req.set_initial_phase(it->second);
  }

  v1::Endpoints* ep = req.mutable_endpoints();
  for (const std::string& url : List(ours["model"])) ep->add_model(url);
  for (const char* key : {"tool", "required-tool"}) {
    for (const std::string& item : List(ours[key])) {
      absl::StatusOr<v1::ToolGrant> tool =
          ParseToolFlag(item, std::string(key) == "required-tool");
      if (!tool.ok()) return Bad(key, item, tool.status().message());
      *ep->add_tool() = *std::move(tool);
    }
  }
  if (auto it = ours.find("tools-any-port"); it != ours.end()) {
    if (it->second != "true" && it->second != "false") {
      return Bad("tools-any-port", it->second, "expected true or false");
    }
    if (it->second == "true") {
      if (ep->tool_size() == 0) {
        return Bad("tools-any-port", it->second,
                   "no tool or required-tool annotation to apply it to");
      }
      for (v1::ToolGrant& tool : *ep->mutable_tool()) tool.set_any_port(true);
    }
  }
  for (const std::string& item : List(ours["allow"])) {
    absl::StatusOr<v1::AllowRule> rule = ParseAllowFlag(item);
    if (!rule.ok()) return Bad("allow", item, rule.status().message());
    *ep->add_allow() = *std::move(rule);
  }
  return req;
}

}  // namespace sandfence
