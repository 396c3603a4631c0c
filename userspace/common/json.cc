#include "common/json.h"

#include "absl/strings/str_format.h"

namespace sandfence {

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          absl::StrAppendFormat(&out, "\\u%04x", u);
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace sandfence
