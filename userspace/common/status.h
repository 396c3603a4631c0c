// Refusal classes and errno-carrying errors, shared by every module.
//
// A refusal class is recoverable from the status code alone, so it survives
// any layer that passes a status along unchanged:
//   InvalidArgument     malformed input: fix the request       (exit 65)
//   FailedPrecondition  rejected: can never be enforced          (exit 78)
//   Unavailable         transient: the same request may succeed  (exit 75)
// Anything else is an internal or system error (exit 70).
#ifndef SANDFENCE_COMMON_STATUS_H_
#define SANDFENCE_COMMON_STATUS_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "common/exit_codes.h"

namespace sandfence {

enum class Refusal {
  kNone,         // OK
  kMalformed,    // InvalidArgument
  kRejected,     // FailedPrecondition: never retry
  kUnavailable,  // Unavailable: retry may help
  kInternal,     // anything else
};

Refusal RefusalOf(const absl::Status& status);
absl::string_view RefusalName(Refusal refusal);

absl::Status Malformed(absl::string_view message);
absl::Status Rejected(absl::string_view message);
absl::Status Unavailable(absl::string_view message);

// A caller's string in a message: escaped, and cut if it is huge.
std::string Echo(absl::string_view s);

// What a refusal is about, carried with its status (as an absl payload)
// from the site that knows it to where the status leaves the process: the
// daemon's status details, the events' refusal line. No one parses the
// message for it.
struct RefusalSubject {
  std::string phase;   // "" when the refusal is about the request
  std::string field;   // "model", "tool", "allow", "netns_path", ...
  std::string value;   // the field's value as given
  std::string reason;  // the message without the phase and field

  bool operator==(const RefusalSubject&) const = default;
};

// `status` with `subject` attached. Parts the status already carries win:
// the innermost site that names a field knows it best, and an outer one
// only fills in what is empty (the phase, say). OK statuses are returned
// as they are.
absl::Status WithSubject(absl::Status status, const RefusalSubject& subject);
std::optional<RefusalSubject> SubjectOf(const absl::Status& status);

// An error from a failed system call, with errno in its message. Its code
// says what kind of failure it is (PermissionDenied, NotFound,
// AlreadyExists, Unavailable for transient ones, else Internal) and is never
// a refusal class a caller would act on as "malformed" or "rejected": only
// the call site that knows what the errno means may turn it into one.
absl::Status ErrnoError(int err, absl::string_view what);

// The sysexits(3) code (common/exit_codes.h) of a status's refusal class.
int ExitCodeFor(const absl::Status& status);

}  // namespace sandfence

#endif  // SANDFENCE_COMMON_STATUS_H_
