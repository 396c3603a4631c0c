#include "confine/unix_broker.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/unique_fd.h"

#ifndef SO_COOKIE
#define SO_COOKIE 57
#endif
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

namespace sandfence::confine {
namespace {

// The kernel's dev_t, as unix_diag reports it: 12 bits of major, 20 minor.
bool SameDev(uint32_t kernel_dev, dev_t user_dev) {
  return (kernel_dev >> 20) == major(user_dev) &&
         (kernel_dev & 0xfffff) == minor(user_dev);
}

// What /proc/<tid>/status says of the caller's credentials.
struct Creds {
  uid_t uid[3] = {0, 0, 0};  // real, effective, saved
  gid_t gid[3] = {0, 0, 0};
  std::vector<gid_t> groups;
  pid_t tgid = 0;
  bool ok = false;
};

Creds ReadCreds(pid_t tid) {
  Creds c;
  std::ifstream in(absl::StrCat("/proc/", tid, "/status"));
  std::string line;
  int seen = 0;
  while (std::getline(in, line)) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.empty()) continue;
    auto ids = [&](auto* out) {
      for (size_t i = 0; i < 3 && i + 1 < f.size(); ++i) {
        uint32_t v = 0;
        if (!absl::SimpleAtoi(f[i + 1], &v)) return false;
        out[i] = v;
      }
      return f.size() >= 4;
    };
    if (f[0] == "Tgid:" && f.size() > 1 && absl::SimpleAtoi(f[1], &c.tgid)) {
      ++seen;
    } else if (f[0] == "Uid:" && ids(c.uid)) {
      ++seen;
    } else if (f[0] == "Gid:" && ids(c.gid)) {
      ++seen;
    } else if (f[0] == "Groups:") {
      for (size_t i = 1; i < f.size(); ++i) {
        uint32_t g = 0;
        if (absl::SimpleAtoi(f[i], &g)) c.groups.push_back(g);
      }
      ++seen;
    }
  }
  c.ok = seen == 4;
  return c;
}

// This thread only (raw system calls; glibc's would change every thread).
bool BecomeThisThread(const Creds& c) {
  return ::syscall(SYS_setgroups, c.groups.size(), c.groups.data()) == 0 &&
         ::syscall(SYS_setresgid, c.gid[0], c.gid[1], c.gid[2]) == 0 &&
         ::syscall(SYS_setresuid, c.uid[0], c.uid[1], c.uid[2]) == 0;
}

bool StillWaiting(int listener, uint64_t id) {
  return ::ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

// The inode `path` names for the caller `tid`: resolved from its root (an
// absolute path) or its working directory, in its mount namespace.
int PinPath(pid_t tid, const std::string& path, UniqueFd* out) {
  const bool absolute = path[0] == '/';
  UniqueFd base(
      ::open(absl::StrCat("/proc/", tid, absolute ? "/root" : "/cwd").c_str(),
             O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!base) return errno;
  struct open_how how {};
  how.flags = O_PATH | O_CLOEXEC;
  // ".." never climbs above the caller's root, as in its own lookup; and
  // no /proc magic link: this lookup is root's, not the caller's, and such
  // a name is left to the hooks (judged by name).
  how.resolve = RESOLVE_NO_MAGICLINKS | (absolute ? RESOLVE_IN_ROOT : 0);
  const std::string rel =
      absolute ? path.substr(path.find_first_not_of('/')) : path;
  const long fd = ::syscall(SYS_openat2, base.get(),
                            rel.empty() ? "." : rel.c_str(), &how, sizeof(how));
  if (fd < 0) return errno;
  out->reset(static_cast<int>(fd));
  return 0;
}

}  // namespace

BoundUnixSocket UnixSocketBoundTo(dev_t dev, ino_t ino) {
  UniqueFd nl(
      ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl) return {};
  struct {
    nlmsghdr nlh;
    unix_diag_req req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof(msg);
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  msg.req.sdiag_family = AF_UNIX;
  msg.req.udiag_states = ~0u;
  msg.req.udiag_show = UDIAG_SHOW_VFS | UDIAG_SHOW_NAME;
  if (::send(nl.get(), &msg, sizeof(msg), 0) != sizeof(msg)) return {};
  BoundUnixSocket found;
  alignas(nlmsghdr) char buf[32768];
  // Walked by offsets: NLMSG_OK and RTA_OK compare signed with unsigned.
  for (;;) {
    const ssize_t n = ::recv(nl.get(), buf, sizeof(buf), 0);
    if (n <= 0) return {};
    const size_t total = static_cast<size_t>(n);
    for (size_t off = 0; off + sizeof(nlmsghdr) <= total;) {
      const auto* h = reinterpret_cast<const nlmsghdr*>(buf + off);
      if (h->nlmsg_len < sizeof(nlmsghdr) || h->nlmsg_len > total - off) {
        return {};
      }
      if (h->nlmsg_type == NLMSG_DONE) return found;
      if (h->nlmsg_type == NLMSG_ERROR) return {};
      const size_t end = off + h->nlmsg_len;
      size_t a = off + NLMSG_LENGTH(NLMSG_ALIGN(sizeof(unix_diag_msg)));
      if (a <= end) {
        const auto* m =
            reinterpret_cast<const unix_diag_msg*>(buf + off + NLMSG_HDRLEN);
        bool match = false;
        std::string name;
        while (a + sizeof(rtattr) <= end) {
          const auto* at = reinterpret_cast<const rtattr*>(buf + a);
          if (at->rta_len < sizeof(rtattr) || at->rta_len > end - a) break;
          const size_t payload = at->rta_len - RTA_LENGTH(0);
          if (at->rta_type == UNIX_DIAG_VFS &&
              payload >= sizeof(unix_diag_vfs)) {
            unix_diag_vfs v;
            std::memcpy(&v, buf + a + RTA_LENGTH(0), sizeof(v));
            match = v.udiag_vfs_ino == ino && SameDev(v.udiag_vfs_dev, dev);
          } else if (at->rta_type == UNIX_DIAG_NAME) {
            const char* p = buf + a + RTA_LENGTH(0);
            name.assign(p, strnlen(p, payload));
          }
          a += RTA_ALIGN(at->rta_len);
        }
        // The dump is read to its end anyway.
        if (match) found = {m->udiag_ino, std::move(name)};
      }
      off += NLMSG_ALIGN(h->nlmsg_len);
    }
  }
}

bool HeldInCgroup(const std::string& cgroup_dir, uint64_t sock_inode) {
  const std::string want = absl::StrCat("socket:[", sock_inode, "]");
  std::vector<std::string> dirs = {cgroup_dir};
  while (!dirs.empty()) {
    const std::string dir = dirs.back();
    dirs.pop_back();
    std::ifstream procs(absl::StrCat(dir, "/cgroup.procs"));
    std::string pid;
    while (std::getline(procs, pid)) {
      const std::string fd_dir = absl::StrCat("/proc/", pid, "/fd");
      DIR* d = ::opendir(fd_dir.c_str());
      if (d == nullptr) continue;
      char target[64];
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const ssize_t n =
            ::readlinkat(::dirfd(d), e->d_name, target, sizeof(target) - 1);
        if (n <= 0) continue;
        if (want == absl::string_view(target, static_cast<size_t>(n))) {
          ::closedir(d);
          return true;
        }
      }
      ::closedir(d);
    }
    if (DIR* d = ::opendir(dir.c_str())) {
      while (dirent* e = ::readdir(d)) {
        if (e->d_type == DT_DIR && e->d_name[0] != '.') {
          dirs.push_back(absl::StrCat(dir, "/", e->d_name));
        }
      }
      ::closedir(d);
    }
  }
  return false;
}

UnixBrokerOutcome UnixBroker::Decide(int listener,
                                     const seccomp_notif& req) const {
  UnixBrokerOutcome out;
  const pid_t tid = static_cast<pid_t>(req.pid);
  const int fd = static_cast<int>(req.data.args[0]);
  const uint32_t len = static_cast<uint32_t>(req.data.args[2]);
  if (len <= offsetof(sockaddr_un, sun_path) + 1 || len > sizeof(sockaddr_un)) {
    return out;
  }
  // A copy: what the kernel reads on CONTINUE may differ, and is judged
  // by the hooks on its own; nothing here is decided on the caller's
  // memory except whether to look further.
  sockaddr_un addr{};
  iovec local{&addr, len};
  iovec remote{reinterpret_cast<void*>(req.data.args[1]), len};
  if (::process_vm_readv(tid, &local, 1, &remote, 1, 0) !=
      static_cast<ssize_t>(len)) {
    return out;
  }
  if (addr.sun_family != AF_UNIX || addr.sun_path[0] == '\0') return out;
  out.path.assign(
      addr.sun_path,
      strnlen(addr.sun_path, len - offsetof(sockaddr_un, sun_path)));
  // Everything read of the caller by its tid is read before the check
  // that it still waits: a tid it left (killed meanwhile) could name
  // another task by now. Once it holds, the pidfd is the caller's, and the
  // root, directory, namespace and credentials read were.
  UniqueFd pinned;
  const int pin_error = PinPath(tid, out.path, &pinned);
  UniqueFd netns(::open(absl::StrCat("/proc/", tid, "/ns/net").c_str(),
                        O_RDONLY | O_CLOEXEC));
  struct stat mnt_ns {};
  const bool in_home =
      hooks_.home_mount_ns != 0 &&
      ::stat(absl::StrCat("/proc/", tid, "/ns/mnt").c_str(), &mnt_ns) == 0 &&
      mnt_ns.st_ino == hooks_.home_mount_ns;
  const Creds creds = ReadCreds(tid);
  UniqueFd pidfd(
      static_cast<int>(::syscall(SYS_pidfd_open, tid, PIDFD_THREAD)));
  if (!pidfd) {
    pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, creds.tgid, 0)));
  }
  if (!StillWaiting(listener, req.id)) return out;
  if (pin_error != 0 || !netns || !creds.ok || !pidfd) return out;
  struct stat st {};
  if (::fstat(pinned.get(), &st) != 0 || !S_ISSOCK(st.st_mode)) return out;
  out.peer_inode = st.st_ino;
  UniqueFd sock(
      static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd.get(), fd, 0)));
  int domain = 0;
  socklen_t dlen = sizeof(domain);
  if (!sock ||
      ::getsockopt(sock.get(), SOL_SOCKET, SO_DOMAIN, &domain, &dlen) != 0 ||
      domain != AF_UNIX) {
    return out;
  }
  uint64_t cookie = 0;
  socklen_t clen = sizeof(cookie);
  dlen = sizeof(out.sock_type);
  if (::getsockopt(sock.get(), SOL_SOCKET, SO_COOKIE, &cookie, &clen) != 0 ||
      ::getsockopt(sock.get(), SOL_SOCKET, SO_TYPE, &out.sock_type, &dlen) !=
          0) {
    return out;
  }

  // In a thread of its own: it enters the caller's network namespace to
  // find the socket, and takes the caller's credentials to connect; this
  // thread keeps its own.
  enum class Step { kKernel, kOutside, kConnected };
  Step step = Step::kKernel;
  int error = 0;
  BoundUnixSocket server;
  bool listed = false;
  UniqueFd own_netns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  std::thread([&] {
    if (::setns(netns.get(), CLONE_NEWNET) != 0) return;
    server = UnixSocketBoundTo(st.st_dev, st.st_ino);
    // A path reaches a socket of any network namespace: one the caller's
    // does not hold may be the host's.
    if (server.inode == 0 && own_netns &&
        ::setns(own_netns.get(), CLONE_NEWNET) == 0) {
      server = UnixSocketBoundTo(st.st_dev, st.st_ino);
    }
    if (server.inode == 0 || !HeldInCgroup(hooks_.cgroup_dir, server.inode)) {
      // A listed name counts for the socket it names in sandfence's view.
      struct stat host_view {};
      listed = hooks_.listed && hooks_.listed(out.path) &&
               ::stat(out.path.c_str(), &host_view) == 0 &&
               host_view.st_dev == st.st_dev && host_view.st_ino == st.st_ino;
      // In the namespace it started in, the caller can mount nothing: the
      // kernel's lookup of the name finds what sandfence's did, and the
      // caller connects as itself (the server sees its pid).
      if (listed && in_home) return;
      if (!listed || server.inode == 0) {
        step = Step::kOutside;
        return;
      }
    }
    const uint64_t pid_tgid = (static_cast<uint64_t>(::getpid()) << 32) |
                              static_cast<uint32_t>(::gettid());
    if (!hooks_.allow(cookie, pid_tgid).ok()) return;
    step = Step::kConnected;
    if (!BecomeThisThread(creds)) {
      error = EPERM;
      return;
    }
    // The caller's flags are the socket's: a blocking one would hold this
    // thread while the server's backlog is full; tried once, not waited.
    const int flags = ::fcntl(sock.get(), F_GETFL);
    if (!(flags & O_NONBLOCK)) ::fcntl(sock.get(), F_SETFL, flags | O_NONBLOCK);
    sockaddr_un via{};
    via.sun_family = AF_UNIX;
    std::snprintf(via.sun_path, sizeof(via.sun_path), "/proc/self/fd/%d",
                  pinned.get());
    error = ::connect(sock.get(), reinterpret_cast<sockaddr*>(&via),
                      sizeof(via)) == 0
                ? 0
                : errno;
    if (!(flags & O_NONBLOCK)) ::fcntl(sock.get(), F_SETFL, flags);
  }).join();
  if (step == Step::kKernel) return out;
  out.reached =
      server.inode == 0
          ? std::string("(no socket found)")
          : absl::StrCat(server.name.empty() ? "(unnamed)" : server.name,
                         " (inode ", server.inode, ")");
  if (step == Step::kOutside) {
    out.outside = true;
    error = EPERM;
  } else {
    hooks_.forget(cookie);
    out.listed = listed;
  }

  seccomp_notif_resp resp{};
  resp.id = req.id;
  resp.error = -error;
  out.answered = true;
  out.error = error;
  // ENOENT: the caller was killed meanwhile (only a fatal signal ends its
  // wait once the call is taken: WAIT_KILLABLE_RECV); whoever else holds
  // the socket holds one connected to the sandbox's own.
  ::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
  return out;
}

}  // namespace sandfence::confine
