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
//       serve: listen on NAME (stream) and answer each connection's byte,
//         for 30 s or until killed (a service inside a sandbox).
// Exit status: 0 on success, else the errno of the failing call (EPERM = 1).
#include <poll.h>
#include <signal.h>
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
