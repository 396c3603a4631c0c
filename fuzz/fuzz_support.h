// What the fuzz targets share: a resolver that never touches the network,
// and the checks every compile result must pass. A violated check aborts,
// which libFuzzer reports as a crash with the input that caused it.
#ifndef SANDFENCE_FUZZ_FUZZ_SUPPORT_H_
#define SANDFENCE_FUZZ_FUZZ_SUPPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ip.h"
#include "policy/rollout_endpoints.h"
#include "resolve/resolver.h"
#include "sandfence/v1/policy.pb.h"

namespace sandfence::fuzz {

// Aborts with `what` on stderr when `ok` is false (assert() is compiled out
// in release builds; a fuzz check must never be).
void Check(bool ok, absl::string_view what);

// Silences protobuf's own logging (it logs, for example, every string field
// that is not UTF-8), which would otherwise cost most of a run's time.
void QuietProtobufLogs();

// Answers from a fixed table for the names in the seeds, and for any other
// name from a hash of it: addresses of every kind the compiler must handle
// (public, IPv6, mapped, loopback, unspecified, none), NXDOMAIN and
// timeouts. Deterministic, so a crash reproduces.
class FuzzResolver : public Resolver {
 public:
  absl::StatusOr<std::vector<IpAddress>> Resolve(
      absl::string_view name) override;
};

// Compiles `policy` with `endpoints` the ways a sandbox can ask for it (host
// network namespace, its own, borrowed; the host's resolvers known and
// not) and checks every outcome: a refusal is malformed, rejected or
// unavailable; compiled rules are sorted and merged, have ports, and open
// neither the unspecified address nor, from a private namespace, the
// host's loopback. Each compiled policy is printed (text and JSON) too.
void CompileAndCheck(const v1::PolicySet& policy,
                     const RolloutEndpoints& endpoints);

}  // namespace sandfence::fuzz

#endif  // SANDFENCE_FUZZ_FUZZ_SUPPORT_H_
