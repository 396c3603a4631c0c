#include "common/ip.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sandfence {
namespace {

constexpr uint8_t kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool BitSet(const uint8_t* bytes, int bit) {
  return (bytes[bit / 8] >> (7 - bit % 8)) & 1;
}

// Decimal digits only, as a port or prefix length is written: SimpleAtoi
// alone would also take " 53", "+53" and "53 ".
bool ParseDigits(absl::string_view text, uint32_t* out) {
  if (text.empty() || text.size() > 5) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(text, out);
}

}  // namespace

std::optional<IpAddress> IpAddress::Parse(absl::string_view text) {
  if (text.empty() || text.size() > INET6_ADDRSTRLEN) return std::nullopt;
  std::string s(text);
  IpAddress out;
  if (inet_pton(AF_INET, s.c_str(), out.bytes_.data()) == 1) {
    out.family_ = AF_INET;
    return out;
  }
  if (inet_pton(AF_INET6, s.c_str(), out.bytes_.data()) == 1) {
    out.family_ = AF_INET6;
    return out;
  }
  return std::nullopt;
}

IpAddress IpAddress::V4(uint32_t host_order) {
  IpAddress out;
  out.family_ = AF_INET;
  uint32_t be = htonl(host_order);
  std::memcpy(out.bytes_.data(), &be, 4);
  return out;
}

IpAddress IpAddress::FromBytes(int family, const uint8_t* bytes) {
  IpAddress out;
  out.family_ = family;
  std::memcpy(out.bytes_.data(), bytes, family == AF_INET ? 4 : 16);
  return out;
}

bool IpAddress::IsV4Mapped() const {
  return family_ == AF_INET6 &&
         std::memcmp(bytes_.data(), kMappedPrefix, sizeof(kMappedPrefix)) == 0;
}

IpAddress IpAddress::Unmapped() const {
  if (!IsV4Mapped()) return *this;
  return FromBytes(AF_INET, bytes_.data() + 12);
}

bool IpAddress::IsLoopback() const {
  IpAddress a = Unmapped();
  if (a.is_v4()) return a.bytes_[0] == 127;
  static constexpr uint8_t kLoop6[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                         0, 0, 0, 0, 0, 0, 0, 1};
  return std::memcmp(a.bytes_.data(), kLoop6, 16) == 0;
}

bool IpAddress::IsUnspecified() const {
  IpAddress a = Unmapped();
  for (int i = 0; i < (a.is_v4() ? 4 : 16); ++i) {
    if (a.bytes_[i] != 0) return false;
  }
  return true;
}

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(family_, bytes_.data(), buf, sizeof(buf));
  return buf;
}

absl::StatusOr<IpPrefix> IpPrefix::Parse(absl::string_view text) {
  size_t slash = text.find('/');
  absl::string_view addr_text = text.substr(0, slash);
  std::optional<IpAddress> addr = IpAddress::Parse(addr_text);
  if (!addr) {
    return Malformed(absl::StrCat("\"", text, "\" is not an IP address or CIDR"));
  }
  if (slash == absl::string_view::npos) return Host(*addr);
  uint32_t length = 0;
  if (!ParseDigits(text.substr(slash + 1), &length) ||
      length > static_cast<uint32_t>(addr->bit_length())) {
    return Malformed(absl::StrCat("\"", text, "\" has a bad prefix length (0..",
                                  addr->bit_length(), ")"));
  }
  for (int bit = length; bit < addr->bit_length(); ++bit) {
    if (BitSet(addr->bytes(), bit)) {
      return Malformed(absl::StrCat("\"", text,
                                    "\" has host bits set below the prefix "
                                    "length"));
    }
  }
  return IpPrefix(*addr, length);
}

IpPrefix IpPrefix::Host(const IpAddress& addr) {
  return IpPrefix(addr, addr.bit_length());
}

bool IpPrefix::Contains(const IpAddress& addr) const {
  if (addr.family() != addr_.family()) return false;
  for (int bit = 0; bit < length_; ++bit) {
    if (BitSet(addr.bytes(), bit) != BitSet(addr_.bytes(), bit)) return false;
  }
  return true;
}

bool IpPrefix::Contains(const IpPrefix& other) const {
  return other.length_ >= length_ && Contains(other.addr_);
}

std::string IpPrefix::ToString() const {
  if (is_host()) return addr_.ToString();
  return absl::StrCat(addr_.ToString(), "/", length_);
}

absl::StatusOr<HostPort> HostPort::Parse(absl::string_view text,
                                         uint16_t default_port) {
  absl::string_view host = text;
  absl::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) {
      return Malformed(absl::StrCat("\"", text, "\": missing ']'"));
    }
    host = text.substr(1, close - 1);
    absl::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return Malformed(absl::StrCat("\"", text, "\": expected ':' after ']'"));
      }
      port_text = rest.substr(1);
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    size_t colon = text.find(':');
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  std::optional<IpAddress> addr = IpAddress::Parse(host);
  if (!addr) {
    return Malformed(absl::StrCat("\"", text, "\": \"", host,
                                  "\" is not an IP address"));
  }
  HostPort out{*addr, default_port};
  if (!port_text.empty() || (text.size() && text.back() == ':')) {
    uint32_t port = 0;
    if (!ParseDigits(port_text, &port) || port == 0 || port > 65535) {
      return Malformed(absl::StrCat("\"", text, "\": port \"", port_text,
                                    "\" is not in 1..65535"));
    }
    out.port = static_cast<uint16_t>(port);
  }
  return out;
}

std::string HostPort::ToString() const {
  if (addr.is_v4()) return absl::StrCat(addr.ToString(), ":", port);
  return absl::StrCat("[", addr.ToString(), "]:", port);
}

}  // namespace sandfence
