// Many sandboxes within a file descriptor budget.
//
// The controller holds one bpf_link fd per hook per sandbox (8 on this
// 6.18 host: EgressController::LinksPerSandbox()), so 10,000 sandboxes
// need 80,000 fds. Where the hard RLIMIT_NOFILE is lower
// and cannot be raised (no CAP_SYS_RESOURCE, as on the machine these
// benchmarks were first run on: 20,000), the benchmarks register as many
// sandboxes through the controller as the budget allows and write the rest
// straight into the controller's maps: the same entries AddSandbox writes,
// without attaching anything to their cgroups. A connect in the measured
// sandbox pays for lookups in those maps only, so its cost is what it would
// be with all of them attached; the controller's user-space memory is not,
// and the control suite projects it instead of pretending.
#ifndef SANDFENCE_BENCH_FILLERS_H_
#define SANDFENCE_BENCH_FILLERS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cgroup.h"
#include "common/unique_fd.h"
#include "compile/compiled_policy.h"
#include "egress/egress_controller.h"
#include "egress/rule_entries.h"
#include "host/host_state.h"

namespace sandfence::bench {

// How many more sandboxes `controller` can attach in this process: the
// fds left under the soft limit, less a reserve, over its links per
// sandbox.
size_t SandboxFdBudget(const EgressController& controller);

// The benchmarks' own host state: private, nothing pinned or shared with a
// daemon or `sandfence run` on the same machine.
HostState* BenchHost();

// Sandbox cgroup directories that keep no fd open, removed on destruction.
class CgroupDirs {
 public:
  explicit CgroupDirs(std::string parent) : parent_(std::move(parent)) {}
  CgroupDirs(const CgroupDirs&) = delete;
  CgroupDirs& operator=(const CgroupDirs&) = delete;
  ~CgroupDirs();

  struct Dir {
    std::string path;
    uint64_t id = 0;
    UniqueFd fd;  // for AddSandbox; close it afterwards
    CgroupRef ref() const { return CgroupRef{path, id, level}; }
    uint32_t level = 0;
  };
  // mkdir, open and stat: what Cgroup::Create does.
  absl::StatusOr<Dir> Make(const std::string& name);
  size_t size() const { return paths_.size(); }

 private:
  std::string parent_;
  uint32_t level_ = 0;
  std::vector<std::string> paths_;
};

// Sandboxes written into a controller's maps without attachments.
class MapOnlySandboxes {
 public:
  // Finds the controller's maps through its connect4 program's map ids.
  static absl::StatusOr<MapOnlySandboxes> Open(
      const EgressController& controller);
  MapOnlySandboxes(MapOnlySandboxes&&) = default;
  MapOnlySandboxes& operator=(MapOnlySandboxes&&) = default;
  // Deletes every entry it wrote (the controller must still be alive).
  ~MapOnlySandboxes();

  absl::Status Add(uint64_t cgroup_id, const CompiledPhase& phase);
  size_t size() const { return written_.size(); }

 private:
  MapOnlySandboxes() = default;

  UniqueFd sandboxes_, counters_, exact4_, exact6_, cidr4_, cidr6_;
  // Far above what the controller hands out in a run: no collisions.
  uint32_t next_generation_ = 0x40000000;
  std::vector<std::pair<uint64_t, RuleEntries>> written_;
};

}  // namespace sandfence::bench

#endif  // SANDFENCE_BENCH_FILLERS_H_
