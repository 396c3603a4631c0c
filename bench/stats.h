// Order statistics of measured samples. Benchmarks report medians with
// their minimum and maximum (and tail percentiles where the question is a
// latency), never means alone: a few scheduler hiccups on a shared 2-core
// machine would move a mean and say nothing about the typical cost.
#ifndef SANDFENCE_BENCH_STATS_H_
#define SANDFENCE_BENCH_STATS_H_

#include <cstddef>
#include <vector>

namespace sandfence::bench {

struct Summary {
  size_t n = 0;
  double median = 0;
  double min = 0;
  double max = 0;
  double p99 = 0;
  double mean = 0;
};

// Nearest-rank percentile (q in [0, 1]) of sorted samples; 0 when empty.
double Percentile(const std::vector<double>& sorted, double q);

// Summarizes samples (in any order).
Summary Summarize(std::vector<double> samples);

}  // namespace sandfence::bench

#endif  // SANDFENCE_BENCH_STATS_H_
