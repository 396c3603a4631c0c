// A plain-text table for the records' reports: columns aligned with two
// spaces, numbers right-aligned, trailing spaces trimmed.
#ifndef SANDFENCE_RECORDS_TEXT_TABLE_H_
#define SANDFENCE_RECORDS_TEXT_TABLE_H_

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace sandfence {

class TextTable {
 public:
  // `right`: which columns are right-aligned (missing ones are not).
  explicit TextTable(std::vector<std::string> header,
                     std::vector<bool> right = {})
      : right_(std::move(right)) {
    right_.resize(header.size(), false);
    rows_.push_back(std::move(header));
  }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  std::string Render(absl::string_view indent) const {
    std::vector<size_t> width(right_.size(), 0);
    for (const auto& row : rows_) {
      for (size_t i = 0; i < row.size(); ++i) {
        width[i] = std::max(width[i], row[i].size());
      }
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line(indent);
      for (size_t i = 0; i < row.size(); ++i) {
        if (i > 0) line += "  ";
        const size_t pad = width[i] - row[i].size();
        if (right_[i]) line.append(pad, ' ');
        line += row[i];
        if (!right_[i]) line.append(pad, ' ');
      }
      line.erase(line.find_last_not_of(' ') + 1);
      absl::StrAppend(&out, line, "\n");
    }
    return out;
  }

 private:
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace sandfence

#endif  // SANDFENCE_RECORDS_TEXT_TABLE_H_
