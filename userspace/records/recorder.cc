#include "records/recorder.h"

#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "compile/unix_name.h"
#include "sandfence/version.h"

namespace sandfence {
namespace {

int64_t MonoNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

v1::RuleSource ToProto(RuleSource s) {
  switch (s) {
    case RuleSource::kModel:
      return v1::RULE_SOURCE_MODEL;
    case RuleSource::kTool:
      return v1::RULE_SOURCE_TOOL;
    case RuleSource::kAllow:
      return v1::RULE_SOURCE_ALLOW;
    case RuleSource::kDns:
      return v1::RULE_SOURCE_DNS;
  }
  return v1::RULE_SOURCE_UNSPECIFIED;
}

std::string L4Name(L4 p) { return p == L4::kUdp ? "udp" : "tcp"; }

RuleSource FromProto(v1::RuleSource s) {
  switch (s) {
    case v1::RULE_SOURCE_MODEL:
      return RuleSource::kModel;
    case v1::RULE_SOURCE_TOOL:
      return RuleSource::kTool;
    case v1::RULE_SOURCE_DNS:
      return RuleSource::kDns;
    default:
      return RuleSource::kAllow;
  }
}

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

v1::RecordJournalEntry PhaseMark(uint32_t index, v1::PhaseSpan span) {
  v1::RecordJournalEntry e;
  e.mutable_phase()->set_index(index);
  *e.mutable_phase()->mutable_span() = std::move(span);
  return e;
}

}  // namespace

std::string RuleText(const Rule& rule) {
  std::string addr = rule.dest.ToString();
  if (!rule.dest.address().is_v4()) addr = absl::StrCat("[", addr, "]");
  std::string ports = rule.port_first == rule.port_last
                          ? absl::StrCat(rule.port_first)
                          : absl::StrCat(rule.port_first, "-", rule.port_last);
  return absl::StrCat(L4Name(rule.protocol), " ", addr, ":", ports);
}

v1::Verdict VerdictOf(sf_verdict verdict) {
  switch (verdict) {
    case SF_VERDICT_ALLOW:
      return v1::VERDICT_ALLOW;
    case SF_VERDICT_AUDIT_DENY:
      return v1::VERDICT_AUDIT_DENY;
    case SF_VERDICT_DENY:
      break;
  }
  return v1::VERDICT_DENY;
}

absl::StatusOr<CompiledPhase> FromPhasePolicy(const v1::PhasePolicy& p) {
  CompiledPhase phase;
  phase.name = p.name();
  phase.access = p.network_access();
  for (const v1::CompiledRule& r : p.rule()) {
    Rule rule;
    if (r.protocol() == "tcp") {
      rule.protocol = L4::kTcp;
    } else if (r.protocol() == "udp") {
      rule.protocol = L4::kUdp;
    } else {
      return Malformed(absl::StrCat("phase ", p.name(), ": rule protocol \"",
                                    r.protocol(), "\""));
    }
    absl::StatusOr<IpPrefix> dest = IpPrefix::Parse(r.destination());
    if (!dest.ok()) {
      return Malformed(absl::StrCat("phase ", p.name(), ": rule destination ",
                                    dest.status().message()));
    }
    if (r.port_first() > 65535 || r.port_last() > 65535 ||
        r.port_first() > r.port_last()) {
      return Malformed(absl::StrCat("phase ", p.name(), ": rule ports ",
                                    r.port_first(), "-", r.port_last()));
    }
    rule.dest = *dest;
    rule.port_first = static_cast<uint16_t>(r.port_first());
    rule.port_last = static_cast<uint16_t>(r.port_last());
    rule.source = FromProto(r.source());
    rule.origin = r.origin();
    phase.rules.push_back(std::move(rule));
  }
  for (const v1::DroppedGrant& d : p.dropped()) {
    phase.dropped.push_back(
        {d.url(), d.name(), d.reason(), FromProto(d.source())});
  }
  phase.loopback = p.loopback();
  phase.guard = p.guard();
  phase.audit_allowed = p.audit_allowed();
  phase.audit_only = p.audit_only() && phase.restricted();
  if (p.has_dns_filter()) {
    const v1::DnsFilterPolicy& d = p.dns_filter();
    phase.dns_filtered = true;
    for (const v1::NameRule& r : d.name_rule()) {
      NameRule rule{r.pattern(), {}, r.origin()};
      for (const v1::NameGrant& g : r.grant()) {
        if ((g.protocol() != "tcp" && g.protocol() != "udp") ||
            g.port_first() == 0 || g.port_first() > 65535 ||
            g.port_last() > 65535 || g.port_first() > g.port_last()) {
          return Malformed(absl::StrCat(
              "phase ", p.name(), ": name rule \"", r.pattern(), "\" grant ",
              g.protocol(), " ", g.port_first(), "-", g.port_last()));
        }
        rule.grants.push_back({g.protocol() == "tcp" ? L4::kTcp : L4::kUdp,
                               static_cast<uint16_t>(g.port_first()),
                               static_cast<uint16_t>(g.port_last())});
      }
      phase.name_rules.push_back(std::move(rule));
    }
    for (const std::string& u : d.upstream()) {
      absl::StatusOr<HostPort> hp = HostPort::Parse(u, 53);
      if (!hp.ok()) {
        return Malformed(absl::StrCat("phase ", p.name(), ": dns upstream \"",
                                      u, "\": ", hp.status().message()));
      }
      phase.dns_upstreams.push_back(*hp);
    }
    phase.dns_ttl = {d.min_ttl_seconds(), d.max_ttl_seconds(),
                     d.grace_seconds()};
    if (d.has_budget()) {
      phase.dns_budget = {d.budget().wildcard_names(),
                          d.budget().window_seconds(),
                          d.budget().max_wildcard_name_length(),
                          d.budget().wildcard_name_bytes(),
                          d.budget().queries_per_second()};
      // A record of a build before query rates: the default.
      if (phase.dns_budget.queries_per_second == 0) {
        phase.dns_budget.queries_per_second = DnsBudget{}.queries_per_second;
      }
    }
    for (const std::string& text : d.answers_may_point_at()) {
      absl::StatusOr<IpPrefix> prefix = IpPrefix::Parse(text);
      if (!prefix.ok()) {
        return Malformed(absl::StrCat("phase ", p.name(),
                                      ": dns answers_may_point_at \"", text,
                                      "\": ", prefix.status().message()));
      }
      phase.dns_answers_may_point_at.push_back(*prefix);
    }
  }
  if (p.has_unix()) {
    phase.unix_checked = p.unix().checked();
    phase.unix_unchecked = !p.unix().checked();
    for (const std::string& text : p.unix().allow()) {
      absl::StatusOr<UnixName> name = ParseUnixName(text);
      if (!name.ok()) {
        return Malformed(absl::StrCat("phase ", p.name(), ": unix allow ",
                                      name.status().message()));
      }
      phase.unix_names.push_back(*std::move(name));
    }
  }
  return phase;
}

v1::PhasePolicy ToPhasePolicy(const CompiledPhase& phase) {
  v1::PhasePolicy p;
  p.set_name(phase.name);
  p.set_network_access(phase.access);
  for (const Rule& r : phase.rules) {
    v1::CompiledRule* out = p.add_rule();
    out->set_protocol(L4Name(r.protocol));
    out->set_destination(r.dest.ToString());
    out->set_port_first(r.port_first);
    out->set_port_last(r.port_last);
    out->set_source(ToProto(r.source));
    out->set_origin(r.origin);
  }
  for (const DroppedGrant& d : phase.dropped) {
    v1::DroppedGrant* out = p.add_dropped();
    out->set_url(d.url);
    out->set_name(d.name);
    out->set_reason(d.reason);
    out->set_source(ToProto(d.source));
  }
  p.set_loopback(phase.loopback);
  p.set_guard(phase.guard);
  p.set_audit_allowed(phase.audit_allowed);
  p.set_audit_only(phase.audit_only);
  if (phase.dns_filtered) {
    v1::DnsFilterPolicy* d = p.mutable_dns_filter();
    for (const NameRule& r : phase.name_rules) {
      v1::NameRule* out = d->add_name_rule();
      out->set_pattern(r.pattern);
      out->set_origin(r.origin);
      for (const NameGrant& g : r.grants) {
        v1::NameGrant* og = out->add_grant();
        og->set_protocol(L4Name(g.protocol));
        og->set_port_first(g.port_first);
        og->set_port_last(g.port_last);
      }
    }
    for (const HostPort& hp : phase.dns_upstreams) {
      d->add_upstream(hp.ToString());
    }
    d->set_min_ttl_seconds(phase.dns_ttl.min_seconds);
    d->set_max_ttl_seconds(phase.dns_ttl.max_seconds);
    d->set_grace_seconds(phase.dns_ttl.grace_seconds);
    v1::DnsBudget* b = d->mutable_budget();
    b->set_wildcard_names(phase.dns_budget.wildcard_names);
    b->set_window_seconds(phase.dns_budget.window_seconds);
    b->set_max_wildcard_name_length(phase.dns_budget.max_wildcard_name_length);
    b->set_wildcard_name_bytes(phase.dns_budget.wildcard_name_bytes);
    b->set_queries_per_second(phase.dns_budget.queries_per_second);
    for (const IpPrefix& prefix : phase.dns_answers_may_point_at) {
      d->add_answers_may_point_at(prefix.ToString());
    }
  }
  if (phase.restricted() && (phase.unix_checked || phase.unix_unchecked)) {
    v1::UnixPolicy* u = p.mutable_unix();
    u->set_checked(phase.unix_checked);
    for (const UnixName& n : phase.unix_names) u->add_allow(n.ToString());
  }
  return p;
}

absl::StatusOr<std::unique_ptr<RolloutRecorder>> RolloutRecorder::Create(
    const std::string& path, const RolloutInfo& info,
    const CompiledPolicy& policy, const BootClock& clock,
    RecorderOptions options) {
  absl::StatusOr<RecordJournal> journal =
      RecordJournal::Create(path, options.overwrite);
  if (!journal.ok()) return journal.status();

  v1::RecordJournalEntry entry;
  v1::RecordHeader* header = entry.mutable_header();
  header->set_format(kRecordFormat);
  v1::RolloutRecord* r = header->mutable_record();
  r->set_rollout_id(info.rollout_id);
  r->mutable_sandbox()->set_cgroup_path(info.cgroup_path);
  r->mutable_sandbox()->set_cgroup_id(info.cgroup_id);
  r->set_host(info.host.empty() ? HostName() : info.host);
  r->set_sandfence_version(info.sandfence_version.empty()
                               ? SANDFENCE_VERSION
                               : info.sandfence_version);
  r->mutable_policy()->set_name(policy.name);
  r->mutable_policy()->set_content_hash(policy.content_hash);
  for (const CompiledPhase& phase : policy.phases) {
    *r->add_phase_policy() = ToPhasePolicy(phase);
    if (phase.audit_only) r->add_audit_only_phase(phase.name);
  }
  r->mutable_enforcement()->set_egress("cgroup-bpf");
  *r->mutable_start_time() = clock.ToTimestamp(clock.NowBootNs());
  journal->Append(entry);
  if (absl::Status s = journal->Flush(options.sync); !s.ok()) return s;

  return std::unique_ptr<RolloutRecorder>(
      new RolloutRecorder(path, info.cgroup_id, clock, policy,
                          std::move(options), *std::move(journal)));
}

RolloutRecorder::RolloutRecorder(std::string path, uint64_t cgroup_id,
                                 BootClock clock, CompiledPolicy policy,
                                 RecorderOptions options, RecordJournal journal)
    : path_(std::move(path)),
      cgroup_id_(cgroup_id),
      clock_(std::move(clock)),
      policy_(std::move(policy)),
      options_(std::move(options)),
      journal_(std::move(journal)),
      folder_(options_.max_entries),
      dns_folder_(options_.max_dns_entries) {
  last_flush_mono_ns_ = last_snapshot_mono_ns_ = MonoNs();
}

void RolloutRecorder::StartSpan(std::string name, int policy_index,
                                uint64_t boot_ns) {
  v1::PhaseSpan span;
  span.set_name(name);
  *span.mutable_start_time() = clock_.ToTimestamp(boot_ns);
  journal_.Append(
      PhaseMark(static_cast<uint32_t>(timeline_.size()), std::move(span)));
  timeline_.push_back(Span{std::move(name), policy_index});
}

void RolloutRecorder::EndSpan(uint64_t boot_ns) {
  if (timeline_.empty()) return;
  v1::PhaseSpan span;
  *span.mutable_end_time() = clock_.ToTimestamp(boot_ns);
  journal_.Append(
      PhaseMark(static_cast<uint32_t>(timeline_.size() - 1), std::move(span)));
}

absl::Status RolloutRecorder::BeginPhase(absl::string_view phase_name) {
  int index = -1;
  for (size_t i = 0; i < policy_.phases.size(); ++i) {
    if (policy_.phases[i].name == phase_name) index = static_cast<int>(i);
  }
  if (index < 0) {
    return Malformed(absl::StrCat(
        "phase \"", phase_name, "\" is not in policy \"", policy_.name, "\""));
  }
  absl::MutexLock lock(&mu_);
  if (finalized_) {
    return absl::FailedPreconditionError("the record is already finalized");
  }
  const uint64_t now = clock_.NowBootNs();
  AppendCounts();  // the counts so far belong before the mark
  EndSpan(now);
  StartSpan(std::string(phase_name), index, now);
  return FlushLocked(options_.sync, /*snapshot=*/true);
}

void RolloutRecorder::BindGeneration(uint32_t generation) {
  absl::MutexLock lock(&mu_);
  if (finalized_ || timeline_.empty()) return;
  const uint32_t index = static_cast<uint32_t>(timeline_.size() - 1);
  span_of_generation_[generation] = index;
  v1::PhaseSpan span;
  span.set_generation(generation);
  journal_.Append(PhaseMark(index, std::move(span)));
  FlushLocked(/*sync=*/false, /*snapshot=*/false).IgnoreError();
}

v1::CutConnection CutToProto(const CutConnection& c) {
  v1::CutConnection out;
  out.set_address(c.peer.ToString());
  out.set_port(c.port);
  out.set_protocol(ProtocolName(c.protocol));
  out.set_reason(std::string(ReasonName(c.reason)));
  if (c.destroy_errno != 0) out.set_error(std::strerror(c.destroy_errno));
  return out;
}

void RolloutRecorder::NoteCut(const std::vector<CutConnection>& cut,
                              const std::string& not_cut) {
  absl::MutexLock lock(&mu_);
  if (finalized_ || timeline_.empty()) return;
  v1::PhaseSpan span;
  for (const CutConnection& c : cut) *span.add_cut() = CutToProto(c);
  span.set_not_cut(not_cut);
  const uint32_t index = static_cast<uint32_t>(timeline_.size() - 1);
  journal_.Append(PhaseMark(index, std::move(span)));
  FlushLocked(/*sync=*/false, /*snapshot=*/false).IgnoreError();
}

uint32_t RolloutRecorder::SpanFor(uint32_t generation) {
  if (auto it = span_of_generation_.find(generation);
      it != span_of_generation_.end()) {
    return it->second;
  }
  if (timeline_.empty()) {
    // Events before any BeginPhase: a misuse, but they are still kept.
    StartSpan("(before the first phase)", -1, clock_.NowBootNs());
  }
  return static_cast<uint32_t>(timeline_.size() - 1);
}

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

void RolloutRecorder::SetGuardEnforcement(absl::string_view mode) {
  absl::MutexLock lock(&mu_);
  if (finalized_) return;
  v1::RecordJournalEntry e;
  e.mutable_enforcement()->set_guard(std::string(mode));
  journal_.Append(e);
  FlushLocked(/*sync=*/false, /*snapshot=*/false).IgnoreError();
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

void RolloutRecorder::AddWarning(v1::WarningKind kind, std::string text) {
  absl::MutexLock lock(&mu_);
  if (finalized_) return;
  v1::RecordJournalEntry e;
  e.mutable_warning()->set_kind(kind);
  e.mutable_warning()->set_text(std::move(text));
  journal_.Append(e);
  FlushLocked(/*sync=*/false, /*snapshot=*/false).IgnoreError();
}

void RolloutRecorder::AppendCounts() {
  AppendDnsCounts();
  std::vector<uint32_t> dirty = folder_.TakeDirty();
  if (dirty.empty()) return;
  v1::RecordJournalEntry e;
  v1::NetAttemptCounts* counts = e.mutable_counts();
  for (uint32_t id : dirty) {
    const FoldedEntry& f = folder_.entry(id);
    v1::NetAttemptCount* c = counts->add_count();
    c->set_id(id);
    c->set_count(f.count);
    *c->mutable_last_time() = UnixNsToTimestamp(f.last_unix_ns);
    c->set_last_pid(f.last_pid);
    c->set_last_tgid(f.last_tgid);
  }
  journal_.Append(e);
}

void RolloutRecorder::AppendDnsCounts() {
  std::vector<uint32_t> dirty = dns_folder_.TakeDirty();
  if (dirty.empty()) return;
  v1::RecordJournalEntry e;
  v1::DnsQueryCounts* counts = e.mutable_dns_counts();
  for (uint32_t id : dirty) {
    const DnsFoldedEntry& f = dns_folder_.entry(id);
    v1::DnsQueryCount* c = counts->add_count();
    c->set_id(id);
    c->set_count(f.count);
    *c->mutable_last_time() = UnixNsToTimestamp(f.last_unix_ns);
    c->set_rcode(f.rcode);
    c->set_transport(f.transport);
    for (const IpAddress& a : f.addresses) c->add_address(a.ToString());
    c->set_addresses_more(f.addresses_more);
    c->set_unreplied(f.unreplied);
  }
  journal_.Append(e);
}

v1::LossAccounting RolloutRecorder::Loss() const {
  v1::LossAccounting loss;
  if (last_counters_) {
    loss.set_kernel_counters_read(true);
    loss.set_kernel_allowed(last_counters_->allowed);
    loss.set_kernel_denied(last_counters_->denied);
    loss.set_kernel_allowed_unreported(last_counters_->allowed_unreported);
    loss.set_kernel_events_lost(last_counters_->events_lost);
    loss.set_kernel_audit_denied(last_counters_->audit_denied);
    if (const std::optional<EgressBudgetCounts>& b = last_counters_->budget) {
      v1::EgressBudgetUse* u = loss.mutable_egress_budget();
      u->set_max_connections(b->limits.connections);
      u->set_max_bytes(b->limits.bytes);
      u->set_max_bytes_per_address(b->limits.bytes_per_address);
      u->set_connections(b->connections);
      u->set_bytes(b->bytes);
      u->set_dropped_packets(b->dropped_packets);
      u->set_dropped_bytes(b->dropped_bytes);
      u->set_addresses(b->addresses);
    }
  }
  loss.set_events_recorded(folder_.total());
  loss.set_reader_dropped(reader_dropped_);
  loss.set_supervisor_decided(supervisor_decided_);
  loss.set_overflowed(folder_.overflowed());
  loss.set_guard_events_recorded(guard_recorded_);
  loss.set_dns_queries(dns_folder_.total());
  loss.set_dns_overflowed(dns_folder_.overflowed());
  loss.set_dns_dropped(dns_dropped_);
  return loss;
}

absl::Status RolloutRecorder::FlushLocked(bool sync, bool snapshot) {
  AppendCounts();
  const int64_t now = MonoNs();
  if (options_.counters &&
      (snapshot ||
       now - last_snapshot_mono_ns_ >=
           absl::ToInt64Nanoseconds(options_.loss_snapshot_interval))) {
    last_snapshot_mono_ns_ = now;
    if (absl::StatusOr<SandboxCounters> c = options_.counters(); c.ok()) {
      last_counters_ = *c;
      v1::RecordJournalEntry e;
      *e.mutable_loss() = Loss();
      journal_.Append(e);
    }
  }
  last_flush_mono_ns_ = now;
  return journal_.Flush(sync);
}

absl::Status RolloutRecorder::MaybeFlushLocked() {
  if (journal_.buffered_bytes() >= options_.flush_bytes) {
    return FlushLocked(/*sync=*/false, /*snapshot=*/false);
  }
  if (MonoNs() - last_flush_mono_ns_ >=
      absl::ToInt64Nanoseconds(options_.flush_interval)) {
    return FlushLocked(/*sync=*/false, /*snapshot=*/false);
  }
  return absl::OkStatus();
}

absl::Status RolloutRecorder::Tick() {
  absl::MutexLock lock(&mu_);
  if (finalized_) return absl::OkStatus();
  return MaybeFlushLocked();
}

absl::StatusOr<RecordOutcome> RolloutRecorder::Finalize(
    const FinalCounts& counts) {
  absl::MutexLock lock(&mu_);
  if (finalized_) {
    return absl::FailedPreconditionError("the record is already finalized");
  }
  finalized_ = true;
  const uint64_t now = clock_.NowBootNs();
  AppendCounts();
  EndSpan(now);
  last_counters_ = counts.kernel;

  v1::RolloutRecord summary;  // just enough of the record to judge its loss
  summary.set_complete(true);
  v1::LossAccounting* loss = summary.mutable_loss();
  *loss = Loss();
  loss->set_decode_errors(counts.decode_errors);
  loss->set_unrouted_events(counts.unrouted_events);
  loss->set_guard_events_lost(counts.guard_events_lost);
  loss->set_guard_decode_errors(counts.guard_decode_errors);
  EvaluateLoss(&summary);

  v1::RecordJournalEntry e;
  *e.mutable_trailer()->mutable_end_time() = clock_.ToTimestamp(now);
  *e.mutable_trailer()->mutable_loss() = *loss;
  journal_.Append(e);
  if (absl::Status s = journal_.Close(); !s.ok()) return s;

  RecordOutcome out;
  out.loss = *loss;
  out.lossy = summary.lossy();
  for (const v1::RecordWarning& w : summary.warning()) {
    out.warnings.push_back(w.text());
  }
  out.entries = folder_.size();
  out.dns_entries = dns_folder_.size();
  out.bytes = journal_.bytes_written();
  return out;
}

absl::StatusOr<std::shared_ptr<RolloutRecorder>> RecordRouter::Open(
    const std::string& path, const RolloutInfo& info,
    const CompiledPolicy& policy, RecorderOptions options) {
  {
    absl::MutexLock lock(&mu_);
    if (open_.contains(info.cgroup_id)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "sandbox ", info.cgroup_id, " already has an open rollout record"));
    }
  }
  absl::StatusOr<std::unique_ptr<RolloutRecorder>> rec =
      RolloutRecorder::Create(path, info, policy, clock_, std::move(options));
  if (!rec.ok()) return rec.status();
  std::shared_ptr<RolloutRecorder> shared = *std::move(rec);
  absl::MutexLock lock(&mu_);
  auto [it, added] =
      open_.emplace(info.cgroup_id, OpenRollout{shared, unrouted_});
  if (!added) {
    return absl::AlreadyExistsError(absl::StrCat(
        "sandbox ", info.cgroup_id, " already has an open rollout record"));
  }
  return shared;
}

void RecordRouter::OnEvent(const NetEvent& event) {
  // Under the router's lock, so that Close cannot finalize a recorder while
  // an event is on its way into it.
  absl::MutexLock lock(&mu_);
  auto it = open_.find(event.sandbox);
  if (it == open_.end() || !it->second.recorder->Add(event)) ++unrouted_;
}

absl::Status RecordRouter::Tick() {
  std::vector<std::shared_ptr<RolloutRecorder>> recorders;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, o] : open_) recorders.push_back(o.recorder);
  }
  absl::Status first;
  for (auto& r : recorders) first.Update(r->Tick());
  return first;
}

absl::StatusOr<RecordOutcome> RecordRouter::Close(uint64_t cgroup_id,
                                                  FinalCounts counts) {
  OpenRollout o;
  {
    absl::MutexLock lock(&mu_);
    auto it = open_.find(cgroup_id);
    if (it == open_.end()) {
      return absl::NotFoundError(
          absl::StrCat("sandbox ", cgroup_id, " has no open rollout record"));
    }
    o = std::move(it->second);
    open_.erase(it);
    counts.unrouted_events = unrouted_ - o.unrouted_at_open;
  }
  return o.recorder->Finalize(counts);
}

uint64_t RecordRouter::unrouted_events() const {
  absl::MutexLock lock(&mu_);
  return unrouted_;
}

size_t RecordRouter::open_rollouts() const {
  absl::MutexLock lock(&mu_);
  return open_.size();
}

}  // namespace sandfence
