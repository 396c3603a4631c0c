// Addresses the DNS filter learned -> the entries of sf_learned4/6. Pure:
// no kernel, no root, unit-tested.
#ifndef SANDFENCE_EGRESS_LEARNED_ENTRIES_H_
#define SANDFENCE_EGRESS_LEARNED_ENTRIES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ip.h"
#include "compile/compiled_policy.h"
#include "egress/egress_abi.h"

namespace sandfence {

// The ports one grant opens on a learned address; rule_id names the grant
// (the phase's rule it came from) in events.
struct PortRangeRef {
  uint16_t first = 0;
  uint16_t last = 0;
  uint32_t rule_id = SF_NO_RULE;
};

// One address an allowed answer carried, with the ports of the grants its
// name opens, until expires_boot_ns (CLOCK_BOOTTIME).
struct LearnedEntry {
  IpAddress addr;  // an IPv4-mapped IPv6 address is learned as IPv4
  L4 protocol = L4::kTcp;
  std::vector<PortRangeRef> ranges;
  uint64_t expires_boot_ns = 0;
};

// The key of one learned address in one generation (IPv4 for mapped).
struct LearnedKey {
  uint32_t generation = 0;
  uint8_t protocol = 0;
  IpAddress addr;

  bool is_v4() const { return addr.is_v4(); }
  sf_learned4_key Key4() const;
  sf_learned6_key Key6() const;

  template <typename H>
  friend H AbslHashValue(H h, const LearnedKey& k) {
    return H::combine(
        std::move(h), k.generation, k.protocol, k.addr.family(),
        absl::string_view(reinterpret_cast<const char*>(k.addr.bytes()), 16));
  }
  friend bool operator==(const LearnedKey&, const LearnedKey&) = default;
};

LearnedKey LearnedKeyOf(uint32_t generation, const LearnedEntry& entry);
LearnedKey LearnedKeyOf(const sf_learned4_key& key);
LearnedKey LearnedKeyOf(const sf_learned6_key& key);

// Whether the entry can be learned at all: a TCP or UDP address that is
// neither unspecified nor in the DNS filters' range, at least one port
// range (first <= last), an expiry. Malformed, naming the field and value.
absl::Status ValidateLearned(const LearnedEntry& entry);

// `entry` merged into what the map holds for its key (`old`, nullptr for
// nothing): the later expiry of the two and the union of the port ranges
// (overlapping or touching ranges coalesce; the first rule's id is kept).
// Rejected when the union needs more than SF_MAX_PORT_RANGES ranges.
absl::StatusOr<sf_learned_value> MergeLearned(const sf_learned_value* old,
                                              const LearnedEntry& entry);

}  // namespace sandfence

#endif  // SANDFENCE_EGRESS_LEARNED_ENTRIES_H_
