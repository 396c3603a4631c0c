// libFuzzer target for the DNS filter's message parser (userspace/dns/
// message.h), the code that reads every packet a sandbox sends and every
// answer an upstream returns. Beyond "no crash, no sanitizer report", it
// checks the parser's promises on whatever parses:
//  - the filter's own responses to it parse back, with its id and question;
//  - an upstream query built from it parses back with the same question;
//  - rewriting it as an answer for itself yields a message that parses;
//  - following its CNAME chain stays within the bound.
// Seeds: fuzz/corpus/dns_message/.
#include <cstddef>
#include <cstdint>
#include <string>

#include "dns/answer.h"
#include "dns/message.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sandfence::dns;
  const std::string wire(reinterpret_cast<const char*>(data), size);
  if (std::optional<std::string> formerr = BuildFormErr(wire)) {
    absl::StatusOr<Message> f = ParseMessage(*formerr);
    Check(f.ok() && f->rcode() == 1);
  }
  absl::StatusOr<Message> m = ParseMessage(wire);
  if (!m.ok()) return 0;
  for (const Question& q : m->questions) {
    Check(q.name_wire.size() <= kMaxNameWire);
    (void)NameText(q.name_wire);
  }
  const std::optional<QueryProblem> problem = CheckQuery(*m);
  const std::string response = BuildResponse(
      *m, Rcode::kNxDomain, Ede{EdeCode::kBlocked, "blocked by policy"});
  absl::StatusOr<Message> r = ParseMessage(response);
  Check(r.ok());
  Check(r->header.id == m->header.id && r->rcode() == 3);
  Check(r->questions.size() == (m->questions.empty() ? 0u : 1u));
  Check(r->edns.has_value() == m->edns.has_value());
  if (!m->questions.empty()) {
    Check(r->questions[0].name_wire == m->questions[0].name_wire);
    ChainAddresses chain = FollowChain(*m, m->questions[0].name);
    Check(chain.chain.size() <= kMaxCnameChain);
  }
  (void)BuildTruncated(*m);
  if (!problem) {
    absl::StatusOr<Message> u = ParseMessage(BuildUpstreamQuery(*m, 0x1234));
    Check(u.ok() && u->questions.size() == 1 &&
          u->questions[0].name == m->questions[0].name);
    absl::StatusOr<std::string> rewritten =
        RewriteAnswer(wire, *m, *m, 300, ClientUdpLimit(*m));
    if (rewritten.ok()) Check(ParseMessage(*rewritten).ok());
  }
  (void)EdeOptions(*m);
  return 0;
}
