// The suggested policy as text: its header, then each phase as what
// suggest_learning.cc learned of it, every grant with what it covers.
#include "records/suggest.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compile/endpoint.h"
#include "compile/rules.h"
#include "records/suggest_internal.h"

namespace sandfence {
namespace suggest_internal {

std::string Quote(absl::string_view s) {
  return absl::StrCat("\"", absl::CEscape(s), "\"");
}

std::string Plural(uint64_t n, absl::string_view one, absl::string_view many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

std::string Tags(const std::set<size_t>& records) {
  std::vector<std::string> tags;
  for (size_t r : records) tags.push_back(RecordTag(r));
  return absl::StrJoin(tags, " ");
}

std::string PhaseLearning::Render() const {
  std::string out = absl::StrCat("phase {\n  name: ", Quote(name_), "\n");
  absl::StrAppend(
      &out, "  # recorded: ",
      recorded_attempts_.Text("network attempt", "network attempts"), "; ",
      recorded_queries_.Text("DNS query", "DNS queries"), "\n");
  if (!ran_as_.empty()) {
    absl::StrAppend(&out, "  # ran as: ", absl::StrJoin(ran_as_, ", "), "\n");
  }
  for (const std::string& w : warnings_) {
    absl::StrAppend(&out, "  # warning: ", w, "\n");
  }
  absl::StrAppend(&out, "  network_access: MODEL_ONLY\n");

  // The model server.
  if (model_urls_.empty()) {
    absl::StrAppend(
        &out,
        "  # model: none in the records (no model rule: the phase ran "
        "inherit?).\n"
        "  # Add model: \"http://HOST:PORT/\" here or give --model per rollout;"
        "\n  # a model_only phase without one is refused.\n");
  } else {
    absl::StrAppend(&out, "  # model: from ", model_from_, "; covers ",
                    model_attempts_.count == 0 ? "no recorded attempt"
                                               : model_attempts_.Text(),
                    "\n");
    for (const std::string& url : model_urls_) {
      absl::StrAppend(&out, "  model: ", Quote(url), "\n");
    }
  }

  // Allow rules: TCP and UDP of one host and port in one rule.
  std::map<std::tuple<bool, std::string, IpAddress, uint16_t>,
           std::vector<std::pair<L4, const GrantSeen*>>>
      rules;
  for (const auto& [key, g] : grants_) {
    rules[{key.address, key.name, key.addr, key.port}].emplace_back(
        key.protocol, &g);
  }
  for (const auto& [where, by_protocol] : rules) {
    const auto& [address, name, addr, port] = where;
    GrantSeen g;
    for (const auto& [protocol, one] : by_protocol) {
      g.attempts.Merge(one->attempts);
      g.reached.insert(one->reached.begin(), one->reached.end());
      g.members.insert(one->members.begin(), one->members.end());
    }
    std::vector<std::string> reached;
    for (const IpAddress& a : g.reached) reached.push_back(a.ToString());
    std::string comment;
    if (address) {
      comment = absl::StrCat(g.attempts.Text(),
                             "; no DNS answer in the records named it");
    } else {
      comment = name;
      if (!g.members.empty()) {
        absl::StrAppend(&comment, " for ", g.members.size(), " sibling names ",
                        absl::StrJoin(g.members, ", "));
      }
      absl::StrAppend(&comment, ": ", g.attempts.Text(), " to ",
                      absl::StrJoin(reached, ", "));
      Seen asked;
      std::set<std::string> types;
      for (const auto& [qname, n] : names_) {
        const bool covered =
            g.members.empty() ? qname == name : g.members.count(qname) > 0;
        if (!covered) continue;
        asked.Merge(n.queries);
        types.insert(n.types.begin(), n.types.end());
      }
      if (asked.count > 0) {
        absl::StrAppend(&comment, "; asked ", asked.count, "x (",
                        absl::StrJoin(types, ", "), ") ", Tags(asked.records));
      }
    }
    const std::string protocol =
        by_protocol.size() > 1
            ? "ANY"
            : absl::AsciiStrToUpper(L4Name(by_protocol.front().first));
    absl::StrAppend(&out, "  # ", Printable(comment), "\n  allow { host: ",
                    Quote(address ? addr.ToString() : name), " port: ", port,
                    " protocol: ", protocol, " }\n");
  }

  if (!unix_.empty()) {
    absl::StrAppend(&out, "  unix {\n");
    for (const auto& [name, seen] : unix_) {
      absl::StrAppend(&out, "    # ", seen.Text(), "\n    allow: ", Quote(name),
                      "\n");
    }
    absl::StrAppend(&out, "  }\n");
  }

  if (!point_at_.empty()) {
    absl::StrAppend(&out,
                    "  dns {\n"
                    "    # allowed answers pointed at the host (loopback, "
                    "link-local, ...),\n"
                    "    # which the recorded phase granted (DNS rebinding "
                    "otherwise)\n");
    for (const auto& [host, seen] : point_at_) {
      absl::StrAppend(&out, "    # ", seen.Text("answer", "answers"),
                      "\n    answers_may_point_at: ", Quote(host), "\n");
    }
    absl::StrAppend(&out, "  }\n");
  }

  std::vector<std::string> not_granted;
  if (!resolvers_.empty()) {
    if (dns_filtered_) {
      for (const auto& [hp, seen] : resolvers_) {
        not_granted.push_back(absl::StrCat(
            seen.Text(), " to the resolver ", hp.ToString(),
            " (unfiltered DNS): the phase's DNS filter answers instead"));
      }
    } else {
      absl::StrAppend(
          &out,
          "  # DNS was not filtered in these records, so the names the phase\n"
          "  # resolved are unknown: the resolvers it used are listed (any "
          "name).\n"
          "  # To learn names, record a run whose DNS is FILTERED.\n"
          "  dns {\n    mode: LISTED\n");
      for (const auto& [hp, seen] : resolvers_) {
        absl::StrAppend(&out, "    # ", seen.Text(),
                        "\n    resolver: ", Quote(hp.ToString()), "\n");
      }
      absl::StrAppend(&out, "  }\n");
    }
  }
  for (const auto& [what, seen] : notes_) {
    not_granted.push_back(absl::StrCat(seen.Text(), ": ", what));
  }
  // Names asked that no grant answers: no port is known for them.
  std::set<std::string> model_hosts;
  for (const std::string& url : model_urls_) {
    if (absl::StatusOr<Endpoint> ep = ParseEndpointUrl(url); ep.ok()) {
      model_hosts.insert(ep->host.name);
    }
  }
  for (const auto& [qname, n] : names_) {
    bool covered = model_hosts.count(qname) > 0;
    for (const auto& [key, g] : grants_) {
      if (key.address) continue;
      if (key.name == qname || (absl::StartsWith(key.name, "*.") &&
                                absl::EndsWith(qname, key.name.substr(1)))) {
        covered = true;
      }
    }
    if (covered) continue;
    std::vector<std::string> how;
    for (const std::string& t : n.types) how.push_back(t);
    not_granted.push_back(absl::StrCat(
        qname, ": asked ", n.queries.count, "x (", absl::StrJoin(how, ", "),
        "; ", absl::StrJoin(n.verdicts, ", "), ") ", Tags(n.queries.records),
        ", never connected to, so no port is known; to let it resolve: "
        "allow { host: ",
        Quote(qname), " port: PORT }"));
  }
  if (!not_granted.empty()) {
    absl::StrAppend(&out, "  # not granted:\n");
    for (const std::string& line : not_granted) {
      absl::StrAppend(&out, "  #   ", Printable(line), "\n");
    }
  }
  absl::StrAppend(&out, "}\n");
  return out;
}

}  // namespace suggest_internal

using suggest_internal::PhaseLearning;
using suggest_internal::Quote;

absl::StatusOr<std::string> SuggestPolicy(
    const std::vector<RecordInput>& records, const SuggestOptions& options) {
  std::vector<std::string> phases = TimelinePhases(records);
  for (const std::string& name : PhasesWithEntries(records)) {
    if (std::find(phases.begin(), phases.end(), name) == phases.end()) {
      phases.push_back(name);
    }
  }
  if (!options.only_phase.empty()) {
    if (std::find(phases.begin(), phases.end(), options.only_phase) ==
        phases.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--phase ", Quote(options.only_phase),
          ": no record has that phase (they have: ",
          phases.empty() ? "none" : absl::StrJoin(phases, ", "), ")"));
    }
    phases = {options.only_phase};
  }
  if (phases.empty()) {
    return absl::InvalidArgumentError(
        "the records have no phase: nothing to learn from");
  }

  std::string out =
      "# Suggested by `sandfence records suggest` from what these rollouts "
      "did:\n";
  for (size_t r = 0; r < records.size(); ++r) {
    const v1::RolloutRecord& rec = records[r].record;
    absl::StrAppend(
        &out, "#   ", RecordTag(r), " ", Printable(records[r].path),
        "  rollout ",
        rec.rollout_id().empty() ? "?" : Printable(rec.rollout_id()),
        rec.lossy() ? "  (lossy: what it lost is not here)" : "", "\n");
  }
  absl::StrAppend(
      &out,
      "# Each grant says which recorded attempts it covers (allowed and "
      "denied\n"
      "# alike). Review it, then replay the records against it:\n"
      "#   sandfence check THIS_FILE --against RECORD...\n"
      "name: \"suggested\"\n");
  for (const std::string& phase : phases) {
    PhaseLearning learning(phase, records, options);
    if (absl::Status s = learning.Learn(); !s.ok()) return s;
    absl::StrAppend(&out, learning.Render());
  }
  return out;
}

}  // namespace sandfence
