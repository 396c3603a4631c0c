// Replaying recorded attempts against a compiled policy (`sandfence check
// POLICY --against RECORD...`): what would this policy have denied of what
// these rollouts did?
//
// Each folded network attempt and DNS query of a record is judged by the
// policy's phase of the same name, the way the kernel and the DNS filter
// judge (bpf/egress/egress_verdict.bpf.h, egress.bpf.c's DNS redirect,
// dns/name_rules.h), using the compiler's own rule cover test (RuleCovers)
// and the filter's own name matcher (dns::PhaseNameRules):
//   inherit phase          everything allowed;
//   socket creation        a raw or non-TCP/UDP socket is denied;
//   Unix sockets           unchecked: allowed; sandfence's own: denied;
//                          a listed name, or one the record saw as the
//                          sandbox's own: allowed; else denied;
//   TCP/UDP                the filters' range (127.83/16) denied; port 53
//                          in a DNS-filtered phase goes to the filter
//                          (allowed; an unconnected IPv6 datagram is
//                          denied, it cannot be redirected); the sandbox's
//                          own loopback (the record said so) allowed unless
//                          loopback RULES_ONLY; then the rules; then, in a
//                          DNS-filtered phase, the addresses the phase
//                          would have learned: every answer address of a
//                          query of the same phase span whose name the
//                          phase answers opens that name's grants;
//   DNS queries            FILTERED: allowed when a name rule matches;
//                          NONE: denied; SYSTEM, LISTED: not judged by name
//                          (allowed).
// Time is not replayed: a learned address counts for the whole span
// (TTLs and expiry are ignored), and names in the policy are resolved now,
// not when the record was made. Overflow entries (no destination kept)
// and attempts no policy decides ("no sandbox", "too deep") are counted as
// not judged.
#ifndef SANDFENCE_RECORDS_REPLAY_H_
#define SANDFENCE_RECORDS_REPLAY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ip.h"
#include "compile/compiled_policy.h"
#include "dns/name_rules.h"
#include "records/record_set.h"
#include "sandfence/v1/record.pb.h"

namespace sandfence {

enum class ReplayOutcome { kAllowed, kDenied, kNotJudged };

struct ReplayVerdict {
  ReplayOutcome outcome = ReplayOutcome::kNotJudged;
  std::string reason;  // why, for a person ("no rule", "rule tcp ...")
};

// The addresses a DNS-filtered phase learns from answers, with what each
// opens (the union of the grants of every name that answered it).
class LearnedAddresses {
 public:
  void Add(const IpAddress& address, const std::vector<NameGrant>& grants,
           absl::string_view name);
  // The name that opened (protocol, address, port), or "" when none did.
  std::string Opens(L4 protocol, const IpAddress& address, uint16_t port) const;

 private:
  struct Learned {
    NameGrant grant;
    std::string name;
  };
  std::map<IpAddress, std::vector<Learned>> learned_;
};

// One compiled phase, ready to judge recorded entries.
class PhaseJudge {
 public:
  // Fails only for name rules the DNS filter would refuse (Malformed).
  static absl::StatusOr<PhaseJudge> Create(const CompiledPhase& phase);

  const CompiledPhase& phase() const { return phase_; }

  // What the phase learns from `queries` (those of one span).
  LearnedAddresses Learn(const std::vector<const v1::DnsQuery*>& queries) const;

  ReplayVerdict Attempt(const v1::NetAttempt& attempt,
                        const LearnedAddresses& learned) const;
  ReplayVerdict Query(const v1::DnsQuery& query) const;

 private:
  PhaseJudge(CompiledPhase phase, dns::PhaseNameRules names)
      : phase_(std::move(phase)), names_(std::move(names)) {}

  CompiledPhase phase_;
  dns::PhaseNameRules names_;
};

// Entries of one kind to one destination in one phase that the policy
// would deny, folded over records.
struct WouldDeny {
  std::string phase;
  // "tcp", "udp", "unix", "socket" (a socket the phase would not let it
  // create), "dns" (a query), or the record's protocol name.
  std::string kind;
  std::string destination;  // "127.0.0.3:80", "/run/x.sock", "b.test"
  std::string detail;       // DNS: the query types, "A,AAAA"; else ""
  std::string reason;
  uint64_t count = 0;           // attempts, or queries
  std::vector<size_t> records;  // indices into the records, ascending
};

struct ReplayReport {
  std::string policy_name;
  // In the policy's phase order, then by kind and destination.
  std::vector<WouldDeny> denied;
  uint64_t attempts = 0;  // network attempts judged (folded counts)
  uint64_t attempts_denied = 0;
  uint64_t queries = 0;  // DNS queries judged
  uint64_t queries_denied = 0;
  uint64_t not_judged = 0;         // attempts and queries no policy decides
  std::vector<std::string> notes;  // lossy records, and the like
};

// Usage errors (InvalidArgument, naming the phase and the ones there are)
// before anything is compiled: with `only_phase`, some record must have
// entries in it; without, every phase with entries must be one of
// `policy_phases`.
absl::Status CheckReplayPhases(const std::vector<std::string>& policy_phases,
                               const std::vector<RecordInput>& records,
                               absl::string_view only_phase);

// Judges every entry of `records` in a phase that `policy` has (entries of
// other phases are skipped: CheckReplayPhases said which may be).
absl::StatusOr<ReplayReport> ReplayRecords(
    const CompiledPolicy& policy, const std::vector<RecordInput>& records);

// For people: the records, the would-deny table, a summary. Ends in '\n'.
std::string FormatReplayText(const ReplayReport& report,
                             const std::vector<RecordInput>& records);
// For programs: {"policy", "records", "would_deny", "summary", "notes"}.
std::string FormatReplayJson(const ReplayReport& report,
                             const std::vector<RecordInput>& records);

}  // namespace sandfence

#endif  // SANDFENCE_RECORDS_REPLAY_H_
