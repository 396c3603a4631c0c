// Guard events as the rollout record keeps them.
#ifndef SANDFENCE_GUARD_GUARD_RECORD_H_
#define SANDFENCE_GUARD_GUARD_RECORD_H_

#include <cstdint>

#include "guard/guard_abi.h"
#include "guard/guard_types.h"
#include "sandfence/v1/policy.pb.h"
#include "sandfence/v1/record.pb.h"

namespace sandfence {

// Guard events are stamped with CLOCK_MONOTONIC; this is the offset to the
// Unix epoch, captured once per rollout.
int64_t MonotonicToUnixOffsetNs();

v1::GuardEntry GuardEntryFromEvent(const sf_guard_event& event,
                                   int64_t monotonic_to_unix_ns);

// The policy's guard block as a mode (unset means auto).
GuardMode GuardModeFromPolicy(v1::Guard::Mode mode);

}  // namespace sandfence

#endif  // SANDFENCE_GUARD_GUARD_RECORD_H_
