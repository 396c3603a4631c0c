#include "host/pin_layout.h"

#include "absl/strings/str_cat.h"

namespace sandfence {

std::string PinLayout::SetsDir(absl::string_view root) {
  return absl::StrCat(root, "/sets");
}

std::string PinLayout::SetDir(absl::string_view root,
                              absl::string_view build) {
  return absl::StrCat(root, "/sets/", build);
}

std::string PinLayout::Join(absl::string_view relative) const {
  return absl::StrCat(set_, "/", relative);
}

std::string PinLayout::Map(absl::string_view name) const {
  return absl::StrCat(MapsDir(), "/", name);
}

std::string PinLayout::Prog(absl::string_view name) const {
  return absl::StrCat(ProgsDir(), "/", name);
}

std::string PinLayout::HostLink(absl::string_view prog) const {
  return absl::StrCat(HostLinksDir(), "/", prog);
}

std::string PinLayout::SandboxLinksDir(uint64_t cgroup_id) const {
  return absl::StrCat(LinksDir(), "/", cgroup_id);
}

std::string PinLayout::SandboxLink(uint64_t cgroup_id,
                                   absl::string_view hook) const {
  return absl::StrCat(SandboxLinksDir(cgroup_id), "/", hook);
}

std::string PinLayout::GuardDir(absl::string_view enforcer) const {
  return absl::StrCat(Join("guard/"), enforcer);
}

std::string PinLayout::GuardMaps(absl::string_view enforcer) const {
  return absl::StrCat(GuardDir(enforcer), "/maps");
}

std::string PinLayout::GuardProgs(absl::string_view enforcer) const {
  return absl::StrCat(GuardDir(enforcer), "/progs");
}

std::string PinLayout::GuardLinks(absl::string_view enforcer) const {
  return absl::StrCat(GuardDir(enforcer), "/links");
}

}  // namespace sandfence
