#include "egress/budget.h"

#include <bpf/bpf.h>
#include <errno.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "egress/egress_abi.h"

namespace sandfence {
namespace {

// The per-address keys of one sandbox; erased when `erase`.
size_t SweepDests(int fd, uint64_t cgroup_id, bool erase) {
  if (fd < 0) return 0;
  std::vector<sf_budget_dest_key> matched;
  sf_budget_dest_key key{}, next{};
  const sf_budget_dest_key* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    if (next.sandbox == cgroup_id) matched.push_back(next);
    key = next;
    prev = &key;
  }
  if (erase) {
    for (const sf_budget_dest_key& k : matched) bpf_map_delete_elem(fd, &k);
  }
  return matched.size();
}

}  // namespace

absl::Status EgressBudgetMaps::Set(uint64_t cgroup_id,
                                   const EgressBudget& limits) const {
  if (!limits.any()) return absl::OkStatus();
  sf_budget b{};
  b.max_connections = limits.connections;
  b.max_bytes = limits.bytes;
  b.max_dest_bytes = limits.bytes_per_address;
  if (bpf_map_update_elem(budgets, &cgroup_id, &b, BPF_NOEXIST) != 0 &&
      errno != EEXIST) {
    const int err = errno;
    return Unavailable(absl::StrCat("the egress budget of sandbox ", cgroup_id,
                                    " (sf_budgets): ", std::strerror(err)));
  }
  // Never turned off again: a lookup per packet is all it costs.
  const uint32_t zero = 0, one = 1;
  if (bpf_map_update_elem(on, &zero, &one, BPF_ANY) != 0) {
    const int err = errno;
    bpf_map_delete_elem(budgets, &cgroup_id);
    return ErrnoError(err, "turn on egress budgets (sf_budget_on)");
  }
  return absl::OkStatus();
}

std::optional<EgressBudgetCounts> EgressBudgetMaps::Read(
    uint64_t cgroup_id) const {
  sf_budget b{};
  if (budgets < 0 || bpf_map_lookup_elem(budgets, &cgroup_id, &b) != 0) {
    return std::nullopt;
  }
  EgressBudgetCounts out;
  out.limits = {b.max_connections, b.max_bytes, b.max_dest_bytes};
  out.connections = b.connections;
  out.bytes = b.bytes;
  out.dropped_packets = b.dropped_packets;
  out.dropped_bytes = b.dropped_bytes;
  out.addresses = b.dests;
  return out;
}

size_t EgressBudgetMaps::Delete(uint64_t cgroup_id) const {
  if (budgets < 0) return 0;
  sf_budget b{};
  const bool had = bpf_map_lookup_elem(budgets, &cgroup_id, &b) == 0;
  bpf_map_delete_elem(budgets, &cgroup_id);
  // Sockets still open keep the id on them, but find no budget: they are
  // counted no more, and their ids are never reused (cgroup ids are not).
  return had && b.dests > 0 ? SweepDests(dests, cgroup_id, /*erase=*/true)
                            : 0;
}

size_t EgressBudgetMaps::DestCount(uint64_t cgroup_id) const {
  return SweepDests(dests, cgroup_id, /*erase=*/false);
}

}  // namespace sandfence
