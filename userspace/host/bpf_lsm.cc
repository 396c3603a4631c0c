#include "host/bpf_lsm.h"

#include <bpf/libbpf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/bpf_handles.h"
#include "common/libbpf_log.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "sf_guard_probe.skel.h"

namespace sandfence {
namespace {

absl::Status ProbeError(int err, absl::string_view what,
                        const LibbpfLogCapture& log) {
  std::string detail = std::strerror(err);
  if (!log.first_line().empty()) {
    absl::StrAppend(&detail, " (libbpf: ", log.first_line(),
                    log.verifier_reason().empty() ? "" : "; the verifier: ",
                    log.verifier_reason(), ")");
  }
  if ((err == EPERM || err == EACCES) && ::geteuid() != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, ": ", detail, " (loading BPF programs needs root)"));
  }
  return Unavailable(absl::StrCat(what, ": ", detail, "; ", kLsmAdvice));
}

}  // namespace

absl::Status ProbeBpfLsm() {
  LibbpfLogCapture log;
  Skeleton<sf_guard_probe> skel(sf_guard_probe::open());
  if (skel == nullptr) return ProbeError(errno, "BPF LSM probe: open", log);
  skel->bss->sf_probe_tgid = static_cast<__u32>(::getpid());
  if (int err = sf_guard_probe::load(skel.get()); err != 0) {
    return ProbeError(-err, "BPF LSM probe: load", log);
  }
  if (int err = sf_guard_probe::attach(skel.get()); err != 0) {
    return ProbeError(-err, "BPF LSM probe: attach", log);
  }
  // An attached program that the kernel never calls (bpf not an active
  // LSM) would enforce nothing: make it run.
  UniqueFd probe(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!probe) return ErrnoError(errno, "BPF LSM probe: open /dev/null");
  if (skel->bss->sf_probe_hits == 0) {
    return Unavailable(absl::StrCat(
        "BPF LSM probe: the program attached but never ran (bpf is not an "
        "active LSM); ",
        kLsmAdvice));
  }
  return absl::OkStatus();
}

}  // namespace sandfence
