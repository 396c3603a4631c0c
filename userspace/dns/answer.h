// What an upstream answer opens: the A/AAAA addresses of the question's
// name, found by following its CNAME chain, each with the TTL that bounds
// it, and how long the filter keeps an address learned from it.
//
// Only records in the answer section whose owner is on the chain count
// (a server cannot slip in addresses for names nobody asked about); the
// chain is bounded and a loop ends it. An address's TTL is the smallest TTL
// along the chain up to and including its own record: when any link
// expires, the client must ask again.
#ifndef SANDFENCE_DNS_ANSWER_H_
#define SANDFENCE_DNS_ANSWER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/ip.h"
#include "dns/message.h"

namespace sandfence::dns {

struct AnswerAddress {
  IpAddress addr;    // IPv4-mapped IPv6 answers come out as IPv4
  uint32_t ttl = 0;  // seconds, as the answer gives it (min along the chain)

  friend bool operator==(const AnswerAddress&, const AnswerAddress&) = default;
};

struct ChainAddresses {
  std::vector<std::string> chain;        // the question's name first
  std::vector<AnswerAddress> addresses;  // deduplicated (largest TTL kept)
  bool loop = false;                     // a CNAME pointed back into the chain
  bool truncated = false;                // the chain was longer than the bound
};

inline constexpr size_t kMaxCnameChain = 16;

// `qname` is the question's text form (Question::name).
ChainAddresses FollowChain(const Message& answer, absl::string_view qname,
                           size_t max_chain = kMaxCnameChain);

// How long learned addresses stay open.
struct TtlPolicy {
  absl::Duration min = absl::Seconds(30);
  absl::Duration max = absl::Minutes(5);
  absl::Duration grace = absl::Seconds(60);
};

// clamp(ttl, min, max) + grace.
absl::Duration LearnedLifetime(uint32_t ttl, const TtlPolicy& policy);

// The TTL the client is given: at most `max` (in whole seconds), so that it
// asks again before the learned address expires.
uint32_t ClientTtlCap(const TtlPolicy& policy);

}  // namespace sandfence::dns

#endif  // SANDFENCE_DNS_ANSWER_H_
