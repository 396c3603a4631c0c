// A JSON string literal, for the few hand-built JSON outputs.
#ifndef SANDFENCE_COMMON_JSON_H_
#define SANDFENCE_COMMON_JSON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace sandfence {

// `text` quoted and escaped: ", \, control characters and DEL. Always
// valid JSON: a byte that is not part of well-formed UTF-8 becomes \u00XX.
std::string JsonQuote(absl::string_view text);

// A JSON object built member by member, for hand-built outputs. Str and
// Raw leave out empty values, so that an object carries only what it has;
// Always keeps a string even when empty.
class JsonObject {
 public:
  JsonObject& Str(absl::string_view key, absl::string_view value);
  JsonObject& Always(absl::string_view key, absl::string_view value);
  JsonObject& Num(absl::string_view key, uint64_t value);
  JsonObject& Int(absl::string_view key, int64_t value);
  JsonObject& NonZero(absl::string_view key, uint64_t value);
  JsonObject& Bool(absl::string_view key, bool value);
  // `json` is already JSON (an object, an array); "" or "{}" is left out.
  JsonObject& Raw(absl::string_view key, absl::string_view json);
  std::string Done() const { return out_ + "}"; }

 private:
  std::string out_ = "{";
  bool first_ = true;
};

// "[a,b]" from elements that are already JSON.
std::string JsonArray(const std::vector<std::string>& elements);

}  // namespace sandfence

#endif  // SANDFENCE_COMMON_JSON_H_
