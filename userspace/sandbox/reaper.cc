#include "sandbox/reaper.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace sandfence {

ReapReport ReapDeadRuns(HostEnforcement& host) {
  ReapReport report;
  std::set<uint32_t> busy_slots;
  for (const OrphanSandbox& o : host.Orphans()) {
    if (o.owner.kind != DriverKind::kRun) {
      report.left.push_back(o);
      busy_slots.insert(o.owner.slot);
      continue;
    }
    const uint64_t id = o.egress.cgroup_id;
    absl::Status s;
    // The processes first: while they die, the hooks still deny.
    absl::StatusOr<std::string> path = host.CgroupPath(id);
    if (path.ok()) s.Update(host.KillCgroup(id));
    if (!s.ok()) {
      // Survivors keep their hooks and guard; the next reaper tries again.
      busy_slots.insert(o.owner.slot);
      report.errors.push_back(absl::StrCat(
          "cgroup ", id, " of dead sandfence run pid ", o.owner.pid,
          ": its processes could not be killed (it stays enforced): ",
          s.message()));
      continue;
    }
    if (o.guarded) s.Update(host.RemoveGuard(id).status());
    absl::StatusOr<AdoptedSandbox> adopted = host.AdoptEgress(id);
    if (adopted.ok()) {
      s.Update(host.DetachEgress(id).status());
    } else if (!absl::IsNotFound(adopted.status())) {
      s.Update(adopted.status());
    }
    if (path.ok()) s.Update(host.ReleaseCgroup(id, /*remove=*/true));
    if (s.ok()) {
      report.reaped.push_back(id);
    } else {
      busy_slots.insert(o.owner.slot);
      report.errors.push_back(absl::StrCat("cgroup ", id, " of dead sandfence ",
                                           "run pid ", o.owner.pid, ": ",
                                           s.message()));
    }
  }
  for (const DeadDriver& d : host.DeadDrivers()) {
    if (!busy_slots.contains(d.slot)) host.ForgetDeadDriver(d);
  }
  return report;
}

}  // namespace sandfence
