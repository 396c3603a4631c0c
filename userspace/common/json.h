// A JSON string literal, for the few hand-built JSON outputs.
#ifndef SANDFENCE_COMMON_JSON_H_
#define SANDFENCE_COMMON_JSON_H_

#include <string>

#include "absl/strings/string_view.h"

namespace sandfence {

// `text` quoted and escaped: ", \, control characters and DEL. Always
// valid JSON: a byte that is not part of well-formed UTF-8 becomes \u00XX.
std::string JsonQuote(absl::string_view text);

}  // namespace sandfence

#endif  // SANDFENCE_COMMON_JSON_H_
