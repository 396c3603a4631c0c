// unix_probe: makes one AF_UNIX attempt and reports how it went, for the
// Unix-socket tests to run inside sandboxes.
//
//   unix_probe OP NAME
//
// NAME: "@name" (abstract) or a path.
// OP:   stream-connect, seqpacket-connect, dgram-connect, dgram-sendto:
//         one attempt at NAME (a stream connect also sends a byte and waits
//         for the listener's reply, so "reached" means a service answered;
//         stream-connect-only does not, for a listener that never accepts);
//       own-stream, own-dgram: bind NAME first (a socket of this process,
//         so of the sandbox), then connect / send to it from another socket;
//       own-dgram-connected: bind NAME (datagram), connect another socket
//         to it, send;
//       own-stream-threaded: own-stream from a process with a second
//         thread (its descriptor table is shared);
//       own-then-symlink NAME TARGET: bind NAME, replace its file with a
//         symbolic link to TARGET, connect to NAME;
//       own-dgram-then-symlink NAME TARGET: the same with a datagram
//         socket, and an addressed send to NAME instead of a connect;
//       own-then-fork-symlink NAME TARGET: the swap, with the connecting
//         socket made before a fork: the child connects to NAME, then the
//         parent, which holds the same socket, tries to talk through it
//         (exit 0 if TARGET answered it, else the child's status);
//       own-then-symlink-uring NAME TARGET: the swap, connected with
//         io_uring (IORING_OP_CONNECT: no connect(2) system call), then a
//         byte exchanged (exit 253: no io_uring here);
//       listed-overmount NAME TARGET: in a user and mount namespace of its
//         own, TARGET bind-mounted over NAME, then a stream connect to
//         NAME and a byte exchanged (exit 252: no namespace or mount);
//       rebind-then-connect NAME: a child in a user and mount namespace of
//         its own mounts a tmpfs over NAME's directory and binds NAME there
//         (its own socket, by that name); then this process, in the
//         original namespace, connects to NAME and exchanges a byte (exit
//         252: no namespace, mount or bind);
//       serve: listen on NAME (stream) and answer each connection's byte,
//         for 30 s or until killed (a service inside a sandbox).
// Exit status: 0 on success, else the errno of the failing call (EPERM = 1).
#include <linux/io_uring.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

socklen_t MakeAddr(const std::string& name, sockaddr_un* a) {
  std::memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  if (!name.empty() && name[0] == '@') {
    // Abstract: a leading NUL, the bytes, no terminator.
    std::memcpy(a->sun_path + 1, name.data() + 1, name.size() - 1);
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) +
                                  name.size());
  }
  std::memcpy(a->sun_path, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() +
                                1);
}

int Err() { return errno ? errno : 255; }

int Connect(int type, const std::string& name, bool exchange) {
  sockaddr_un a;
  const socklen_t len = MakeAddr(name, &a);
  int s = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (s < 0) return Err();
  if (connect(s, reinterpret_cast<sockaddr*>(&a), len) != 0) return Err();
  if (exchange) {
    char c = 'p';
    if (write(s, &c, 1) != 1) return Err();
    pollfd p{s, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return ETIMEDOUT;
    if (read(s, &c, 1) != 1) return Err();
  } else if (type == SOCK_DGRAM) {
    char c = 'p';
    if (send(s, &c, 1, 0) != 1) return Err();
  }
  close(s);
  return 0;
}

int SendTo(const std::string& name) {
  sockaddr_un a;
  const socklen_t len = MakeAddr(name, &a);
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return Err();
  char c = 'p';
  if (sendto(s, &c, 1, 0, reinterpret_cast<sockaddr*>(&a), len) != 1) {
    return Err();
  }
  close(s);
  return 0;
}

int Own(int type, const std::string& name) {
  sockaddr_un a;
  const socklen_t len = MakeAddr(name, &a);
  int s = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (s < 0) return Err();
  if (bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0) return Err();
  if (type == SOCK_STREAM && listen(s, 4) != 0) return Err();
  const int r = type == SOCK_STREAM ? Connect(type, name, false) : SendTo(name);
  close(s);
  if (name[0] != '@') unlink(name.c_str());
  return r;
}

// The swap an agent would try: bind a path (it is then the sandbox's own),
// replace the socket file with a link to an outside socket, connect.
int OwnThenSymlink(const std::string& name, const std::string& target) {
  sockaddr_un a;
  const socklen_t len = MakeAddr(name, &a);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return Err();
  if (bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0) return Err();
  if (listen(s, 4) != 0) return Err();
  if (unlink(name.c_str()) != 0) return Err();
  if (symlink(target.c_str(), name.c_str()) != 0) return Err();
  const int r = Connect(SOCK_STREAM, name, false);
  unlink(name.c_str());
  close(s);
  return r;
}

// A byte to the service at the other end of s, and its answer: 0, or why
// not.
int Exchange(int s) {
  char c = 'p';
  if (write(s, &c, 1) != 1) return Err();
  pollfd p{s, POLLIN, 0};
  if (poll(&p, 1, 5000) != 1) return ETIMEDOUT;
  if (read(s, &c, 1) != 1) return Err();
  return 0;
}

// One IORING_OP_CONNECT through a ring of one entry (raw system calls, no
// liburing): the completion's result, 0 or -errno; 253 without io_uring.
int UringConnect(int fd, const sockaddr_un* a, socklen_t len) {
  io_uring_params p{};
  const int ring = static_cast<int>(syscall(__NR_io_uring_setup, 1, &p));
  if (ring < 0) return 253;
  const size_t sq_bytes = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  const size_t cq_bytes = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
  const size_t ring_bytes = sq_bytes > cq_bytes ? sq_bytes : cq_bytes;
  auto* sq = static_cast<char*>(mmap(nullptr, ring_bytes,
                                     PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_POPULATE, ring,
                                     IORING_OFF_SQ_RING));
  char* cq = sq;
  if (!(p.features & IORING_FEAT_SINGLE_MMAP)) {
    cq = static_cast<char*>(mmap(nullptr, cq_bytes, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_POPULATE, ring,
                                 IORING_OFF_CQ_RING));
  }
  auto* sqes = static_cast<io_uring_sqe*>(
      mmap(nullptr, p.sq_entries * sizeof(io_uring_sqe),
           PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
           IORING_OFF_SQES));
  if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) {
    close(ring);
    return 253;
  }
  std::memset(&sqes[0], 0, sizeof(sqes[0]));
  sqes[0].opcode = IORING_OP_CONNECT;
  sqes[0].fd = fd;
  sqes[0].addr = reinterpret_cast<uint64_t>(a);
  sqes[0].off = len;
  sqes[0].user_data = 1;
  auto* tail = reinterpret_cast<unsigned*>(sq + p.sq_off.tail);
  const unsigned mask = *reinterpret_cast<unsigned*>(sq + p.sq_off.ring_mask);
  auto* array = reinterpret_cast<unsigned*>(sq + p.sq_off.array);
  array[*tail & mask] = 0;
  __atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
  if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS,
              nullptr, 0) < 0) {
    close(ring);
    return 253;
  }
  auto* head = reinterpret_cast<unsigned*>(cq + p.cq_off.head);
  const unsigned cq_mask =
      *reinterpret_cast<unsigned*>(cq + p.cq_off.ring_mask);
  auto* cqes = reinterpret_cast<io_uring_cqe*>(cq + p.cq_off.cqes);
  const int res =
      cqes[__atomic_load_n(head, __ATOMIC_ACQUIRE) & cq_mask].res;
  close(ring);
  return res;
}

// Issue 33's attack 1: the swap, connected through io_uring, which the
// connect(2) exit check never saw.
int OwnThenSymlinkUring(const std::string& name, const std::string& target) {
  sockaddr_un a;
  const socklen_t len = MakeAddr(name, &a);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return Err();
  if (bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0) return Err();
  if (listen(s, 4) != 0) return Err();
  if (unlink(name.c_str()) != 0) return Err();
  if (symlink(target.c_str(), name.c_str()) != 0) return Err();
  int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c < 0) return Err();
  const int res = UringConnect(c, &a, len);
  unlink(name.c_str());
  close(s);
  if (res == 253) return 253;
  if (res < 0) return -res;
  return Exchange(c);
}

// Issue 33's attack 4: a listed name with another socket mounted over it,
// in a mount namespace of the caller's own.
int ListedOvermount(const std::string& name, const std::string& target) {
  // A user namespace too, as an agent without capabilities would.
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
    std::perror("unshare(CLONE_NEWUSER | CLONE_NEWNS)");
    return 252;
  }
  // Nothing of this namespace's mounts goes back to the caller's.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    std::perror("mount --make-rprivate /");
    return 252;
  }
  if (mount(target.c_str(), name.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    std::perror("mount --bind");
    return 252;
  }
  return Connect(SOCK_STREAM, name, true);
}

// Root in a new user namespace is this process outside it.
bool MapIds(uid_t uid, gid_t gid) {
  const std::string maps[][2] = {{"/proc/self/setgroups", "deny"},
                                 {"/proc/self/uid_map",
                                  "0 " + std::to_string(uid) + " 1"},
                                 {"/proc/self/gid_map",
                                  "0 " + std::to_string(gid) + " 1"}};
  for (const auto& [file, text] : maps) {
    FILE* f = std::fopen(file.c_str(), "w");
    if (f == nullptr) return false;
    const bool ok = std::fputs(text.c_str(), f) >= 0;
    if (std::fclose(f) != 0 || !ok) return false;
  }
  return true;
}

// Issue 33's attack 2: the name bound again, by the sandbox, where only a
// namespace of its own sees it; the connect from the sandbox's namespace
// reaches the host's socket of that name.
int RebindThenConnect(const std::string& name) {
  int ready[2], done[2];
  if (pipe(ready) != 0 || pipe(done) != 0) return Err();
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  const pid_t pid = fork();
  if (pid < 0) return Err();
  if (pid == 0) {
    char code = 0;
    const std::string dir = name.substr(0, name.rfind('/'));
    sockaddr_un a;
    const socklen_t len = MakeAddr(name, &a);
    int s = -1;
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0 || !MapIds(uid, gid) ||
        mount("sf", dir.c_str(), "tmpfs", 0, nullptr) != 0 ||
        (s = socket(AF_UNIX, SOCK_STREAM, 0)) < 0 ||
        bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        listen(s, 4) != 0) {
      std::perror("rebind-then-connect: the child's namespace");
      code = 1;
    }
    (void)!write(ready[1], &code, 1);
    char c;
    (void)!read(done[0], &c, 1);  // holds its socket until the parent is done
    _exit(0);
  }
  char code = 1;
  int r = 252;
  if (read(ready[0], &code, 1) == 1 && code == 0) {
    r = Connect(SOCK_STREAM, name, true);
  }
  (void)!write(done[1], "x", 1);
  int status;
  waitpid(pid, &status, 0);
  return r;
}

int OwnDgramConnected(const std::string& name) {
  sockaddr_un a;
  const socklen_t len = MakeAddr(name, &a);
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return Err();
  if (bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0) return Err();
  const int r = Connect(SOCK_DGRAM, name, false);
  close(s);
  if (name[0] != '@') unlink(name.c_str());
  return r;
}

int OwnStreamThreaded(const std::string& name) {
  int ready[2];
  if (pipe(ready) != 0) return Err();
  // A second thread shares the descriptor table for as long as it runs.
  std::thread waiter([&] {
    char c;
    (void)!read(ready[0], &c, 1);
  });
  const int r = Own(SOCK_STREAM, name);
  (void)!write(ready[1], "x", 1);
  waiter.join();
  return r;
}

int OwnDgramThenSymlink(const std::string& name, const std::string& target) {
  sockaddr_un a;
  const socklen_t len = MakeAddr(name, &a);
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return Err();
  if (bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0) return Err();
  if (unlink(name.c_str()) != 0) return Err();
  if (symlink(target.c_str(), name.c_str()) != 0) return Err();
  const int r = SendTo(name);
  unlink(name.c_str());
  close(s);
  return r;
}

int OwnThenForkSymlink(const std::string& name, const std::string& target) {
  sockaddr_un a;
  const socklen_t len = MakeAddr(name, &a);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return Err();
  if (bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0) return Err();
  if (listen(s, 4) != 0) return Err();
  int c = socket(AF_UNIX, SOCK_STREAM, 0);  // inherited by the child
  if (c < 0) return Err();
  if (unlink(name.c_str()) != 0) return Err();
  if (symlink(target.c_str(), name.c_str()) != 0) return Err();
  const pid_t pid = fork();
  if (pid < 0) return Err();
  if (pid == 0) {
    _exit(connect(c, reinterpret_cast<sockaddr*>(&a), len) == 0 ? 0 : errno);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return Err();
  const int child = WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                        : WEXITSTATUS(status);
  unlink(name.c_str());
  // Whatever became of the child: does the parent's copy reach TARGET?
  char ch = 'p';
  signal(SIGPIPE, SIG_IGN);
  if (write(c, &ch, 1) == 1) {
    pollfd p{c, POLLIN, 0};
    if (poll(&p, 1, 2000) == 1 && read(c, &ch, 1) == 1) return 0;
  }
  return child == 0 ? 255 : child;
}

// A stream service inside the sandbox it runs in; exits after 30 s so that
// a test that dies cannot leave it behind for long.
int Serve(const std::string& name) {
  sockaddr_un a;
  const socklen_t len = MakeAddr(name, &a);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return Err();
  if (bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0) return Err();
  if (listen(s, 16) != 0) return Err();
  for (int i = 0; i < 300; i++) {
    pollfd p{s, POLLIN, 0};
    if (poll(&p, 1, 100) != 1) continue;
    int c = accept4(s, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    char ch;
    pollfd q{c, POLLIN, 0};
    if (poll(&q, 1, 2000) == 1 && read(c, &ch, 1) == 1) {
      (void)!write(c, &ch, 1);
    }
    close(c);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: unix_probe OP NAME [TARGET]\n");
    return 254;
  }
  const std::string op = argv[1];
  const std::string name = argv[2];
  if (name.size() > sizeof(sockaddr_un{}.sun_path) - 1) return 254;
  int err;
  if (op == "stream-connect") {
    err = Connect(SOCK_STREAM, name, true);
  } else if (op == "stream-connect-only") {
    err = Connect(SOCK_STREAM, name, false);
  } else if (op == "seqpacket-connect") {
    err = Connect(SOCK_SEQPACKET, name, false);
  } else if (op == "dgram-connect") {
    err = Connect(SOCK_DGRAM, name, false);
  } else if (op == "dgram-sendto") {
    err = SendTo(name);
  } else if (op == "own-stream") {
    err = Own(SOCK_STREAM, name);
  } else if (op == "own-dgram") {
    err = Own(SOCK_DGRAM, name);
  } else if (op == "serve") {
    err = Serve(name);
  } else if (op == "own-dgram-connected") {
    err = OwnDgramConnected(name);
  } else if (op == "own-stream-threaded") {
    err = OwnStreamThreaded(name);
  } else if (op == "own-then-symlink" && argc == 4) {
    err = OwnThenSymlink(name, argv[3]);
  } else if (op == "own-dgram-then-symlink" && argc == 4) {
    err = OwnDgramThenSymlink(name, argv[3]);
  } else if (op == "own-then-fork-symlink" && argc == 4) {
    err = OwnThenForkSymlink(name, argv[3]);
  } else if (op == "own-then-symlink-uring" && argc == 4) {
    err = OwnThenSymlinkUring(name, argv[3]);
  } else if (op == "rebind-then-connect") {
    err = RebindThenConnect(name);
  } else if (op == "listed-overmount" && argc == 4) {
    err = ListedOvermount(name, argv[3]);
  } else {
    std::fprintf(stderr, "unix_probe: unknown op %s\n", op.c_str());
    return 254;
  }
  if (err != 0) {
    std::fprintf(stderr, "unix_probe: %s %s: %s\n", op.c_str(), name.c_str(),
                 strerror(err));
  }
  return err;
}
