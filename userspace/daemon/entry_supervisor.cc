#include "daemon/entry_supervisor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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
  std::string rollout_id;   // after the first message
  std::string cgroup_path;  // what admit answered
};

namespace {

constexpr size_t kMaxRolloutId = 128;

// "ok", or the exit code the entering process takes and why.
void Reply(int conn, const absl::Status& status) {
  const std::string text =
      status.ok() ? "ok"
                  : absl::StrCat(ExitCodeFor(status), " ", status.message());
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
  // Root's alone, whatever the daemon's own socket allows: what comes in
  // here is a process's seccomp listener.
  const mode_t old = ::umask(0177);
  const int rc =
      ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int err = errno;
  ::umask(old);
  if (rc != 0) return ErrnoError(err, absl::StrCat("bind ", path));
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
  for (;;) {
    UniqueFd conn(::accept4(listen_fd_.get(), nullptr, nullptr,
                            SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn) return;
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
    absl::StatusOr<std::string> cgroup = hooks_.admit(p.rollout_id);
    if (!cgroup.ok()) {
      Reply(p.conn.get(), cgroup.status());
      return false;
    }
    p.cgroup_path = *std::move(cgroup);
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
  {
    absl::MutexLock lock(&mu_);
    supervised_.push_back(std::make_shared<Supervised>(Supervised{
        p.rollout_id, confine::SocketSupervisor(std::move(passed))}));
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
    std::vector<pollfd> fds;
    fds.push_back({wake_.get(), POLLIN, 0});
    fds.push_back({listen_fd_.get(), POLLIN, 0});
    for (const auto& p : pending_) fds.push_back({p->conn.get(), POLLIN, 0});
    for (const auto& s : supervised) {
      fds.push_back({s->supervisor.fd(), POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 1000) < 0) {
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
        if (absl::Status st = hooks_.answer(s->rollout_id, s->supervisor);
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
