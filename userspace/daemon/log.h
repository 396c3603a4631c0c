// A tiny logger for the daemon: one line per message on stderr, with a UTC
// timestamp and a level. (Debian's Abseil has no absl/log.) journald adds
// its own metadata when the daemon runs under systemd.
#ifndef SANDFENCE_DAEMON_LOG_H_
#define SANDFENCE_DAEMON_LOG_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace sandfence {

enum class LogLevel { kInfo, kWarning, kError };

// Thread-safe: each line is written with one write(2).
void LogLine(LogLevel level, absl::string_view message);

// A status for the log: its code and message, without the payloads
// (a refusal's RefusalSubject, which the message already says).
inline std::string StatusText(const absl::Status& s) {
  return s.ToString(absl::StatusToStringMode::kWithNoExtraData);
}

template <typename... Args>
void LogInfo(const absl::FormatSpec<Args...>& format, const Args&... args) {
  LogLine(LogLevel::kInfo, absl::StrFormat(format, args...));
}
template <typename... Args>
void LogWarning(const absl::FormatSpec<Args...>& format, const Args&... args) {
  LogLine(LogLevel::kWarning, absl::StrFormat(format, args...));
}
template <typename... Args>
void LogError(const absl::FormatSpec<Args...>& format, const Args&... args) {
  LogLine(LogLevel::kError, absl::StrFormat(format, args...));
}

}  // namespace sandfence

#endif  // SANDFENCE_DAEMON_LOG_H_
