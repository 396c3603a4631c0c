#include "bench/report.h"

#include <cerrno>
#include <cmath>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "common/status.h"

namespace sandfence::bench {
namespace {


std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

// Fields of a serialized row may not hold tabs or newlines.
std::string Clean(absl::string_view s) {
  return absl::StrReplaceAll(s, {{"\t", " "}, {"\n", " "}});
}

}  // namespace

std::optional<double> Row::ratio() const {
  if (baseline.empty() || baseline_median <= 0) return std::nullopt;
  return stats.median / baseline_median;
}

std::string Row::ParamText() const {
  return absl::StrJoin(params, " ", [](std::string* out, const auto& p) {
    absl::StrAppend(out, p.first, "=", p.second);
  });
}

std::string Compact(double v) {
  if (!std::isfinite(v)) return "-";
  double a = std::fabs(v);
  if (a >= 1e9) return absl::StrFormat("%.3gG", v / 1e9);
  if (a >= 1e6) return absl::StrFormat("%.3gM", v / 1e6);
  if (a >= 1e4) return absl::StrFormat("%.3gk", v / 1e3);
  if (a >= 100) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.3g", v);
}

const Row* Report::Find(
    absl::string_view suite, absl::string_view name, absl::string_view variant,
    const std::vector<std::pair<std::string, int64_t>>& params) const {
  for (const Row& r : rows_) {
    if (!suite.empty() && r.suite != suite) continue;
    if (!name.empty() && r.name != name) continue;
    if (!variant.empty() && r.variant != variant) continue;
    bool all = true;
    for (const auto& p : params) {
      bool found = false;
      for (const auto& q : r.params) found |= (q == p);
      all &= found;
    }
    if (all) return &r;
  }
  return nullptr;
}

void Report::PrintTable(std::FILE* out) const {
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"suite", "benchmark", "params", "variant", "unit", "n",
                   "median", "min", "max", "p99", "ratio", "vs"});
  for (const Row& r : rows_) {
    std::optional<double> ratio = r.ratio();
    cells.push_back({r.suite, r.name, r.ParamText(), r.variant, r.unit,
                     absl::StrCat(r.stats.n), Compact(r.stats.median),
                     Compact(r.stats.min), Compact(r.stats.max),
                     r.tail ? Compact(r.stats.p99) : "",
                     ratio ? absl::StrFormat("%.3f", *ratio) : "", r.baseline});
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& row : cells) {
    for (size_t i = 0; i < row.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  }
  // Text columns left-aligned, numbers right-aligned.
  auto numeric = [](size_t i) { return i >= 5 && i <= 10; };
  for (size_t k = 0; k < cells.size(); ++k) {
    std::string line;
    for (size_t i = 0; i < cells[k].size(); ++i) {
      const std::string& c = cells[k][i];
      std::string pad(width[i] - c.size(), ' ');
      absl::StrAppend(&line, i ? "  " : "", numeric(i) ? pad + c : c + pad);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::fprintf(out, "%s\n", line.c_str());
    if (k == 0)
      std::fprintf(out, "%s\n", std::string(line.size(), '-').c_str());
  }
  for (const Row& r : rows_) {
    if (!r.note.empty()) {
      std::fprintf(out, "  * %s %s %s [%s]: %s\n", r.suite.c_str(),
                   r.name.c_str(), r.variant.c_str(), r.ParamText().c_str(),
                   r.note.c_str());
    }
  }
  if (!notes_.empty()) std::fprintf(out, "\nnotes:\n");
  for (const std::string& n : notes_) std::fprintf(out, "  - %s\n", n.c_str());
  if (!targets_.empty()) std::fprintf(out, "\ntargets:\n");
  for (const Target& t : targets_) {
    std::fprintf(out, "  [%s] %s\n         measured: %s\n", t.status.c_str(),
                 t.goal.c_str(), t.measured.c_str());
    if (!t.detail.empty()) {
      std::fprintf(out, "         %s\n", t.detail.c_str());
    }
  }
}

absl::Status Report::WriteJson(const std::string& path) const {
  std::string j = "{\n  \"meta\": {";
  for (size_t i = 0; i < meta_.size(); ++i) {
    absl::StrAppend(&j, i ? "," : "", "\n    ", JsonQuote(meta_[i].first),
                    ": ", JsonQuote(meta_[i].second));
  }
  j += "\n  },\n  \"results\": [";
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    std::string params =
        absl::StrJoin(r.params, ", ", [](std::string* out, const auto& p) {
          absl::StrAppend(out, JsonQuote(p.first), ": ", p.second);
        });
    std::optional<double> ratio = r.ratio();
    absl::StrAppend(&j, i ? "," : "", "\n    {\"suite\": ", JsonQuote(r.suite),
                    ", \"name\": ", JsonQuote(r.name), ", \"params\": {",
                    params, "}, \"variant\": ", JsonQuote(r.variant),
                    ", \"unit\": ", JsonQuote(r.unit), ", \"n\": ", r.stats.n,
                    ", \"median\": ", JsonNumber(r.stats.median),
                    ", \"min\": ", JsonNumber(r.stats.min),
                    ", \"max\": ", JsonNumber(r.stats.max),
                    ", \"p99\": ", r.tail ? JsonNumber(r.stats.p99) : "null",
                    ", \"baseline\": ",
                    r.baseline.empty() ? "null" : JsonQuote(r.baseline),
                    ", \"baseline_median\": ",
                    r.baseline.empty() ? "null" : JsonNumber(r.baseline_median),
                    ", \"ratio\": ", ratio ? JsonNumber(*ratio) : "null",
                    ", \"note\": ", JsonQuote(r.note), "}");
  }
  j += "\n  ],\n  \"targets\": [";
  for (size_t i = 0; i < targets_.size(); ++i) {
    const Target& t = targets_[i];
    absl::StrAppend(&j, i ? "," : "", "\n    {\"goal\": ", JsonQuote(t.goal),
                    ", \"status\": ", JsonQuote(t.status),
                    ", \"measured\": ", JsonQuote(t.measured),
                    ", \"detail\": ", JsonQuote(t.detail), "}");
  }
  j += "\n  ],\n  \"notes\": [";
  for (size_t i = 0; i < notes_.size(); ++i) {
    absl::StrAppend(&j, i ? "," : "", "\n    ", JsonQuote(notes_[i]));
  }
  j += "\n  ]\n}\n";

  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return ErrnoError(errno, absl::StrCat("open ", tmp));
    f << j;
    if (!f.flush()) return ErrnoError(errno, absl::StrCat("write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

std::string Report::Serialize(const Row& r) {
  std::string params =
      absl::StrJoin(r.params, ",", [](std::string* out, const auto& p) {
        absl::StrAppend(out, p.first, "=", p.second);
      });
  return absl::StrJoin(
      {std::string("ROW"), Clean(r.suite), Clean(r.name), params,
       Clean(r.variant), Clean(r.unit), absl::StrCat(r.stats.n),
       absl::StrFormat("%.17g", r.stats.median),
       absl::StrFormat("%.17g", r.stats.min),
       absl::StrFormat("%.17g", r.stats.max),
       absl::StrFormat("%.17g", r.stats.p99),
       absl::StrFormat("%.17g", r.stats.mean), std::string(r.tail ? "1" : "0"),
       Clean(r.baseline), absl::StrFormat("%.17g", r.baseline_median),
       Clean(r.note)},
      "\t");
}

absl::StatusOr<Row> Report::Parse(absl::string_view line) {
  std::vector<std::string> f = absl::StrSplit(line, '\t');
  if (f.size() != 16 || f[0] != "ROW") {
    return absl::InvalidArgumentError(absl::StrCat("not a row: ", line));
  }
  Row r;
  r.suite = f[1];
  r.name = f[2];
  for (absl::string_view kv : absl::StrSplit(f[3], ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, '=');
    int64_t v = 0;
    if (!absl::SimpleAtoi(p.second, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("bad param: ", kv));
    }
    r.params.emplace_back(p.first, v);
  }
  r.variant = f[4];
  r.unit = f[5];
  bool ok = absl::SimpleAtoi(f[6], &r.stats.n) &&
            absl::SimpleAtod(f[7], &r.stats.median) &&
            absl::SimpleAtod(f[8], &r.stats.min) &&
            absl::SimpleAtod(f[9], &r.stats.max) &&
            absl::SimpleAtod(f[10], &r.stats.p99) &&
            absl::SimpleAtod(f[11], &r.stats.mean) &&
            absl::SimpleAtod(f[14], &r.baseline_median);
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad row: ", line));
  r.tail = f[12] == "1";
  r.baseline = f[13];
  r.note = f[15];
  return r;
}

}  // namespace sandfence::bench
