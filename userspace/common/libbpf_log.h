// Capturing libbpf's log around a load whose failure is an answer to
// report (a kernel refusing a program): the first warning and the
// verifier's own reason become part of the error.
#ifndef SANDFENCE_COMMON_LIBBPF_LOG_H_
#define SANDFENCE_COMMON_LIBBPF_LOG_H_

#include <bpf/libbpf.h>

#include <cstdarg>
#include <string>

#include "absl/strings/string_view.h"

namespace sandfence {

// libbpf logs to stderr by default; while a thread tries a load whose
// failure is an expected answer (the lsm probe), its lines go to a buffer
// instead, and the first warning (usually the kernel's refusal) becomes
// part of the reason. One print function is installed for the process,
// once: swapping libbpf's global hook per load would steal (or drop) the
// log of a load running in another thread.
class LibbpfLogCapture {
 public:
  LibbpfLogCapture();
  ~LibbpfLogCapture();
  LibbpfLogCapture(const LibbpfLogCapture&) = delete;
  LibbpfLogCapture& operator=(const LibbpfLogCapture&) = delete;

  // The first libbpf warning (often the kernel's reason).
  const std::string& first_line() const { return first_line_; }
  // The verifier's own reason for the first refused program: the last line
  // of its log before the statistics ("invalid func unknown#158" where a
  // helper is missing). Empty if no program was refused.
  const std::string& verifier_reason() const { return verifier_reason_; }

  // The last line of a verifier log in libbpf's message; "" if none.
  static std::string VerifierReason(absl::string_view text);

 private:
  static int Print(enum libbpf_print_level level, const char* format,
                   va_list args);

  static thread_local LibbpfLogCapture* active_;
  LibbpfLogCapture* previous_ = nullptr;
  std::string first_line_;
  std::string verifier_reason_;
};

}  // namespace sandfence

#endif  // SANDFENCE_COMMON_LIBBPF_LOG_H_
