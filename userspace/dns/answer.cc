#include "dns/answer.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace sandfence::dns {

ChainAddresses FollowChain(const Message& answer, absl::string_view qname,
                           size_t max_chain) {
  ChainAddresses out;
  // The TTL bound reached at each name on the chain.
  absl::flat_hash_map<std::string, uint32_t> bound;
  std::string name(qname);
  uint32_t ttl = UINT32_MAX;
  for (;;) {
    out.chain.push_back(name);
    bound[name] = ttl;
    const ResourceRecord* next = nullptr;
    for (const ResourceRecord& rr : answer.answers) {
      if (rr.type == kTypeCname && rr.klass == kClassIn && rr.name == name) {
        next = &rr;  // a name has one CNAME; the first one wins
        break;
      }
    }
    if (next == nullptr) break;
    if (bound.contains(next->target)) {
      out.loop = true;
      break;
    }
    if (out.chain.size() >= max_chain) {
      out.truncated = true;
      break;
    }
    ttl = std::min(ttl, next->ttl);
    name = next->target;
  }
  for (const ResourceRecord& rr : answer.answers) {
    if ((rr.type != kTypeA && rr.type != kTypeAaaa) || rr.klass != kClassIn) {
      continue;
    }
    auto it = bound.find(rr.name);
    if (it == bound.end()) continue;
    // A mapped IPv6 address (::ffff:a.b.c.d) is the IPv4 address, as the
    // compiler stores such literals.
    const IpAddress addr =
        IpAddress::FromBytes(rr.type == kTypeA ? AF_INET : AF_INET6,
                             reinterpret_cast<const uint8_t*>(rr.rdata.data()))
            .Unmapped();
    const uint32_t t = std::min(it->second, rr.ttl);
    auto same =
        std::find_if(out.addresses.begin(), out.addresses.end(),
                     [&](const AnswerAddress& a) { return a.addr == addr; });
    if (same == out.addresses.end()) {
      out.addresses.push_back({addr, t});
    } else {
      same->ttl = std::max(same->ttl, t);
    }
  }
  return out;
}

absl::Duration LearnedLifetime(uint32_t ttl, const TtlPolicy& policy) {
  const absl::Duration clamped = std::clamp(absl::Seconds(ttl), policy.min,
                                            std::max(policy.min, policy.max));
  return clamped + policy.grace;
}

uint32_t ClientTtlCap(const TtlPolicy& policy) {
  const int64_t s = absl::ToInt64Seconds(std::max(policy.min, policy.max));
  return static_cast<uint32_t>(std::clamp<int64_t>(s, 0, INT32_MAX));
}

}  // namespace sandfence::dns
