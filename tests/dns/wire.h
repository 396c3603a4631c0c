// Hand-made DNS messages for the dns tests, byte by byte, so that a test
// can write exactly the malformed packet it means (the library's builders
// only make well-formed ones).
#ifndef SANDFENCE_TESTS_DNS_WIRE_H_
#define SANDFENCE_TESTS_DNS_WIRE_H_

#include <arpa/inet.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace sandfence::dns::testing {

class Wire {
 public:
  Wire& U8(uint8_t v) {
    s_.push_back(static_cast<char>(v));
    return *this;
  }
  Wire& U16(uint16_t v) { return U8(v >> 8).U8(v & 0xff); }
  Wire& U32(uint32_t v) { return U16(v >> 16).U16(v & 0xffff); }
  Wire& Bytes(absl::string_view b) {
    s_.append(b.data(), b.size());
    return *this;
  }
  Wire& Header(uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
               uint16_t ns, uint16_t ar) {
    return U16(id).U16(flags).U16(qd).U16(an).U16(ns).U16(ar);
  }
  // Labels of `name` ("a.b.c"), then the root unless `terminate` is false.
  Wire& Name(absl::string_view name, bool terminate = true) {
    size_t start = 0;
    while (!name.empty() && start <= name.size()) {
      size_t dot = name.find('.', start);
      if (dot == absl::string_view::npos) dot = name.size();
      U8(static_cast<uint8_t>(dot - start));
      Bytes(name.substr(start, dot - start));
      start = dot + 1;
    }
    if (terminate) U8(0);
    return *this;
  }
  Wire& Ptr(uint16_t offset) { return U16(0xc000 | offset); }
  Wire& Question(absl::string_view name, uint16_t type, uint16_t klass = 1) {
    return Name(name).U16(type).U16(klass);
  }
  // A record with an uncompressed owner and the given rdata.
  Wire& Rr(absl::string_view name, uint16_t type, uint32_t ttl,
           absl::string_view rdata) {
    return Name(name)
        .U16(type)
        .U16(1)
        .U32(ttl)
        .U16(static_cast<uint16_t>(rdata.size()))
        .Bytes(rdata);
  }
  Wire& Opt(uint16_t udp_size, bool dnssec_ok,
            const std::vector<std::pair<uint16_t, std::string>>& options = {}) {
    size_t len = 0;
    for (const auto& o : options) len += 4 + o.second.size();
    U8(0)
        .U16(41)
        .U16(udp_size)
        .U32(dnssec_ok ? 0x8000 : 0)
        .U16(static_cast<uint16_t>(len));
    for (const auto& [code, data] : options) {
      U16(code).U16(static_cast<uint16_t>(data.size())).Bytes(data);
    }
    return *this;
  }
  size_t size() const { return s_.size(); }
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

inline std::string V4(const char* text) {
  std::string out(4, '\0');
  ::inet_pton(AF_INET, text, out.data());
  return out;
}

inline std::string V6(const char* text) {
  std::string out(16, '\0');
  ::inet_pton(AF_INET6, text, out.data());
  return out;
}

// The uncompressed wire form of a name (for CNAME rdata).
inline std::string NameBytes(absl::string_view name) {
  return Wire().Name(name).str();
}

// A standard query: id, RD, one question, OPT when udp_size > 0.
inline std::string Query(absl::string_view name, uint16_t type, uint16_t id = 7,
                         uint16_t udp_size = 0, bool dnssec_ok = false) {
  Wire w;
  w.Header(id, 0x0100, 1, 0, 0, udp_size > 0 ? 1 : 0).Question(name, type);
  if (udp_size > 0) w.Opt(udp_size, dnssec_ok);
  return w.str();
}

}  // namespace sandfence::dns::testing

#endif  // SANDFENCE_TESTS_DNS_WIRE_H_
