// An event as a journald entry (systemd's native protocol,
// systemd.journal-fields(7)): one datagram of fields, so that `journalctl
// SANDFENCE_VERDICT=denied` or `-o json` finds them without parsing the
// message. MESSAGE is the event's JSON line.
#ifndef SANDFENCE_EVENTS_JOURNAL_ENTRY_H_
#define SANDFENCE_EVENTS_JOURNAL_ENTRY_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "events/event.h"

namespace sandfence::events {

// Where journald listens for native entries.
inline constexpr char kJournalSocket[] = "/run/systemd/journal/socket";

// The entry's fields, in order: MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, then
// SANDFENCE_* for every member the event has.
std::vector<std::pair<std::string, std::string>> JournalFields(
    const Event& event, const std::string& line);

// The datagram: every value in the protocol's length-prefixed form (a
// process name or a socket path can hold a newline).
std::string EncodeJournalEntry(
    const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace sandfence::events

#endif  // SANDFENCE_EVENTS_JOURNAL_ENTRY_H_
