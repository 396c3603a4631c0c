#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sandfence::bench {

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  // Nearest rank: the smallest sample with at least q of all at or below it.
  size_t rank = static_cast<size_t>(std::ceil(q * sorted.size()));
  if (rank == 0) rank = 1;
  return sorted[std::min(rank, sorted.size()) - 1];
}

Summary Summarize(std::vector<double> samples) {
  Summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.n = samples.size();
  s.min = samples.front();
  s.max = samples.back();
  const size_t mid = s.n / 2;
  s.median = s.n % 2 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2;
  s.p99 = Percentile(samples, 0.99);
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / s.n;
  return s;
}

}  // namespace sandfence::bench
