// The event-stream flags `run` and `daemon` share (docs/events.md).
#ifndef SANDFENCE_CLI_EVENT_FLAGS_H_
#define SANDFENCE_CLI_EVENT_FLAGS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/policy_flags.h"
#include "events/event_stream.h"

namespace sandfence {

// --events-out, --events-format, --events-max-bytes, --events-keep into
// *options (path "": no --events-out).
void RegisterEventFlags(FlagParser* parser, events::StreamOptions* options);

// The stream the flags ask for; null without --events-out.
absl::StatusOr<std::shared_ptr<events::EventStream>> OpenEventStream(
    const events::StreamOptions& options);

// A refusal (nothing started) as a line of the stream: its typed cause,
// whether a retry can help, and the message.
void EmitRefusal(events::EventStream* stream, const std::string& rollout,
                 const std::string& phase, const absl::Status& status);

}  // namespace sandfence

#endif  // SANDFENCE_CLI_EVENT_FLAGS_H_
