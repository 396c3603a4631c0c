#include "common/json.h"

#include <cstddef>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace sandfence {
namespace {

// The length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no
// overlong forms, no surrogates, nothing past U+10FFFF), or 0.
size_t Utf8Length(absl::string_view text, size_t i) {
  const auto at = [&](size_t k) -> unsigned {
    return i + k < text.size() ? static_cast<unsigned char>(text[i + k])
                               : 0u;
  };
  const auto cont = [&](size_t k) { return (at(k) & 0xc0) == 0x80; };
  const unsigned b0 = at(0);
  if (b0 >= 0xc2 && b0 <= 0xdf) return cont(1) ? 2 : 0;
  if (b0 >= 0xe0 && b0 <= 0xef) {
    const unsigned b1 = at(1);
    if (b0 == 0xe0 && b1 < 0xa0) return 0;  // overlong
    if (b0 == 0xed && b1 >= 0xa0) return 0;  // a surrogate
    return cont(1) && cont(2) ? 3 : 0;
  }
  if (b0 >= 0xf0 && b0 <= 0xf4) {
    const unsigned b1 = at(1);
    if (b0 == 0xf0 && b1 < 0x90) return 0;  // overlong
    if (b0 == 0xf4 && b1 >= 0x90) return 0;  // past U+10FFFF
    return cont(1) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\r':
        out += "\\r";
        continue;
      default:
        break;
    }
    if (u < 0x20 || u == 0x7f) {
      absl::StrAppendFormat(&out, "\\u%04x", u);
    } else if (u < 0x80) {
      out += c;
    } else if (const size_t n = Utf8Length(text, i); n > 0) {
      out.append(text.data() + i, n);
      i += n - 1;
    } else {
      // Not UTF-8 (a process name or a socket path can hold any bytes):
      // the byte as the code point of the same value, so that the output
      // stays valid JSON and the byte can still be read off it.
      absl::StrAppendFormat(&out, "\\u%04x", u);
    }
  }
  out += '"';
  return out;
}

JsonObject& JsonObject::Raw(absl::string_view key, absl::string_view json) {
  if (json.empty() || json == "{}") return *this;
  out_ += first_ ? "" : ",";
  first_ = false;
  absl::StrAppend(&out_, JsonQuote(key), ":", json);
  return *this;
}

JsonObject& JsonObject::Str(absl::string_view key, absl::string_view value) {
  return value.empty() ? *this : Raw(key, JsonQuote(value));
}

JsonObject& JsonObject::Always(absl::string_view key,
                               absl::string_view value) {
  return Raw(key, JsonQuote(value));
}

JsonObject& JsonObject::Num(absl::string_view key, uint64_t value) {
  return Raw(key, absl::StrCat(value));
}

JsonObject& JsonObject::Int(absl::string_view key, int64_t value) {
  return Raw(key, absl::StrCat(value));
}

JsonObject& JsonObject::NonZero(absl::string_view key, uint64_t value) {
  return value != 0 ? Num(key, value) : *this;
}

JsonObject& JsonObject::Bool(absl::string_view key, bool value) {
  return Raw(key, value ? "true" : "false");
}

std::string JsonArray(const std::vector<std::string>& elements) {
  return absl::StrCat("[", absl::StrJoin(elements, ","), "]");
}

}  // namespace sandfence
