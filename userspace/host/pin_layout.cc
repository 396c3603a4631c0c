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

std::string PinLayout::EgressProgsDir(absl::string_view object) const {
  return absl::StrCat(ProgsDir(), "/", object);
}

std::string PinLayout::EgressProg(absl::string_view object,
                                  absl::string_view name) const {
  return absl::StrCat(EgressProgsDir(object), "/", name);
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
  return absl::StrCat(GuardsDir(), "/", enforcer);
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

std::string PinLayout::GuardMap(absl::string_view enforcer,
                                absl::string_view name) const {
  return absl::StrCat(GuardMaps(enforcer), "/", name);
}

std::string PinLayout::GuardProg(absl::string_view enforcer,
                                 absl::string_view name) const {
  return absl::StrCat(GuardProgs(enforcer), "/", name);
}

std::string PinLayout::GuardLink(absl::string_view enforcer,
                                 absl::string_view name) const {
  return absl::StrCat(GuardLinks(enforcer), "/", name);
}

}  // namespace sandfence
