#include "daemon/entry_supervisor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cgroup.h"
#include "common/status.h"
#include "daemon/log.h"

namespace sandfence {

struct EntrySupervisor::Pending {
  UniqueFd conn;
  pid_t pid = 0;
  int64_t since_ns = 0;
  std::string rollout_id;   // after the first message
  std::string cgroup_path;  // what admit answered
  uint64_t home_mount_ns = 0;
};

namespace {

constexpr size_t kMaxRolloutId = 128;
constexpr size_t kMaxPending = 64;
constexpr int64_t kPendingSeconds = 30;

int64_t NowNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// "ok", or the exit code the entering process takes and why.
void Reply(int conn, const absl::Status& status) {
  // What cannot be found (a rollout) never will be by retrying: rejected.
  const int code = absl::IsNotFound(status) ? kExitConfig : ExitCodeFor(status);
  const std::string text =
      status.ok() ? "ok" : absl::StrCat(code, " ", status.message());
  ssize_t ignored = ::send(conn, text.data(), text.size(), MSG_NOSIGNAL);
  (void)ignored;
}

// Whether fd is a seccomp user-notification listener (an anon inode named
// so): anything else would be polled and ioctl'd for nothing.
bool IsSeccompListener(int fd) {
  char link[64];
  const std::string self = absl::StrCat("/proc/self/fd/", fd);
  const ssize_t n = ::readlink(self.c_str(), link, sizeof(link) - 1);
  if (n <= 0) return false;
  return absl::string_view(link, static_cast<size_t>(n)) ==
         "anon_inode:seccomp notify";
}

}  // namespace

std::string SupervisionSocketPath(absl::string_view daemon_socket) {
  return absl::StrCat(daemon_socket, ".supervise");
}

absl::StatusOr<std::unique_ptr<EntrySupervisor>> EntrySupervisor::Listen(
    const std::string& path, Hooks hooks) {
  UniqueFd fd(
      ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return ErrnoError(errno, "socket for the supervision socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return Malformed(
        absl::StrCat("supervision socket path ", path, " is too long"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(errno, absl::StrCat("remove stale socket ", path));
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
      0) {
    return ErrnoError(errno, absl::StrCat("bind ", path));
  }
  // Root's alone, whatever the daemon's own socket allows (a peer that is
  // not root is refused in any case): what comes in here is a process's
  // seccomp listener. Not umask: other threads of the daemon create files.
  if (::chmod(path.c_str(), 0600) != 0) {
    return ErrnoError(errno, absl::StrCat("chmod ", path));
  }
  if (::listen(fd.get(), 64) != 0) {
    return ErrnoError(errno, absl::StrCat("listen on ", path));
  }
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return ErrnoError(errno, "eventfd");
  std::unique_ptr<EntrySupervisor> s(new EntrySupervisor(
      path, std::move(fd), std::move(wake), std::move(hooks)));
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

EntrySupervisor::EntrySupervisor(std::string path, UniqueFd listen_fd,
                                 UniqueFd wake, Hooks hooks)
    : path_(std::move(path)),
      listen_fd_(std::move(listen_fd)),
      wake_(std::move(wake)),
      hooks_(std::move(hooks)) {}

EntrySupervisor::~EntrySupervisor() {
  stop_ = true;
  Wake();
  if (thread_.joinable()) thread_.join();
  ::unlink(path_.c_str());
}

void EntrySupervisor::Wake() {
  const uint64_t one = 1;
  ssize_t ignored = ::write(wake_.get(), &one, sizeof(one));
  (void)ignored;
}

void EntrySupervisor::Forget(const std::string& rollout_id) {
  {
    absl::MutexLock lock(&mu_);
    std::erase_if(supervised_, [&](const std::shared_ptr<Supervised>& s) {
      return s->rollout_id == rollout_id;
    });
  }
  Wake();  // the loop lets go of its copies
}

size_t EntrySupervisor::ListenerCount(const std::string& rollout_id) const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& s : supervised_) {
    n += rollout_id.empty() || s->rollout_id == rollout_id;
  }
  return n;
}

void EntrySupervisor::Accept() {
  while (pending_.size() < kMaxPending) {
    UniqueFd conn(::accept4(listen_fd_.get(), nullptr, nullptr,
                            SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        // Out of descriptors, say: the socket stays readable, so it is not
        // polled for a while rather than spun on.
        LogError("supervision: accept: %s", std::strerror(errno));
        accept_paused_until_ns_ = NowNs() + 100000000;
      }
      return;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        cred.uid != 0) {
      Reply(conn.get(), absl::PermissionDeniedError(
                            "the daemon takes socket calls from root only"));
      continue;
    }
    auto p = std::make_unique<Pending>();
    p->conn = std::move(conn);
    p->pid = cred.pid;
    p->since_ns = NowNs();
    pending_.push_back(std::move(p));
  }
}

bool EntrySupervisor::ReadPending(Pending& p) {
  char buf[kMaxRolloutId + 1];
  iovec iov = {buf, sizeof(buf)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = ::recvmsg(p.conn.get(), &msg, MSG_CMSG_CLOEXEC);
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  if (n == 0) return false;  // gone before it handed anything over
  UniqueFd passed;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
       c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int))) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c), sizeof(fd));
      passed.reset(fd);
    }
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    Reply(p.conn.get(), Malformed("a message longer than a rollout id"));
    return false;
  }
  if (p.rollout_id.empty()) {
    // 1. The rollout id, before the process changed anything.
    if (passed) {
      Reply(p.conn.get(), Malformed("the rollout id comes first"));
      return false;
    }
    p.rollout_id.assign(buf, static_cast<size_t>(n));
    // The caller waits for this answer before it moves: it is where it
    // connected from (outside every sandbox, or refused).
    absl::StatusOr<std::string> cgroup = hooks_.admit(p.rollout_id, p.pid);
    if (!cgroup.ok()) {
      Reply(p.conn.get(), cgroup.status());
      return false;
    }
    p.cgroup_path = *std::move(cgroup);
    struct stat mnt {};
    if (::stat(absl::StrCat("/proc/", p.pid, "/ns/mnt").c_str(), &mnt) == 0) {
      p.home_mount_ns = mnt.st_ino;
    }
    Reply(p.conn.get(), absl::OkStatus());
    return true;
  }
  // 2. The listener, from inside the rollout's cgroup.
  if (!passed || !IsSeccompListener(passed.get())) {
    Reply(p.conn.get(),
          Malformed("expected the socket-family filter's listener"));
    return false;
  }
  // Exactly the rollout's cgroup: enter joined it before it sent this.
  absl::StatusOr<std::string> mount = FindCgroup2Mount();
  absl::StatusOr<std::string> rel = CgroupOfPid(p.pid);
  if (!mount.ok() || !rel.ok() ||
      absl::StrCat(*mount, *rel == "/" ? "" : *rel) != p.cgroup_path) {
    Reply(p.conn.get(),
          absl::PermissionDeniedError(absl::StrCat(
              "pid ", p.pid, " is not in rollout \"", p.rollout_id,
              "\"'s cgroup ", p.cgroup_path, " (",
              rel.ok() ? *rel : std::string(rel.status().message()), ")")));
    return false;
  }
  // Still open (it may have ended while the process confined itself).
  if (absl::StatusOr<std::string> again = hooks_.admit(p.rollout_id, 0);
      !again.ok()) {
    Reply(p.conn.get(), again.status());
    return false;
  }
  {
    absl::MutexLock lock(&mu_);
    supervised_.push_back(std::make_shared<Supervised>(
        Supervised{p.rollout_id, p.home_mount_ns,
                   confine::SocketSupervisor(std::move(passed))}));
  }
  hooks_.admitted(p.rollout_id);
  Reply(p.conn.get(), absl::OkStatus());
  return false;
}

void EntrySupervisor::Loop() {
  while (!stop_) {
    std::vector<std::shared_ptr<Supervised>> supervised;
    {
      absl::MutexLock lock(&mu_);
      supervised = supervised_;
    }
    // Connections that never finish go (a caller gone quiet, or one
    // holding the daemon's descriptors).
    const int64_t now = NowNs();
    std::erase_if(pending_, [&](const std::unique_ptr<Pending>& p) {
      return now - p->since_ns > kPendingSeconds * 1000000000;
    });
    const bool accepting =
        pending_.size() < kMaxPending && now >= accept_paused_until_ns_;
    std::vector<pollfd> fds;
    fds.push_back({wake_.get(), POLLIN, 0});
    fds.push_back({accepting ? listen_fd_.get() : -1, POLLIN, 0});
    for (const auto& p : pending_) fds.push_back({p->conn.get(), POLLIN, 0});
    for (const auto& s : supervised) {
      fds.push_back({s->supervisor.fd(), POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), accepting ? 1000 : 100) < 0) {
      if (errno == EINTR) continue;
      LogError("supervision: poll: %s", std::strerror(errno));
      return;
    }
    if (fds[0].revents & POLLIN) {
      uint64_t n = 0;
      ssize_t ignored = ::read(wake_.get(), &n, sizeof(n));
      (void)ignored;
    }
    size_t i = 2;
    std::vector<std::unique_ptr<Pending>> still;
    for (auto& p : pending_) {
      const short ev = fds[i++].revents;
      bool keep = true;
      if (ev & POLLIN) {
        keep = ReadPending(*p);
      } else if (ev & (POLLHUP | POLLERR)) {
        keep = false;
      }
      if (keep) still.push_back(std::move(p));
    }
    pending_ = std::move(still);
    std::vector<const Supervised*> done;
    for (const auto& s : supervised) {
      const short ev = fds[i++].revents;
      if (ev & POLLIN) {
        if (absl::Status st = hooks_.answer(s->rollout_id, s->home_mount_ns,
                                            s->supervisor);
            !st.ok()) {
          LogError("rollout %s: a supervised socket call: %s", s->rollout_id,
                   StatusText(st));
        }
      } else if (ev & (POLLHUP | POLLERR | POLLNVAL)) {
        // No process uses the filter any more.
        done.push_back(s.get());
      }
    }
    if (!done.empty()) {
      absl::MutexLock lock(&mu_);
      std::erase_if(supervised_, [&](const std::shared_ptr<Supervised>& s) {
        return std::find(done.begin(), done.end(), s.get()) != done.end();
      });
    }
    if (fds[1].revents & POLLIN) Accept();
  }
}

}  // namespace sandfence
