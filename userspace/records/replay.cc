#include "records/replay.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "common/status.h"
#include "compile/format.h"
#include "compile/rules.h"
#include "egress/egress_abi.h"
#include "egress/net_event.h"
#include "records/text_table.h"

namespace sandfence {
namespace {

ReplayVerdict Allowed(std::string reason) {
  return {ReplayOutcome::kAllowed, std::move(reason)};
}
ReplayVerdict Denied(std::string reason) {
  return {ReplayOutcome::kDenied, std::move(reason)};
}
ReplayVerdict NotJudged(std::string reason) {
  return {ReplayOutcome::kNotJudged, std::move(reason)};
}

bool Is(absl::string_view recorded, sf_reason reason) {
  return recorded == ReasonName(reason);
}

// Local for "a private netns may use its own loopback" (sf_is_local).
bool IsLocal(const IpAddress& a) { return a.IsLoopback() || a.IsUnspecified(); }

bool InFilterRange(const IpAddress& a) {
  if (!a.is_v4()) return false;
  const uint8_t* b = a.bytes();
  const uint32_t v = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) |
                     (uint32_t{b[2]} << 8) | b[3];
  return (v & SF_DNS_FILTER_MASK) == SF_DNS_FILTER_NET;
}

std::string Quote(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

}  // namespace

void LearnedAddresses::Add(const IpAddress& address,
                           const std::vector<NameGrant>& grants,
                           absl::string_view name) {
  std::vector<Learned>& list = learned_[address.Unmapped()];
  for (const NameGrant& g : grants) list.push_back({g, std::string(name)});
}

std::string LearnedAddresses::Opens(L4 protocol, const IpAddress& address,
                                    uint16_t port) const {
  auto it = learned_.find(address.Unmapped());
  if (it == learned_.end()) return "";
  for (const Learned& l : it->second) {
    if (l.grant.protocol == protocol && l.grant.port_first <= port &&
        port <= l.grant.port_last) {
      return l.name;
    }
  }
  return "";
}

absl::StatusOr<PhaseJudge> PhaseJudge::Create(const CompiledPhase& phase) {
  dns::PhaseNameRules names;
  if (phase.restricted() && phase.dns_filtered) {
    absl::StatusOr<dns::PhaseNameRules> built =
        dns::PhaseNameRules::Build(phase.name_rules);
    if (!built.ok()) {
      return Malformed(absl::StrCat("phase ", Quote(phase.name), ": ",
                                    built.status().message()));
    }
    names = *std::move(built);
  }
  return PhaseJudge(phase, std::move(names));
}

LearnedAddresses PhaseJudge::Learn(
    const std::vector<const v1::DnsQuery*>& queries) const {
  LearnedAddresses learned;
  if (!phase_.restricted() || !phase_.dns_filtered) return learned;
  for (const v1::DnsQuery* q : queries) {
    if (q->address().empty()) continue;
    dns::NameMatch match = names_.Match(q->name());
    if (match.grants.empty()) continue;
    for (const std::string& text : q->address()) {
      std::optional<IpAddress> addr = IpAddress::Parse(text);
      if (!addr || addr->IsUnspecified() || InFilterRange(*addr)) continue;
      learned.Add(*addr, match.grants, q->name());
    }
  }
  return learned;
}

ReplayVerdict PhaseJudge::Attempt(const v1::NetAttempt& a,
                                  const LearnedAddresses& learned) const {
  if (a.overflow()) return NotJudged("overflow entry: no destination kept");
  if (Is(a.reason(), SF_REASON_NO_SANDBOX) ||
      Is(a.reason(), SF_REASON_TOO_DEEP)) {
    return NotJudged(absl::StrCat("\"", a.reason(), "\": not the policy's"));
  }
  if (IsBudgetReason(a.reason())) {
    return NotJudged(absl::StrCat("\"", a.reason(),
                                  "\": the rollout's egress budget, a count "
                                  "the rules do not replay"));
  }
  if (!phase_.restricted()) return Allowed("inherit");
  if (a.hook() == HookName(SF_HOOK_SOCK_CREATE)) {
    return Denied(
        absl::StrCat(a.socket_type(), " ", a.protocol(),
                     " socket: a restricted phase creates only TCP and UDP "
                     "sockets, never raw ones"));
  }
  if (a.protocol() == "unix") {
    if (!phase_.unix_checked) return Allowed("unix unchecked");
    if (Is(a.reason(), SF_REASON_UNIX_PROTECTED)) {
      return Denied("sandfence's own socket");
    }
    for (const UnixName& n : phase_.unix_names) {
      if (n.ToString() == a.address()) return Allowed("unix name listed");
    }
    if (Is(a.reason(), SF_REASON_UNIX_OWN) ||
        Is(a.reason(), SF_REASON_UNIX_OWN_SOCKET)) {
      return Allowed("the sandbox's own socket");
    }
    if (Is(a.reason(), SF_REASON_UNIX_SCOPED)) {
      return Allowed("an abstract name left to Landlock's scope");
    }
    if (Is(a.reason(), SF_REASON_UNIX_UNVERIFIABLE)) {
      return Denied("the sandbox's own path could not be verified");
    }
    if (Is(a.reason(), SF_REASON_UNIX_OUTSIDE_SOCKET)) {
      return Denied(absl::StrCat("unix name not listed (it led to ",
                                 a.reached(), ", outside the sandbox)"));
    }
    if (Is(a.reason(), SF_REASON_UNIX_PEER_OUTSIDE)) {
      return Denied("the sandbox's name led to a socket outside it");
    }
    return Denied("unix name not listed");
  }
  L4 protocol;
  if (a.protocol() == "tcp") {
    protocol = L4::kTcp;
  } else if (a.protocol() == "udp") {
    protocol = L4::kUdp;
  } else {
    return Denied(absl::StrCat("protocol ", a.protocol(),
                               ": a restricted phase allows TCP and UDP"));
  }
  std::optional<IpAddress> addr = IpAddress::Parse(a.address());
  if (!addr || a.port() > 65535) {
    return NotJudged(absl::StrCat("destination ", Quote(a.address()), " port ",
                                  a.port(), " does not parse"));
  }
  const IpAddress dest = addr->Unmapped();
  const uint16_t port = static_cast<uint16_t>(a.port());
  if (InFilterRange(dest)) return Denied("the DNS filters' range");
  if (port == SF_DNS_PORT && phase_.dns_filtered) {
    if (a.hook() == HookName(SF_HOOK_SENDMSG6)) {
      return Denied(
          "unconnected IPv6 DNS: cannot be redirected to the DNS filter");
    }
    return Allowed("redirected to the DNS filter");
  }
  if (Is(a.reason(), SF_REASON_OWN_LOOPBACK) && IsLocal(dest) &&
      phase_.loopback == v1::LOOPBACK_DEFAULT) {
    return Allowed("own loopback");
  }
  const Rule probe{protocol, IpPrefix::Host(dest), port,
                   port,     RuleSource::kAllow,   ""};
  for (const Rule& rule : phase_.rules) {
    if (RuleCovers(rule, probe)) {
      return Allowed(absl::StrCat("rule ", L4Name(rule.protocol), " ",
                                  FormatDestination(rule)));
    }
  }
  if (phase_.dns_filtered) {
    std::string name = learned.Opens(protocol, dest, port);
    if (!name.empty()) return Allowed(absl::StrCat("learned from ", name));
  }
  return Denied("no rule");
}

ReplayVerdict PhaseJudge::Query(const v1::DnsQuery& q) const {
  if (q.overflow()) return NotJudged("overflow entry: no name kept");
  if (q.name().empty()) return NotJudged("the question did not parse");
  if (!phase_.restricted()) return Allowed("inherit");
  switch (phase_.dns_mode) {
    case v1::Dns::NONE:
      return Denied("dns NONE: no DNS at all");
    case v1::Dns::FILTERED: {
      dns::NameMatch match = names_.Match(q.name());
      if (match.grants.empty()) return Denied("no name rule matches");
      return Allowed(absl::StrJoin(match.patterns, ","));
    }
    default:
      return Allowed("DNS not filtered by name");
  }
}

absl::Status CheckReplayPhases(const std::vector<std::string>& policy_phases,
                               const std::vector<RecordInput>& records,
                               absl::string_view only_phase) {
  const std::vector<std::string> used = PhasesWithEntries(records);
  if (!only_phase.empty()) {
    if (std::find(used.begin(), used.end(), only_phase) != used.end()) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "--phase ", Quote(only_phase),
        ": no record has attempts or DNS queries in it (they have: ",
        used.empty() ? "none" : absl::StrJoin(used, ", "), ")"));
  }
  for (const std::string& name : used) {
    if (std::find(policy_phases.begin(), policy_phases.end(), name) !=
        policy_phases.end()) {
      continue;
    }
    std::string where;
    for (const RecordInput& in : records) {
      for (const v1::PhaseSpan& s : in.record.timeline()) {
        if (s.name() == name && where.empty()) where = in.path;
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "record ", where.empty() ? "" : absl::StrCat(Quote(where), " "),
        "has phase ", Quote(name), ", which the policy does not have (it has: ",
        absl::StrJoin(policy_phases, ", "),
        "); give --phase NAME to judge one phase only"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ReplayReport> ReplayRecords(
    const CompiledPolicy& policy, const std::vector<RecordInput>& records) {
  ReplayReport report;
  report.policy_name = policy.name;
  report.notes = LossNotes(records);
  std::map<std::string, PhaseJudge> judges;
  std::map<std::string, size_t> phase_order;
  for (const CompiledPhase& phase : policy.phases) {
    absl::StatusOr<PhaseJudge> judge = PhaseJudge::Create(phase);
    if (!judge.ok()) return judge.status();
    phase_order.emplace(phase.name, phase_order.size());
    judges.emplace(phase.name, *std::move(judge));
  }

  // (phase order, kind, destination, reason) -> the folded would-deny.
  using Key = std::tuple<size_t, std::string, std::string, std::string>;
  std::map<Key, WouldDeny> denied;
  std::map<Key, std::set<std::string>> dns_types;
  auto deny = [&](const std::string& phase, std::string kind,
                  std::string destination, const std::string& reason,
                  uint64_t count, size_t record) -> WouldDeny& {
    Key key{phase_order[phase], kind, destination, reason};
    WouldDeny& d = denied[key];
    if (d.count == 0) {
      d.phase = phase;
      d.kind = std::move(kind);
      d.destination = std::move(destination);
      d.reason = reason;
    }
    d.count += count;
    if (std::find(d.records.begin(), d.records.end(), record) ==
        d.records.end()) {
      d.records.push_back(record);
    }
    return d;
  };

  for (size_t r = 0; r < records.size(); ++r) {
    const v1::RolloutRecord& rec = records[r].record;
    // Learned addresses per span, from that span's queries.
    std::map<uint32_t, std::vector<const v1::DnsQuery*>> span_queries;
    for (const v1::DnsQuery& q : rec.dns_query()) {
      span_queries[q.phase_index()].push_back(&q);
    }
    std::map<uint32_t, LearnedAddresses> learned;
    for (const v1::NetAttempt& a : rec.net_attempt()) {
      auto judge = judges.find(a.phase());
      if (judge == judges.end()) continue;
      auto l = learned.find(a.phase_index());
      if (l == learned.end()) {
        l = learned
                .emplace(a.phase_index(),
                         judge->second.Learn(span_queries[a.phase_index()]))
                .first;
      }
      ReplayVerdict v = judge->second.Attempt(a, l->second);
      if (v.outcome == ReplayOutcome::kNotJudged) {
        report.not_judged += a.count();
        continue;
      }
      report.attempts += a.count();
      if (v.outcome == ReplayOutcome::kAllowed) continue;
      report.attempts_denied += a.count();
      const bool socket = a.hook() == HookName(SF_HOOK_SOCK_CREATE);
      deny(a.phase(), socket ? "socket" : a.protocol(),
           socket ? absl::StrCat(a.socket_type(), " ", a.protocol())
                  : AttemptDestination(a.protocol(), a.address(), a.port()),
           v.reason, a.count(), r);
    }
    for (const v1::DnsQuery& q : rec.dns_query()) {
      auto judge = judges.find(q.phase());
      if (judge == judges.end()) continue;
      ReplayVerdict v = judge->second.Query(q);
      if (v.outcome == ReplayOutcome::kNotJudged) {
        report.not_judged += q.count();
        continue;
      }
      report.queries += q.count();
      if (v.outcome == ReplayOutcome::kAllowed) continue;
      report.queries_denied += q.count();
      deny(q.phase(), "dns", q.name(), v.reason, q.count(), r);
      dns_types[Key{phase_order[q.phase()], "dns", q.name(), v.reason}].insert(
          q.type_name().empty() ? absl::StrCat("TYPE", q.type())
                                : q.type_name());
    }
  }
  for (auto& [key, d] : denied) {
    if (auto t = dns_types.find(key); t != dns_types.end()) {
      d.detail = absl::StrJoin(t->second, ",");
    }
    std::sort(d.records.begin(), d.records.end());
    report.denied.push_back(std::move(d));
  }
  return report;
}

namespace {

std::string Tags(const std::vector<size_t>& records) {
  std::vector<std::string> tags;
  for (size_t r : records) tags.push_back(RecordTag(r));
  return absl::StrJoin(tags, " ");
}

std::string PhasesOf(const v1::RolloutRecord& record) {
  std::vector<std::string> names;
  for (const v1::PhaseSpan& s : record.timeline()) {
    if (std::find(names.begin(), names.end(), s.name()) == names.end()) {
      names.push_back(s.name());
    }
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

}  // namespace

std::string FormatReplayText(const ReplayReport& report,
                             const std::vector<RecordInput>& records) {
  std::string out = absl::StrCat(
      "policy ", Quote(report.policy_name), " against ", records.size(),
      records.size() == 1 ? " record\n" : " records\n");
  TextTable inputs({"", "record", "rollout", "phases"});
  for (size_t r = 0; r < records.size(); ++r) {
    const v1::RolloutRecord& rec = records[r].record;
    inputs.Add({RecordTag(r), Printable(records[r].path),
                rec.rollout_id().empty() ? "?" : Printable(rec.rollout_id()),
                Printable(PhasesOf(rec))});
  }
  absl::StrAppend(&out, inputs.Render("  "));
  for (const std::string& note : report.notes) {
    absl::StrAppend(&out, "warning: ", Printable(note), "\n");
  }
  if (report.denied.empty()) {
    absl::StrAppend(&out, "\nwould deny: nothing\n");
  } else {
    absl::StrAppend(&out, "\nwould deny:\n");
    TextTable table(
        {"phase", "kind", "destination", "count", "records", "because"},
        {false, false, false, true, false, false});
    for (const WouldDeny& d : report.denied) {
      table.Add({Printable(d.phase), Printable(d.kind),
                 Printable(d.detail.empty() ? d.destination
                                            : absl::StrCat(d.destination, " (",
                                                           d.detail, ")")),
                 absl::StrCat(d.count), Tags(d.records), Printable(d.reason)});
    }
    absl::StrAppend(&out, table.Render("  "));
  }
  absl::StrAppend(&out, "\nsummary: would deny ", report.attempts_denied,
                  " of ", report.attempts, " network attempts and ",
                  report.queries_denied, " of ", report.queries,
                  " DNS queries");
  if (report.not_judged > 0) {
    absl::StrAppend(&out, "; ", report.not_judged,
                    " not judged (overflow entries, DNS questions that did not "
                    "parse, attempts no policy decides)");
  }
  absl::StrAppend(&out, "\n");
  return out;
}

std::string FormatReplayJson(const ReplayReport& report,
                             const std::vector<RecordInput>& records) {
  std::string out = absl::StrCat("{\"policy\": ", JsonQuote(report.policy_name),
                                 ",\n \"records\": [");
  for (size_t r = 0; r < records.size(); ++r) {
    const v1::RolloutRecord& rec = records[r].record;
    absl::StrAppend(&out, r == 0 ? "\n  " : ",\n  ", "{\"index\": ", r + 1,
                    ", \"path\": ", JsonQuote(records[r].path),
                    ", \"rollout_id\": ", JsonQuote(rec.rollout_id()),
                    ", \"lossy\": ", rec.lossy() ? "true" : "false", "}");
  }
  absl::StrAppend(&out, "],\n \"would_deny\": [");
  for (size_t i = 0; i < report.denied.size(); ++i) {
    const WouldDeny& d = report.denied[i];
    std::vector<std::string> tags;
    for (size_t r : d.records) tags.push_back(absl::StrCat(r + 1));
    absl::StrAppend(&out, i == 0 ? "\n  " : ",\n  ",
                    "{\"phase\": ", JsonQuote(d.phase),
                    ", \"kind\": ", JsonQuote(d.kind),
                    ", \"destination\": ", JsonQuote(d.destination));
    if (!d.detail.empty()) {
      absl::StrAppend(&out, ", \"types\": ", JsonQuote(d.detail));
    }
    absl::StrAppend(&out, ", \"count\": ", d.count, ", \"records\": [",
                    absl::StrJoin(tags, ", "),
                    "], \"because\": ", JsonQuote(d.reason), "}");
  }
  absl::StrAppend(&out, "],\n \"summary\": {\"attempts\": ", report.attempts,
                  ", \"attempts_would_deny\": ", report.attempts_denied,
                  ", \"dns_queries\": ", report.queries,
                  ", \"dns_queries_would_deny\": ", report.queries_denied,
                  ", \"not_judged\": ", report.not_judged, "},\n \"notes\": [");
  for (size_t i = 0; i < report.notes.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", JsonQuote(report.notes[i]));
  }
  absl::StrAppend(&out, "]}\n");
  return out;
}

}  // namespace sandfence
