#include "compile/unix_name.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace sandfence {
namespace {

// sun_path holds 108 bytes; a path needs its NUL, an abstract name its
// leading one.
constexpr size_t kMaxName = 107;

}  // namespace

std::string UnixName::ToString() const {
  if (!abstract) return name;
  std::string out = "@";
  for (unsigned char c : name) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c >= 0x7f) {
      out += absl::StrFormat("\\x%02x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

absl::StatusOr<UnixName> ParseUnixName(absl::string_view text) {
  const std::string quoted = absl::StrCat("\"", text, "\"");
  UnixName out;
  if (absl::StartsWith(text, "@")) {
    out.abstract = true;
    out.name = std::string(text.substr(1));
    if (out.name.empty()) {
      return Malformed(absl::StrCat("unix name ", quoted,
                                    ": an abstract name needs at least one "
                                    "byte after the @"));
    }
  } else if (absl::StartsWith(text, "/")) {
    out.name = std::string(text);
    if (out.name.find('\0') != std::string::npos) {
      return Malformed(
          absl::StrCat("unix name ", quoted, ": a path cannot hold a NUL"));
    }
    if (absl::StrContains(text, "//") || absl::StrContains(text, "/./") ||
        absl::StrContains(text, "/../") || absl::EndsWith(text, "/") ||
        absl::EndsWith(text, "/.") || absl::EndsWith(text, "/..")) {
      return Malformed(absl::StrCat(
          "unix name ", quoted,
          ": write the path as processes connect to it (no \"//\", \".\" or "
          "\"..\" parts, no trailing \"/\"): the kernel compares names byte "
          "for byte"));
    }
  } else {
    return Malformed(absl::StrCat(
        "unix name ", quoted,
        ": a Unix socket name is an absolute path (\"/run/model.sock\") or "
        "an abstract name (\"@name\")"));
  }
  if (out.name.size() > kMaxName) {
    return Malformed(absl::StrCat("unix name ", quoted, ": ", out.name.size(),
                                  " bytes; a sockaddr_un holds at most ",
                                  kMaxName));
  }
  return out;
}

}  // namespace sandfence
