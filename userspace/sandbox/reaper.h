// What a sandfence process does for the sandboxes of one that died: a dead
// `sandfence run`'s sandbox is ended (its processes killed first, then its
// guard and hooks removed, then its cgroup), so that nothing it left runs
// on without its supervisor; a dead daemon's sandboxes wait for the next
// daemon, which adopts them (Sandbox::Adopt).
#ifndef SANDFENCE_SANDBOX_REAPER_H_
#define SANDFENCE_SANDBOX_REAPER_H_

#include <string>
#include <vector>

#include "sandbox/host_enforcement.h"

namespace sandfence {

struct ReapReport {
  std::vector<uint64_t> reaped;     // cgroup ids ended
  std::vector<std::string> errors;  // what could not be done, per sandbox
  // Sandboxes of dead daemons, left enforced for a daemon to adopt.
  std::vector<OrphanSandbox> left;
};

// Ends every sandbox of a dead `sandfence run`, and frees the slots of dead
// processes that have no sandbox left.
ReapReport ReapDeadRuns(HostEnforcement& host);

}  // namespace sandfence

#endif  // SANDFENCE_SANDBOX_REAPER_H_
