#include "host/build_id.h"

#include "absl/strings/str_cat.h"
#include "bpf_build_id.h"  // generated: SF_BPF_OBJECTS_ID
#include "host/host_abi.h"

namespace sandfence {

const std::string& BpfBuildId() {
  static const std::string id =
      absl::StrCat(SF_BPF_OBJECTS_ID, "-abi", SF_ABI_VERSION);
  return id;
}

}  // namespace sandfence
