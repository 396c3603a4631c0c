// The egress budget's maps (bpf/egress/egress_budget.bpf.h): a sandbox's
// limits written once when it is added, its counts read for the record, and
// everything of it freed when it goes.
#ifndef SANDFENCE_EGRESS_BUDGET_H_
#define SANDFENCE_EGRESS_BUDGET_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "compile/compiled_policy.h"

namespace sandfence {

// A sandbox's budget: its limits (0: none) and what the kernel counted.
struct EgressBudgetCounts {
  EgressBudget limits;
  uint64_t connections = 0;
  uint64_t bytes = 0;
  uint64_t dropped_packets = 0;  // past a byte limit
  uint64_t dropped_bytes = 0;
  uint64_t addresses = 0;  // counted for bytes_per_address

  friend bool operator==(const EgressBudgetCounts&,
                         const EgressBudgetCounts&) = default;
};

// The three maps, by fd (the controller owns them).
struct EgressBudgetMaps {
  int budgets = -1;  // sf_budgets
  int dests = -1;    // sf_budget_dests
  int on = -1;       // sf_budget_on

  // Writes the sandbox's limits with zero counts (a budget that is not
  // any() writes nothing), and turns the backstop's counting on for the
  // host. An entry already there is kept (an adopted sandbox's counts go
  // on). A full map is Unavailable (retryable): a rollout whose budget
  // cannot be counted does not start.
  absl::Status Set(uint64_t cgroup_id, const EgressBudget& limits) const;
  // Its limits and counts; nullopt when it has no budget.
  std::optional<EgressBudgetCounts> Read(uint64_t cgroup_id) const;
  // Frees the sandbox's entry and its per-address counts (a scan, when it
  // counted any); returns the per-address entries freed.
  size_t Delete(uint64_t cgroup_id) const;
  // Per-address entries the sandbox holds (a scan).
  size_t DestCount(uint64_t cgroup_id) const;
};

}  // namespace sandfence

#endif  // SANDFENCE_EGRESS_BUDGET_H_
