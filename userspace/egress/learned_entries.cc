#include "egress/learned_entries.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sandfence {
namespace {

bool InFilterRange(const IpAddress& addr) {
  const IpAddress a = addr.Unmapped();
  if (!a.is_v4()) return false;
  uint32_t host = 0;
  std::memcpy(&host, a.bytes(), 4);
  return (ntohl(host) & SF_DNS_FILTER_MASK) == SF_DNS_FILTER_NET;
}

}  // namespace

sf_learned4_key LearnedKey::Key4() const {
  sf_learned4_key k{};
  k.generation = generation;
  k.protocol = protocol;
  std::memcpy(&k.addr, addr.bytes(), 4);
  return k;
}

sf_learned6_key LearnedKey::Key6() const {
  sf_learned6_key k{};
  k.generation = generation;
  k.protocol = protocol;
  std::memcpy(k.addr, addr.bytes(), 16);
  return k;
}

LearnedKey LearnedKeyOf(uint32_t generation, const LearnedEntry& entry) {
  // The hooks unmap ::ffff:a.b.c.d before they judge: learn it as IPv4.
  return LearnedKey{generation, static_cast<uint8_t>(entry.protocol),
                    entry.addr.Unmapped()};
}

LearnedKey LearnedKeyOf(const sf_learned4_key& key) {
  return LearnedKey{key.generation, key.protocol,
                    IpAddress::FromBytes(
                        AF_INET, reinterpret_cast<const uint8_t*>(&key.addr))};
}

LearnedKey LearnedKeyOf(const sf_learned6_key& key) {
  return LearnedKey{key.generation, key.protocol,
                    IpAddress::FromBytes(AF_INET6, key.addr)};
}

absl::Status ValidateLearned(const LearnedEntry& e) {
  const std::string addr = e.addr.ToString();
  if (e.protocol != L4::kTcp && e.protocol != L4::kUdp) {
    return Malformed(absl::StrCat("learned ", addr, ": protocol ",
                                  static_cast<int>(e.protocol),
                                  " is neither tcp nor udp"));
  }
  if (e.addr.Unmapped().IsUnspecified()) {
    return Malformed(absl::StrCat("learned address ", addr,
                                  " is unspecified: it cannot be opened"));
  }
  if (InFilterRange(e.addr)) {
    return Malformed(absl::StrCat(
        "learned address ", addr, " is in the DNS filters' range 127.83.0.0/",
        SF_DNS_FILTER_PREFIX, ", which no sandbox may reach"));
  }
  if (e.ranges.empty()) {
    return Malformed(absl::StrCat("learned ", addr, ": no port ranges"));
  }
  for (const PortRangeRef& r : e.ranges) {
    if (r.first > r.last) {
      return Malformed(absl::StrCat("learned ", addr, ": port range ", r.first,
                                    "-", r.last, " is empty"));
    }
  }
  if (e.expires_boot_ns == 0) {
    return Malformed(absl::StrCat("learned ", addr, ": expires_boot_ns is 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<sf_learned_value> MergeLearned(const sf_learned_value* old,
                                              const LearnedEntry& e) {
  if (absl::Status s = ValidateLearned(e); !s.ok()) return s;
  std::vector<sf_port_range> ranges;
  for (const PortRangeRef& r : e.ranges) {
    ranges.push_back({r.first, r.last, r.rule_id});
  }
  uint64_t expires = e.expires_boot_ns;
  if (old != nullptr) {
    const uint32_t n = std::min<uint32_t>(old->nranges, SF_MAX_PORT_RANGES);
    ranges.insert(ranges.end(), old->ranges, old->ranges + n);
    expires = std::max<uint64_t>(expires, old->expires_ns);
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const sf_port_range& a, const sf_port_range& b) {
              return std::tie(a.first, a.last, a.rule_id) <
                     std::tie(b.first, b.last, b.rule_id);
            });
  std::vector<sf_port_range> merged;
  for (const sf_port_range& r : ranges) {
    if (!merged.empty() &&
        r.first <= static_cast<uint32_t>(merged.back().last) + 1) {
      merged.back().last = std::max(merged.back().last, r.last);
      continue;
    }
    merged.push_back(r);
  }
  if (merged.size() > SF_MAX_PORT_RANGES) {
    return Rejected(absl::StrCat(
        "learned ", e.protocol == L4::kTcp ? "tcp " : "udp ", e.addr.ToString(),
        " needs ", merged.size(), " distinct port ranges; at most ",
        SF_MAX_PORT_RANGES, " per learned address can be enforced"));
  }
  sf_learned_value v{};
  v.expires_ns = expires;
  v.nranges = static_cast<uint32_t>(merged.size());
  std::copy(merged.begin(), merged.end(), v.ranges);
  return v;
}

}  // namespace sandfence
