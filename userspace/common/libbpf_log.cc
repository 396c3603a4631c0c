#include "common/libbpf_log.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "absl/strings/strip.h"

namespace sandfence {

thread_local LibbpfLogCapture* LibbpfLogCapture::active_ = nullptr;

LibbpfLogCapture::LibbpfLogCapture() {
  static std::once_flag installed;
  std::call_once(installed, [] { libbpf_set_print(&LibbpfLogCapture::Print); });
  previous_ = active_;
  active_ = this;
}

LibbpfLogCapture::~LibbpfLogCapture() { active_ = previous_; }

int LibbpfLogCapture::Print(enum libbpf_print_level level, const char* format,
                            va_list args) {
  // SANDFENCE_LIBBPF_DEBUG=1 shows libbpf's debug lines (CO-RE relocations).
  static const bool debug = std::getenv("SANDFENCE_LIBBPF_DEBUG") != nullptr;
  if (level == LIBBPF_DEBUG && !debug) return 0;
  if (active_ == nullptr) return std::vfprintf(stderr, format, args);
  // The verifier's log comes in one message, often longer than a line.
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (n <= 0) return 0;
  std::string text(static_cast<size_t>(n) + 1, '\0');
  std::vsnprintf(text.data(), text.size(), format, args);
  text.resize(static_cast<size_t>(n));
  if (active_->verifier_reason_.empty()) {
    active_->verifier_reason_ = VerifierReason(text);
  }
  absl::string_view s(text);
  s = s.substr(0, s.find('\n'));
  absl::ConsumePrefix(&s, "libbpf: ");
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (!s.empty() && active_->first_line_.empty()) {
    active_->first_line_ = std::string(s);
  }
  return 0;
}

std::string LibbpfLogCapture::VerifierReason(absl::string_view text) {
  const size_t begin = text.find("-- BEGIN PROG LOAD LOG --\n");
  if (begin == absl::string_view::npos) return "";
  absl::string_view log = text.substr(begin);
  log.remove_prefix(log.find('\n') + 1);
  size_t end = log.find("\nprocessed ");
  if (end == absl::string_view::npos) end = log.find("-- END PROG LOAD LOG");
  if (end == absl::string_view::npos) return "";
  log = log.substr(0, end);
  while (!log.empty() && log.back() == '\n') log.remove_suffix(1);
  const size_t last = log.rfind('\n');
  return std::string(last == absl::string_view::npos ? log
                                                     : log.substr(last + 1));
}

}  // namespace sandfence
