#include "compile/rules.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace sandfence {

bool RuleLess(const Rule& a, const Rule& b) {
  auto key = [](const Rule& r) {
    return std::make_tuple(static_cast<int>(r.protocol),
                           r.dest.address().family(), r.dest.address(),
                           r.dest.length(), r.port_first, r.port_last,
                           static_cast<int>(r.source));
  };
  auto ka = key(a);
  auto kb = key(b);
  if (ka != kb) return ka < kb;
  return a.origin < b.origin;
}

bool RuleCovers(const Rule& outer, const Rule& inner) {
  return outer.protocol == inner.protocol && outer.dest.Contains(inner.dest) &&
         outer.port_first <= inner.port_first &&
         inner.port_last <= outer.port_last;
}

void SortAndMergeRules(std::vector<Rule>* rules) {
  std::sort(rules->begin(), rules->end(), RuleLess);
  std::vector<Rule> kept;
  kept.reserve(rules->size());
  for (size_t i = 0; i < rules->size(); ++i) {
    const Rule& rule = (*rules)[i];
    bool covered = false;
    for (size_t j = 0; j < rules->size() && !covered; ++j) {
      if (j == i || !RuleCovers((*rules)[j], rule)) continue;
      // Two rules that cover each other are equal in effect: the one
      // earlier in order stays.
      covered = !RuleCovers(rule, (*rules)[j]) || j < i;
    }
    if (!covered) kept.push_back(rule);
  }
  *rules = std::move(kept);
}

absl::string_view L4Name(L4 protocol) {
  return protocol == L4::kUdp ? "udp" : "tcp";
}

absl::string_view RuleSourceName(RuleSource s) {
  switch (s) {
    case RuleSource::kModel:
      return "model";
    case RuleSource::kTool:
      return "tool";
    case RuleSource::kAllow:
      return "allow";
    case RuleSource::kDns:
      return "dns";
  }
  return "allow";
}

}  // namespace sandfence
