// Every path sandfence pins under a pin root, spelled once.
//
//   <root>/                         the pin root (`daemon --pin-dir`), locked
//                                   while sets are created or removed
//   <root>/sets/<build>/            one build's set (BpfBuildId(): a hash of
//                                   every BPF object this binary embeds):
//     host, drivers                 HostState: ABI, generations, driver slots
//     facts                         what probes of this kernel found
//     maps/<map>                    the egress and Unix maps
//     progs/<object>/<prog>         the egress, Unix and cut programs (of
//                                   the egress objects with that hash)
//     links/host/<prog>             host-wide attachments (while needed)
//     links/<cgroup id>/<hook>      one sandbox's cgroup attachments
//     guard/<enforcer>/{maps,progs,links}/<name>   the process guard
//
// A set is loaded (verified) once per host and build and stays pinned while
// the host runs: a sandbox is then map entries and links. Sets never share
// a map, so two builds never read each other's layouts; a set that no live
// process uses and no sandbox needs is removed by the next process to open
// the pin root (CollectUnusedSets).
#ifndef SANDFENCE_HOST_PIN_LAYOUT_H_
#define SANDFENCE_HOST_PIN_LAYOUT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace sandfence {

class PinLayout {
 public:
  PinLayout() = default;  // private: nothing is pinned
  explicit PinLayout(std::string set_dir) : set_(std::move(set_dir)) {}

  static std::string SetsDir(absl::string_view root);
  static std::string SetDir(absl::string_view root, absl::string_view build);

  bool pinned() const { return !set_.empty(); }
  const std::string& set() const { return set_; }

  std::string HostMap() const { return Join("host"); }
  std::string DriversMap() const { return Join("drivers"); }
  std::string FactsMap() const { return Join("facts"); }
  std::string MapsDir() const { return Join("maps"); }
  std::string Map(absl::string_view name) const;
  std::string ProgsDir() const { return Join("progs"); }
  std::string EgressProgsDir(absl::string_view object) const;
  std::string EgressProg(absl::string_view object,
                         absl::string_view name) const;
  std::string LinksDir() const { return Join("links"); }
  std::string HostLinksDir() const { return Join("links/host"); }
  std::string HostLink(absl::string_view prog) const;
  std::string SandboxLinksDir(uint64_t cgroup_id) const;
  std::string SandboxLink(uint64_t cgroup_id, absl::string_view hook) const;
  std::string GuardsDir() const { return Join("guard"); }
  std::string GuardDir(absl::string_view enforcer) const;
  std::string GuardMaps(absl::string_view enforcer) const;
  std::string GuardProgs(absl::string_view enforcer) const;
  std::string GuardLinks(absl::string_view enforcer) const;
  std::string GuardMap(absl::string_view enforcer,
                       absl::string_view name) const;
  std::string GuardProg(absl::string_view enforcer,
                        absl::string_view name) const;
  std::string GuardLink(absl::string_view enforcer,
                        absl::string_view name) const;

 private:
  std::string Join(absl::string_view relative) const;
  std::string set_;
};

}  // namespace sandfence

#endif  // SANDFENCE_HOST_PIN_LAYOUT_H_
