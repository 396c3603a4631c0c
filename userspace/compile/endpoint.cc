#include "compile/endpoint.h"

#include <idn2.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace sandfence {
namespace {

constexpr size_t kMaxName = 253;
constexpr size_t kMaxLabel = 63;

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

bool IsHostNameChar(char c) {
  return absl::ascii_islower(static_cast<unsigned char>(c)) ||
         absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-' ||
         c == '_';
}

bool HasNonAscii(absl::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return true;
  }
  return false;
}

// WHATWG URL parsing treats a host whose last label is a number ("1", "0x7f")
// as an IPv4 address in one of the legacy forms (octal, hex, 32-bit).
bool EndsInNumber(absl::string_view name) {
  absl::string_view last = name.substr(name.rfind('.') + 1);
  if (last.empty()) return false;
  absl::string_view digits = last;
  if (absl::StartsWith(last, "0x")) {
    digits = last.substr(2);
    for (char c : digits) {
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
    }
    return true;
  }
  for (char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// A mapped IPv4 literal or block is stored as IPv4, so that one rule covers
// both ways of writing the destination (the kernel side matches IPv4 rules
// for mapped destinations too).
IpPrefix UnmapPrefix(const IpPrefix& prefix) {
  if (prefix.address().IsV4Mapped() && prefix.length() >= 96) {
    return IpPrefix(prefix.address().Unmapped(), prefix.length() - 96);
  }
  return prefix;
}

std::string Quote(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

}  // namespace

absl::StatusOr<AllowHost> ParseAllowHost(absl::string_view text) {
  AllowHost out;
  if (absl::StartsWith(text, "*")) {
    absl::StatusOr<NamePattern> pattern = NormalizeNamePattern(text);
    if (!pattern.ok()) return pattern.status();
    out.pattern = *std::move(pattern);
    return out;
  }
  absl::StatusOr<Host> host = NormalizeHost(text, HostForm::kAddressNameOrPrefix);
  if (!host.ok()) return host.status();
  out.host = *std::move(host);
  return out;
}

std::string Host::ToString() const {
  return is_name() ? name : prefix.ToString();
}

std::string Endpoint::HostPortString() const {
  if (!host.is_name() && !host.prefix.address().is_v4()) {
    return absl::StrCat("[", host.ToString(), "]:", port);
  }
  return absl::StrCat(host.ToString(), ":", port);
}

absl::StatusOr<std::string> NormalizeHostName(absl::string_view text) {
  if (text.empty()) return Malformed("the host is empty");
  if (absl::StrContains(text, '*')) {
    return Malformed(absl::StrCat(
        "host ", Quote(text),
        " has a wildcard where none is allowed: only a leading \"*.\" is "
        "one (\"*.example.com\", in allow and tool hosts of a phase with "
        "dns FILTERED); a model URL and an address name one host"));
  }
  if (absl::EndsWith(text, "..")) {
    return Malformed(absl::StrCat("host ", Quote(text),
                                  " ends with two dots (one is allowed)"));
  }
  absl::string_view stripped = text;
  if (absl::EndsWith(stripped, ".")) stripped.remove_suffix(1);
  if (stripped.empty()) return Malformed("the host is empty");

  std::string name = absl::AsciiStrToLower(stripped);
  bool has_ace_label =
      absl::StartsWith(name, "xn--") || absl::StrContains(name, ".xn--");
  if (HasNonAscii(name) || has_ace_label) {
    // libidn2 applies the UTS #46 mapping (case folding, width, ideographic
    // full stops) and checks punycode that is already there.
    char* out = nullptr;
    int rc = idn2_to_ascii_8z(name.c_str(), &out,
                              IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);
    std::unique_ptr<char, FreeDeleter> owned(out);
    if (rc != IDN2_OK) {
      return Malformed(absl::StrCat("host ", Quote(text),
                                    " is not a valid internationalized "
                                    "domain name: ",
                                    idn2_strerror(rc)));
    }
    name = absl::AsciiStrToLower(owned.get());
  }

  if (name.size() > kMaxName) {
    return Malformed(absl::StrCat("host ", Quote(text), " is longer than ",
                                  kMaxName, " characters"));
  }
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (label.empty()) {
      return Malformed(
          absl::StrCat("host ", Quote(text), " has an empty label (\"..\")"));
    }
    if (label.size() > kMaxLabel) {
      return Malformed(absl::StrCat("host ", Quote(text), ": label ",
                                    Quote(label), " is longer than ", kMaxLabel,
                                    " characters"));
    }
    for (char c : label) {
      if (!IsHostNameChar(c)) {
        return Malformed(absl::StrCat(
            "host ", Quote(text), " contains ",
            absl::ascii_isprint(static_cast<unsigned char>(c))
                ? absl::StrCat("'", std::string(1, c), "'")
                : absl::StrCat("byte ",
                               static_cast<int>(static_cast<unsigned char>(c))),
            ", which is not allowed in a host name"));
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      return Malformed(absl::StrCat("host ", Quote(text), ": label ",
                                    Quote(label), " starts or ends with '-'"));
    }
  }
  if (EndsInNumber(name)) {
    return Malformed(absl::StrCat(
        "host ", Quote(text),
        " looks like an IPv4 address in a numeric form that sandfence does "
        "not accept; write IPv4 addresses as a.b.c.d"));
  }
  return name;
}

std::string NamePattern::ToString() const {
  return wildcard ? absl::StrCat("*.", name) : name;
}

absl::StatusOr<NamePattern> NormalizeNamePattern(absl::string_view text) {
  if (text == "*" || text == "*.") {
    return Malformed(absl::StrCat("host ", Quote(text),
                                  " matches every name; name a domain (\"*.",
                                  "example.com\")"));
  }
  if (!absl::StartsWith(text, "*.")) {
    absl::StatusOr<std::string> name = NormalizeHostName(text);
    if (!name.ok()) return name.status();
    return NamePattern{*std::move(name), false};
  }
  absl::string_view suffix = text.substr(2);
  if (absl::StrContains(suffix, '*')) {
    return Malformed(absl::StrCat(
        "host ", Quote(text),
        " has a '*' after its first label; only \"*.\" at the start is a "
        "wildcard"));
  }
  absl::StatusOr<std::string> name = NormalizeHostName(suffix);
  if (!name.ok()) return name.status();
  return NamePattern{*std::move(name), true};
}

absl::StatusOr<Host> NormalizeHost(absl::string_view text, HostForm form) {
  absl::string_view inner = text;
  bool bracketed = false;
  if (absl::StartsWith(inner, "[")) {
    if (!absl::EndsWith(inner, "]")) {
      return Malformed(absl::StrCat("host ", Quote(text), " is missing ']'"));
    }
    inner = inner.substr(1, inner.size() - 2);
    bracketed = true;
  }
  bool has_slash = absl::StrContains(inner, '/');
  if (has_slash && form == HostForm::kAddressOrName) {
    return Malformed(absl::StrCat("host ", Quote(text),
                                  " is a block of addresses; give one host"));
  }
  if (has_slash) {
    absl::StatusOr<IpPrefix> prefix = IpPrefix::Parse(inner);
    if (!prefix.ok()) return prefix.status();
    if (bracketed && prefix->address().is_v4()) {
      return Malformed(absl::StrCat("host ", Quote(text),
                                    ": brackets are for IPv6 addresses"));
    }
    return Host{"", UnmapPrefix(*prefix)};
  }
  if (std::optional<IpAddress> addr = IpAddress::Parse(inner)) {
    if (bracketed && addr->is_v4()) {
      return Malformed(absl::StrCat("host ", Quote(text),
                                    ": brackets are for IPv6 addresses"));
    }
    return Host{"", IpPrefix::Host(addr->Unmapped())};
  }
  if (bracketed || absl::StrContains(inner, ':')) {
    return Malformed(
        absl::StrCat("host ", Quote(text), " is not a valid IPv6 address"));
  }
  // "10.0.0.1." is the literal with its one trailing dot, not a name.
  if (absl::EndsWith(inner, ".") && !absl::EndsWith(inner, "..")) {
    if (std::optional<IpAddress> addr =
            IpAddress::Parse(inner.substr(0, inner.size() - 1))) {
      return Host{"", IpPrefix::Host(addr->Unmapped())};
    }
  }
  absl::StatusOr<std::string> name = NormalizeHostName(inner);
  if (!name.ok()) return name.status();
  return Host{*std::move(name), IpPrefix::Host(IpAddress())};
}

namespace {

// ParseEndpointUrl, and with `pattern` a wildcard host ("*.suffix") too:
// then *pattern is set and the endpoint's host is left empty.
absl::StatusOr<Endpoint> ParseUrl(absl::string_view url,
                                  std::optional<NamePattern>* pattern) {
  size_t sep = url.find("://");
  if (sep == absl::string_view::npos) {
    return Malformed(
        absl::StrCat(Quote(url),
                     " is not a URL; write http://HOST[:PORT][/PATH] or "
                     "https://..."));
  }
  Endpoint out;
  out.scheme = absl::AsciiStrToLower(url.substr(0, sep));
  uint16_t default_port = 0;
  if (out.scheme == "http") {
    default_port = 80;
  } else if (out.scheme == "https") {
    default_port = 443;
  } else {
    return Malformed(absl::StrCat("scheme ", Quote(out.scheme),
                                  " is not supported; endpoint URLs are "
                                  "http:// or https://"));
  }

  absl::string_view rest = url.substr(sep + 3);
  // '\' ends the authority too: HTTP clients read it as '/'.
  absl::string_view authority = rest.substr(0, rest.find_first_of("/?#\\"));
  // The credentials are the client's business, not the network's. The last
  // '@' ends them, as in WHATWG URL parsing.
  if (size_t at = authority.rfind('@'); at != absl::string_view::npos) {
    authority = authority.substr(at + 1);
  }

  absl::string_view host_text = authority;
  absl::string_view port_text;
  bool has_port = false;
  if (absl::StartsWith(authority, "[")) {
    size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return Malformed(absl::StrCat("host in ", Quote(url), " is missing ']'"));
    }
    host_text = authority.substr(0, close + 1);
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return Malformed(absl::StrCat(Quote(url), ": expected ':' after ']'"));
      }
      has_port = true;
      port_text = after.substr(1);
    }
  } else {
    size_t colon = authority.find(':');
    if (colon != absl::string_view::npos) {
      if (authority.find(':', colon + 1) != absl::string_view::npos) {
        return Malformed(absl::StrCat(
            Quote(url),
            ": an IPv6 address in a URL is written in brackets, as in "
            "http://[2001:db8::1]:8000/"));
      }
      host_text = authority.substr(0, colon);
      has_port = true;
      port_text = authority.substr(colon + 1);
    }
  }
  if (host_text.empty()) {
    return Malformed(absl::StrCat(Quote(url), " has no host"));
  }

  out.port = default_port;
  if (has_port && !port_text.empty()) {
    uint32_t port = 0;
    bool digits = port_text.size() <= 5;
    for (char c : port_text) {
      digits = digits && absl::ascii_isdigit(static_cast<unsigned char>(c));
    }
    if (!digits || !absl::SimpleAtoi(port_text, &port) || port == 0 ||
        port > 65535) {
      return Malformed(absl::StrCat(Quote(url), ": port ", Quote(port_text),
                                    " is not in 1..65535"));
    }
    out.port = static_cast<uint16_t>(port);
  }

  if (absl::StartsWith(host_text, "*")) {
    if (pattern == nullptr) {
      return Malformed(absl::StrCat(
          "host ", Quote(host_text),
          " is a wildcard; this URL must name one host (wildcards are for "
          "tool and allow hosts, with dns { mode: FILTERED })"));
    }
    absl::StatusOr<NamePattern> p = NormalizeNamePattern(host_text);
    if (!p.ok()) return p.status();
    *pattern = *std::move(p);
    return out;
  }
  absl::StatusOr<Host> host =
      NormalizeHost(host_text, HostForm::kAddressOrName);
  if (!host.ok()) return host.status();
  out.host = *std::move(host);
  return out;
}

}  // namespace

absl::StatusOr<Endpoint> ParseEndpointUrl(absl::string_view url) {
  return ParseUrl(url, nullptr);
}

absl::StatusOr<ToolEndpoint> ParseToolUrl(absl::string_view url) {
  ToolEndpoint out;
  absl::StatusOr<Endpoint> ep = ParseUrl(url, &out.pattern);
  if (!ep.ok()) return ep.status();
  out.endpoint = *std::move(ep);
  return out;
}

bool IsLocalhostName(absl::string_view normalized_name) {
  return normalized_name == "localhost" ||
         absl::EndsWith(normalized_name, ".localhost");
}

std::string UnreachableReason(const IpPrefix& dest,
                              const CompileContext& context,
                              bool own_loopback_by_rules) {
  const IpAddress addr = dest.address().Unmapped();
  if (dest.is_host() && addr.IsUnspecified()) {
    return absl::StrCat(addr.ToString(),
                        " is the unspecified address: it names no server "
                        "(a connection to it reaches the local host)");
  }
  if (!context.own_netns || own_loopback_by_rules) return "";
  static const IpPrefix kLoop4 = *IpPrefix::Parse("127.0.0.0/8");
  static const IpPrefix kLoop6 = *IpPrefix::Parse("::1/128");
  IpPrefix unmapped = UnmapPrefix(dest);
  if (kLoop4.Contains(unmapped) || kLoop6.Contains(unmapped)) {
    return absl::StrCat(unmapped.ToString(),
                        " is a loopback address, and a sandbox with its own "
                        "network namespace cannot reach the host's loopback");
  }
  return "";
}

}  // namespace sandfence
