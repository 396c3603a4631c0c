// Host and URL normalization (compile/endpoint.h) and the address parsers
// under it (common/ip.h): every accepted input normalizes to a fixed point
// (normalizing the result again gives the same value), names come out in
// the characters a DNS name may have, and every refusal is Malformed.
// Seeds: the hosts and URLs of tests/compile/endpoint_test.cc.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/ip.h"
#include "common/status.h"
#include "compile/endpoint.h"
#include "fuzz_support.h"

namespace sandfence {
namespace {

using fuzz::Check;

void CheckMalformed(const absl::Status& s) {
  Check(RefusalOf(s) == Refusal::kMalformed, s.ToString());
}

void CheckName(const std::string& name, absl::string_view input) {
  Check(!name.empty() && name.size() <= 253,
        absl::StrCat("bad length of name \"", name, "\" from ", input));
  for (char c : name) {
    Check((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || c == '.',
          absl::StrCat("name \"", name, "\" from \"", input,
                       "\" has a character a DNS name may not have"));
  }
}

void FuzzHost(absl::string_view text, HostForm form) {
  absl::StatusOr<Host> host = NormalizeHost(text, form);
  if (!host.ok()) return CheckMalformed(host.status());
  if (host->is_name()) CheckName(host->name, text);
  if (form == HostForm::kAddressOrName) {
    Check(host->is_name() || host->prefix.is_host(),
          absl::StrCat("a URL host \"", text, "\" became a block"));
  }
  Check(host->is_name() || !host->prefix.address().IsV4Mapped(),
        absl::StrCat("host \"", text, "\" kept its IPv4-mapped form"));
  absl::StatusOr<Host> again = NormalizeHost(host->ToString(), form);
  Check(
      again.ok() && *again == *host,
      absl::StrCat("host \"", text, "\" normalized to \"", host->ToString(),
                   "\", which does not normalize to itself: ",
                   again.ok() ? again->ToString() : again.status().ToString()));
}

void FuzzUrl(absl::string_view text) {
  absl::StatusOr<Endpoint> ep = ParseEndpointUrl(text);
  if (!ep.ok()) return CheckMalformed(ep.status());
  Check(ep->port != 0, absl::StrCat("URL \"", text, "\" has port 0"));
  Check(ep->scheme == "http" || ep->scheme == "https",
        absl::StrCat("URL \"", text, "\" has scheme ", ep->scheme));
  const std::string canonical =
      absl::StrCat(ep->scheme, "://", ep->HostPortString(), "/");
  absl::StatusOr<Endpoint> again = ParseEndpointUrl(canonical);
  Check(again.ok() && *again == *ep,
        absl::StrCat("URL \"", text, "\" gives ", canonical,
                     ", which does not parse to the same endpoint"));
}

void FuzzAddresses(absl::string_view text) {
  if (std::optional<IpAddress> a = IpAddress::Parse(text)) {
    std::optional<IpAddress> again = IpAddress::Parse(a->ToString());
    Check(again && *again == *a,
          absl::StrCat("address \"", text, "\" does not round-trip"));
  }
  if (absl::StatusOr<IpPrefix> p = IpPrefix::Parse(text); p.ok()) {
    absl::StatusOr<IpPrefix> again = IpPrefix::Parse(p->ToString());
    Check(again.ok() && *again == *p,
          absl::StrCat("prefix \"", text, "\" does not round-trip"));
  } else {
    CheckMalformed(p.status());
  }
  if (absl::StatusOr<HostPort> hp = HostPort::Parse(text, 53); hp.ok()) {
    Check(hp->port != 0, absl::StrCat("\"", text, "\" has port 0"));
    absl::StatusOr<HostPort> again = HostPort::Parse(hp->ToString(), 1);
    Check(again.ok() && *again == *hp,
          absl::StrCat("host:port \"", text, "\" does not round-trip"));
  } else {
    CheckMalformed(hp.status());
  }
}

}  // namespace
}  // namespace sandfence

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  sandfence::FuzzHost(text, sandfence::HostForm::kAddressOrName);
  sandfence::FuzzHost(text, sandfence::HostForm::kAddressNameOrPrefix);
  if (absl::StatusOr<std::string> name = sandfence::NormalizeHostName(text);
      name.ok()) {
    sandfence::CheckName(*name, text);
  }
  sandfence::FuzzUrl(text);
  sandfence::FuzzAddresses(text);
  return 0;
}
