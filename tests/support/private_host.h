// A private HostState (nothing pinned or shared with other sandfence
// processes) for the controllers a test creates directly; one per test
// process.
#ifndef SANDFENCE_TESTS_SUPPORT_PRIVATE_HOST_H_
#define SANDFENCE_TESTS_SUPPORT_PRIVATE_HOST_H_

#include <memory>

#include "host/host_state.h"

namespace sandfence::testing {

inline HostState* PrivateHost() {
  static HostState* host = [] {
    absl::StatusOr<std::unique_ptr<HostState>> h = HostState::Open({});
    return h.ok() ? h->release() : nullptr;
  }();
  return host;
}

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_SUPPORT_PRIVATE_HOST_H_
