#include "events/journal_entry.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace sandfence::events {

std::vector<std::pair<std::string, std::string>> JournalFields(
    const Event& e, const std::string& line) {
  std::vector<std::pair<std::string, std::string>> f;
  const auto add = [&f](const char* key, const std::string& value) {
    if (!value.empty()) f.emplace_back(key, value);
  };
  const bool stop = e.verdict == "denied" || e.verdict == "killed" ||
                    e.verdict == "refused" || e.verdict == "lost";
  f.emplace_back("MESSAGE", line);
  // warning for what was stopped or lost, info for the rest.
  f.emplace_back("PRIORITY", stop ? "4" : "6");
  f.emplace_back("SYSLOG_IDENTIFIER", "sandfence");
  add("SANDFENCE_SCHEMA", kSchema);
  add("SANDFENCE_KIND", std::string(KindName(e.kind)));
  add("SANDFENCE_VERDICT", e.verdict);
  add("SANDFENCE_ROLLOUT", e.rollout);
  add("SANDFENCE_PHASE", e.phase);
  add("SANDFENCE_REASON", e.reason);
  if (e.process.known()) {
    add("SANDFENCE_PID", absl::StrCat(e.process.pid));
    add("SANDFENCE_UID", absl::StrCat(e.process.uid));
    add("SANDFENCE_COMM", e.process.comm);
  }
  add("SANDFENCE_HOOK", e.hook);
  add("SANDFENCE_PROTOCOL", e.protocol);
  if (e.address) {
    add("SANDFENCE_DESTINATION_ADDRESS", e.address->ToString());
    add("SANDFENCE_DESTINATION_PORT", absl::StrCat(e.port));
  }
  add("SANDFENCE_PEER_PATH", e.path);
  add("SANDFENCE_NAME", e.name);
  add("SANDFENCE_QUERY_TYPE", e.query_type);
  add("SANDFENCE_RCODE", e.rcode);
  add("SANDFENCE_ACTION", e.action);
  add("SANDFENCE_LAYER", e.layer);
  if (e.target.known()) {
    add("SANDFENCE_TARGET_PID", absl::StrCat(e.target.pid));
    add("SANDFENCE_TARGET_COMM", e.target.comm);
  }
  add("SANDFENCE_DETAIL", e.detail);
  add("SANDFENCE_CAUSE", e.cause);
  add("SANDFENCE_FIELD", e.field);
  add("SANDFENCE_VALUE", e.value);
  return f;
}

std::string EncodeJournalEntry(
    const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [key, value] : fields) {
    // KEY \n <64-bit little-endian length> VALUE \n
    out += key;
    out += '\n';
    uint64_t n = value.size();
    for (int i = 0; i < 8; ++i) {
      out += static_cast<char>((n >> (8 * i)) & 0xff);
    }
    out += value;
    out += '\n';
  }
  return out;
}

}  // namespace sandfence::events
