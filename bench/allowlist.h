// The policies the benchmarks program, built by hand as the compiler would
// emit them (sorted, no duplicates). Every address is inside 127.0.0.0/8:
// rules are only map entries, but no benchmark policy names an address
// outside loopback, and all traffic goes to 127.0.0.2 (allowed) or
// 127.0.0.9 (denied).
//   127.0.0.2             the destination the measuring worker uses
//   127.0.0.9             where the event load is sent (and denied)
//   127.16.0.0 + ...      the rest of a measured sandbox's allowlist
//   127.64.0.0 + 16 * k   filler sandbox k's rules
#ifndef SANDFENCE_BENCH_ALLOWLIST_H_
#define SANDFENCE_BENCH_ALLOWLIST_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compile/compiled_policy.h"

namespace sandfence::bench {

inline constexpr char kAllowedDst[] = "127.0.0.2";
inline constexpr char kDeniedDst[] = "127.0.0.9";
inline constexpr size_t kFillerRules = 10;

// n rules (n >= 2): TCP to 127.0.0.2:tcp_port, UDP to 127.0.0.2:udp_port,
// and n - 2 others. Different salts give disjoint allowlists of one size.
CompiledPhase AllowlistPhase(size_t n, uint16_t tcp_port, uint16_t udp_port,
                             uint32_t salt = 0);
// The distinct IPv4 addresses (host order) of AllowlistPhase's rules: what a
// sidecar's address set holds for the same allowlist.
std::vector<uint32_t> AllowlistAddresses(size_t n, uint32_t salt = 0);

// Filler sandbox k: kFillerRules rules of its own.
CompiledPhase FillerPhase(size_t k);
std::vector<uint32_t> FillerAddresses(size_t k);

// Restricted with no rules: every connect and send is denied.
CompiledPhase DenyAllPhase();

}  // namespace sandfence::bench

#endif  // SANDFENCE_BENCH_ALLOWLIST_H_
