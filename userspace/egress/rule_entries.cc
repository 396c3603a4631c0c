#include "egress/rule_entries.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sandfence {
namespace {

// An LPM prefix within one (family, protocol): address bytes and length.
struct PrefixKey {
  std::array<uint8_t, 16> addr{};
  int length = 0;
  friend auto operator<=>(const PrefixKey&, const PrefixKey&) = default;
};

PrefixKey Truncate(const PrefixKey& p, int length) {
  PrefixKey out;
  out.length = length;
  for (int bit = 0; bit < length; ++bit) {
    if ((p.addr[bit / 8] >> (7 - bit % 8)) & 1) {
      out.addr[bit / 8] |= static_cast<uint8_t>(1 << (7 - bit % 8));
    }
  }
  return out;
}

// Sorts and coalesces ranges that overlap or touch. Coalescing keeps the
// first rule's id: the verdict is the same, only attribution narrows.
std::vector<sf_port_range> Coalesce(std::vector<sf_port_range> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const sf_port_range& a, const sf_port_range& b) {
              return std::tie(a.first, a.last, a.rule_id) <
                     std::tie(b.first, b.last, b.rule_id);
            });
  std::vector<sf_port_range> out;
  for (const sf_port_range& r : ranges) {
    if (!out.empty() && r.first <= static_cast<uint32_t>(out.back().last) + 1) {
      out.back().last = std::max(out.back().last, r.last);
      continue;
    }
    out.push_back(r);
  }
  return out;
}

using PrefixRanges = std::map<PrefixKey, std::vector<sf_port_range>>;

// For every prefix, its own ranges plus those of every containing prefix.
absl::StatusOr<std::vector<std::pair<PrefixKey, sf_cidr_value>>> MergeCovering(
    const PrefixRanges& prefixes, int family_bits, absl::string_view what) {
  std::vector<std::pair<PrefixKey, sf_cidr_value>> out;
  out.reserve(prefixes.size());
  for (const auto& [prefix, own] : prefixes) {
    std::vector<sf_port_range> ranges = own;
    for (int len = 0; len < prefix.length; ++len) {
      auto it = prefixes.find(Truncate(prefix, len));
      if (it != prefixes.end()) {
        ranges.insert(ranges.end(), it->second.begin(), it->second.end());
      }
    }
    ranges = Coalesce(std::move(ranges));
    if (ranges.size() > SF_MAX_PORT_RANGES) {
      IpAddress addr = IpAddress::FromBytes(
          family_bits == 32 ? AF_INET : AF_INET6, prefix.addr.data());
      return Rejected(absl::StrCat(
          what, " rules for ", IpPrefix(addr, prefix.length).ToString(),
          " need ", ranges.size(), " distinct port ranges; at most ",
          SF_MAX_PORT_RANGES, " per address or CIDR can be enforced"));
    }
    sf_cidr_value value{};
    value.nranges = static_cast<uint32_t>(ranges.size());
    std::copy(ranges.begin(), ranges.end(), value.ranges);
    out.emplace_back(prefix, value);
  }
  return out;
}

}  // namespace

absl::StatusOr<RuleEntries> BuildRuleEntries(const CompiledPhase& phase,
                                             uint32_t generation) {
  RuleEntries entries;
  // Keyed by protocol, one map per family.
  std::map<uint8_t, PrefixRanges> lpm4, lpm6;

  for (size_t i = 0; i < phase.rules.size(); ++i) {
    const Rule& rule = phase.rules[i];
    const uint32_t rule_id = static_cast<uint32_t>(i);
    const uint8_t proto = static_cast<uint8_t>(rule.protocol);
    const IpAddress& addr = rule.dest.address();
    const bool v4 = addr.is_v4();
    if (rule.port_first > rule.port_last) {
      return absl::InvalidArgumentError(
          absl::StrCat("rule ", i, ": port range ", rule.port_first, "-",
                       rule.port_last, " is empty"));
    }
    if (rule.dest.is_host() && rule.port_first == rule.port_last) {
      if (v4) {
        sf_exact4_key key{};
        key.generation = generation;
        key.protocol = proto;
        key.port = rule.port_first;
        std::memcpy(&key.addr, addr.bytes(), 4);
        entries.exact4.push_back({key, sf_rule_ref{rule_id}});
      } else {
        sf_exact6_key key{};
        key.generation = generation;
        key.protocol = proto;
        key.port = rule.port_first;
        std::memcpy(key.addr, addr.bytes(), 16);
        entries.exact6.push_back({key, sf_rule_ref{rule_id}});
      }
      continue;
    }
    PrefixKey prefix;
    std::memcpy(prefix.addr.data(), addr.bytes(), v4 ? 4 : 16);
    prefix.length = rule.dest.length();
    (v4 ? lpm4 : lpm6)[proto][prefix].push_back(
        sf_port_range{rule.port_first, rule.port_last, rule_id});
  }

  for (const auto& [proto, prefixes] : lpm4) {
    auto merged = MergeCovering(prefixes, 32, proto == 6 ? "tcp" : "udp");
    if (!merged.ok()) return merged.status();
    for (const auto& [prefix, value] : *merged) {
      sf_cidr4_key key{};
      key.prefixlen = SF_LPM_FIXED_BITS + prefix.length;
      key.generation = generation;
      key.protocol = proto;
      std::memcpy(&key.addr, prefix.addr.data(), 4);
      entries.cidr4.push_back({key, value});
    }
  }
  for (const auto& [proto, prefixes] : lpm6) {
    auto merged = MergeCovering(prefixes, 128, proto == 6 ? "tcp" : "udp");
    if (!merged.ok()) return merged.status();
    for (const auto& [prefix, value] : *merged) {
      sf_cidr6_key key{};
      key.prefixlen = SF_LPM_FIXED_BITS + prefix.length;
      key.generation = generation;
      key.protocol = proto;
      std::memcpy(key.addr, prefix.addr.data(), 16);
      entries.cidr6.push_back({key, value});
    }
  }
  // rule_id: the name's index in phase.unix_names.
  if (phase.restricted() && phase.unix_checked) {
    for (size_t i = 0; i < phase.unix_names.size(); ++i) {
      const UnixName& n = phase.unix_names[i];
      if (n.name.empty() || n.name.size() > SF_UNIX_NAME_MAX - 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("unix name ", n.ToString(), ": ", n.name.size(),
                         " bytes; 1 to ", SF_UNIX_NAME_MAX - 1, " fit"));
      }
      entries.unix_names.push_back(
          {UnixKey(n, generation), sf_rule_ref{static_cast<uint32_t>(i)}});
    }
  }
  return entries;
}

sf_unix_key UnixKey(const UnixName& name, uint64_t scope) {
  sf_unix_key key{};
  key.scope = scope;
  const size_t n = std::min<size_t>(name.name.size(), SF_UNIX_NAME_MAX);
  // A path ends at its first NUL (len 0); an abstract name is its bytes.
  key.len = name.abstract ? static_cast<uint16_t>(n) : 0;
  key.abstract = name.abstract ? 1 : 0;
  std::memcpy(key.name, name.name.data(), n);
  return key;
}

uint32_t SandboxFlags(const CompiledPhase& phase) {
  uint32_t flags = 0;
  if (phase.restricted()) flags |= SF_SB_RESTRICTED;
  // An unrestricted phase sends DNS wherever it likes: nothing to filter.
  if (phase.restricted() && phase.dns_filtered) flags |= SF_SB_DNS_FILTER;
  if (phase.restricted() && phase.unix_checked) flags |= SF_SB_UNIX_CHECKED;
  if (phase.restricted() && phase.audit_only) flags |= SF_SB_AUDIT;
  if (phase.budget_enforced()) flags |= SF_SB_BUDGET;
  if (phase.loopback == v1::LOOPBACK_DEFAULT) flags |= SF_SB_OWN_LOOPBACK;
  switch (phase.audit_allowed) {
    case v1::Audit::ALL:
      flags |= SF_SB_AUDIT_ALLOW_ALL;
      break;
    case v1::Audit::NO_ALLOWED:
      break;
    default:
      flags |= SF_SB_AUDIT_ALLOW_FIRST;
      break;
  }
  return flags;
}

}  // namespace sandfence
