// Which DNS names a phase lets a sandbox resolve, and what each one opens.
//
// A phase's name rules come from its model endpoints, kept tool hosts and
// `allow` hosts: each is a name ("api.model.test") or a wildcard
// ("*.githubusercontent.com": any name below the suffix, not the suffix
// itself), with the grants (protocol + port range) that the name's learned
// addresses open. A name matching several rules opens the union of their
// grants. Patterns are normalized by the compile module's normalizer
// (NormalizeNamePattern: case, one trailing dot, IDN to punycode), and query
// names arrive lower-cased from the DNS parser, so both sides compare in
// the same form.
//
// Lookup is one hash probe for the exact name plus one per label for the
// wildcard suffixes: its cost depends on the name, not on the rule count.
#ifndef SANDFENCE_DNS_NAME_RULES_H_
#define SANDFENCE_DNS_NAME_RULES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compile/compiled_policy.h"

namespace sandfence::dns {

// The compiler's types (compile/compiled_policy.h): what a name opens,
// and one rule as the compiler hands it over (its pattern not yet
// normalized when built by hand).
using ::sandfence::NameGrant;
using ::sandfence::NameRule;

// The result of a match: the grants (sorted, deduplicated) and the
// patterns that matched, in normalized form.
struct NameMatch {
  std::vector<NameGrant> grants;
  std::vector<std::string> patterns;
};

class PhaseNameRules {
 public:
  PhaseNameRules() = default;  // allows nothing

  // Normalizes every pattern and indexes the rules. Malformed, naming the
  // rule, for a bad pattern, a rule with no grant (a name that opens
  // nothing is a mistake, and a wildcard with no port is refused), or a
  // grant with port 0 or a reversed range.
  static absl::StatusOr<PhaseNameRules> Build(
      const std::vector<NameRule>& rules);

  // The grants for `name` (the text form the DNS parser gives: lower case,
  // no trailing dot); empty grants when no rule matches.
  NameMatch Match(absl::string_view name) const;
  bool Allows(absl::string_view name) const;

  size_t size() const { return exact_.size() + suffixes_.size(); }

 private:
  struct Entry {
    std::vector<NameGrant> grants;
    std::string pattern;
  };
  absl::flat_hash_map<std::string, Entry> exact_;
  absl::flat_hash_map<std::string, Entry> suffixes_;  // "*.x.y" stored as x.y
};

}  // namespace sandfence::dns

#endif  // SANDFENCE_DNS_NAME_RULES_H_
