// The order and merging of compiled rules, so that equal policies compile
// to equal rule lists (golden tests, records, and kernel map contents).
#ifndef SANDFENCE_COMPILE_RULES_H_
#define SANDFENCE_COMPILE_RULES_H_

#include <vector>

#include "absl/strings/string_view.h"
#include "compile/compiled_policy.h"

namespace sandfence {

// Strict weak order: protocol, family, address, prefix length, first port,
// last port, then source and origin (so exact duplicates sort by source:
// model, tool, allow, dns).
bool RuleLess(const Rule& a, const Rule& b);

// `outer` allows everything `inner` allows: same protocol, inner's block
// within outer's, inner's ports within outer's.
bool RuleCovers(const Rule& outer, const Rule& inner);

// Sorts `rules` by RuleLess and removes every rule covered by another (of
// exact duplicates the first in order stays, keeping its origin).
void SortAndMergeRules(std::vector<Rule>* rules);

absl::string_view L4Name(L4 protocol);           // "tcp", "udp"
absl::string_view RuleSourceName(RuleSource s);  // "model", "tool", ...

}  // namespace sandfence

#endif  // SANDFENCE_COMPILE_RULES_H_
