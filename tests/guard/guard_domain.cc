#include "guard_domain.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

extern char** environ;

namespace sandfence::guard_test {
namespace {

// What the forked child reports when it could not become the zygote.
struct StartError {
  int stage;  // 1 cgroup, 2 fd, 3 + ConfineStep: ApplyConfinement, 99 exec
  int err;
};

[[noreturn]] void Fail(int fd, int stage, int err) {
  StartError e{stage, err};
  ssize_t ignored = ::write(fd, &e, sizeof(e));
  (void)ignored;
  ::_exit(125);
}

std::string StageName(int stage) {
  if (stage == 1) return "join the sandbox's cgroup";
  if (stage == 2) return "set up its control socket";
  if (stage == 99) return "exec the zygote";
  return absl::StrCat("apply the confinement: ", ConfineStepName(stage - 3));
}

absl::Status WriteAll(int fd, const void* data, size_t len) {
  if (::write(fd, data, len) != static_cast<ssize_t>(len)) {
    return ErrnoError(errno, "write");
  }
  return absl::OkStatus();
}

}  // namespace

std::string ZygotePath() { return SF_GUARD_ZYGOTE; }

absl::StatusOr<std::unique_ptr<Zygote>> Zygote::Start(
    const ConfinePlan& plan, const std::string& cgroup_dir) {
  absl::StatusOr<PreparedConfinement> prepared = PrepareConfinement(plan);
  if (!prepared.ok()) return prepared.status();
  std::unique_ptr<Zygote> z(new Zygote(*std::move(prepared)));

  // Everything the child needs, before fork().
  const std::string exe = ZygotePath();
  char* const argv[] = {const_cast<char*>(exe.c_str()), nullptr};
  const std::string procs = cgroup_dir + "/cgroup.procs";
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return ErrnoError(errno, "socketpair");
  }
  UniqueFd ours(sv[0]), theirs(sv[1]);
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2");
  UniqueFd err_read(pipefd[0]), err_write(pipefd[1]);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoError(errno, "fork");
  if (pid == 0) {
    const int efd = err_write.get();
    // Dies with the test; nothing of it outlives a crashed test.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != parent) ::_exit(125);
    // Into the sandbox's cgroup while still unconfined: Landlock keeps a
    // confined process from writing any cgroup.procs.
    const int cg = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (cg < 0 || ::write(cg, "0", 1) != 1) Fail(efd, 1, errno);
    ::close(cg);
    if (::dup2(theirs.get(), 3) != 3) Fail(efd, 2, errno);
    int step = 0;
    if (const int rc = ApplyConfinement(z->prepared_, &step); rc != 0) {
      Fail(efd, 3 + step, -rc);
    }
    ::execve(argv[0], argv, environ);
    Fail(efd, 99, errno);
  }
  theirs.reset();
  err_write.reset();
  StartError e{};
  ssize_t n;
  do {
    n = ::read(err_read.get(), &e, sizeof(e));
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof(e))) {
    ::waitpid(pid, nullptr, 0);
    return ErrnoError(
        e.err, absl::StrCat("the zygote could not ", StageName(e.stage)));
  }
  z->pid_ = pid;
  z->sock_ = std::move(ours);
  return z;
}

Zygote::~Zygote() {
  if (pid_ <= 0) return;
  sock_.reset();  // EOF: it exits
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

absl::StatusOr<pid_t> Zygote::Spawn(const std::vector<std::string>& argv,
                                    const std::string& cgroup_dir,
                                    int out_fd) const {
  std::string payload;
  for (const std::string& a : argv) {
    payload.append(a);
    payload.push_back('\0');
  }
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2");
  UniqueFd go_read(go[0]), go_write(go[1]);

  int fds[2] = {out_fd, go_read.get()};
  char control[CMSG_SPACE(sizeof(fds))] = {};
  iovec iov = {payload.data(), payload.size()};
  msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(c), fds, sizeof(fds));
  if (::sendmsg(sock_.get(), &msg, MSG_NOSIGNAL) < 0) {
    return ErrnoError(errno, "send a request to the zygote");
  }
  go_read.reset();
  int answer = 0;
  ssize_t n;
  do {
    n = ::recv(sock_.get(), &answer, sizeof(answer), 0);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof(answer))) {
    return absl::InternalError("the zygote did not answer");
  }
  if (answer < 0) return ErrnoError(-answer, "the zygote's clone");
  const pid_t pid = answer;
  // It waits on `go` (EOF when go_write closes: it gives up with 126).
  if (!cgroup_dir.empty()) {
    const std::string procs = cgroup_dir + "/cgroup.procs";
    const int cg = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    const std::string text = absl::StrCat(pid);
    const bool moved = cg >= 0 && ::write(cg, text.data(), text.size()) ==
                                      static_cast<ssize_t>(text.size());
    const int err = errno;
    if (cg >= 0) ::close(cg);
    if (!moved) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return ErrnoError(err, absl::StrCat("move ", pid, " into ", procs));
    }
  }
  if (absl::Status s = WriteAll(go_write.get(), "g", 1); !s.ok()) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return s;
  }
  return pid;
}

}  // namespace sandfence::guard_test
