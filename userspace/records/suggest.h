// Learning a policy from rollout records (`sandfence records suggest`): the
// smallest policy, per phase, that would have allowed what the rollouts
// did, as a commented PolicySet in protobuf text format that `sandfence
// check` (and --against) accepts as it is.
//
// What becomes what, per phase (allowed and denied attempts alike: the
// point is what the rollout needed):
//   - the model server: the records' own model rules (or --model) become
//     the phase's `model` URLs, and the attempts they cover need nothing
//     else. Every suggested phase is model_only (allow rules are honoured
//     there);
//   - a TCP/UDP destination becomes `allow { host port protocol }`: under
//     every DNS name whose recorded answers (same record, same phase) held
//     its address, else under the address itself. Two or more sibling
//     names (a.x.test, b.x.test) with the same port and protocol become one
//     wildcard `*.x.test`, never directly under a top-level label (no
//     `*.test`, `*.com`); TCP and UDP on the same host and port become ANY;
//   - a Unix socket name becomes `unix { allow }`; the sandbox's own
//     sockets need nothing;
//   - DNS: in a phase whose records have DNS queries (the filter ran), port
//     53 needs no grant (the filter answers it); in one with port-53
//     attempts but no queries (DNS was not filtered, so names are unknown),
//     the resolvers seen become `dns { mode: LISTED resolver }`;
//   - the sandbox's own loopback (private network namespace) needs nothing;
//     raw sockets, sandfence's own sockets and the DNS filters' range can
//     be granted by no policy; overflow entries kept no destination. Each
//     is said in a comment, as is each name asked but never connected to
//     (no port is known for it).
// Output is deterministic: phases in timeline order, grants sorted.
#ifndef SANDFENCE_RECORDS_SUGGEST_H_
#define SANDFENCE_RECORDS_SUGGEST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "records/record_set.h"

namespace sandfence {

struct SuggestOptions {
  // Only this phase; empty: every phase of the records' timelines.
  std::string only_phase;
  // The model server's URLs, for every phase, instead of the records' own
  // (e.g. records of inherit runs, which have none).
  std::vector<std::string> models;
};

// The suggested policy. InvalidArgument for an only_phase that no record
// has (naming it and the ones there are), or a malformed --model URL.
absl::StatusOr<std::string> SuggestPolicy(
    const std::vector<RecordInput>& records, const SuggestOptions& options);

}  // namespace sandfence

#endif  // SANDFENCE_RECORDS_SUGGEST_H_
