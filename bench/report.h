// The results of one bench run: rows of measurements, each against a
// baseline measured in the same run, the targets with where they
// stand, and notes (skipped variants and why). Printed as one table and
// written as JSON.
#ifndef SANDFENCE_BENCH_REPORT_H_
#define SANDFENCE_BENCH_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/stats.h"

namespace sandfence::bench {

struct Row {
  std::string suite;  // "connect", "events", "control"
  std::string name;   // "udp_connect", "switch_phase", ...
  std::vector<std::pair<std::string, int64_t>> params;  // rules=1000, ...
  std::string variant;  // "baseline", "sandfence", "nftables", ...
  std::string unit;     // "ns/op", "events/s", "us", "MiB", ...
  Summary stats;
  bool tail = false;  // p99 is meaningful (latencies)
  // What the ratio is against ("baseline", "pipe", ...), and its median in
  // the same unit. Empty: the row is itself a baseline or has none.
  std::string baseline;
  double baseline_median = 0;
  std::string note;

  std::optional<double> ratio() const;
  std::string ParamText() const;  // "rules=1000 sandboxes=10000"
};

struct Target {
  std::string goal;      // as the issue states it
  std::string measured;  // the numbers it was judged on
  std::string status;    // "met", "missed", "not measured"
  std::string detail;    // by how much, and why
};

class Report {
 public:
  void Add(Row row) { rows_.push_back(std::move(row)); }
  void Note(std::string note) { notes_.push_back(std::move(note)); }
  void AddTarget(Target t) { targets_.push_back(std::move(t)); }
  void SetMeta(std::string key, std::string value) {
    meta_.emplace_back(std::move(key), std::move(value));
  }

  const std::vector<Row>& rows() const { return rows_; }
  // The first row matching all non-empty fields and params, or nullptr.
  const Row* Find(
      absl::string_view suite, absl::string_view name,
      absl::string_view variant,
      const std::vector<std::pair<std::string, int64_t>>& params = {}) const;

  void PrintTable(std::FILE* out) const;
  absl::Status WriteJson(const std::string& path) const;

  // One line per row, for a child process to hand rows to its parent.
  static std::string Serialize(const Row& row);
  static absl::StatusOr<Row> Parse(absl::string_view line);

 private:
  std::vector<std::pair<std::string, std::string>> meta_;
  std::vector<Row> rows_;
  std::vector<Target> targets_;
  std::vector<std::string> notes_;
};

// "1.23 µs"-style compact numbers for the table: 3 significant digits.
std::string Compact(double v);

}  // namespace sandfence::bench

#endif  // SANDFENCE_BENCH_REPORT_H_
