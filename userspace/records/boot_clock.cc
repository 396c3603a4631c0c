#include "records/boot_clock.h"

#include <time.h>

#include <limits>

namespace sandfence {
namespace {

int64_t Read(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

BootClock BootClock::Capture() {
  // Two boot-clock reads around one real-time read bound the error by the
  // gap between them; the narrowest of a few samples wins.
  int64_t best_gap = std::numeric_limits<int64_t>::max();
  int64_t offset = 0;
  for (int i = 0; i < 5; ++i) {
    const int64_t before = Read(CLOCK_BOOTTIME);
    const int64_t real = Read(CLOCK_REALTIME);
    const int64_t after = Read(CLOCK_BOOTTIME);
    if (after - before < best_gap) {
      best_gap = after - before;
      offset = real - (before + (after - before) / 2);
    }
  }
  return BootClock(offset);
}

uint64_t BootClock::NowBootNs() const {
  if (now_) return now_();
  return static_cast<uint64_t>(Read(CLOCK_BOOTTIME));
}

google::protobuf::Timestamp BootClock::ToTimestamp(uint64_t boot_ns) const {
  return UnixNsToTimestamp(ToUnixNs(boot_ns));
}

google::protobuf::Timestamp UnixNsToTimestamp(int64_t unix_ns) {
  google::protobuf::Timestamp t;
  int64_t seconds = unix_ns / 1000000000;
  int64_t nanos = unix_ns % 1000000000;
  if (nanos < 0) {
    nanos += 1000000000;
    --seconds;
  }
  t.set_seconds(seconds);
  t.set_nanos(static_cast<int32_t>(nanos));
  return t;
}

int64_t TimestampToUnixNs(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1000000000 + t.nanos();
}

}  // namespace sandfence
