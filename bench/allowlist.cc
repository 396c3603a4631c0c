#include "bench/allowlist.h"

#include <algorithm>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace sandfence::bench {
namespace {

constexpr uint32_t kTarget = 0x7f000002;      // 127.0.0.2
constexpr uint32_t kAllowBase = 0x7f100000;   // 127.16.0.0
constexpr uint32_t kSaltStride = 0x100000;    // 1M addresses per salt
constexpr uint32_t kFillerBase = 0x7f400000;  // 127.64.0.0

Rule HostRule(L4 protocol, uint32_t addr, uint16_t port, RuleSource source) {
  Rule r;
  r.protocol = protocol;
  r.dest = IpPrefix::Host(IpAddress::V4(addr));
  r.port_first = r.port_last = port;
  r.source = source;
  r.origin = r.dest.ToString();
  return r;
}

CompiledPhase Restricted(std::vector<Rule> rules) {
  // The compiler's order: protocol, then destination, then port.
  std::sort(rules.begin(), rules.end(), [](const Rule& a, const Rule& b) {
    return std::tie(a.protocol, a.dest, a.port_first) <
           std::tie(b.protocol, b.dest, b.port_first);
  });
  CompiledPhase p;
  p.name = "bench";
  p.access = v1::MODEL_ONLY;
  p.rules = std::move(rules);
  // Users get FIRST_PER_DESTINATION unless they ask otherwise; measure that.
  p.audit_allowed = v1::Audit::FIRST_PER_DESTINATION;
  return p;
}

uint32_t AllowAddress(size_t i, uint32_t salt) {
  return kAllowBase + salt * kSaltStride + static_cast<uint32_t>(i);
}

}  // namespace

CompiledPhase AllowlistPhase(size_t n, uint16_t tcp_port, uint16_t udp_port,
                             uint32_t salt) {
  std::vector<Rule> rules;
  rules.reserve(n);
  rules.push_back(HostRule(L4::kTcp, kTarget, tcp_port, RuleSource::kModel));
  rules.push_back(HostRule(L4::kUdp, kTarget, udp_port, RuleSource::kDns));
  for (size_t i = 2; i < n; ++i) {
    rules.push_back(HostRule(i % 2 ? L4::kUdp : L4::kTcp, AllowAddress(i, salt),
                             443, RuleSource::kAllow));
  }
  return Restricted(std::move(rules));
}

std::vector<uint32_t> AllowlistAddresses(size_t n, uint32_t salt) {
  std::vector<uint32_t> out{kTarget};
  for (size_t i = 2; i < n; ++i) out.push_back(AllowAddress(i, salt));
  return out;
}

CompiledPhase FillerPhase(size_t k) {
  std::vector<Rule> rules;
  for (uint32_t addr : FillerAddresses(k)) {
    rules.push_back(HostRule(L4::kTcp, addr, 443, RuleSource::kAllow));
  }
  return Restricted(std::move(rules));
}

std::vector<uint32_t> FillerAddresses(size_t k) {
  std::vector<uint32_t> out;
  for (size_t j = 0; j < kFillerRules; ++j) {
    out.push_back(kFillerBase + 16 * static_cast<uint32_t>(k) +
                  static_cast<uint32_t>(j));
  }
  return out;
}

CompiledPhase DenyAllPhase() { return Restricted({}); }

}  // namespace sandfence::bench
