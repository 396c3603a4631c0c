// How the answers to the A and the AAAA query of one name become one result.
// Internal to the resolve module; separate so that the refusal rules can be
// tested without a DNS server.
#ifndef SANDFENCE_RESOLVE_ANSWER_H_
#define SANDFENCE_RESOLVE_ANSWER_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ip.h"

namespace sandfence {

// The outcome of one address-family lookup: a c-ares status code (ARES_*)
// and the addresses it returned.
struct FamilyAnswer {
  int ares_status = 0;
  std::vector<IpAddress> addrs;
};

// The refusal for one failed c-ares status, naming the name, the query
// ("A", "AAAA") and the servers asked.
absl::Status CaresError(int ares_status, absl::string_view name,
                        absl::string_view query, absl::string_view servers);

// Combines the two lookups of `name`:
// - NXDOMAIN is final: it says the name does not exist, whatever the other
//   query did, unless the other one returned addresses (then those count);
// - a transient failure of either query is Unavailable even when the other
//   one returned addresses: a half answer would silently compile a policy
//   without the other family's addresses;
// - otherwise the addresses of both, deduplicated and sorted, or Rejected
//   when there are none (the name exists but has no address record).
absl::StatusOr<std::vector<IpAddress>> CombineAnswers(absl::string_view name,
                                                      absl::string_view servers,
                                                      const FamilyAnswer& a,
                                                      const FamilyAnswer& aaaa);

}  // namespace sandfence

#endif  // SANDFENCE_RESOLVE_ANSWER_H_
