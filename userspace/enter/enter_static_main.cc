// sandfence-enter: `sandfence enter` for container entrypoints, statically
// linked (glibc, libstdc++, Abseil; no gRPC, protobuf, libbpf or NSS), so
// that it runs in any image it is bind-mounted into:
//
//   podman run ... --entrypoint /.sandfence-enter
//       -v /usr/libexec/sandfence/sandfence-enter:/.sandfence-enter:ro
//       IMAGE -- AGENT ARGS...
//
// The OCI hook has already made the container's cgroup the rollout's
// sandbox (egress enforced from the first instruction); this confines the
// agent with Landlock + seccomp in place and execs it. --cgroup joins
// another cgroup first; --rollout needs the daemon, which only the full
// `sandfence enter` talks to.
#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "enter/enter.h"

// No NSS in this binary: a static glibc would dlopen the image's
// libnss_*.so into a process that is about to confine itself, running the
// image's code before the confinement. Users come from /etc/passwd, read as
// text (enter::LookupUserInPasswd); these keep every NSS lookup out of the
// link (nothing here calls them).
extern "C" struct passwd* getpwnam(const char*) {
  errno = ENOSYS;
  return nullptr;
}
extern "C" struct passwd* getpwuid(uid_t) {
  errno = ENOSYS;
  return nullptr;
}

namespace {

constexpr char kUsage[] =
    "usage: sandfence-enter [--cgroup PATH] [--allow-io-uring] "
    "[--deny-ptrace]\n"
    "           [--user UID[:GID]] [--no-access PATH]... -- CMD [ARG]...\n"
    "\n"
    "A container's entrypoint: runs CMD in place of this process with the\n"
    "process guard the kernel enforces: Landlock (no ptrace, /proc/<pid>\n"
    "reads or signals beyond CMD's own processes, no abstract Unix sockets\n"
    "outside, no writes to /sys or /proc) and seccomp (no user namespaces,\n"
    "mounts, bpf, perf, kernel modules, 32-bit entry; io_uring unless\n"
    "allowed), with no_new_privs and, as root, the capabilities that take\n"
    "enforcement apart dropped. It holds for CMD and everything CMD starts,\n"
    "for their whole lives. Without --cgroup it stays in this cgroup: the\n"
    "container's, which sandfence's OCI hook made the rollout's sandbox.\n"
    "Statically linked: it needs nothing from the image but CMD.\n"
    "Exit status: CMD's; before exec 64 usage, 77 not permitted, 78\n"
    "rejected, 127 a failure after the point of no return.\n"
    "\n";

std::string ReadFile(const char* path) {
  std::string out;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  ::close(fd);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  sandfence::enter::EnterHost host;
  host.program = "sandfence-enter";
  host.usage = kUsage;
  host.lookup_user = [](absl::string_view user) {
    return sandfence::enter::LookupUserInPasswd(user,
                                                ReadFile("/etc/passwd"));
  };
  // sandfence's own places, as host/host_state.h names them
  // (SandfenceOwnPaths(kDefaultPinRoot)); in a container they are usually
  // absent (skipped), unless bound in.
  host.own_paths = {"/run/sandfence", "/var/lib/sandfence",
                    "/sys/fs/bpf/sandfence"};
  return sandfence::enter::Enter(std::vector<std::string>(argv + 1, argv + argc),
                                 host);
}
