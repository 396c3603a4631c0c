#include "dns/message.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/dns_names.h"
#include "common/status.h"

namespace sandfence::dns {
namespace {

uint16_t Get16(absl::string_view w, size_t at) {
  return static_cast<uint16_t>((static_cast<uint8_t>(w[at]) << 8) |
                               static_cast<uint8_t>(w[at + 1]));
}

uint32_t Get32(absl::string_view w, size_t at) {
  return (uint32_t{Get16(w, at)} << 16) | Get16(w, at + 2);
}

void Put16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v & 0xff));
}

void Set16(std::string* out, size_t at, uint16_t v) {
  (*out)[at] = static_cast<char>(v >> 8);
  (*out)[at + 1] = static_cast<char>(v & 0xff);
}

void Set32(std::string* out, size_t at, uint32_t v) {
  Set16(out, at, static_cast<uint16_t>(v >> 16));
  Set16(out, at + 2, static_cast<uint16_t>(v & 0xffff));
}

bool IsHostChar(unsigned char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '_';
}

absl::Status Bad(absl::string_view what, size_t offset) {
  return Malformed(
      absl::StrCat("DNS message: ", what, " (at byte ", offset, ")"));
}

// The record types whose rdata is one name that may be compressed
// (RFC 1035; RFC 3597 section 4 forbids compressing the others).
bool RdataIsOneName(uint16_t type) {
  return type == kTypeCname || type == kTypeNs || type == kTypePtr;
}

absl::StatusOr<ResourceRecord> ReadRecord(absl::string_view wire,
                                          size_t* offset, bool* is_opt,
                                          Edns* edns) {
  const size_t start = *offset;
  absl::StatusOr<std::string> owner = ReadName(wire, offset);
  if (!owner.ok()) return owner.status();
  if (wire.size() - *offset < 10) return Bad("record header truncated", start);
  ResourceRecord rr;
  rr.name = NameText(*owner);
  rr.type = Get16(wire, *offset);
  rr.klass = Get16(wire, *offset + 2);
  rr.ttl_offset = *offset + 4;
  rr.ttl = Get32(wire, *offset + 4);
  const uint16_t rdlength = Get16(wire, *offset + 8);
  *offset += 10;
  if (wire.size() - *offset < rdlength) {
    return Bad(absl::StrCat("rdata of ", rdlength, " bytes truncated"),
               *offset);
  }
  const size_t rdata_start = *offset;
  rr.rdata = std::string(wire.substr(rdata_start, rdlength));
  *offset += rdlength;

  if (rr.type == kTypeA && rdlength != 4) {
    return Bad(absl::StrCat("A record with ", rdlength, " bytes of rdata"),
               rdata_start);
  }
  if (rr.type == kTypeAaaa && rdlength != 16) {
    return Bad(absl::StrCat("AAAA record with ", rdlength, " bytes of rdata"),
               rdata_start);
  }
  if (RdataIsOneName(rr.type)) {
    size_t at = rdata_start;
    // The name is read from the whole message (pointers reach back out of
    // the rdata) but must end exactly where the rdata does.
    absl::StatusOr<std::string> target =
        ReadName(wire.substr(0, rdata_start + rdlength), &at);
    if (!target.ok()) return target.status();
    if (at != rdata_start + rdlength) {
      return Bad(
          absl::StrCat(TypeName(rr.type), " rdata has ",
                       rdata_start + rdlength - at, " bytes after the name"),
          at);
    }
    rr.target = NameText(*target);
  }
  *is_opt = rr.type == kTypeOpt;
  if (*is_opt) {
    if (*owner != std::string(1, '\0')) {
      return Bad("OPT record not owned by the root", start);
    }
    edns->udp_size = rr.klass;
    edns->extended_rcode = static_cast<uint8_t>(rr.ttl >> 24);
    edns->version = static_cast<uint8_t>((rr.ttl >> 16) & 0xff);
    edns->dnssec_ok = (rr.ttl & 0x8000) != 0;
    absl::string_view opts = rr.rdata;
    size_t at = 0;
    while (at < opts.size()) {
      if (opts.size() - at < 4) {
        return Bad("EDNS option header truncated", rdata_start + at);
      }
      const uint16_t code = Get16(opts, at);
      const uint16_t len = Get16(opts, at + 2);
      at += 4;
      if (opts.size() - at < len) {
        return Bad(
            absl::StrCat("EDNS option ", code, " of ", len, " bytes truncated"),
            rdata_start + at);
      }
      if (edns->options.size() >= 64) {
        return Bad("more than 64 EDNS options", rdata_start + at);
      }
      edns->options.push_back({code, std::string(opts.substr(at, len))});
      at += len;
    }
  }
  return rr;
}

void AppendHeader(std::string* out, const Header& h) {
  Put16(out, h.id);
  Put16(out, h.flags);
  Put16(out, h.qdcount);
  Put16(out, h.ancount);
  Put16(out, h.nscount);
  Put16(out, h.arcount);
}

void AppendQuestion(std::string* out, const Question& q,
                    absl::string_view name_wire) {
  out->append(name_wire.data(), name_wire.size());
  Put16(out, q.type);
  Put16(out, q.klass);
}

// An OPT record: root owner, our UDP size, the extended rcode bits, version
// 0, DO as given, the options.
void AppendOpt(std::string* out, uint8_t extended_rcode, bool dnssec_ok,
               const std::vector<EdnsOption>& options) {
  out->push_back('\0');
  Put16(out, kTypeOpt);
  Put16(out, kFilterUdpSize);
  out->push_back(static_cast<char>(extended_rcode));
  out->push_back('\0');
  Put16(out, dnssec_ok ? 0x8000 : 0);
  size_t len = 0;
  for (const EdnsOption& o : options) len += 4 + o.data.size();
  Put16(out, static_cast<uint16_t>(len));
  for (const EdnsOption& o : options) {
    Put16(out, o.code);
    Put16(out, static_cast<uint16_t>(o.data.size()));
    out->append(o.data);
  }
}

std::string LowerWire(absl::string_view wire) {
  // Only the label bytes change; the length bytes are < 64 and never
  // upper-case letters ('A' is 65).
  std::string out(wire);
  for (char& c : out) c = absl::ascii_tolower(static_cast<unsigned char>(c));
  return out;
}

}  // namespace



std::optional<Header> ParseHeader(absl::string_view wire) {
  if (wire.size() < kHeaderSize) return std::nullopt;
  Header h;
  h.id = Get16(wire, 0);
  h.flags = Get16(wire, 2);
  h.qdcount = Get16(wire, 4);
  h.ancount = Get16(wire, 6);
  h.nscount = Get16(wire, 8);
  h.arcount = Get16(wire, 10);
  return h;
}

uint16_t Message::rcode() const {
  uint16_t r = static_cast<uint16_t>(header.header_rcode());
  if (edns) r |= static_cast<uint16_t>(edns->extended_rcode) << 4;
  return r;
}

absl::StatusOr<std::string> ReadName(absl::string_view wire, size_t* offset) {
  std::string out;
  size_t at = *offset;
  // Every pointer must point before the start of the label run it ends,
  // so the runs visited start at strictly decreasing offsets: no loop can
  // form, and the work is bounded by the message size.
  size_t run_start = at;
  bool jumped = false;
  size_t labels = 0;
  for (;;) {
    if (at >= wire.size()) return Bad("name runs past the end", at);
    const uint8_t len = static_cast<uint8_t>(wire[at]);
    if ((len & 0xc0) == 0xc0) {
      if (at + 1 >= wire.size()) {
        return Bad("compression pointer truncated", at);
      }
      const size_t target =
          ((len & 0x3f) << 8) | static_cast<uint8_t>(wire[at + 1]);
      if (target >= run_start || target < kHeaderSize) {
        return Bad(absl::StrCat("compression pointer to ", target,
                                " does not point backwards"),
                   at);
      }
      if (!jumped) *offset = at + 2;
      jumped = true;
      at = target;
      run_start = target;
      continue;
    }
    if ((len & 0xc0) != 0) {
      return Bad(absl::StrCat("label type 0x", absl::Hex(len & 0xc0),
                              " is not supported"),
                 at);
    }
    if (len == 0) {
      out.push_back('\0');
      if (!jumped) *offset = at + 1;
      break;
    }
    if (at + 1 + len > wire.size()) return Bad("label runs past the end", at);
    if (++labels > kMaxLabels) return Bad("name has too many labels", at);
    if (out.size() + 1 + len + 1 > kMaxNameWire) {
      return Bad("name longer than 255 bytes", at);
    }
    out.append(wire.data() + at, 1 + len);
    at += 1 + len;
  }
  return out;
}

std::string NameText(absl::string_view name_wire) {
  std::string out;
  size_t at = 0;
  while (at < name_wire.size()) {
    const uint8_t len = static_cast<uint8_t>(name_wire[at]);
    if (len == 0 || at + 1 + len > name_wire.size()) break;
    if (!out.empty()) out.push_back('.');
    for (size_t i = at + 1; i <= at + len; ++i) {
      const unsigned char c = static_cast<unsigned char>(name_wire[i]);
      if (IsHostChar(c)) {
        out.push_back(absl::ascii_tolower(c));
      } else if (c == '.' || c == '\\') {
        out.push_back('\\');
        out.push_back(static_cast<char>(c));
      } else {
        absl::StrAppend(&out, "\\", c / 100, (c / 10) % 10, c % 10);
      }
    }
    at += 1 + len;
  }
  return out;
}

absl::StatusOr<std::string> NameWire(absl::string_view text) {
  std::string out;
  if (!text.empty()) {
    size_t start = 0;
    while (start <= text.size()) {
      size_t dot = text.find('.', start);
      if (dot == absl::string_view::npos) dot = text.size();
      const size_t len = dot - start;
      if (len == 0 || len > kMaxLabel) {
        return Malformed(
            absl::StrCat("name \"", text, "\" has a label of ", len, " bytes"));
      }
      out.push_back(static_cast<char>(len));
      out.append(text.data() + start, len);
      start = dot + 1;
    }
  }
  out.push_back('\0');
  if (out.size() > kMaxNameWire) {
    return Malformed(absl::StrCat("name \"", text, "\" is too long"));
  }
  return out;
}

absl::StatusOr<Message> ParseMessage(absl::string_view wire,
                                     const ParseLimits& limits) {
  if (wire.size() > 65535) return Bad("longer than 65535 bytes", 65535);
  std::optional<Header> header = ParseHeader(wire);
  if (!header) return Bad("shorter than the 12-byte header", wire.size());
  Message m;
  m.header = *header;
  if (m.header.qdcount > limits.max_questions) {
    return Bad(absl::StrCat(m.header.qdcount, " questions (at most ",
                            limits.max_questions, ")"),
               4);
  }
  const size_t records =
      size_t{m.header.ancount} + m.header.nscount + m.header.arcount;
  if (records > limits.max_records) {
    return Bad(
        absl::StrCat(records, " records (at most ", limits.max_records, ")"),
        6);
  }
  size_t at = kHeaderSize;
  for (int i = 0; i < m.header.qdcount; ++i) {
    Question q;
    const size_t start = at;
    absl::StatusOr<std::string> name = ReadName(wire, &at);
    if (!name.ok()) return name.status();
    if (wire.size() - at < 4) return Bad("question truncated", start);
    q.name_wire = *std::move(name);
    q.name = NameText(q.name_wire);
    q.type = Get16(wire, at);
    q.klass = Get16(wire, at + 2);
    at += 4;
    m.questions.push_back(std::move(q));
  }
  struct Section {
    uint16_t count;
    std::vector<ResourceRecord>* records;
    bool additional;
  };
  const Section sections[] = {{m.header.ancount, &m.answers, false},
                              {m.header.nscount, &m.authority, false},
                              {m.header.arcount, &m.additional, true}};
  for (const Section& s : sections) {
    for (int i = 0; i < s.count; ++i) {
      const size_t start = at;
      bool is_opt = false;
      Edns edns;
      absl::StatusOr<ResourceRecord> rr = ReadRecord(wire, &at, &is_opt, &edns);
      if (!rr.ok()) return rr.status();
      if (is_opt) {
        if (!s.additional) {
          return Bad("OPT record outside the additional section", start);
        }
        if (m.edns) return Bad("a second OPT record", start);
        m.edns = std::move(edns);
        m.opt_offset = start;
        m.opt_size = at - start;
        continue;
      }
      s.records->push_back(*std::move(rr));
    }
  }
  if (at != wire.size()) {
    return Bad(absl::StrCat(wire.size() - at, " bytes after the last record"),
               at);
  }
  return m;
}

std::optional<QueryProblem> CheckQuery(const Message& query) {
  if (query.header.qr()) {
    return QueryProblem{std::nullopt, "a response, not a query"};
  }
  if (query.header.opcode() != 0) {
    return QueryProblem{Rcode::kNotImp,
                        absl::StrCat("opcode ", query.header.opcode())};
  }
  if (query.questions.size() != 1) {
    return QueryProblem{Rcode::kFormErr,
                        absl::StrCat(query.questions.size(), " questions")};
  }
  if (query.edns && query.edns->version != 0) {
    return QueryProblem{Rcode::kBadVers,
                        absl::StrCat("EDNS version ", query.edns->version)};
  }
  const Question& q = query.questions[0];
  if (q.type == kTypeAxfr || q.type == kTypeIxfr) {
    return QueryProblem{Rcode::kNotImp, "zone transfer"};
  }
  if (q.klass != kClassIn) {
    return QueryProblem{Rcode::kRefused, absl::StrCat("class ", q.klass)};
  }
  if (q.type == kTypeOpt) {
    return QueryProblem{Rcode::kFormErr, "a question of type OPT"};
  }
  return std::nullopt;
}

std::string BuildResponse(const Message& query, Rcode rcode,
                          const std::optional<Ede>& ede) {
  const uint16_t r = static_cast<uint16_t>(rcode);
  Header h;
  h.id = query.header.id;
  h.flags = static_cast<uint16_t>(
      kFlagQr | (query.header.flags & (0x7800 | kFlagRd | kFlagCd)) | kFlagRa |
      (r & 0xf));
  h.qdcount = query.questions.empty() ? 0 : 1;
  h.arcount = query.edns ? 1 : 0;
  std::string out;
  out.reserve(kHeaderSize + 64 + (ede ? ede->text.size() : 0));
  AppendHeader(&out, h);
  if (!query.questions.empty()) {
    AppendQuestion(&out, query.questions[0], query.questions[0].name_wire);
  }
  if (query.edns) {
    std::vector<EdnsOption> options;
    if (ede) {
      EdnsOption o;
      o.code = kOptionEde;
      Put16(&o.data, static_cast<uint16_t>(ede->code));
      // The text is for people; keep the option well inside one datagram.
      o.data.append(ede->text.substr(0, 200));
      options.push_back(std::move(o));
    }
    AppendOpt(&out, static_cast<uint8_t>(r >> 4), query.edns->dnssec_ok,
              options);
  }
  return out;
}

std::optional<std::string> BuildFormErr(absl::string_view wire) {
  std::optional<Header> in = ParseHeader(wire);
  if (!in || in->qr()) return std::nullopt;
  Header h;
  h.id = in->id;
  h.flags =
      static_cast<uint16_t>(kFlagQr | (in->flags & (0x7800 | kFlagRd)) |
                            kFlagRa | static_cast<uint16_t>(Rcode::kFormErr));
  std::string out;
  AppendHeader(&out, h);
  return out;
}

std::string BuildTruncated(const Message& query) {
  std::string out = BuildResponse(query, Rcode::kNoError);
  Set16(&out, 2, static_cast<uint16_t>(Get16(out, 2) | kFlagTc));
  return out;
}

std::string BuildUpstreamQuery(const Message& client_query, uint16_t id) {
  Header h;
  h.id = id;
  h.flags = client_query.header.flags & (kFlagRd | kFlagCd | kFlagAd);
  h.qdcount = 1;
  h.arcount = client_query.edns ? 1 : 0;
  std::string out;
  out.reserve(kHeaderSize + 300);
  AppendHeader(&out, h);
  const Question& q = client_query.questions.at(0);
  AppendQuestion(&out, q, LowerWire(q.name_wire));
  if (client_query.edns) AppendOpt(&out, 0, client_query.edns->dnssec_ok, {});
  return out;
}

namespace {

// Whether two parses hold the same records, TTLs aside (the rewrite caps
// them); names compare in their lower-cased text form.
bool SameRecords(const Message& a, const Message& b) {
  if (a.questions.size() != b.questions.size()) return false;
  for (size_t i = 0; i < a.questions.size(); ++i) {
    if (a.questions[i].name != b.questions[i].name ||
        a.questions[i].type != b.questions[i].type) {
      return false;
    }
  }
  const auto same = [](const std::vector<ResourceRecord>& x,
                       const std::vector<ResourceRecord>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i].name != y[i].name || x[i].type != y[i].type ||
          x[i].klass != y[i].klass || x[i].rdata != y[i].rdata ||
          x[i].target != y[i].target) {
        return false;
      }
    }
    return true;
  };
  return same(a.answers, b.answers) && same(a.authority, b.authority) &&
         same(a.additional, b.additional);
}

}  // namespace

absl::StatusOr<std::string> RewriteAnswer(absl::string_view upstream_wire,
                                          const Message& upstream,
                                          const Message& client_query,
                                          uint32_t ttl_cap, size_t max_size) {
  std::string out(upstream_wire);
  if (upstream.edns && !client_query.edns) {
    if (upstream.opt_offset + upstream.opt_size != out.size()) {
      return Malformed(
          "DNS message: the upstream answer carries an OPT record that is "
          "not the last record, to a query without EDNS");
    }
    out.resize(upstream.opt_offset);
    Set16(&out, 10, static_cast<uint16_t>(upstream.header.arcount - 1));
  }
  if (out.size() > max_size) return BuildTruncated(client_query);
  Set16(&out, 0, client_query.header.id);
  if (!upstream.questions.empty() && !client_query.questions.empty() &&
      upstream.questions[0].name_wire.size() ==
          client_query.questions[0].name_wire.size()) {
    // The question is the first name in the message, uncompressed.
    out.replace(kHeaderSize, client_query.questions[0].name_wire.size(),
                client_query.questions[0].name_wire);
  }
  for (const auto* section : {&upstream.answers, &upstream.authority}) {
    for (const ResourceRecord& rr : *section) {
      if (rr.ttl > ttl_cap) Set32(&out, rr.ttl_offset, ttl_cap);
    }
  }
  // A compression pointer may land inside a field rewritten above (a TTL,
  // say), so the client could read other names than the ones the filter
  // checked and learned from. Read the result back; pass it on only if it
  // says the same.
  absl::StatusOr<Message> back = ParseMessage(out);
  if (!back.ok() || !SameRecords(*back, upstream)) {
    return Malformed(
        "DNS message: the upstream answer reads differently once rewritten "
        "for the client (a compression pointer into a rewritten field)");
  }
  return out;
}

size_t ClientUdpLimit(const Message& query) {
  if (!query.edns) return kClassicUdpSize;
  return std::max<size_t>(kClassicUdpSize, query.edns->udp_size);
}

std::vector<Ede> EdeOptions(const Message& message) {
  std::vector<Ede> out;
  if (!message.edns) return out;
  for (const EdnsOption& o : message.edns->options) {
    if (o.code != kOptionEde || o.data.size() < 2) continue;
    out.push_back({static_cast<EdeCode>(Get16(o.data, 0)), o.data.substr(2)});
  }
  return out;
}

std::string TypeName(uint16_t type) { return DnsTypeName(type); }
std::string RcodeName(uint16_t rcode) { return DnsRcodeName(rcode); }

}  // namespace sandfence::dns
