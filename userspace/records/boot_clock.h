// Kernel events are stamped with CLOCK_BOOTTIME (bpf_ktime_get_boot_ns);
// records are read by people in wall-clock time. The offset between the two
// is captured once, so that every time in a record comes from one clock:
// a wall-clock step (NTP, an operator) during a rollout moves nothing.
#ifndef SANDFENCE_RECORDS_BOOT_CLOCK_H_
#define SANDFENCE_RECORDS_BOOT_CLOCK_H_

#include <cstdint>
#include <functional>

#include "google/protobuf/timestamp.pb.h"

namespace sandfence {

class BootClock {
 public:
  // Reads CLOCK_REALTIME - CLOCK_BOOTTIME now (the tightest of a few
  // samples) and reads CLOCK_BOOTTIME for Now().
  static BootClock Capture();

  // A fixed offset and, optionally, a fake "now" (tests, golden files).
  BootClock(int64_t realtime_minus_boot_ns,
            std::function<uint64_t()> now_boot_ns = nullptr)
      : offset_ns_(realtime_minus_boot_ns), now_(std::move(now_boot_ns)) {}

  // CLOCK_BOOTTIME now, in nanoseconds.
  uint64_t NowBootNs() const;
  // Nanoseconds since the Unix epoch for a CLOCK_BOOTTIME reading.
  int64_t ToUnixNs(uint64_t boot_ns) const {
    return static_cast<int64_t>(boot_ns) + offset_ns_;
  }
  google::protobuf::Timestamp ToTimestamp(uint64_t boot_ns) const;

  int64_t offset_ns() const { return offset_ns_; }

 private:
  int64_t offset_ns_ = 0;
  std::function<uint64_t()> now_;
};

google::protobuf::Timestamp UnixNsToTimestamp(int64_t unix_ns);
int64_t TimestampToUnixNs(const google::protobuf::Timestamp& t);

}  // namespace sandfence

#endif  // SANDFENCE_RECORDS_BOOT_CLOCK_H_
