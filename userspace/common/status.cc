#include "common/status.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sandfence {

Refusal RefusalOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return Refusal::kNone;
    case absl::StatusCode::kInvalidArgument:
      return Refusal::kMalformed;
    case absl::StatusCode::kFailedPrecondition:
      return Refusal::kRejected;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return Refusal::kUnavailable;
    default:
      return Refusal::kInternal;
  }
}

absl::string_view RefusalName(Refusal refusal) {
  switch (refusal) {
    case Refusal::kNone:
      return "ok";
    case Refusal::kMalformed:
      return "malformed";
    case Refusal::kRejected:
      return "rejected";
    case Refusal::kUnavailable:
      return "unavailable";
    case Refusal::kInternal:
      return "internal";
  }
  return "internal";
}

std::string Echo(absl::string_view s) {
  if (s.size() <= 64) return absl::CHexEscape(s);
  return absl::StrCat(absl::CHexEscape(s.substr(0, 64)), "... (", s.size(),
                      " bytes)");
}

absl::Status Malformed(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

absl::Status Rejected(absl::string_view message) {
  return absl::FailedPreconditionError(message);
}

absl::Status Unavailable(absl::string_view message) {
  return absl::UnavailableError(message);
}

namespace {

constexpr absl::string_view kSubjectUrl = "sandfence.dev/refusal-subject";

// Four length-prefixed parts ("5:phase3:..."): any byte may be in a value.
std::string EncodeSubject(const RefusalSubject& s) {
  std::string out;
  for (const std::string* part : {&s.phase, &s.field, &s.value, &s.reason}) {
    absl::StrAppend(&out, part->size(), ":", *part);
  }
  return out;
}

std::optional<RefusalSubject> DecodeSubject(absl::string_view in) {
  RefusalSubject s;
  for (std::string* part : {&s.phase, &s.field, &s.value, &s.reason}) {
    const size_t colon = in.find(':');
    size_t n = 0;
    if (colon == absl::string_view::npos ||
        !absl::SimpleAtoi(in.substr(0, colon), &n) ||
        n > in.size() - colon - 1) {
      return std::nullopt;
    }
    *part = std::string(in.substr(colon + 1, n));
    in.remove_prefix(colon + 1 + n);
  }
  if (!in.empty()) return std::nullopt;
  return s;
}

}  // namespace

absl::Status WithSubject(absl::Status status, const RefusalSubject& subject) {
  if (status.ok()) return status;
  RefusalSubject merged = SubjectOf(status).value_or(RefusalSubject{});
  for (auto [have, add] :
       {std::pair{&merged.phase, &subject.phase},
        std::pair{&merged.field, &subject.field},
        std::pair{&merged.value, &subject.value},
        std::pair{&merged.reason, &subject.reason}}) {
    if (have->empty()) *have = *add;
  }
  status.SetPayload(kSubjectUrl, absl::Cord(EncodeSubject(merged)));
  return status;
}

std::optional<RefusalSubject> SubjectOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kSubjectUrl);
  if (!payload) return std::nullopt;
  return DecodeSubject(std::string(*payload));
}

absl::Status ErrnoError(int err, absl::string_view what) {
  // A system error is never a refusal by itself: only the call site knows
  // whether EINVAL means "your request is wrong" or "we are". So errno never
  // becomes Malformed or Rejected here.
  const std::string message =
      absl::StrCat(what, ": ", std::strerror(err), " (errno ", err, ")");
  switch (err) {
    case EPERM:
    case EACCES:
      return absl::PermissionDeniedError(message);
    case ENOENT:
    case ESRCH:
      return absl::NotFoundError(message);
    case EEXIST:
      return absl::AlreadyExistsError(message);
    case EAGAIN:
    case EBUSY:
    case EINTR:
    case ENOMEM:
    case ENOSPC:
    case ENOBUFS:
    case ETIMEDOUT:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

int ExitCodeFor(const absl::Status& status) {
  if (status.code() == absl::StatusCode::kPermissionDenied) return kExitNoPerm;
  switch (RefusalOf(status)) {
    case Refusal::kNone:
      return kExitOk;
    case Refusal::kMalformed:
      return kExitDataErr;
    case Refusal::kRejected:
      return kExitConfig;
    case Refusal::kUnavailable:
      return kExitTempFail;
    case Refusal::kInternal:
      return kExitSoftware;
  }
  return kExitSoftware;
}

}  // namespace sandfence
