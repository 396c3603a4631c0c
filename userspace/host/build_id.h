// The identity of the BPF this binary embeds: a hash of every object its
// skeletons carry (taken by the build: cmake/bpf_build_id.cmake) and the
// pinned layout's ABI version. Two binaries with the same id load the same
// programs and read the same maps the same way, so they share one pinned
// set (pin_layout.h); any other pair never does.
#ifndef SANDFENCE_HOST_BUILD_ID_H_
#define SANDFENCE_HOST_BUILD_ID_H_

#include <string>

namespace sandfence {

// 16 lower-case hex digits, "-abi", SF_ABI_VERSION.
const std::string& BpfBuildId();

}  // namespace sandfence

#endif  // SANDFENCE_HOST_BUILD_ID_H_
