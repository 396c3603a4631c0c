#include "guard/guard_record.h"

#include <time.h>

#include <cstring>
#include <string>

namespace sandfence {
namespace {

int64_t ReadNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void FillProcess(const sf_guard_task& task, v1::ProcessRef* out) {
  out->set_pid(task.pid);
  out->set_tgid(task.tgid);
  out->set_uid(task.uid);
  out->set_command(std::string(task.comm, strnlen(task.comm, sizeof(task.comm))));
}

}  // namespace

int64_t MonotonicToUnixOffsetNs() {
  // The tightest of a few samples: the pair brackets the smallest gap.
  int64_t best = 0, best_gap = INT64_MAX;
  for (int i = 0; i < 5; ++i) {
    int64_t m1 = ReadNs(CLOCK_MONOTONIC);
    int64_t r = ReadNs(CLOCK_REALTIME);
    int64_t m2 = ReadNs(CLOCK_MONOTONIC);
    if (m2 - m1 < best_gap) {
      best_gap = m2 - m1;
      best = r - (m1 + (m2 - m1) / 2);
    }
  }
  return best;
}

v1::GuardEntry GuardEntryFromEvent(const sf_guard_event& e,
                                   int64_t monotonic_to_unix_ns) {
  v1::GuardEntry out;
  const int64_t unix_ns = static_cast<int64_t>(e.ts_ns) + monotonic_to_unix_ns;
  out.mutable_time()->set_seconds(unix_ns / 1000000000);
  out.mutable_time()->set_nanos(static_cast<int32_t>(unix_ns % 1000000000));
  out.set_action(std::string(GuardActionName(e.action)));
  out.set_what(std::string(GuardWhatName(e.what)));
  FillProcess(e.actor, out.mutable_actor());
  if (e.target.tgid != 0) FillProcess(e.target, out.mutable_target());
  out.set_detail(std::string(e.name, strnlen(e.name, sizeof(e.name))));
  return out;
}

GuardMode GuardModeFromPolicy(v1::Guard::Mode mode) {
  switch (mode) {
    case v1::Guard::LSM:
      return GuardMode::kLsm;
    case v1::Guard::SIGNAL:
      return GuardMode::kSignal;
    case v1::Guard::OFF:
      return GuardMode::kOff;
    case v1::Guard::LANDLOCK:
      return GuardMode::kLandlock;
    default:
      return GuardMode::kAuto;
  }
}

}  // namespace sandfence
