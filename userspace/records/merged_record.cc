#include "records/merged_record.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "records/journal.h"

namespace sandfence {
namespace {

std::string FormatUnixNs(int64_t ns) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixNanos(ns),
                          absl::UTCTimeZone());
}

bool GuardEnforced(const std::string& text) {
  return !text.empty() && text.rfind("off", 0) != 0;
}

}  // namespace

v1::RolloutRecord MergeRecordSegments(
    const std::vector<RecordSegment>& segments) {
  if (segments.empty()) return v1::RolloutRecord();
  v1::RolloutRecord merged = segments.front().record;
  if (segments.size() == 1) return merged;
  merged.clear_warning();
  for (size_t k = 0; k < segments.size(); ++k) {
    const v1::RolloutRecord& seg = segments[k].record;
    if (k > 0) {
      const uint32_t offset = static_cast<uint32_t>(merged.timeline_size());
      for (const v1::PhaseSpan& span : seg.timeline()) {
        *merged.add_timeline() = span;
      }
      for (v1::NetAttempt a : seg.net_attempt()) {
        a.set_phase_index(a.phase_index() + offset);
        *merged.add_net_attempt() = std::move(a);
      }
      for (v1::DnsQuery q : seg.dns_query()) {
        q.set_phase_index(q.phase_index() + offset);
        *merged.add_dns_query() = std::move(q);
      }
      for (v1::GuardEntry g : seg.guard_event()) {
        g.set_phase_index(g.phase_index() + offset);
        *merged.add_guard_event() = std::move(g);
      }
      v1::LossAccounting* loss = merged.mutable_loss();
      const v1::LossAccounting& l = seg.loss();
      // The kernel counters outlive the processes: the last journal's are
      // the rollout's. The reader-side counts add up.
      loss->set_kernel_counters_read(l.kernel_counters_read());
      loss->set_kernel_allowed(l.kernel_allowed());
      loss->set_kernel_denied(l.kernel_denied());
      loss->set_kernel_allowed_unreported(l.kernel_allowed_unreported());
      loss->set_kernel_events_lost(l.kernel_events_lost());
      loss->set_kernel_audit_denied(l.kernel_audit_denied());
      loss->set_events_recorded(loss->events_recorded() + l.events_recorded());
      loss->set_reader_dropped(loss->reader_dropped() + l.reader_dropped());
      loss->set_supervisor_decided(loss->supervisor_decided() +
                                   l.supervisor_decided());
      loss->set_decode_errors(loss->decode_errors() + l.decode_errors());
      loss->set_unrouted_events(loss->unrouted_events() + l.unrouted_events());
      loss->set_overflowed(loss->overflowed() + l.overflowed());
      loss->set_guard_events_lost(loss->guard_events_lost() +
                                  l.guard_events_lost());
      loss->set_guard_decode_errors(loss->guard_decode_errors() +
                                    l.guard_decode_errors());
      loss->set_guard_events_recorded(loss->guard_events_recorded() +
                                      l.guard_events_recorded());
      loss->set_dns_queries(loss->dns_queries() + l.dns_queries());
      loss->set_dns_overflowed(loss->dns_overflowed() + l.dns_overflowed());
      loss->set_dns_dropped(loss->dns_dropped() + l.dns_dropped());
      *merged.mutable_end_time() = seg.end_time();
      merged.set_complete(seg.complete());
      const std::string& guard_before =
          segments[k - 1].record.enforcement().guard();
      const std::string& guard_after = seg.enforcement().guard();
      if (guard_after != guard_before) {
        merged.mutable_enforcement()->set_guard(
            absl::StrCat(merged.enforcement().guard(), "; from journal ",
                         k + 1, ": ", guard_after));
      }
      const RecordSegment& prev = segments[k - 1];
      AddWarning(
          &merged, v1::WARNING_HANDOVER,
          absl::StrCat(
              "handover: the sandfence process writing ", prev.path,
              " stopped",
              prev.stopped_unix_ns
                  ? absl::StrCat(" after its last write at ",
                                 FormatUnixNs(*prev.stopped_unix_ns))
                  : "",
              " and another adopted the rollout at ",
              FormatUnixNs(prev.handed_over_unix_ns),
              "; egress enforcement continued unchanged (pinned programs)",
              GuardEnforced(guard_before)
                  ? ", and so did the process guard (pinned)"
                  : "",
              "; events the kernel queued meanwhile were read by the "
              "successor where its ring survived, the rest are counted as "
              "lost; the record continues in ",
              segments[k].path));
    }
    for (const v1::RecordWarning& w : seg.warning()) {
      // A journal cut short by a dead process is the handover itself, said
      // above; the balance is checked again over all journals below.
      if (k + 1 < segments.size() && (w.kind() == v1::WARNING_NOT_FINALIZED ||
                                      w.kind() == v1::WARNING_CUT)) {
        continue;
      }
      if (w.kind() == v1::WARNING_IMBALANCE ||
          w.kind() == v1::WARNING_EVENTS_LOST ||
          w.kind() == v1::WARNING_READER_DROPPED ||
          w.kind() == v1::WARNING_DECODE_ERRORS ||
          w.kind() == v1::WARNING_OVERFLOW ||
          w.kind() == v1::WARNING_GUARD_EVENTS_LOST ||
          w.kind() == v1::WARNING_GUARD_DECODE_ERRORS ||
          w.kind() == v1::WARNING_DNS_OVERFLOW ||
          w.kind() == v1::WARNING_DNS_DROPPED ||
          w.kind() == v1::WARNING_COUNTERS_UNREAD) {
        continue;  // recomputed over the merged loss
      }
      v1::RecordWarning* out = merged.add_warning();
      out->set_kind(w.kind());
      out->set_text(absl::StrCat("journal ", k + 1, ": ", w.text()));
    }
  }
  EvaluateLoss(&merged);
  merged.set_lossy(true);  // a gap is never proven whole
  return merged;
}

}  // namespace sandfence
