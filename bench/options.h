// Sizes and iteration counts of a bench run. The full run measures the
// issue's sizes and stays within about ten minutes on a 2-core machine; the
// smoke run exercises every code path with tiny sizes in seconds.
#ifndef SANDFENCE_BENCH_OPTIONS_H_
#define SANDFENCE_BENCH_OPTIONS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sandfence::bench {

struct BenchOptions {
  bool smoke = false;
  std::string worker;         // sandfence_bench_worker
  std::string work_dir;       // scratch files (nft scripts, records)
  std::string cgroup2_mount;  // e.g. /sys/fs/cgroup/unified
  std::string cgroup_root;    // this run's cgroup subtree (exists)

  // Connect cost: every (sandboxes, rules) pair, in `rounds` interleaved
  // rounds of (baseline, sandfence, nftables) workers, each timing
  // `batches` batches per operation.
  std::vector<size_t> connect_sandboxes;
  std::vector<size_t> connect_rules;
  int connect_rounds = 0;
  int connect_batches = 0;
  size_t udp_connect_batch = 0;
  size_t udp_send_batch = 0;
  size_t tcp_batch = 0;
  int bpf_stats_runs = 0;  // worker runs with run-time accounting on

  // Events: a ladder of offered rates (events/s, 0 = unpaced), each run
  // `event_reps` times for `event_ms`; then bisection steps between the
  // last rate without loss and the first with.
  std::vector<uint64_t> event_rates;
  int event_reps = 0;
  int event_ms = 0;
  int event_children = 0;
  int bisect_steps = 0;
  // Consumer capacity: the ring filled with the reader waiting, then
  // drained, `drain_reps` times per sink.
  int drain_reps = 0;
  // Loss curve: the reader stalls for `stall_ms` at each rate.
  std::vector<uint64_t> stall_rates;
  int stall_ms = 0;
  // Latency: denial -> user space at these rates, `latency_ms` each.
  std::vector<uint64_t> latency_rates;
  int latency_ms = 0;

  // Control plane.
  size_t control_sandboxes = 0;
  std::vector<size_t> switch_rules;
  std::vector<int> switch_reps;  // repetitions per size
  double micro_min_time_s = 0;   // Google Benchmark min time, per-event cost

  // DNS filter: at each rate (queries/s from 100 identities), for
  // `dns_phase_ms` per variant (direct, filter), in `dns_rounds` alternating
  // rounds.
  std::vector<int> dns_rates;
  bool dns_realtime = true;  // see dns_suite.cc
  int dns_phase_ms = 0;
  int dns_rounds = 0;
  // Lookups per round by a worker inside a sandbox (through the kernel's
  // redirect) and outside (straight to the upstream).
  int dns_sandbox_lookups = 0;

  // Guard cost outside guarded sandboxes: `guard_rounds` alternating rounds
  // of (no guard, guard attached) workers, each timing `guard_batches`
  // batches of `guard_batch` calls per system call.
  int guard_rounds = 0;
  int guard_batches = 0;
  size_t guard_batch = 0;

  // `sandfence run -- true` (issue 34): `run_warm_rounds` warm runs
  // alternating with bare `true`, `run_cold_rounds` cold ones, then
  // `run_soak` runs in a row and what they leave behind.
  std::string sandfence;  // the CLI
  int run_warm_rounds = 0;
  int run_cold_rounds = 0;
  int run_soak = 0;

  // The daemon under churn (issue 36): `soak_rollouts` rollouts started,
  // given traffic and ended, a tenth killed midway and a tenth losing
  // their cgroup, and what they leave behind.
  int soak_rollouts = 0;
};

BenchOptions FullOptions();
BenchOptions SmokeOptions();

// Set by SIGINT/SIGTERM: suites stop at the next boundary and clean up.
extern std::atomic<bool> g_interrupted;

}  // namespace sandfence::bench

#endif  // SANDFENCE_BENCH_OPTIONS_H_
