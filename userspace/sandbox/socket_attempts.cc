#include "sandbox/socket_attempts.h"

#include <time.h>

#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sandfence {
namespace {

// Tgid, Uid and Gid (real) of /proc/<tid>/status.
void ReadStatus(pid_t tid, NetEvent* e) {
  std::ifstream in(absl::StrCat("/proc/", tid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.size() < 2) continue;
    uint32_t v = 0;
    if (!absl::SimpleAtoi(f[1], &v)) continue;
    if (f[0] == "Tgid:") e->tgid = v;
    if (f[0] == "Uid:") e->uid = v;
    if (f[0] == "Gid:") e->gid = v;
  }
}

}  // namespace

std::optional<sf_verdict> SocketFamilyVerdict(const CompiledPhase& phase) {
  if (!phase.restricted()) return std::nullopt;
  return phase.audit_only ? SF_VERDICT_AUDIT_DENY : SF_VERDICT_DENY;
}

std::function<bool(const std::string& path)> ListedUnixPaths(
    const CompiledPhase& phase) {
  return [names = phase.unix_names](const std::string& path) {
    for (const UnixName& n : names) {
      if (!n.abstract && n.name == path) return true;
    }
    return false;
  };
}

NetEvent SocketAttemptEvent(const confine::SocketAttempt& attempt,
                            sf_verdict verdict, uint64_t sandbox,
                            uint32_t generation) {
  NetEvent e;
  const bool uring =
      attempt.call == confine::SocketAttempt::Call::kIoUringSetup;
  e.hook = uring ? SF_HOOK_IO_URING_SETUP : SF_HOOK_SOCKET;
  e.reason = uring ? SF_REASON_IO_URING : SF_REASON_FAMILY;
  e.verdict = verdict;
  if (attempt.call == confine::SocketAttempt::Call::kConnect) {
    // A path whose socket the sandbox holds, connected on its behalf; or
    // one leading to a socket outside it, refused.
    e.hook = SF_HOOK_CONNECT_UNIX;
    e.reason = attempt.denied        ? SF_REASON_UNIX_OUTSIDE_SOCKET
               : attempt.unix_listed ? SF_REASON_UNIX_LISTED
                                     : SF_REASON_UNIX_OWN_SOCKET;
    e.verdict = attempt.denied ? SF_VERDICT_DENY : SF_VERDICT_ALLOW;
    e.unix_name = UnixName{attempt.unix_path, false};
    e.unix_reached = attempt.unix_reached;
  }
  // Family numbers fit: the kernel refuses any past AF_MAX (46).
  e.protocol = static_cast<uint8_t>(
      attempt.family > 0 && attempt.family < 256 && e.unix_name == std::nullopt
          ? attempt.family
          : 0);
  e.sock_type = static_cast<uint8_t>(attempt.type & 0xff);
  e.generation = generation;
  e.supervised = true;
  e.pid = static_cast<uint32_t>(attempt.tid);
  e.sandbox = sandbox;
  e.cgroup = sandbox;
  struct timespec ts {};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  e.boot_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull +
              static_cast<uint64_t>(ts.tv_nsec);
  ReadStatus(attempt.tid, &e);
  std::ifstream comm(absl::StrCat("/proc/", attempt.tid, "/comm"));
  std::getline(comm, e.comm);
  return e;
}

}  // namespace sandfence
