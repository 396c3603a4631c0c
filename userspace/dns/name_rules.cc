#include "dns/name_rules.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "compile/endpoint.h"

namespace sandfence::dns {
namespace {

void MergeGrants(std::vector<NameGrant>* into,
                 const std::vector<NameGrant>& more) {
  into->insert(into->end(), more.begin(), more.end());
  std::sort(into->begin(), into->end());
  into->erase(std::unique(into->begin(), into->end()), into->end());
}

}  // namespace

absl::StatusOr<PhaseNameRules> PhaseNameRules::Build(
    const std::vector<NameRule>& rules) {
  PhaseNameRules out;
  for (const NameRule& rule : rules) {
    absl::StatusOr<NamePattern> pattern = NormalizeNamePattern(rule.pattern);
    if (!pattern.ok()) {
      return Malformed(absl::StrCat("name rule \"", rule.pattern,
                                    "\": ", pattern.status().message()));
    }
    if (rule.grants.empty()) {
      return Malformed(
          absl::StrCat("name rule \"", rule.pattern, "\" opens no port",
                       pattern->wildcard ? "; a wildcard needs a port" : ""));
    }
    for (const NameGrant& g : rule.grants) {
      if (g.port_first == 0 || g.port_last < g.port_first) {
        return Malformed(absl::StrCat("name rule \"", rule.pattern,
                                      "\": port range ", g.port_first, "-",
                                      g.port_last, " is not in 1..65535"));
      }
    }
    auto& index = pattern->wildcard ? out.suffixes_ : out.exact_;
    Entry& entry = index[pattern->name];
    entry.pattern = pattern->ToString();
    MergeGrants(&entry.grants, rule.grants);
  }
  return out;
}

NameMatch PhaseNameRules::Match(absl::string_view name) const {
  NameMatch out;
  // A name with a byte that no host name has (the parser escapes those
  // with a backslash, a dot inside a label too) matches nothing: a suffix
  // walk over its text would split a label at the escaped dot.
  if (name.empty() || name.find('\\') != absl::string_view::npos) return out;
  if (auto it = exact_.find(name); it != exact_.end()) {
    MergeGrants(&out.grants, it->second.grants);
    out.patterns.push_back(it->second.pattern);
  }
  if (!suffixes_.empty()) {
    // Every proper suffix at a label boundary: "a.b.c" tries "b.c", "c".
    for (size_t dot = name.find('.'); dot != absl::string_view::npos;
         dot = name.find('.', dot + 1)) {
      if (auto it = suffixes_.find(name.substr(dot + 1));
          it != suffixes_.end()) {
        MergeGrants(&out.grants, it->second.grants);
        out.patterns.push_back(it->second.pattern);
      }
    }
  }
  return out;
}

bool PhaseNameRules::Allows(absl::string_view name) const {
  return !Match(name).grants.empty();
}

}  // namespace sandfence::dns
