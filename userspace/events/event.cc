#include "events/event.h"

#include <ctime>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json.h"
#include "common/status.h"
#include "sandfence/version.h"

namespace sandfence::events {
namespace {

using Object = JsonObject;

std::string AddressList(const std::vector<IpAddress>& addresses) {
  if (addresses.empty()) return "";
  std::string out = "[";
  for (size_t i = 0; i < addresses.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", JsonQuote(addresses[i].ToString()));
  }
  return out + "]";
}

std::string CountsObject(const Event& e) {
  Object o;
  for (const auto& [name, count] : e.counts) o.Num(name, count);
  return o.Done();
}

std::string ProcessJson(const Process& p) {
  if (!p.known()) return "";
  return Object().NonZero("pid", p.pid).Num("uid", p.uid).Str("comm", p.comm)
      .Done();
}

bool IsConnect(const Event& e) {
  return absl::StartsWith(e.hook, "connect");
}

// The verdict as OCSF's action and disposition (1 allowed, 2 denied or
// blocked; 99 other: an audit-only phase's "would deny").
struct OcsfOutcome {
  int action_id;
  const char* action;
  int disposition_id;
  const char* disposition;
  int status_id;  // 1 success, 2 failure
  int severity_id;  // 1 informational, 3 medium
};
OcsfOutcome OutcomeOf(absl::string_view verdict) {
  if (verdict == "allowed" || verdict == "applied") {
    return {1, "Allowed", 1, "Allowed", 1, 1};
  }
  if (verdict == "would_deny" || verdict == "audited") {
    return {1, "Allowed", 99, "Would deny (audit only)", 1, 2};
  }
  return {2, "Denied", 2, "Blocked", 2, 3};
}

std::string OcsfProcess(const Process& p) {
  if (!p.known()) return "";
  return Object()
      .NonZero("pid", p.pid)
      .Str("name", p.comm)
      .Raw("user", Object().Str("uid", absl::StrCat(p.uid)).Done())
      .Done();
}

std::string OcsfMetadata(const Event& e) {
  return Object()
      .Str("version", "1.3.0")
      .Raw("product", Object()
                          .Str("name", "sandfence")
                          .Str("vendor_name", "sandfence")
                          .Str("version", SANDFENCE_VERSION)
                          .Done())
      .Str("correlation_uid", e.rollout)
      .Done();
}

}  // namespace

absl::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kNetwork:
      return "network";
    case Kind::kDns:
      return "dns";
    case Kind::kUnix:
      return "unix";
    case Kind::kGuard:
      return "guard";
    case Kind::kPhase:
      return "phase";
    case Kind::kLoss:
      return "loss";
    case Kind::kRefusal:
      return "refusal";
  }
  return "unknown";
}

absl::StatusOr<Format> ParseFormat(absl::string_view text) {
  if (text == "jsonl" || text == "json") return Format::kJsonLines;
  if (text == "ocsf") return Format::kOcsf;
  return Malformed(absl::StrCat("events format \"", text,
                                "\": expected jsonl or ocsf"));
}

Event RefusalEvent(const std::string& rollout, const std::string& phase,
                   const absl::Status& status) {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  Event e;
  e.unix_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  e.rollout = rollout;
  e.phase = phase;
  e.kind = Kind::kRefusal;
  e.verdict = "refused";
  const Refusal refusal = RefusalOf(status);
  e.cause = std::string(RefusalName(refusal));
  e.retryable = refusal == Refusal::kUnavailable;
  e.reason = std::string(status.message());
  if (std::optional<RefusalSubject> subject = SubjectOf(status)) {
    if (e.phase.empty()) e.phase = subject->phase;
    e.field = subject->field;
    e.value = subject->value;
  }
  return e;
}

std::string Rfc3339(int64_t unix_ns) {
  int64_t secs = unix_ns / 1000000000;
  int64_t nanos = unix_ns % 1000000000;
  if (nanos < 0) {
    nanos += 1000000000;
    --secs;
  }
  const time_t t = static_cast<time_t>(secs);
  struct tm tm {};
  ::gmtime_r(&t, &tm);
  return absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02d.%09dZ",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                         tm.tm_hour, tm.tm_min, tm.tm_sec, nanos);
}

std::string RenderJson(const Event& e) {
  Object o;
  o.Str("schema", kSchema)
      .Str("time", Rfc3339(e.unix_ns))
      .Str("rollout", e.rollout)
      .Str("phase", e.phase)
      .Str("kind", KindName(e.kind))
      .Str("verdict", e.verdict);
  switch (e.kind) {
    case Kind::kNetwork:
      o.Str("hook", e.hook).Str("protocol", e.protocol);
      if (e.address) {
        o.Raw("destination", Object()
                                 .Str("address", e.address->ToString())
                                 .Num("port", e.port)
                                 .Done());
      }
      break;
    case Kind::kUnix:
      o.Str("hook", e.hook)
          .Str("protocol", e.protocol)
          .Raw("peer", Object().Str("path", e.path).Done());
      break;
    case Kind::kDns:
      o.Str("name", e.name)
          .Str("type", e.query_type)
          .Str("rcode", e.rcode)
          .Raw("answers", AddressList(e.answers))
          .Str("matched", e.matched);
      break;
    case Kind::kGuard:
      o.Str("action", e.action)
          .Str("layer", e.layer)
          .Raw("target", ProcessJson(e.target))
          .Str("detail", e.detail);
      break;
    case Kind::kPhase:
      o.Str("from", e.from_phase).NonZero("generation", e.generation);
      if (e.ended) o.Bool("ended", true);
      break;
    case Kind::kLoss:
      o.Raw("counts", CountsObject(e));
      break;
    case Kind::kRefusal:
      o.Str("cause", e.cause)
          .Str("field", e.field)
          .Str("value", e.value)
          .Bool("retryable", e.retryable);
      break;
  }
  return o.Str("reason", e.reason)
      .Raw("process", ProcessJson(e.process))
      .Done();
}

std::string RenderOcsf(const Event& e) {
  // category, class, activity: OCSF 1.3's numbers.
  int category = 0, klass = 0, activity = 0;
  const char* class_name = "Base Event";
  const char* activity_name = "Other";
  switch (e.kind) {
    case Kind::kNetwork:
    case Kind::kUnix:
      category = 4;
      klass = 4001;
      class_name = "Network Activity";
      if (!IsConnect(e)) {
        activity = 6;
        activity_name = "Traffic";
      } else if (e.verdict == "denied") {
        activity = 5;
        activity_name = "Refuse";
      } else {
        activity = 1;
        activity_name = "Open";
      }
      break;
    case Kind::kDns:
      category = 4;
      klass = 4003;
      class_name = "DNS Activity";
      activity = 1;
      activity_name = "Query";
      break;
    case Kind::kGuard:
      category = 1;
      klass = 1007;
      class_name = "Process Activity";
      // ptrace and its kin reach into another process (Inject); the rest
      // open its /proc files (Open).
      if (absl::StartsWith(e.action, "proc")) {
        activity = 3;
        activity_name = "Open";
      } else {
        activity = 4;
        activity_name = "Inject";
      }
      break;
    case Kind::kPhase:
    case Kind::kLoss:
    case Kind::kRefusal:
      activity = 99;
      break;
  }
  const OcsfOutcome out = OutcomeOf(e.verdict);
  Object o;
  o.Num("category_uid", category)
      .Num("class_uid", klass)
      .Str("class_name", class_name)
      .Num("activity_id", activity)
      .Str("activity_name", activity_name)
      .Num("type_uid", static_cast<uint64_t>(klass) * 100 + activity)
      .Num("time", static_cast<uint64_t>(e.unix_ns / 1000000))
      .Str("time_dt", Rfc3339(e.unix_ns))
      .Num("severity_id", out.severity_id)
      .Num("status_id", out.status_id)
      .Num("action_id", out.action_id)
      .Str("action", out.action)
      .Num("disposition_id", out.disposition_id)
      .Str("disposition", out.disposition)
      .Raw("metadata", OcsfMetadata(e));
  switch (e.kind) {
    case Kind::kNetwork:
    case Kind::kUnix:
      if (e.address) {
        o.Raw("dst_endpoint", Object()
                                  .Str("ip", e.address->ToString())
                                  .Num("port", e.port)
                                  .Done());
      }
      o.Raw("connection_info", Object()
                                   .Str("protocol_name", e.protocol)
                                   .Num("direction_id", 2)  // outbound
                                   .Done())
          .Raw("actor", Object().Raw("process", OcsfProcess(e.process)).Done());
      break;
    case Kind::kDns: {
      o.Raw("query",
            Object().Str("hostname", e.name).Str("type", e.query_type).Done())
          .Str("rcode", e.rcode);
      if (!e.answers.empty()) {
        std::string answers = "[";
        for (size_t i = 0; i < e.answers.size(); ++i) {
          absl::StrAppend(&answers, i ? "," : "",
                          Object().Str("rdata", e.answers[i].ToString())
                              .Done());
        }
        o.Raw("answers", answers + "]");
      }
      break;
    }
    case Kind::kGuard:
      o.Raw("process", OcsfProcess(e.target))
          .Raw("actor", Object().Raw("process", OcsfProcess(e.process)).Done());
      break;
    default:
      break;
  }
  const std::string message =
      e.kind == Kind::kRefusal ? e.reason
                               : absl::StrCat(KindName(e.kind), " ", e.verdict);
  o.Str("message", message);
  // sandfence's own names, for what OCSF has no field for.
  Object unmapped;
  unmapped.Str("schema", kSchema)
      .Str("rollout", e.rollout)
      .Str("phase", e.phase)
      .Str("kind", KindName(e.kind))
      .Str("verdict", e.verdict)
      .Str("hook", e.hook)
      .Str("path", e.path)
      .Str("matched", e.matched)
      .Str("action", e.action)
      .Str("layer", e.layer)
      .Str("detail", e.detail)
      .Str("from", e.from_phase)
      .Raw("counts", e.kind == Kind::kLoss ? CountsObject(e) : "")
      .Str("cause", e.cause)
      .Str("field", e.field)
      .Str("value", e.value);
  if (e.kind == Kind::kRefusal) unmapped.Bool("retryable", e.retryable);
  if (e.kind != Kind::kRefusal) unmapped.Str("reason", e.reason);
  return o.Raw("unmapped", unmapped.Done()).Done();
}

std::string Render(const Event& event, Format format) {
  return format == Format::kOcsf ? RenderOcsf(event) : RenderJson(event);
}

}  // namespace sandfence::events
