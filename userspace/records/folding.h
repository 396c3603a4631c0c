// Folding of network attempts and DNS queries: identical ones become one
// entry with a count, in a table whose size is capped, so that a flooding
// agent costs a record a bounded amount of memory and disk whatever it does.
// The keys are stated in proto/sandfence/v1/record.proto.
#ifndef SANDFENCE_RECORDS_FOLDING_H_
#define SANDFENCE_RECORDS_FOLDING_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/dns_names.h"
#include "common/ip.h"
#include "egress/net_event.h"

namespace sandfence {

// What makes two attempts "identical".
struct FoldKey {
  uint32_t phase_index = 0;
  uint32_t uid = 0;
  uint16_t port = 0;
  uint8_t verdict = 0;
  uint8_t reason = 0;
  uint8_t hook = 0;
  uint8_t protocol = 0;
  uint8_t sock_type = 0;
  uint8_t family = 0;
  std::array<uint8_t, 16> addr{};
  std::array<char, 16> comm{};
  std::string unix_name;  // a Unix socket's, as records show it

  static FoldKey Of(const NetEvent& e, uint32_t phase_index);

  friend bool operator==(const FoldKey&, const FoldKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const FoldKey& k) {
    return H::combine(std::move(h), k.phase_index, k.uid, k.port, k.verdict,
                      k.reason, k.hook, k.protocol, k.sock_type, k.family,
                      k.addr, k.comm, k.unix_name);
  }
};

struct FoldedEntry {
  NetEvent first;  // the attempt that opened the entry
  uint32_t phase_index = 0;
  uint64_t count = 0;
  int64_t first_unix_ns = 0;
  int64_t last_unix_ns = 0;
  uint32_t last_pid = 0;
  uint32_t last_tgid = 0;
  bool overflow = false;  // counts attempts past the table's capacity
  bool dirty = false;     // changed since the last TakeDirty()
};

class AttemptFolder {
 public:
  // max_entries caps the folded entries; overflow entries (at most one per
  // phase span and verdict) come on top.
  explicit AttemptFolder(size_t max_entries) : max_entries_(max_entries) {}

  struct Result {
    uint32_t id = 0;
    bool added = false;  // a new entry: its first attempt is this one
  };
  // Folds one attempt judged in timeline span phase_index at unix_ns.
  Result Add(const NetEvent& e, uint32_t phase_index, int64_t unix_ns);

  const FoldedEntry& entry(uint32_t id) const { return entries_[id]; }
  size_t size() const { return entries_.size(); }
  // Entries folded into since the last call (not the ones just added),
  // each once, in id order; clears their dirty flags.
  std::vector<uint32_t> TakeDirty();

  uint64_t total() const { return total_; }
  uint64_t overflowed() const { return overflowed_; }

 private:
  size_t max_entries_;
  std::vector<FoldedEntry> entries_;
  absl::flat_hash_map<FoldKey, uint32_t> index_;
  // (phase span, verdict) -> overflow entry id.
  absl::flat_hash_map<uint64_t, uint32_t> overflow_index_;
  std::vector<uint32_t> dirty_;
  uint64_t total_ = 0;
  uint64_t overflowed_ = 0;
};

// One DNS query the sandbox's filter decided (issue 14). The filter's module
// (userspace/dns) is not a dependency of records: its verdict arrives as text
// (dns::VerdictName).
struct DnsQueryInfo {
  // Every member has an initializer, so that designated initializers may
  // name only some (-Wmissing-field-initializers).
  uint64_t boot_ns = 0;     // CLOCK_BOOTTIME when it was decided; 0: now
  uint32_t generation = 0;  // of the policy that judged it (phase attribution)
  // Text form, lower case; "" when the question did not parse.
  std::string name{};
  uint16_t type = 0;      // QTYPE (1 A, 28 AAAA, 65 HTTPS, ...)
  std::string verdict{};  // dns::VerdictName; "" is recorded as "unknown"
  uint16_t rcode = 0;     // what the client got
  bool replied = true;
  std::string transport{};  // "udp" or "tcp"
  // Learned from the answer (allowed only).
  std::vector<IpAddress> addresses{};
  // The policy pattern(s) that matched, comma-joined ("*.tool.test"); "" if
  // none.
  std::string matched{};
  std::string detail{};  // why, for a person
  // The filter's own time for it (first byte read to reply sent); 0 when
  // not known. For the daemon's metrics only: records do not keep it.
  uint64_t latency_ns = 0;
};

// The answer addresses a DNS entry keeps; more are counted, not kept.
inline constexpr size_t kDnsAddressesKept = 16;

struct DnsFoldedEntry {
  uint32_t phase_index = 0;
  std::string name;  // empty for the overflow entry
  uint16_t type = 0;
  std::string verdict;
  uint64_t count = 0;
  int64_t first_unix_ns = 0;
  int64_t last_unix_ns = 0;
  uint16_t rcode = 0;  // of the last query folded in
  uint64_t unreplied = 0;
  std::string transport;             // as seen, in order: "udp", "udp,tcp"
  std::vector<IpAddress> addresses;  // first seen first; kDnsAddressesKept
  uint64_t addresses_more = 0;
  std::string matched;  // of the first query
  std::string detail;   // of the first query
  bool overflow = false;
  bool dirty = false;  // changed since the last TakeDirty()
};

// Folds DNS queries by (phase span, name, type, verdict). The query must be
// sanitized already (the recorder does it): the folder keeps its strings.
class DnsQueryFolder {
 public:
  // max_entries caps the folded entries; overflow entries (at most one per
  // phase span and verdict) come on top.
  explicit DnsQueryFolder(size_t max_entries) : max_entries_(max_entries) {}

  struct Result {
    uint32_t id = 0;
    bool added = false;  // a new entry: its first query is this one
  };
  Result Add(const DnsQueryInfo& q, uint32_t phase_index, int64_t unix_ns);

  const DnsFoldedEntry& entry(uint32_t id) const { return entries_[id]; }
  size_t size() const { return entries_.size(); }
  // As AttemptFolder::TakeDirty.
  std::vector<uint32_t> TakeDirty();

  uint64_t total() const { return total_; }
  uint64_t overflowed() const { return overflowed_; }

 private:
  struct Key {
    uint32_t phase_index = 0;
    uint16_t type = 0;
    std::string name;
    std::string verdict;
    friend bool operator==(const Key&, const Key&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.phase_index, k.type, k.name, k.verdict);
    }
  };

  static constexpr size_t kMaxOverflowEntries = 256;
  static constexpr size_t kMaxTransportBytes = 32;

  size_t max_entries_;
  std::vector<DnsFoldedEntry> entries_;
  absl::flat_hash_map<Key, uint32_t> index_;
  // (phase span, verdict) -> overflow entry id (name empty, type 0).
  absl::flat_hash_map<Key, uint32_t> overflow_index_;
  uint32_t last_overflow_ = 0;
  std::vector<uint32_t> dirty_;
  uint64_t total_ = 0;
  uint64_t overflowed_ = 0;
};

}  // namespace sandfence

#endif  // SANDFENCE_RECORDS_FOLDING_H_
