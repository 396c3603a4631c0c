#include "cli/event_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sandfence {

void RegisterEventFlags(FlagParser* parser, events::StreamOptions* options) {
  parser->AddValueFlag(
      "events-out", "PATH|-|journald",
      "write every decision as a line of JSON (docs/events.md) to PATH "
      "(appended, rotated by size), to standard output (-), or to journald "
      "as entries with every field (journald; ./journald for a file)",
      [options](absl::string_view v) {
        if (v.empty()) return Malformed("empty path");
        options->path = std::string(v);
        return absl::OkStatus();
      });
  parser->AddValueFlag(
      "events-format", "jsonl|ocsf",
      "the lines' schema: sandfence's own (jsonl, the default) or OCSF 1.3 "
      "(Network Activity, DNS Activity, Process Activity)",
      [options](absl::string_view v) -> absl::Status {
        absl::StatusOr<events::Format> f = events::ParseFormat(v);
        if (!f.ok()) return Malformed("expected jsonl or ocsf");
        options->format = *f;
        return absl::OkStatus();
      });
  parser->AddValueFlag(
      "events-max-bytes", "BYTES",
      "rotate the events file before it passes BYTES (PATH -> PATH.1 ...; "
      "default 67108864; 0: never)",
      [options](absl::string_view v) {
        if (!absl::SimpleAtoi(v, &options->max_bytes)) {
          return Malformed("expected a number of bytes");
        }
        return absl::OkStatus();
      });
  parser->AddValueFlag(
      "events-keep", "N", "rotated events files kept (default 4)",
      [options](absl::string_view v) {
        if (!absl::SimpleAtoi(v, &options->keep) ||
            options->keep < 0 || options->keep > 1000) {
          return Malformed("expected a number from 0 to 1000");
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<std::shared_ptr<events::EventStream>> OpenEventStream(
    const events::StreamOptions& options) {
  if (options.path.empty()) return nullptr;
  return events::EventStream::Open(options);
}

void EmitRefusal(events::EventStream* stream, const std::string& rollout,
                 const std::string& phase, const absl::Status& status) {
  if (stream == nullptr || status.ok()) return;
  stream->Emit(events::RefusalEvent(rollout, phase, status));
  stream->Flush();
}

}  // namespace sandfence
