// The benchmark suites (issue 7; dns: issue 14) and their targets.
#ifndef SANDFENCE_BENCH_SUITES_H_
#define SANDFENCE_BENCH_SUITES_H_

#include "absl/status/status.h"
#include "bench/options.h"
#include "bench/report.h"

namespace sandfence::bench {

// UDP connect(), UDP sendto() and TCP connect+accept to loopback from a
// process in no sandbox, in a sandfence sandbox, and under the same
// allowlist in nftables; plus the kernel's own run time of each program.
absl::Status RunConnectSuite(const BenchOptions& options, Report* report);

// Denials from child processes at controlled rates through the ring buffer
// to user space (and into rollout records when the records module is
// built): the loss curve, the highest rate without loss, and the latency
// from a denial to its arrival.
absl::Status RunEventsSuite(const BenchOptions& options, Report* report);

// Phase switch latency, sandbox registration rate, controller and map
// memory with many sandboxes, and the user-space cost of one event. Runs in
// a process of its own (bench_main's --control-child) so that its memory
// figures are the controller's, not the other suites'.
absl::Status RunControlSuite(const BenchOptions& options, Report* report);

// The DNS filter's added latency (issue 14): queries at a paced rate from
// 100 sandbox identities through the filter, against the same queries sent
// straight to the same upstream, in alternating rounds.
absl::Status RunDnsSuite(const BenchOptions& options, Report* report);

// StartRollout of a 40,000-rule policy through RolloutManager (issue 12,
// item 9), against a 10-rule start, with its stages timed apart.
absl::Status RunStartSuite(const BenchOptions& options, Report* report);

// What the process guard costs a process outside every guarded sandbox
// (issue 13): system calls with no guard loaded against the same calls with
// the host's guard attached, and the kernel's run time per guard program.
absl::Status RunGuardSuite(const BenchOptions& options, Report* report);

// `sandfence run -- true` warm and cold against bare `true` (issue 34), and
// what many runs in a row leave behind.
absl::Status RunRunSuite(const BenchOptions& options, Report* report);

// A day of churn against a real daemon (issue 36): rollouts started, given
// traffic and ended, some killed midway, some losing their cgroup, and
// what the daemon keeps afterwards against a baseline.
absl::Status RunSoakSuite(const BenchOptions& options, Report* report);

// Judges the targets from the rows.
void EvaluateTargets(const BenchOptions& options, Report* report);

}  // namespace sandfence::bench

#endif  // SANDFENCE_BENCH_SUITES_H_
