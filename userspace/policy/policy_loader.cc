#include "policy/policy_loader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace sandfence {
namespace {

namespace pb = google::protobuf;

constexpr size_t kMaxPolicyBytes = 1 << 20;

// The text between `prefix"` and the next quote in a protobuf parser
// message, or "" (the parser names fields and types in quotes).
std::string QuotedAfter(const std::string& message, absl::string_view prefix) {
  std::string key = absl::StrCat(prefix, "\"");
  size_t start = message.find(key);
  if (start == std::string::npos) return "";
  start += key.size();
  size_t end = message.find('"', start);
  if (end == std::string::npos) return "";
  return message.substr(start, end - start);
}

// Every message type reachable from PolicySet, so that hints can name the
// fields a user may write.
void CollectMessages(const pb::Descriptor* d,
                     std::vector<const pb::Descriptor*>* out) {
  for (const pb::Descriptor* seen : *out) {
    if (seen == d) return;
  }
  out->push_back(d);
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->message_type() != nullptr) {
      CollectMessages(d->field(i)->message_type(), out);
    }
  }
}

// A hint listing what would have been accepted, when it is unambiguous.
std::string Hint(const std::string& message) {
  std::vector<const pb::Descriptor*> messages;
  CollectMessages(v1::PolicySet::descriptor(), &messages);

  std::string type = QuotedAfter(message, "Message type ");
  if (!type.empty() &&
      message.find("has no field named") != std::string::npos) {
    const pb::Descriptor* d =
        pb::DescriptorPool::generated_pool()->FindMessageTypeByName(type);
    if (d == nullptr) return "";
    std::vector<std::string> names;
    for (int i = 0; i < d->field_count(); ++i) {
      names.push_back(d->field(i)->name());
    }
    return absl::StrCat(" (", d->name(), " has: ", absl::StrJoin(names, ", "),
                        ")");
  }

  std::string field = QuotedAfter(message, "for field ");
  if (!field.empty() &&
      message.find("Unknown enumeration value") != std::string::npos) {
    // Fields such as "mode" exist in several messages with different enums;
    // a hint is given only when the name identifies one enum.
    std::set<const pb::EnumDescriptor*> enums;
    for (const pb::Descriptor* d : messages) {
      const pb::FieldDescriptor* f = d->FindFieldByName(field);
      if (f != nullptr && f->enum_type() != nullptr)
        enums.insert(f->enum_type());
    }
    if (enums.size() != 1) return "";
    const pb::EnumDescriptor* e = *enums.begin();
    std::vector<std::string> names;
    for (int i = 0; i < e->value_count(); ++i) {
      if (e->value(i)->number() != 0) names.push_back(e->value(i)->name());
    }
    return absl::StrCat(" (expected one of: ", absl::StrJoin(names, ", "), ")");
  }
  return "";
}

// The parser reports an unknown field or enum value where it noticed the
// mistake: after the next token, often on the next line. The word itself is
// the last occurrence of `word` (as a whole identifier) before that point.
// Returns the byte offset of the line/column pair (0-based) in `text`, or
// npos.
size_t OffsetOf(absl::string_view text, int line, int column) {
  size_t offset = 0;
  for (int l = 0; l < line; ++l) {
    offset = text.find('\n', offset);
    if (offset == absl::string_view::npos) return text.size();
    ++offset;
  }
  // Columns count a tab as up to 8 bytes, so the column may overshoot: it
  // is kept within its line, as an upper bound for a backwards search.
  size_t line_end = std::min(text.find('\n', offset), text.size());
  return std::min(line_end, offset + static_cast<size_t>(column));
}

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_';
}

size_t FindWordBefore(absl::string_view text, absl::string_view word,
                      size_t limit) {
  if (word.empty()) return absl::string_view::npos;
  size_t pos = std::min(limit, text.size());
  while (pos > 0) {
    size_t found = text.rfind(word, pos - 1);
    if (found == absl::string_view::npos) return found;
    bool starts = found == 0 || !IsIdentChar(text[found - 1]);
    size_t end = found + word.size();
    bool ends = end >= text.size() || !IsIdentChar(text[end]);
    if (starts && ends) return found;
    pos = found;
  }
  return absl::string_view::npos;
}

class CollectFirstError : public pb::io::ErrorCollector {
 public:
  CollectFirstError(absl::string_view source, absl::string_view text)
      : source_(source), text_(text) {}

  void AddError(int line, pb::io::ColumnNumber column,
                const std::string& message) override {
    // The parser stops at its first error; later ones are consequences.
    if (!first_.empty()) return;
    std::string word = QuotedAfter(message, "has no field named ");
    if (word.empty())
      word = QuotedAfter(message, "Unknown enumeration value of ");
    size_t at = FindWordBefore(text_, word, OffsetOf(text_, line, column) + 1);
    if (at != absl::string_view::npos) {
      size_t newline =
          at == 0 ? absl::string_view::npos : text_.rfind('\n', at - 1);
      size_t line_start = newline == absl::string_view::npos ? 0 : newline + 1;
      line =
          static_cast<int>(std::count(text_.begin(), text_.begin() + at, '\n'));
      column = static_cast<int>(at - line_start);
    }
    first_ = absl::StrCat(source_, ":", line + 1, ":", column + 1, ": ",
                          message, Hint(message));
  }

  const std::string& first() const { return first_; }

 private:
  std::string source_;
  absl::string_view text_;
  std::string first_;
};

}  // namespace

absl::StatusOr<v1::PolicySet> ParsePolicySetText(
    absl::string_view text, absl::string_view source_name) {
  CollectFirstError errors(source_name, text);
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.AllowUnknownField(false);
  parser.AllowPartialMessage(false);
  v1::PolicySet policy;
  if (!parser.ParseFromString(std::string(text), &policy)) {
    if (errors.first().empty()) {
      return Malformed(absl::StrCat(source_name, ": not a valid policy"));
    }
    return Malformed(errors.first());
  }
  return policy;
}

absl::StatusOr<v1::PolicySet> LoadPolicySetFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return ErrnoError(errno,
                      absl::StrCat("cannot open policy file \"", path, "\""));
  }
  std::string content;
  char buf[8192];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno,
                        absl::StrCat("cannot read policy file \"", path, "\""));
    }
    if (n == 0) break;
    content.append(buf, static_cast<size_t>(n));
    // A policy is a few kilobytes; this stops a mistaken /dev/zero.
    if (content.size() > kMaxPolicyBytes) {
      return Malformed(absl::StrCat(path, ": larger than ", kMaxPolicyBytes,
                                    " bytes; not a policy file"));
    }
  }
  return ParsePolicySetText(content, path);
}

}  // namespace sandfence
