// What a recorder folds in as the rollout runs: network attempts, DNS
// queries and guard events, each made safe for the record.
#include "records/recorder.h"

#include <sys/socket.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sandfence {
namespace {

std::string SocketTypeName(uint8_t type) {
  switch (type) {
    case SOCK_STREAM:
      return "stream";
    case SOCK_DGRAM:
      return "dgram";
    case SOCK_RAW:
      return "raw";
    case SOCK_SEQPACKET:
      return "seqpacket";
  }
  return absl::StrCat("type ", type);
}

// Text from outside (a DNS name, a verdict) as the record keeps it: proto3
// strings must be UTF-8 or the record would not parse back, and a person
// reads them, so every byte outside printable ASCII becomes \DDD, the
// zone-file escape the DNS filter writes names in (its own escapes pass
// through as they are). At most max bytes.
std::string Printable(absl::string_view text, size_t max, bool lower) {
  std::string out;
  for (size_t i = 0; i < text.size() && out.size() < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(lower ? absl::ascii_tolower(c) : static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "\\", c / 100, (c / 10) % 10, c % 10);
    }
  }
  if (out.size() > max) out.resize(max);
  return out;
}

}  // namespace

v1::NetAttempt RolloutRecorder::ToAttempt(const FoldedEntry& f) const {
  const NetEvent& e = f.first;
  v1::NetAttempt a;
  *a.mutable_first_time() = UnixNsToTimestamp(f.first_unix_ns);
  *a.mutable_last_time() = UnixNsToTimestamp(f.last_unix_ns);
  a.set_count(f.count);
  a.set_phase(timeline_[f.phase_index].name);
  a.set_phase_index(f.phase_index);
  a.set_verdict(VerdictOf(e.verdict));
  if (f.overflow) {
    a.set_overflow(true);
    return a;
  }
  a.set_reason(std::string(ReasonName(e.reason)));
  a.set_hook(std::string(HookName(e.hook)));
  a.set_protocol(AttemptProtocol(e));
  a.set_socket_type(SocketTypeName(e.sock_type));
  if (e.is_unix()) {
    a.set_address(e.unix_name->ToString());
    if (!e.unix_reached.empty()) a.set_reached(e.unix_reached);
  } else if (HasDestination(e)) {
    a.set_address(e.addr.ToString());
    a.set_port(e.port);
  }
  a.set_pid(e.pid);
  a.set_tgid(e.tgid);
  a.set_last_pid(f.last_pid);
  a.set_last_tgid(f.last_tgid);
  a.set_uid(e.uid);
  a.set_gid(e.gid);
  // Any bytes a process named itself: escaped, or the entry would not parse.
  a.set_command(Printable(e.comm, 64, /*lower=*/false));
  const int policy_index = timeline_[f.phase_index].policy_index;
  if (e.is_unix()) {
    // A listed name's rule_id indexes the phase's unix names, not rules.
    if (e.reason == SF_REASON_UNIX_LISTED) {
      a.set_rule(absl::StrCat("unix ", e.unix_name->ToString()));
    }
  } else if (e.rule_id != SF_NO_RULE && policy_index >= 0) {
    const CompiledPhase& phase = policy_.phases[policy_index];
    if (e.rule_id < phase.rules.size()) {
      const Rule& rule = phase.rules[e.rule_id];
      a.set_rule_index(e.rule_id);
      a.set_rule(RuleText(rule));
      a.set_allowed_as(rule.origin);
    }
  }
  return a;
}

bool RolloutRecorder::Add(const NetEvent& event) {
  absl::MutexLock lock(&mu_);
  if (finalized_) return false;
  if (IsSupervised(event)) ++supervisor_decided_;
  if (journal_.failed()) {
    ++reader_dropped_;
    return true;
  }
  const uint32_t span = SpanFor(event.generation);
  AttemptFolder::Result r =
      folder_.Add(event, span, clock_.ToUnixNs(event.boot_ns));
  if (r.added) {
    v1::RecordJournalEntry e;
    e.mutable_attempt()->set_id(r.id);
    *e.mutable_attempt()->mutable_attempt() = ToAttempt(folder_.entry(r.id));
    journal_.Append(e);
  }
  MaybeFlushLocked().IgnoreError();  // sticky: Finalize reports it
  return true;
}

v1::DnsQuery RolloutRecorder::ToDnsQuery(const DnsFoldedEntry& f) const {
  v1::DnsQuery q;
  *q.mutable_first_time() = UnixNsToTimestamp(f.first_unix_ns);
  *q.mutable_last_time() = UnixNsToTimestamp(f.last_unix_ns);
  q.set_count(f.count);
  q.set_phase(timeline_[f.phase_index].name);
  q.set_phase_index(f.phase_index);
  q.set_verdict(f.verdict);
  q.set_rcode(f.rcode);
  q.set_transport(f.transport);
  q.set_unreplied(f.unreplied);
  if (f.overflow) {
    q.set_overflow(true);
    return q;
  }
  q.set_name(f.name);
  q.set_type(f.type);
  q.set_type_name(DnsTypeName(f.type));
  for (const IpAddress& a : f.addresses) q.add_address(a.ToString());
  q.set_addresses_more(f.addresses_more);
  q.set_matched(f.matched);
  q.set_detail(f.detail);
  return q;
}

bool RolloutRecorder::AddDnsQuery(const DnsQueryInfo& query) {
  // Bounds: a DNS name in text form is at most 1004 bytes with every byte
  // escaped; the rest is the filter's own short text.
  DnsQueryInfo q;
  q.name = Printable(query.name, 1024, /*lower=*/true);
  q.type = query.type;
  q.verdict =
      query.verdict.empty() ? "unknown" : Printable(query.verdict, 64, false);
  q.rcode = query.rcode;
  q.replied = query.replied;
  q.transport = Printable(query.transport, 16, /*lower=*/true);
  q.addresses = query.addresses;
  q.matched = Printable(query.matched, 1024, false);
  q.detail = Printable(query.detail, 1024, false);
  // Past the DNS budget every name is one the agent chose to send: one
  // entry per wildcard counts them, and names the first (record.proto).
  if (q.verdict == "over_budget" && !q.matched.empty()) {
    q.detail =
        Printable(absl::StrCat("first: ", q.name, ": ", q.detail), 1024, false);
    q.name = q.matched;
  }

  absl::MutexLock lock(&mu_);
  if (finalized_) return false;
  ++dns_stats_.by_verdict[q.verdict];
  if (query.latency_ns != 0) {
    const double seconds = static_cast<double>(query.latency_ns) / 1e9;
    size_t b = 0;
    while (b < DnsQueryStats::kLatencyBounds.size() &&
           seconds > DnsQueryStats::kLatencyBounds[b]) {
      ++b;
    }
    ++dns_stats_.latency_buckets[b];
    ++dns_stats_.latency_count;
    dns_stats_.latency_sum_seconds += seconds;
  }
  if (journal_.failed()) {
    ++dns_dropped_;
    return true;
  }
  const uint32_t span = SpanFor(query.generation);
  const uint64_t boot_ns =
      query.boot_ns != 0 ? query.boot_ns : clock_.NowBootNs();
  DnsQueryFolder::Result r = dns_folder_.Add(q, span, clock_.ToUnixNs(boot_ns));
  if (r.added) {
    v1::RecordJournalEntry e;
    e.mutable_dns_query()->set_id(r.id);
    *e.mutable_dns_query()->mutable_query() =
        ToDnsQuery(dns_folder_.entry(r.id));
    journal_.Append(e);
  }
  MaybeFlushLocked().IgnoreError();  // sticky: Finalize reports it
  return true;
}

DnsQueryStats RolloutRecorder::dns_stats() const {
  absl::MutexLock lock(&mu_);
  return dns_stats_;
}

void RolloutRecorder::AddGuardEntry(v1::GuardEntry entry) {
  absl::MutexLock lock(&mu_);
  if (finalized_) return;
  if (journal_.failed()) {
    ++reader_dropped_;
    return;
  }
  if (!timeline_.empty()) {
    entry.set_phase_index(static_cast<uint32_t>(timeline_.size() - 1));
    entry.set_phase(timeline_.back().name);
  }
  // Commands (and a /proc entry's name) are any bytes a process chose: a
  // string that is not UTF-8 would make the entry, and the rest of the
  // record, unreadable.
  if (entry.has_actor()) {
    entry.mutable_actor()->set_command(
        Printable(entry.actor().command(), 64, /*lower=*/false));
  }
  if (entry.has_target()) {
    entry.mutable_target()->set_command(
        Printable(entry.target().command(), 64, /*lower=*/false));
  }
  entry.set_detail(Printable(entry.detail(), 4096, /*lower=*/false));
  v1::RecordJournalEntry e;
  *e.mutable_guard_event() = std::move(entry);
  journal_.Append(e);
  ++guard_recorded_;
  MaybeFlushLocked().IgnoreError();
}

}  // namespace sandfence
