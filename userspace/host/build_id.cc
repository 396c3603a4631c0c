#include "host/build_id.h"

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "host/host_abi.h"
#include "sf_egress.skel.h"
#include "sf_egress_cut.skel.h"
#include "sf_egress_unix.skel.h"
#include "sf_egress_unix_lsm.skel.h"
#include "sf_guard_lsm.skel.h"
#include "sf_guard_sig.skel.h"

namespace sandfence {
namespace {

template <typename Skel>
absl::string_view Bytes() {
  size_t size = 0;
  const void* data = Skel::elf_bytes(&size);
  return absl::string_view(static_cast<const char*>(data), size);
}

}  // namespace

const std::string& BpfBuildId() {
  static const std::string id =
      Sha256Hex(absl::StrCat("abi ", SF_ABI_VERSION, "\n", Bytes<sf_egress>(),
                             Bytes<sf_egress_unix>(),
                             Bytes<sf_egress_unix_lsm>(),
                             Bytes<sf_egress_cut>(), Bytes<sf_guard_lsm>(),
                             Bytes<sf_guard_sig>()))
          .substr(0, 16);
  return id;
}

}  // namespace sandfence
