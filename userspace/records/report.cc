#include "records/report.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/dns_names.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "records/journal.h"
#include "records/text_table.h"

namespace sandfence {
namespace {

using google::protobuf::Timestamp;
using google::protobuf::util::TimeUtil;

using Table = TextTable;

// A record's times come from a file and may be anything: absl::Time holds
// every Timestamp exactly, and its arithmetic saturates where nanoseconds
// in an int64 would overflow (past the year 2262).
absl::Time ToTime(const Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

std::string Seconds(absl::Duration d) {
  if (d == absl::InfiniteDuration() || d == -absl::InfiniteDuration()) {
    return "?";
  }
  return absl::StrFormat("%.3fs", absl::FDivDuration(d, absl::Seconds(1)));
}

std::string Between(const Timestamp& from, const Timestamp& to) {
  return Seconds(ToTime(to) - ToTime(from));
}

// "+1.250s" after the rollout's start (absolute when there is no start).
std::string Relative(const v1::RolloutRecord& r, const Timestamp& t) {
  if (!r.has_start_time()) return TimeUtil::ToString(t);
  const absl::Duration d = ToTime(t) - ToTime(r.start_time());
  return d < absl::ZeroDuration() ? Seconds(d) : absl::StrCat("+", Seconds(d));
}

std::string Lower(const std::string& enum_name) {
  return absl::AsciiStrToLower(enum_name);
}

std::string AuditName(v1::Audit::Allowed a) {
  switch (a) {
    case v1::Audit::ALL:
      return "all";
    case v1::Audit::NO_ALLOWED:
      return "none";
    default:
      return "first per destination";
  }
}

std::string Destination(const v1::NetAttempt& a) {
  if (a.overflow()) return "(overflow: destinations not kept)";
  if (a.hook() == "sock_create")
    return absl::StrCat(a.socket_type(), " socket");
  if (a.protocol() == "unix") return a.address();  // a name, no port
  if (a.address().find(':') != std::string::npos) {
    return absl::StrCat("[", a.address(), "]:", a.port());
  }
  return absl::StrCat(a.address(), ":", a.port());
}

std::string Process(const std::string& command, uint32_t tgid) {
  return absl::StrCat(command.empty() ? "?" : command, "[", tgid, "]");
}

// Rows of one verdict, folded entries grouped by phase span, protocol and
// destination: the table a reviewer reads.
struct Group {
  uint32_t phase_index = 0;
  std::string phase, protocol, destination;
  uint64_t count = 0;
  absl::Time first, last;
  Timestamp first_time, last_time;
  std::set<std::string> reasons, rules, names;
  std::vector<std::string> processes;  // first process of each command
  std::set<std::string> commands;
};

std::vector<Group> GroupAttempts(const v1::RolloutRecord& r,
                                 v1::Verdict verdict) {
  std::map<std::tuple<uint32_t, std::string, std::string>, Group> groups;
  for (const v1::NetAttempt& a : r.net_attempt()) {
    if (a.verdict() != verdict) continue;
    const std::string proto = a.overflow() ? "*" : a.protocol();
    const std::string dest = Destination(a);
    Group& g = groups[{a.phase_index(), proto, dest}];
    const absl::Time first = ToTime(a.first_time());
    const absl::Time last = ToTime(a.last_time());
    if (g.count == 0 || first < g.first) {
      g.first = first;
      g.first_time = a.first_time();
    }
    if (g.count == 0 || last > g.last) {
      g.last = last;
      g.last_time = a.last_time();
    }
    g.phase_index = a.phase_index();
    g.phase = a.phase();
    g.protocol = proto;
    g.destination = dest;
    g.count += a.count();
    if (!a.reason().empty()) g.reasons.insert(a.reason());
    if (a.has_rule_index()) {
      g.rules.insert(absl::StrCat("#", a.rule_index(), " ", a.rule()));
    }
    if (!a.allowed_as().empty()) g.names.insert(a.allowed_as());
    if (!a.overflow() && g.commands.insert(a.command()).second) {
      g.processes.push_back(Process(a.command(), a.tgid()));
    }
  }
  std::vector<Group> out;
  for (auto& [key, g] : groups) out.push_back(std::move(g));
  return out;
}

std::string Joined(const std::set<std::string>& s) {
  return s.empty() ? "-" : absl::StrJoin(s, ", ");
}

std::string Processes(const std::vector<std::string>& p) {
  if (p.empty()) return "-";
  constexpr size_t kShown = 3;
  if (p.size() <= kShown) return absl::StrJoin(p, ", ");
  return absl::StrCat(
      absl::StrJoin(std::vector<std::string>(p.begin(), p.begin() + kShown),
                    ", "),
      ", +", p.size() - kShown, " more");
}

std::string Plural(uint64_t n, absl::string_view one, absl::string_view many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

// The policy's audit-only phases: the header's list, and any phase policy
// that says so (a record written before the list).
std::set<std::string> AuditOnlyPhases(const v1::RolloutRecord& r) {
  std::set<std::string> out(r.audit_only_phase().begin(),
                            r.audit_only_phase().end());
  for (const v1::PhasePolicy& p : r.phase_policy()) {
    if (p.audit_only()) out.insert(p.name());
  }
  return out;
}

std::string Quoted(const std::set<std::string>& names) {
  std::vector<std::string> q;
  for (const std::string& n : names) q.push_back(absl::StrCat("\"", n, "\""));
  return absl::StrJoin(q, ", ");
}

// First, before anything else: a rollout that ran audit-only phases must
// never be read as an enforced one.
void AuditBanner(const v1::RolloutRecord& r, std::string* out) {
  const std::set<std::string> audit = AuditOnlyPhases(r);
  if (audit.empty()) return;
  std::set<std::string> ran;
  for (const v1::PhaseSpan& s : r.timeline()) {
    if (audit.count(s.name()) > 0) ran.insert(s.name());
  }
  if (ran.empty()) {
    absl::StrAppend(out,
                    "audit only: ", audit.size() == 1 ? "phase " : "phases ",
                    Quoted(audit),
                    " of the policy (enforce: AUDIT) did not run; every phase "
                    "that ran was enforced\n");
    return;
  }
  uint64_t would_deny = 0, would_block = 0;
  for (const v1::NetAttempt& a : r.net_attempt()) {
    if (a.verdict() == v1::VERDICT_AUDIT_DENY) would_deny += a.count();
  }
  for (const v1::DnsQuery& q : r.dns_query()) {
    if (q.verdict() == "would_block") would_block += q.count();
  }
  absl::StrAppend(
      out, "AUDIT ONLY: ", ran.size() == 1 ? "phase " : "phases ", Quoted(ran),
      " ran with enforce: AUDIT and denied nothing; ",
      Plural(would_deny, "attempt", "attempts"), " would have been denied",
      would_block > 0
          ? absl::StrCat(", ", Plural(would_block, "DNS query", "DNS queries"),
                         " would have been blocked")
          : "",
      "\n\n");
}

void Header(const v1::RolloutRecord& r, std::string* out) {
  Table t({"rollout", r.rollout_id().empty() ? "-" : r.rollout_id()});
  t.Add({"sandbox", absl::StrCat(r.sandbox().cgroup_path(), " (cgroup ",
                                 r.sandbox().cgroup_id(), ")")});
  t.Add({"host", r.host()});
  t.Add({"sandfence", r.sandfence_version()});
  t.Add({"policy", r.policy().content_hash().empty()
                       ? r.policy().name()
                       : absl::StrCat(r.policy().name(),
                                      "  sha256:", r.policy().content_hash())});
  std::string time = TimeUtil::ToString(r.start_time());
  if (r.has_end_time()) {
    absl::StrAppend(&time, " .. ", TimeUtil::ToString(r.end_time()), " (",
                    Between(r.start_time(), r.end_time()), ")");
  } else {
    absl::StrAppend(&time, " .. (no end: not finalized)");
  }
  t.Add({"time", time});
  std::string state;
  if (!r.complete()) {
    state = "INCOMPLETE, LOSSY (see warnings)";
  } else if (r.lossy()) {
    state = "complete, LOSSY (see warnings)";
  } else {
    state = "complete, nothing lost";
  }
  t.Add({"record", state});
  const std::set<std::string> audit = AuditOnlyPhases(r);
  std::string egress =
      r.enforcement().egress().empty()
          ? "not reported"
          : absl::StrCat("enforced by ", r.enforcement().egress());
  if (!audit.empty()) {
    egress = absl::StrCat("AUDIT ONLY in ", Quoted(audit),
                          " (nothing denied there); elsewhere ", egress);
  }
  t.Add({"egress", egress});
  t.Add({"guard", r.enforcement().guard().empty() ? "not reported"
                                                  : r.enforcement().guard()});
  absl::StrAppend(out, t.Render(""));
  if (r.warning_size() > 0) {
    absl::StrAppend(out, "\nwarnings\n");
    for (const v1::RecordWarning& w : r.warning()) {
      absl::StrAppend(out, "  - ", w.text(), "\n");
    }
  }
}

void Phases(const v1::RolloutRecord& r, std::string* out) {
  absl::StrAppend(out, "\nphases\n");
  if (r.timeline_size() == 0) {
    absl::StrAppend(out, "  none began\n");
    return;
  }
  Table t({"#", "phase", "access", "start", "end", "duration", "rules",
           "allowed recorded"},
          {true, false, false, false, false, true, true, false});
  for (int i = 0; i < r.timeline_size(); ++i) {
    const v1::PhaseSpan& s = r.timeline(i);
    const v1::PhasePolicy* policy = nullptr;
    for (const v1::PhasePolicy& p : r.phase_policy()) {
      if (p.name() == s.name()) policy = &p;
    }
    std::string end = "-", duration = "-";
    if (s.has_end_time()) {
      end = Relative(r, s.end_time());
      duration = Between(s.start_time(), s.end_time());
    }
    std::string access =
        policy ? Lower(v1::NetworkAccess_Name(policy->network_access())) : "?";
    if (policy && policy->audit_only()) absl::StrAppend(&access, " AUDIT ONLY");
    t.Add({absl::StrCat(i), s.name(), access, Relative(r, s.start_time()), end,
           duration, policy ? absl::StrCat(policy->rule_size()) : "?",
           policy ? AuditName(policy->audit_allowed()) : "?"});
  }
  absl::StrAppend(out, t.Render("  "));
  // What each switch cut, or why it could not (only where there is
  // something to say: a span without cuts or a reason prints nothing).
  for (int i = 0; i < r.timeline_size(); ++i) {
    const v1::PhaseSpan& s = r.timeline(i);
    if (!s.not_cut().empty()) {
      absl::StrAppend(out, "  switch to ", s.name(),
                      ": not cut: ", s.not_cut(), "\n");
    }
    if (s.cut_size() == 0) continue;
    absl::StrAppend(out, "  switch to ", s.name(), ": cut ", s.cut_size(),
                    s.cut_size() == 1 ? " connection" : " connections", "\n");
    for (const v1::CutConnection& c : s.cut()) {
      const bool v6 = absl::StrContains(c.address(), ':');
      absl::StrAppend(out, "    ", c.protocol(), " ", v6 ? "[" : "",
                      c.address(), v6 ? "]:" : ":", c.port(), " (",
                      c.reason(), ")",
                      c.error().empty() ? "" : " NOT destroyed: ", c.error(),
                      "\n");
    }
  }
}

void Attempts(const v1::RolloutRecord& r, v1::Verdict verdict,
              std::string* out) {
  // Would-denies read like denials: the reason is what would have denied.
  const bool denied = verdict != v1::VERDICT_ALLOW;
  const bool would = verdict == v1::VERDICT_AUDIT_DENY;
  std::vector<Group> groups = GroupAttempts(r, verdict);
  std::stable_sort(groups.begin(), groups.end(),
                   [&](const Group& a, const Group& b) {
                     if (denied && a.count != b.count) return a.count > b.count;
                     return std::tie(a.phase_index, a.first) <
                            std::tie(b.phase_index, b.first);
                   });
  uint64_t total = 0, overflowed = 0, destinations = 0;
  for (const Group& g : groups) {
    total += g.count;
    if (g.protocol == "*") {
      overflowed += g.count;
    } else {
      ++destinations;
    }
  }
  absl::StrAppend(out, "\n",
                  would    ? "would deny"
                  : denied ? "denied"
                           : "allowed",
                  ": ", Plural(total, "attempt", "attempts"),
                  denied ? "" : " recorded");
  if (overflowed > 0) {
    absl::StrAppend(out, "; ", total - overflowed, " to ",
                    Plural(destinations, "destination", "destinations"), ", ",
                    overflowed, " in overflow entries (destinations not kept)");
  } else {
    absl::StrAppend(out, " to ",
                    Plural(destinations, "destination", "destinations"));
  }
  absl::StrAppend(out,
                  would    ? " (audit only: let through, not denied)"
                  : denied ? ""
                           : "; see each phase's audit setting",
                  "\n");
  if (groups.empty()) return;
  std::vector<std::string> header = {"phase",    "proto", "destination",
                                     "attempts", "first", "last"};
  if (denied) {
    header.insert(header.end(), {"reason", "by"});
  } else {
    header.insert(header.end(), {"allowed as", "rule", "by"});
  }
  std::vector<bool> right(header.size(), false);
  right[3] = true;
  Table t(header, right);
  for (const Group& g : groups) {
    std::vector<std::string> row = {g.phase,
                                    g.protocol,
                                    g.destination,
                                    absl::StrCat(g.count),
                                    Relative(r, g.first_time),
                                    Relative(r, g.last_time)};
    if (denied) {
      row.insert(row.end(), {Joined(g.reasons), Processes(g.processes)});
    } else {
      row.insert(row.end(),
                 {Joined(g.names), Joined(g.rules), Processes(g.processes)});
    }
    t.Add(std::move(row));
  }
  absl::StrAppend(out, t.Render("  "));
}

bool HasDns(const v1::RolloutRecord& r) {
  const v1::LossAccounting& l = r.loss();
  return r.dns_query_size() > 0 || l.dns_queries() > 0 ||
         l.dns_overflowed() > 0 || l.dns_dropped() > 0;
}

std::string Reply(const v1::DnsQuery& q) {
  if (q.unreplied() >= q.count() && q.count() > 0) return "no reply";
  std::string out = DnsRcodeName(static_cast<uint16_t>(q.rcode()));
  if (q.unreplied() > 0)
    absl::StrAppend(&out, ", ", q.unreplied(), " no reply");
  return out;
}

std::string Addresses(const v1::DnsQuery& q) {
  if (q.address_size() == 0 && q.addresses_more() == 0) return "-";
  std::string out = absl::StrJoin(q.address(), ", ");
  if (q.addresses_more() > 0) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", "+", q.addresses_more(),
                    " more");
  }
  return out;
}

// The DNS section: one row per folded entry, by phase span, then first time.
// Absent from records without DNS queries, which print as they always did.
void Dns(const v1::RolloutRecord& r, std::string* out) {
  if (!HasDns(r)) return;
  std::vector<const v1::DnsQuery*> rows;
  uint64_t total = 0, overflowed = 0;
  std::set<std::string> names;
  for (const v1::DnsQuery& q : r.dns_query()) {
    rows.push_back(&q);
    total += q.count();
    if (q.overflow()) {
      overflowed += q.count();
    } else if (!q.name().empty()) {
      names.insert(q.name());
    }
  }
  std::stable_sort(
      rows.begin(), rows.end(),
      [](const v1::DnsQuery* a, const v1::DnsQuery* b) {
        return std::make_tuple(a->phase_index(), ToTime(a->first_time())) <
               std::make_tuple(b->phase_index(), ToTime(b->first_time()));
      });
  absl::StrAppend(out, "\ndns: ", Plural(total, "query", "queries"));
  if (overflowed > 0) {
    absl::StrAppend(out, "; ", total - overflowed, " for ",
                    Plural(names.size(), "name", "names"), ", ", overflowed,
                    " in overflow entries (names not kept)\n");
  } else {
    absl::StrAppend(out, " for ", Plural(names.size(), "name", "names"), "\n");
  }
  if (rows.empty()) return;
  Table t({"phase", "name", "type", "verdict", "queries", "first", "last",
           "reply", "matched", "addresses"},
          {false, false, false, false, true});
  for (const v1::DnsQuery* q : rows) {
    std::string name = q->name(), type = q->type_name();
    if (q->overflow()) {
      name = "(overflow: names not kept)";
      type = "*";
    } else if (name.empty()) {
      name = "(question not parsed)";
      type = "-";
    } else if (type.empty()) {
      type = absl::StrCat("TYPE", q->type());
    }
    t.Add({q->phase(), name, type, q->verdict(), absl::StrCat(q->count()),
           Relative(r, q->first_time()), Relative(r, q->last_time()), Reply(*q),
           q->matched().empty() ? "-" : q->matched(),
           q->overflow() ? "-" : Addresses(*q)});
  }
  absl::StrAppend(out, t.Render("  "));
}

void Guard(const v1::RolloutRecord& r, std::string* out) {
  absl::StrAppend(out, "\nguard events: ", r.guard_event_size(), "\n");
  if (r.guard_event_size() == 0) return;
  Table t({"time", "phase", "action", "what", "actor", "target", "detail"});
  for (const v1::GuardEntry& g : r.guard_event()) {
    t.Add({Relative(r, g.time()), g.phase(), g.action(), g.what(),
           Process(g.actor().command(), g.actor().tgid()),
           g.has_target() ? Process(g.target().command(), g.target().tgid())
                          : "-",
           g.detail().empty() ? "-" : g.detail()});
  }
  absl::StrAppend(out, t.Render("  "));
}

// "3 of 10 connections, 1048000 of 1048576 bytes (12 packets dropped,
// 700000 bytes), 2 addresses (at most 1048576 bytes each)".
std::string BudgetText(const v1::LossAccounting& l) {
  const v1::EgressBudgetUse& b = l.egress_budget();
  auto of = [](uint64_t used, uint64_t max, absl::string_view what) {
    return max ? absl::StrCat(used, " of ", max, " ", what)
               : absl::StrCat(used, " ", what, " (no limit)");
  };
  std::string out = absl::StrCat(of(b.connections(), b.max_connections(),
                                    "connections"),
                                 ", ", of(b.bytes(), b.max_bytes(), "bytes"));
  if (b.dropped_packets() > 0) {
    absl::StrAppend(&out, " (", Plural(b.dropped_packets(), "packet", "packets"),
                    " dropped past it, ", b.dropped_bytes(), " bytes)");
  }
  if (b.max_bytes_per_address() > 0) {
    absl::StrAppend(&out, ", ", Plural(b.addresses(), "address", "addresses"),
                    " (at most ", b.max_bytes_per_address(), " bytes each)");
  }
  return out;
}

void Losses(const v1::RolloutRecord& r, std::string* out) {
  const v1::LossAccounting& l = r.loss();
  absl::StrAppend(out, "\nlosses\n");
  Table t({"kernel counted",
           l.kernel_counters_read()
               ? absl::StrCat(
                     l.kernel_allowed() + l.kernel_denied(), " attempts: ",
                     l.kernel_denied(), " denied, ", l.kernel_allowed(),
                     " allowed (", l.kernel_allowed_unreported(),
                     " allowed not reported, by the audit setting",
                     AuditOnlyPhases(r).empty() && l.kernel_audit_denied() == 0
                         ? ""
                         : absl::StrCat("; ", l.kernel_audit_denied(),
                                        " would have been denied: audit only"),
                     ")", r.complete() ? "" : " at the last snapshot")
               : std::string("not read")});
  if (l.has_egress_budget()) t.Add({"egress budget", BudgetText(l)});
  if (l.supervisor_decided() > 0) {
    t.Add({"supervisor judged",
           absl::StrCat(Plural(l.supervisor_decided(), "socket call",
                               "socket calls"),
                        " (socket families no hook judges, io_uring, "
                        "Unix paths connected for the sandbox)")});
  }
  const std::string parts =
      absl::StrCat(l.events_recorded(), " recorded + ", l.kernel_events_lost(),
                   " lost in the kernel (ring buffer full) + ",
                   l.reader_dropped(), " dropped by the reader");
  if (!l.kernel_counters_read()) {
    t.Add(
        {"accounted", absl::StrCat(parts, "; nothing to check them against")});
  } else if (!r.complete()) {
    t.Add({"accounted", absl::StrCat(parts, "; not final: no check")});
  } else {
    const uint64_t want = EventsToRecord(l), have = EventsAccountedFor(l);
    t.Add({"meant for record",
           absl::StrCat(want, want == have ? " = " : " != ", parts)});
    if (want != have) {
      t.Add({"unaccounted",
             want > have ? absl::StrCat(want - have, " events")
                         : absl::StrCat(have - want, " events too many")});
    }
  }
  t.Add({"also",
         absl::StrCat(Plural(l.overflowed(), "attempt", "attempts"),
                      " in overflow entries, ",
                      Plural(l.decode_errors(), "undecodable event",
                             "undecodable events"),
                      ", ", Plural(l.unrouted_events(), "event", "events"),
                      " for sandboxes with no open rollout")});
  t.Add({"guard",
         absl::StrCat(l.guard_events_recorded(), " recorded, ",
                      l.guard_events_lost(), " lost in the kernel, ",
                      Plural(l.guard_decode_errors(), "undecodable record",
                             "undecodable records"))});
  if (HasDns(r)) {
    t.Add({"dns", absl::StrCat(Plural(l.dns_queries(), "query", "queries"),
                               " recorded, ", l.dns_overflowed(),
                               " in overflow entries, ", l.dns_dropped(),
                               " dropped by the reader")});
  }
  absl::StrAppend(out, t.Render("  "));
}

}  // namespace

std::string FormatRecordText(const v1::RolloutRecord& record) {
  std::string out;
  AuditBanner(record, &out);
  Header(record, &out);
  Phases(record, &out);
  Attempts(record, v1::VERDICT_DENY, &out);
  if (!AuditOnlyPhases(record).empty()) {
    Attempts(record, v1::VERDICT_AUDIT_DENY, &out);
  }
  Attempts(record, v1::VERDICT_ALLOW, &out);
  Dns(record, &out);
  Guard(record, &out);
  Losses(record, &out);
  return out;
}

absl::StatusOr<std::string> FormatRecordJson(const v1::RolloutRecord& record) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  // snake_case, as every other --json output and the Python client's dicts
  // (issue 38): one casing for whoever reads them.
  options.preserve_proto_field_names = true;
  std::string out;
  auto status =
      google::protobuf::util::MessageToJsonString(record, &out, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("record to JSON: ", status.ToString()));
  }
  if (out.empty() || out.back() != '\n') out += '\n';
  return out;
}

}  // namespace sandfence
