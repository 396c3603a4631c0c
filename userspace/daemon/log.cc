#include "daemon/log.h"

#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace sandfence {

void LogLine(LogLevel level, absl::string_view message) {
  const char* tag = level == LogLevel::kInfo      ? "I"
                    : level == LogLevel::kWarning ? "W"
                                                  : "E";
  std::string line =
      absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                                    absl::UTCTimeZone()),
                   " ", tag, " sandfence: ", message, "\n");
  // One write: lines from several threads do not interleave.
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace sandfence
