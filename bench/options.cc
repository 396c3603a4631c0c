#include "bench/options.h"

namespace sandfence::bench {

std::atomic<bool> g_interrupted{false};

BenchOptions FullOptions() {
  BenchOptions o;
  o.connect_sandboxes = {1, 1000, 10000};
  o.connect_rules = {10, 1000, 100000};
  // Short batches (a few hundred microseconds): on a shared machine a
  // preemption spoils one batch, which the median then ignores.
  o.connect_rounds = 10;
  o.connect_batches = 60;
  o.udp_connect_batch = 250;
  o.udp_send_batch = 100;
  o.tcp_batch = 10;
  o.bpf_stats_runs = 3;

  o.event_rates = {25000, 50000, 100000, 200000, 400000, 800000, 0};
  o.event_reps = 3;
  o.event_ms = 1000;
  o.event_children = 2;
  o.bisect_steps = 3;
  o.drain_reps = 10;
  o.stall_rates = {50000, 100000, 150000, 200000, 300000, 0};
  o.stall_ms = 400;
  o.latency_rates = {1000, 100000};
  o.latency_ms = 2000;

  o.control_sandboxes = 10000;
  o.switch_rules = {10, 1000, 100000};
  o.switch_reps = {1000, 200, 10};
  o.micro_min_time_s = 0.3;

  // A ladder up to the load (10,000/s).
  o.dns_rates = {1000, 3000, 10000};
  o.dns_phase_ms = 1500;
  o.dns_rounds = 4;
  o.dns_sandbox_lookups = 500;

  // Batches of 0.1-2 ms, like connect's.
  o.guard_rounds = 10;
  o.guard_batches = 40;
  o.guard_batch = 1000;

  // The 1,000 runs in a row: about two minutes here.
  o.run_warm_rounds = 30;
  o.run_cold_rounds = 3;
  o.run_soak = 1000;
  // The day of churn: about ten minutes here.
  o.soak_rollouts = 10000;
  return o;
}

BenchOptions SmokeOptions() {
  BenchOptions o;
  o.smoke = true;
  o.connect_sandboxes = {1, 10};
  o.connect_rules = {10, 100};
  o.connect_rounds = 2;
  o.connect_batches = 3;
  o.udp_connect_batch = 200;
  o.udp_send_batch = 50;
  o.tcp_batch = 10;
  o.bpf_stats_runs = 1;

  o.event_rates = {10000, 0};
  o.event_reps = 1;
  o.event_ms = 150;
  o.event_children = 2;
  o.bisect_steps = 1;
  o.drain_reps = 2;
  o.stall_rates = {100000, 0};
  o.stall_ms = 100;
  o.latency_rates = {1000};
  o.latency_ms = 200;

  o.control_sandboxes = 20;
  o.switch_rules = {10, 100};
  o.switch_reps = {20, 5};
  o.micro_min_time_s = 0.01;

  o.dns_rates = {2000};
  o.dns_phase_ms = 200;
  o.dns_rounds = 1;
  o.dns_sandbox_lookups = 20;

  o.guard_rounds = 2;
  o.guard_batches = 3;
  o.guard_batch = 100;

  o.run_warm_rounds = 2;
  o.run_cold_rounds = 1;
  o.run_soak = 3;
  // Enough for every ending several times, reclaims waited for included.
  o.soak_rollouts = 40;
  return o;
}

}  // namespace sandfence::bench
