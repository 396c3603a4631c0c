// Compiled rules -> the exact entries the kernel's rule maps hold for one
// generation. Pure: no kernel, no root, fully unit-tested.
#ifndef SANDFENCE_EGRESS_RULE_ENTRIES_H_
#define SANDFENCE_EGRESS_RULE_ENTRIES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "compile/compiled_policy.h"
#include "egress/egress_abi.h"

namespace sandfence {

template <typename K, typename V>
struct MapEntry {
  K key;
  V value;
};

struct RuleEntries {
  std::vector<MapEntry<sf_exact4_key, sf_rule_ref>> exact4;
  std::vector<MapEntry<sf_exact6_key, sf_rule_ref>> exact6;
  std::vector<MapEntry<sf_cidr4_key, sf_cidr_value>> cidr4;
  std::vector<MapEntry<sf_cidr6_key, sf_cidr_value>> cidr6;
  // sf_unix_rules: the phase's Unix socket names (scope = generation).
  std::vector<MapEntry<sf_unix_key, sf_rule_ref>> unix_names;

  size_t size() const {
    return exact4.size() + exact6.size() + cidr4.size() + cidr6.size() +
           unix_names.size();
  }
};

// A single-port rule on a host address becomes one exact entry; every other
// rule (a CIDR or a port range) an LPM entry. Because an LPM lookup returns
// only the longest matching prefix, each LPM entry also carries the port
// ranges of every shorter prefix that contains it. rule_id is the rule's
// index in phase.rules. Fails (Rejected) when one prefix would need more
// than SF_MAX_PORT_RANGES distinct port ranges.
absl::StatusOr<RuleEntries> BuildRuleEntries(const CompiledPhase& phase,
                                             uint32_t generation);

// The sf_unix_* key of a Unix socket name under `scope`.
sf_unix_key UnixKey(const UnixName& name, uint64_t scope);

// The sf_sandbox.flags value for a phase.
uint32_t SandboxFlags(const CompiledPhase& phase);

}  // namespace sandfence

#endif  // SANDFENCE_EGRESS_RULE_ENTRIES_H_
