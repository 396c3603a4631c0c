// DNS wire format (RFC 1035, EDNS(0) RFC 6891, Extended DNS Errors RFC 8914)
// for the per-sandbox DNS filter: a parser written for hostile input and the
// builders of the filter's own responses.
//
// The parser never reads outside the message, follows a compression pointer
// only strictly backwards (each pointer must point before the start of the
// label run that contains it, so every name decodes in bounded steps), and
// bounds names (255 bytes on the wire, 63 per label, 127 labels) and the
// record count. Anything else is a Malformed status naming what was wrong
// and where.
//
// Names come in two forms: the uncompressed wire form as the sender wrote
// it (kept for echoing, case and all) and a text form for matching: ASCII
// lower-cased, labels joined by '.', no trailing dot ("" for the root), and
// any byte that cannot appear in a host name escaped as \DDD (a '.' inside a
// label as "\."), so that a text name can never equal a normalized host that
// differs from it on the wire.
#ifndef SANDFENCE_DNS_MESSAGE_H_
#define SANDFENCE_DNS_MESSAGE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sandfence::dns {

// Record types and classes the filter looks at; any other is carried as a
// number.
inline constexpr uint16_t kTypeA = 1;
inline constexpr uint16_t kTypeNs = 2;
inline constexpr uint16_t kTypeCname = 5;
inline constexpr uint16_t kTypeSoa = 6;
inline constexpr uint16_t kTypePtr = 12;
inline constexpr uint16_t kTypeMx = 15;
inline constexpr uint16_t kTypeTxt = 16;
inline constexpr uint16_t kTypeAaaa = 28;
inline constexpr uint16_t kTypeSrv = 33;
inline constexpr uint16_t kTypeOpt = 41;
inline constexpr uint16_t kTypeSvcb = 64;
inline constexpr uint16_t kTypeHttps = 65;
inline constexpr uint16_t kTypeIxfr = 251;
inline constexpr uint16_t kTypeAxfr = 252;
inline constexpr uint16_t kTypeAny = 255;
inline constexpr uint16_t kClassIn = 1;

// "A", "AAAA", ... or "TYPE<n>" (RFC 3597).
std::string TypeName(uint16_t type);

// Response codes; values above 15 need EDNS (the upper 8 bits live in the
// OPT record).
enum class Rcode : uint16_t {
  kNoError = 0,
  kFormErr = 1,
  kServFail = 2,
  kNxDomain = 3,
  kNotImp = 4,
  kRefused = 5,
  kBadVers = 16,
};
std::string RcodeName(uint16_t rcode);

// RFC 8914 info-codes the filter uses.
enum class EdeCode : uint16_t {
  kOther = 0,
  kBlocked = 15,     // blocked by the operator's policy
  kProhibited = 18,  // the requester is not allowed to ask
  kNoReachableAuthority = 22,
  kNetworkError = 23,
};

inline constexpr uint16_t kOptionEde = 15;

inline constexpr size_t kHeaderSize = 12;
inline constexpr size_t kMaxNameWire = 255;
inline constexpr size_t kMaxLabel = 63;
inline constexpr size_t kMaxLabels = 127;
// What a DNS client may always receive over UDP without EDNS.
inline constexpr size_t kClassicUdpSize = 512;
// The UDP payload size the filter advertises (DNS Flag Day 2020).
inline constexpr uint16_t kFilterUdpSize = 1232;

// Header flag bits (in the 16-bit flags word).
inline constexpr uint16_t kFlagQr = 0x8000;
inline constexpr uint16_t kFlagAa = 0x0400;
inline constexpr uint16_t kFlagTc = 0x0200;
inline constexpr uint16_t kFlagRd = 0x0100;
inline constexpr uint16_t kFlagRa = 0x0080;
inline constexpr uint16_t kFlagAd = 0x0020;
inline constexpr uint16_t kFlagCd = 0x0010;

struct Header {
  uint16_t id = 0;
  uint16_t flags = 0;
  uint16_t qdcount = 0;
  uint16_t ancount = 0;
  uint16_t nscount = 0;
  uint16_t arcount = 0;

  bool qr() const { return flags & kFlagQr; }
  bool tc() const { return flags & kFlagTc; }
  bool rd() const { return flags & kFlagRd; }
  int opcode() const { return (flags >> 11) & 0xf; }
  // The 4 header bits only; Message::rcode() adds the EDNS bits.
  int header_rcode() const { return flags & 0xf; }
};

// Parses the fixed header; the only part needed to answer FORMERR.
std::optional<Header> ParseHeader(absl::string_view wire);

struct Question {
  std::string name_wire;  // uncompressed, as sent (case kept)
  std::string name;       // text form, for matching
  uint16_t type = 0;
  uint16_t klass = 0;
};

struct ResourceRecord {
  std::string name;  // text form of the owner
  uint16_t type = 0;
  uint16_t klass = 0;
  uint32_t ttl = 0;
  size_t ttl_offset = 0;  // where the TTL sits in the message (for capping)
  std::string rdata;      // as on the wire (may hold compression pointers)
  // CNAME: the target's text form. A/AAAA: the address bytes are rdata.
  std::string target;
};

struct EdnsOption {
  uint16_t code = 0;
  std::string data;
};

struct Edns {
  uint16_t udp_size = 0;
  uint8_t extended_rcode = 0;  // the upper 8 bits of the rcode
  uint8_t version = 0;
  bool dnssec_ok = false;
  std::vector<EdnsOption> options;
};

struct Message {
  Header header;
  std::vector<Question> questions;
  std::vector<ResourceRecord> answers;
  std::vector<ResourceRecord> authority;
  std::vector<ResourceRecord> additional;  // without the OPT record
  std::optional<Edns> edns;
  size_t opt_offset = 0;  // where the OPT record starts, if any
  size_t opt_size = 0;    // and its size on the wire

  // The full rcode: the header's 4 bits and EDNS's upper 8.
  uint16_t rcode() const;
};

struct ParseLimits {
  // Records of all sections together (a record needs at least 11 bytes,
  // so 64 KiB can claim ~6,000).
  size_t max_records = 1024;
  size_t max_questions = 1;
};

// Parses a whole message. Malformed (InvalidArgument) for anything that is
// not well-formed DNS or exceeds `limits`, with the field and the offset.
absl::StatusOr<Message> ParseMessage(absl::string_view wire,
                                     const ParseLimits& limits = {});

// Decodes the (possibly compressed) name at *offset, advancing *offset past
// it; returns the uncompressed wire form.
absl::StatusOr<std::string> ReadName(absl::string_view wire, size_t* offset);

// The text form of an uncompressed wire name (see the file comment).
std::string NameText(absl::string_view name_wire);

// The wire form of a text name made of host-name characters only
// ("a.b.example"); Malformed for an empty label or a label or name too long.
absl::StatusOr<std::string> NameWire(absl::string_view text);

// Why a well-formed message cannot be served as a query, with the rcode to
// answer: a response instead of a query (no answer at all: nullopt rcode),
// an opcode other than QUERY (NOTIMP), not exactly one question or a
// second OPT (FORMERR), EDNS version > 0 (BADVERS), zone transfers and
// classes other than IN (REFUSED... NOTIMP for transfers).
struct QueryProblem {
  std::optional<Rcode> rcode;  // nullopt: drop without answering
  std::string reason;
};
std::optional<QueryProblem> CheckQuery(const Message& query);

// A response of the filter's own to `query` (echoing its id, opcode, RD and
// CD bits and its question in wire form; RA set). When the query carried
// EDNS, the response carries an OPT record (our UDP size, the DO bit
// echoed) and, if `ede` is given, an Extended DNS Error option with the
// info-code and text; without EDNS in the query there is no OPT and no EDE
// (RFC 6891: a responder must not add OPT to a reply to a query without).
struct Ede {
  EdeCode code = EdeCode::kOther;
  std::string text;
};
std::string BuildResponse(const Message& query, Rcode rcode,
                          const std::optional<Ede>& ede = std::nullopt);

// FORMERR for bytes that did not parse: only the header is echoed (id,
// opcode, RD), no question. nullopt when not even a header is there or the
// bytes are a response (answering those could start a loop).
std::optional<std::string> BuildFormErr(absl::string_view wire);

// An empty truncated response (TC set, the question, OPT if the query had
// EDNS): the client retries over TCP.
std::string BuildTruncated(const Message& query);

// The query the filter sends upstream for a client's query: a fresh id, the
// question in lower case (the form that was matched), RD and CD copied, and
// OPT only if the client sent one (our UDP size, DO copied, no options: the
// client's cookies and subnet are not passed on).
std::string BuildUpstreamQuery(const Message& client_query, uint16_t id);

// Turns an upstream answer into the answer for the client, in place on a
// copy of its bytes: the client's id, the client's question name bytes
// (same length; the case the client used), every TTL in the answer and
// authority sections capped at `ttl_cap` (so that the client asks again
// before what the filter learned expires), an OPT record the client did
// not ask for removed. Truncated to BuildTruncated when it exceeds
// `max_size`. Malformed when the OPT to remove is not the last record
// (rewriting would need re-encoding; no sane server does this), and when
// the rewritten bytes no longer read as the same records (a compression
// pointer into a rewritten field): the client must read what was checked.
absl::StatusOr<std::string> RewriteAnswer(absl::string_view upstream_wire,
                                          const Message& upstream,
                                          const Message& client_query,
                                          uint32_t ttl_cap, size_t max_size);

// The largest response the client accepts over UDP: 512 without EDNS, else
// its advertised size (at least 512).
size_t ClientUdpLimit(const Message& query);

// The EDE options in a parsed message, for tests and records.
std::vector<Ede> EdeOptions(const Message& message);

}  // namespace sandfence::dns

#endif  // SANDFENCE_DNS_MESSAGE_H_
