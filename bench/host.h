// What the benchmarks need from the host: a private network namespace, file
// descriptor headroom, a cgroup subtree of their own, the kernel's
// per-program run statistics, and memory figures. Every change to the host
// is owned by an object that undoes it.
#ifndef SANDFENCE_BENCH_HOST_H_
#define SANDFENCE_BENCH_HOST_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace sandfence::bench {

// Moves the (still single-threaded) process into a network namespace of its
// own with loopback up: the benchmark's traffic, listeners and nftables
// tables can then touch nothing of the host's, and vanish with the process.
absl::Status EnterPrivateNetns();

// Raises RLIMIT_NOFILE to n (the controller holds one link fd per hook per
// sandbox), or, where the hard limit cannot be raised, the soft limit to the
// hard one (bench/fillers.h says what happens then).
absl::Status RaiseFdLimit(uint64_t n);

// CLOCK_BOOTTIME (the clock of event boot_ns) and CLOCK_MONOTONIC, in ns.
uint64_t BootNs();
uint64_t MonoNs();

// Enables the kernel's per-program run-time accounting
// (kernel.bpf_stats_enabled) for the object's lifetime. It uses
// BPF_ENABLE_STATS, whose effect ends when its fd is closed (also if the
// process dies); where that is refused it writes the sysctl and restores the
// previous value on destruction.
class BpfStatsEnabled {
 public:
  static absl::StatusOr<BpfStatsEnabled> Enable();
  BpfStatsEnabled(BpfStatsEnabled&& o) noexcept
      : fd_(std::move(o.fd_)), restore_(std::exchange(o.restore_, "")) {}
  BpfStatsEnabled& operator=(BpfStatsEnabled&&) = delete;
  ~BpfStatsEnabled();

 private:
  BpfStatsEnabled() = default;
  UniqueFd fd_;
  std::string restore_;  // the sysctl's value before, when we wrote it
};

struct ProgRunStats {
  uint64_t run_time_ns = 0;
  uint64_t run_cnt = 0;
};
// BPF_OBJ_GET_INFO_BY_FD on a program fd.
absl::StatusOr<ProgRunStats> ReadProgRunStats(int prog_fd);

// VmRSS and VmHWM of this process, in bytes.
struct ProcessMemory {
  uint64_t rss = 0;
  uint64_t hwm = 0;
};
absl::StatusOr<ProcessMemory> ReadProcessMemory();

// The BPF maps this process holds open, with the kernel's own account of
// their memory (fdinfo "memlock", which since 6.4 is the map's actual
// usage, not its worst case).
struct MapMemory {
  std::string name;
  uint32_t type = 0;
  uint32_t max_entries = 0;
  uint64_t memlock = 0;
};
absl::StatusOr<std::vector<MapMemory>> ReadMapMemory();

// A TCP listener and a UDP sink on 127.0.0.2 (kAllowedDst), owned by the
// bench (outside every sandbox) and passed to measuring workers by fd.
struct Listeners {
  UniqueFd tcp;
  UniqueFd udp;
  uint16_t tcp_port = 0;
  uint16_t udp_port = 0;
};
absl::StatusOr<Listeners> ListenLoopback();

// The time a thread of this process has spent on a CPU (schedstat), in ns;
// 0 if it cannot be read.
uint64_t ThreadCpuNs(pid_t tid);
// This process's thread ids.
std::vector<pid_t> ThreadIds();

// Runs argv (looked up in PATH) to completion; its stderr is returned in
// the error when it fails.
absl::Status RunCommand(const std::vector<std::string>& argv);

// "Linux 6.1.0 x86_64", the CPU model and count, for the report.
std::string KernelRelease();
std::string CpuModel();
int CpuCount();
// The first three fields of /proc/loadavg.
std::string LoadAverage();

}  // namespace sandfence::bench

#endif  // SANDFENCE_BENCH_HOST_H_
