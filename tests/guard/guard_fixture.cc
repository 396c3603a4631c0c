#include "guard_fixture.h"

#include <fcntl.h>
#include <ftw.h>
#include <linux/kcmp.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "guard/guard_types.h"
#include "support/host_probe.h"
#include "support/private_host.h"

namespace sandfence::guard_test {
namespace {

constexpr char kSetpriv[] = "/usr/bin/setpriv";

absl::Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoError(errno, absl::StrCat("mkdir ", path));
  }
  return absl::OkStatus();
}

bool CgroupEmpty(const std::string& dir) {
  std::ifstream procs(dir + "/cgroup.procs");
  std::string line;
  return !procs || !std::getline(procs, line);
}

// Kills whatever still runs in a cgroup and removes it. Best effort: this
// runs in destructors.
void RemoveCgroup(const std::string& dir) {
  if (dir.empty()) return;
  if (std::ofstream kill(dir + "/cgroup.kill"); kill) kill << "1";
  // The kill is asynchronous; rmdir succeeds once the cgroup is empty.
  for (int i = 0; i < 500 && !CgroupEmpty(dir); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::rmdir(dir.c_str());
}

}  // namespace

std::string ScenarioTestName(const ::testing::TestParamInfo<Scenario>& row) {
  return row.param.name;
}

std::string ActorPath() { return SF_GUARD_ACTOR; }
std::string TargetPath() { return SF_GUARD_TARGET; }

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(status), " (",
                        ::strsignal(WTERMSIG(status)), ")");
  }
  return absl::StrCat("wait status ", status);
}

// --- Sandboxes ---------------------------------------------------------------

absl::StatusOr<Sandboxes> Sandboxes::Create() {
  absl::StatusOr<std::string> root = FindCgroup2Mount();
  if (!root.ok()) return root.status();
  Sandboxes s;
  std::string base = absl::StrCat(*root, "/sf-guard-test-", ::getpid());
  for (const std::string& dir :
       {base, base + "/guarded", base + "/guarded/sub", base + "/uring",
        base + "/audited", base + "/unguarded", base + "/escape"}) {
    if (absl::Status st = MakeDir(dir); !st.ok()) return st;
  }
  s.base_ = base;
  s.sub_ = base + "/guarded/sub";
  s.unguarded_ = base + "/unguarded";
  s.escape_ = base + "/escape";
  absl::StatusOr<CgroupRef> guarded = InspectCgroup(base + "/guarded");
  if (!guarded.ok()) return guarded.status();
  absl::StatusOr<CgroupRef> uring = InspectCgroup(base + "/uring");
  if (!uring.ok()) return uring.status();
  absl::StatusOr<CgroupRef> audited = InspectCgroup(base + "/audited");
  if (!audited.ok()) return audited.status();
  s.guarded_ = *guarded;
  s.uring_ = *uring;
  s.audited_ = *audited;
  return s;
}

Sandboxes::Sandboxes(Sandboxes&& other) noexcept
    : base_(std::exchange(other.base_, std::string())),
      guarded_(other.guarded_),
      uring_(other.uring_),
      audited_(other.audited_),
      sub_(other.sub_),
      unguarded_(other.unguarded_),
      escape_(other.escape_) {}

Sandboxes::~Sandboxes() {
  if (base_.empty()) return;
  for (const std::string& dir :
       {sub_, guarded_.path, uring_.path, audited_.path, unguarded_, escape_}) {
    RemoveCgroup(dir);
  }
  RemoveCgroup(base_);
}

std::string Sandboxes::DirFor(Where where) const {
  switch (where) {
    case Where::kGuarded:
      return guarded_.path;
    case Where::kUring:
      return uring_.path;
    case Where::kSub:
      return sub_;
    case Where::kAudited:
      return audited_.path;
    case Where::kUnguarded:
      return unguarded_;
    case Where::kOutside:
      return "";
  }
  return "";
}

// --- ProcMount ---------------------------------------------------------------

absl::StatusOr<ProcMount> ProcMount::Create() {
  char pattern[] = "/tmp/sf-guard-proc-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) return ErrnoError(errno, "mkdtemp");
  if (::mount("proc", pattern, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0) {
    int err = errno;
    ::rmdir(pattern);
    return ErrnoError(err, "mount proc");
  }
  ProcMount m;
  m.path_ = pattern;
  return m;
}

ProcMount::ProcMount(ProcMount&& other) noexcept
    : path_(std::exchange(other.path_, std::string())) {}

ProcMount::~ProcMount() {
  if (path_.empty()) return;
  ::umount2(path_.c_str(), MNT_DETACH);
  ::rmdir(path_.c_str());
}

// --- ProtectedFiles ----------------------------------------------------------

namespace {

// A Unix socket bound at path (listening, for a stream one); its fd.
absl::StatusOr<int> BindUnix(const std::string& path, int type) {
  int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError(errno, "socket");
  sockaddr_un sa = {};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof(sa.sun_path) - 1);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      (type == SOCK_STREAM && ::listen(fd, 64) != 0)) {
    int err = errno;
    ::close(fd);
    return ErrnoError(err, absl::StrCat("bind/listen ", path));
  }
  // Others' agents (another UID) may connect: the guard must refuse them.
  ::chmod(path.c_str(), 0777);
  return fd;
}

absl::Status WriteFile(const std::string& path) {
  std::ofstream out(path);
  out << "sandfence state\n";
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProtectedFiles> ProtectedFiles::Create() {
  char pattern[] = "/tmp/sf-guard-files-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) return ErrnoError(errno, "mkdtemp");
  ProtectedFiles f;
  f.base_ = pattern;
  f.prot_ = f.base_ + "/prot";
  f.free_ = f.base_ + "/free";
  std::string sockdir = f.base_ + "/sock";
  f.socket_ = sockdir + "/s.sock";
  for (const std::string& dir :
       {f.base_, f.prot_, f.prot_ + "/pins", f.prot_ + "/pins/sub",
        f.prot_ + "/pins/empty", f.free_, sockdir}) {
    if (absl::Status s = MakeDir(dir); !s.ok()) return s;
    ::chmod(dir.c_str(), 0777);  // DAC lets everyone: the guard decides
  }
  for (const auto& [path, type] : std::vector<std::pair<std::string, int>>{
           {f.prot_ + "/daemon.sock", SOCK_STREAM},
           {f.prot_ + "/dgram.sock", SOCK_DGRAM},
           {f.socket_, SOCK_STREAM},
           {f.free_ + "/free.sock", SOCK_STREAM}}) {
    absl::StatusOr<int> fd = BindUnix(path, type);
    if (!fd.ok()) return fd.status();
    f.listeners_.push_back(*fd);
  }
  if (absl::Status s = f.Reset(); !s.ok()) return s;
  return f;
}

// What the rows may leave behind: in signal mode the refused call has run
// (the kill comes after it), so a renamed directory is put back (the same
// inode stays protected) and every stray name removed.
absl::Status ProtectedFiles::Reset() const {
  struct stat st;
  if (::stat(prot_.c_str(), &st) != 0 &&
      ::rename((free_ + "/moved").c_str(), prot_.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("put back ", prot_));
  }
  for (const std::string& stray :
       {prot_ + "/new", prot_ + "/lnk", prot_ + "/fifo", prot_ + "/new.sock",
        free_ + "/stolen", free_ + "/hard",
        free_ + "/new", free_ + "/renamed"}) {
    ::unlink(stray.c_str());
  }
  ::rmdir((prot_ + "/pins/new").c_str());
  for (const std::string& dir :
       {prot_ + "/pins", prot_ + "/pins/sub", prot_ + "/pins/empty"}) {
    if (absl::Status s = MakeDir(dir); !s.ok()) return s;
    ::chmod(dir.c_str(), 0777);
  }
  for (const std::string& file :
       {prot_ + "/state", prot_ + "/pins/sub/pin", free_ + "/state"}) {
    if (absl::Status s = WriteFile(file); !s.ok()) return s;
    ::chmod(file.c_str(), 0666);
  }
  return absl::OkStatus();
}

ProtectedFiles::ProtectedFiles(ProtectedFiles&& other) noexcept
    : base_(std::exchange(other.base_, std::string())),
      prot_(other.prot_),
      free_(other.free_),
      socket_(other.socket_),
      listeners_(std::exchange(other.listeners_, {})) {}

ProtectedFiles::~ProtectedFiles() {
  for (int fd : listeners_) ::close(fd);
  if (base_.empty()) return;
  (void)Reset();  // strays out, the directory back in place
  // Only what Create() made: a stray file fails the rmdir, and stays.
  for (const std::string& file :
       {prot_ + "/state", prot_ + "/pins/sub/pin", prot_ + "/daemon.sock",
        prot_ + "/dgram.sock", socket_, free_ + "/free.sock",
        free_ + "/state"}) {
    ::unlink(file.c_str());
  }
  for (const std::string& dir :
       {prot_ + "/pins/sub", prot_ + "/pins/empty", prot_ + "/pins", prot_,
        free_, base_ + "/sock", base_}) {
    ::rmdir(dir.c_str());
  }
}

// --- Child -------------------------------------------------------------------

absl::StatusOr<Child> Child::Spawn(const Spec& spec) {
  // Everything the child needs is built before fork().
  std::vector<std::string> args;
  if (spec.uid != kRoot) {
    args = {kSetpriv, absl::StrCat("--reuid=", spec.uid),
            absl::StrCat("--regid=", spec.uid), "--clear-groups", "--"};
  }
  args.insert(args.end(), spec.argv.begin(), spec.argv.end());
  if (spec.zygote != nullptr) {
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2");
    absl::StatusOr<pid_t> pid =
        spec.zygote->Spawn(args, spec.cgroup_dir, pipefd[1]);
    ::close(pipefd[1]);
    if (!pid.ok()) {
      ::close(pipefd[0]);
      return pid.status();
    }
    Child c;
    c.pid_ = *pid;
    c.out_ = pipefd[0];
    return c;
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string procs =
      spec.cgroup_dir.empty() ? "" : spec.cgroup_dir + "/cgroup.procs";

  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2");
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return ErrnoError(err, "fork");
  }
  if (pid == 0) {
    ::dup2(pipefd[1], STDOUT_FILENO);
    if (!procs.empty()) {
      int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(126);
      ::close(fd);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  Child c;
  c.pid_ = pid;
  c.out_ = pipefd[0];
  return c;
}

Child::Child(Child&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      out_(std::exchange(other.out_, -1)),
      reaped_(other.reaped_),
      buffered_(std::move(other.buffered_)) {}

Child::~Child() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_ >= 0) ::close(out_);
}

std::string Child::ReadLine() {
  std::string line;
  char c;
  while (::read(out_, &c, 1) == 1) {
    if (c == '\n') return line;
    line.push_back(c);
  }
  return line;
}

bool Child::Running() {
  if (reaped_) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) reaped_ = true;
  return r == 0;
}

int Child::Wait() {
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return status;
}

std::string Child::DrainOutput() {
  ::fcntl(out_, F_SETFL, ::fcntl(out_, F_GETFL) | O_NONBLOCK);
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out_, buf, sizeof(buf))) > 0) buffered_.append(buf, n);
  return buffered_;
}

std::string Child::ReadAll() {
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out_, buf, sizeof(buf))) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    buffered_.append(buf, n);
  }
  return buffered_;
}

absl::StatusOr<Target> StartTarget(uid_t uid, const std::string& cgroup_dir,
                                   const Zygote* zygote) {
  absl::StatusOr<Child> child = Child::Spawn({.argv = {TargetPath()},
                                              .uid = uid,
                                              .cgroup_dir = cgroup_dir,
                                              .zygote = zygote});
  if (!child.ok()) return child.status();
  Target t{.child = *std::move(child)};
  std::string line = t.child.ReadLine();
  // "ready pid=P addr=0xA len=N fd=F"
  std::map<std::string, std::string> fields;
  for (absl::string_view kv : absl::StrSplit(line, ' ')) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, '=');
    fields[p.first] = p.second;
  }
  uint64_t addr = 0;
  if (fields.count("ready") == 0 && line.rfind("ready", 0) != 0) {
    return absl::InternalError(
        absl::StrCat("target did not start: \"", line, "\""));
  }
  if (!absl::SimpleHexAtoi(fields["addr"], &addr) ||
      !absl::SimpleAtoi(fields["len"], &t.len) ||
      !absl::SimpleAtoi(fields["fd"], &t.fd)) {
    return absl::InternalError(absl::StrCat("target said \"", line, "\""));
  }
  t.addr = static_cast<uintptr_t>(addr);
  return t;
}

// --- GuardWorld --------------------------------------------------------------

GuardWorld::GuardWorld(Enforcer enforcer, std::optional<GuardController> guard,
                       Sandboxes sandboxes, ProcMount proc,
                       ProtectedFiles files)
    : enforcer_(enforcer),
      guard_(std::move(guard)),
      sandboxes_(std::move(sandboxes)),
      proc_(std::move(proc)),
      files_(std::move(files)) {}

namespace {

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);
  return 0;
}

// Where the actor makes its scratch directories (SF_GUARD_SCRATCH), removed
// with the world, with what killed actors left there. For landlock it
// must exist before a plan is prepared: the protected directory and the
// second procfs lie in /tmp, so /tmp is on the way to a no_access path and
// a no_write mount, and Landlock then lets nothing new be made directly in
// it (landlock.h), which `run` does not do to /tmp (sandfence's own paths
// are elsewhere).
absl::StatusOr<std::string> MakeScratch() {
  char scratch[] = "/tmp/sf-guard-scratch-XXXXXX";
  if (::mkdtemp(scratch) == nullptr) return ErrnoError(errno, "mkdtemp");
  ::chmod(scratch, 01777);  // agents make theirs in it too
  ::setenv("SF_GUARD_SCRATCH", scratch, 1);
  return std::string(scratch);
}

}  // namespace

GuardWorld::~GuardWorld() {
  // The zygotes first (their processes are in the sandboxes' cgroups,
  // which ~Sandboxes kills); then what the actors left in the scratch.
  guarded_zygote_.reset();
  uring_zygote_.reset();
  if (!scratch_.empty()) {
    ::nftw(scratch_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
  }
}

ConfinePlan GuardWorld::LandlockPlan(Where where) const {
  // What Sandbox::ConfinementPlan gives `run` for a policy that leaves the
  // guard's fields at their defaults, with the fixture's protected objects
  // in place of sandfence's own paths (SandfenceOwnPaths), and run's fresh
  // /proc (here the host's: the zygote makes no PID namespace, so that it
  // can name processes outside).
  ConfinePlan plan;
  plan.no_access = {files_.prot(), files_.socket()};
  plan.deny_io_uring = where != Where::kUring;  // policy allow_io_uring
  plan.deny_ptrace = false;
  plan.fresh_mounts = {"/proc"};
  return plan;
}

absl::StatusOr<const Zygote*> GuardWorld::ZygoteFor(Where where) {
  std::unique_ptr<Zygote>* slot = nullptr;
  switch (where) {
    case Where::kOutside:
    case Where::kUnguarded:
      return nullptr;
    case Where::kAudited:
      return absl::InvalidArgumentError(
          "an audit-only sandbox has no landlock counterpart (Landlock "
          "cannot record and let through): mark the row NotApplicable");
    case Where::kGuarded:
    case Where::kSub:
      slot = &guarded_zygote_;
      break;
    case Where::kUring:
      slot = &uring_zygote_;
      break;
  }
  if (*slot == nullptr) {
    const Where sandbox =
        where == Where::kUring ? Where::kUring : Where::kGuarded;
    absl::StatusOr<std::unique_ptr<Zygote>> z =
        Zygote::Start(LandlockPlan(sandbox), sandboxes_.DirFor(sandbox));
    if (!z.ok()) return z.status();
    *slot = *std::move(z);
  }
  return slot->get();
}

absl::StatusOr<GuardWorld*> GuardWorld::Get(Enforcer enforcer) {
  static std::unique_ptr<GuardWorld> world;
  if (world != nullptr) {
    if (world->enforcer_ != enforcer) {
      return absl::InternalError("one enforcer per test process");
    }
    return world.get();
  }
  if (enforcer == Enforcer::kLandlock) {
    absl::StatusOr<Sandboxes> sandboxes = Sandboxes::Create();
    if (!sandboxes.ok()) return sandboxes.status();
    absl::StatusOr<ProcMount> proc = ProcMount::Create();
    if (!proc.ok()) return proc.status();
    absl::StatusOr<ProtectedFiles> files = ProtectedFiles::Create();
    if (!files.ok()) return files.status();
    absl::StatusOr<std::string> scratch = MakeScratch();
    if (!scratch.ok()) return scratch.status();
    world = std::make_unique<GuardWorld>(enforcer, std::nullopt,
                                         *std::move(sandboxes),
                                         *std::move(proc), *std::move(files));
    world->scratch_ = *scratch;
    return world.get();
  }
  absl::StatusOr<GuardController> guard = GuardController::Create(
      testing::PrivateHost(),
      enforcer == Enforcer::kLsm ? GuardMode::kLsm : GuardMode::kSignal);
  if (!guard.ok()) return guard.status();
  absl::StatusOr<Sandboxes> sandboxes = Sandboxes::Create();
  if (!sandboxes.ok()) return sandboxes.status();
  absl::StatusOr<ProcMount> proc = ProcMount::Create();
  if (!proc.ok()) return proc.status();
  if (absl::Status s = guard->AddSandbox({.cgroup_id = sandboxes->guarded().id,
                                          .level = sandboxes->guarded().level});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = guard->AddSandbox({.cgroup_id = sandboxes->uring().id,
                                          .level = sandboxes->uring().level,
                                          .allow_io_uring = true});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = guard->AddSandbox({.cgroup_id = sandboxes->audited().id,
                                          .level = sandboxes->audited().level,
                                          .audit_only = true});
      !s.ok()) {
    return s;
  }
  absl::StatusOr<ProtectedFiles> files = ProtectedFiles::Create();
  if (!files.ok()) return files.status();
  for (const std::string& path : {files->prot(), files->socket()}) {
    if (absl::Status s = guard->Protect(path); !s.ok()) return s;
  }
  auto w = std::make_unique<GuardWorld>(enforcer, *std::move(guard),
                                        *std::move(sandboxes), *std::move(proc),
                                        *std::move(files));
  GuardWorld* raw = w.get();
  absl::StatusOr<GuardEventReader> reader = GuardEventReader::Create(
      raw->guard_->events_fd(),
      [raw](const sf_guard_event& e) { raw->events_.push_back(e); });
  if (!reader.ok()) return reader.status();
  raw->reader_ = std::make_unique<GuardEventReader>(*std::move(reader));
  absl::StatusOr<std::string> scratch = MakeScratch();
  if (!scratch.ok()) return scratch.status();
  raw->scratch_ = *scratch;
  world = std::move(w);
  return raw;
}

void GuardWorld::ClearEvents() { (void)CollectEvents(); }

std::vector<sf_guard_event> GuardWorld::CollectEvents() {
  // Events are written before the system call returns, so everything an
  // ended process caused is already in the ring buffer. (No reader: no
  // BPF guard, no events.)
  while (reader_ != nullptr) {
    absl::StatusOr<int> n = reader_->Poll(0);
    if (!n.ok() || *n == 0) break;
  }
  return std::exchange(events_, {});
}

namespace {

// The path below /tmp (the target's working directory).
std::string BelowTmp(const std::string& path) {
  return absl::StartsWith(path, "/tmp/") ? path.substr(5) : path;
}

std::string Substitute(const std::string& arg, const Target& t,
                       const GuardWorld& w, const Sandboxes& s) {
  const ProtectedFiles& f = w.protected_files();
  return absl::StrReplaceAll(
      arg, {{"{pid}", absl::StrCat(t.child.pid())},
            {"{addr}", absl::StrCat("0x", absl::Hex(t.addr))},
            {"{len}", absl::StrCat(t.len)},
            {"{fd}", absl::StrCat(t.fd)},
            {"{pgid}", absl::StrCat(::getpgid(t.child.pid()))},
            {"{procmnt}", w.proc_mount()},
            {"{escape}", s.escape_dir()},
            {"{sub}", s.DirFor(Where::kSub)},
            {"{guarded}", s.DirFor(Where::kGuarded)},
            {"{prot_name}", BelowTmp(f.prot())},
            {"{prot}", f.prot()},
            {"{free_name}", BelowTmp(f.free())},
            {"{free}", f.free()},
            {"{sock}", f.socket()}});
}

std::string DescribeEvents(const std::vector<sf_guard_event>& events) {
  if (events.empty()) return "  (no events)";
  std::string s;
  for (const sf_guard_event& e : events) {
    absl::StrAppend(&s, "  ", DescribeGuardEvent(e), "\n");
  }
  return s;
}

uint32_t ActionFor(Outcome o) {
  switch (o) {
    case Outcome::kAudited:
      return SF_ACTION_AUDITED;
    case Outcome::kKilled:
      return SF_ACTION_KILLED;
    case Outcome::kDenied:
    case Outcome::kDeniedPartly:
      return SF_ACTION_DENIED;
    default:
      return 0;
  }
}

}  // namespace

// perf_event_open works here at all (a software event on ourselves): some
// hosts forbid it (kernel.perf_event_paranoid 3 without CAP_PERFMON, or no
// perf events), and then a row would test the host, not sandfence.
const absl::Status& HostPerfEvents() {
  static const absl::Status s = [] {
    perf_event_attr attr = {};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.exclude_kernel = 1;
    attr.disabled = 1;
    long fd = ::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd < 0) return ErrnoError(errno, "perf_event_open of a software event");
    ::close(static_cast<int>(fd));
    return absl::OkStatus();
  }();
  return s;
}

// kcmp() exists (CONFIG_KCMP).
const absl::Status& HostKcmp() {
  static const absl::Status s = [] {
    if (::syscall(SYS_kcmp, ::getpid(), ::getpid(), KCMP_VM, 0, 0) < 0) {
      return ErrnoError(errno, "kcmp");
    }
    return absl::OkStatus();
  }();
  return s;
}

// /dev/fd, /dev/stdin, ... are the links to /proc/self/fd that udev and
// container runtimes make (a bare devtmpfs, as in the test VM, has none).
const absl::Status& HostDevFdLinks() {
  static const absl::Status s = [] {
    char target[64] = {};
    if (::readlink("/dev/fd", target, sizeof(target) - 1) < 0) {
      return ErrnoError(errno, "readlink /dev/fd");
    }
    if (std::string(target) != "/proc/self/fd") {
      return absl::FailedPreconditionError(
          absl::StrCat("/dev/fd links to ", target, ", not /proc/self/fd"));
    }
    if (::access("/dev/stdin", F_OK) != 0) {
      return ErrnoError(errno, "/dev/stdin");
    }
    return absl::OkStatus();
  }();
  return s;
}

// Actor commands that make their call through the 32-bit entry.
static bool UsesInt80(const Scenario& s) {
  static const char* const kInt80Commands[] = {"open32", "openat2-32",
                                               "ptrace32-seize"};
  if (s.args.empty()) return false;
  for (const char* c : kInt80Commands) {
    if (s.args[0] == c) return true;
  }
  return false;
}

void GuardWorld::Run(const Scenario& s, const Expect& expect) {
  SCOPED_TRACE(s.description);
  if (expect.outcome == Outcome::kNotApplicable) {
    GTEST_SKIP() << "not applicable to " << EnforcerName(enforcer_) << ": "
                 << (expect.why != nullptr ? expect.why : "(no reason given)");
  }
  if (UsesInt80(s)) SANDFENCE_REQUIRE_HOST(sandfence::testing::HostInt80());
  const std::string command = s.args.empty() ? "" : s.args[0];
  if (absl::StartsWith(command, "uring")) {
    SANDFENCE_REQUIRE_HOST(sandfence::testing::HostIoUring());
  }
  if (absl::StartsWith(command, "perf"))
    SANDFENCE_REQUIRE_HOST(HostPerfEvents());
  if (absl::StartsWith(command, "kcmp")) SANDFENCE_REQUIRE_HOST(HostKcmp());
  for (const std::string& a : s.args) {
    if (a == "dev" || a == "stdin" || absl::StartsWith(a, "/dev/fd")) {
      SANDFENCE_REQUIRE_HOST(HostDevFdLinks());
    }
  }
  {
    absl::Status reset = files_.Reset();
    ASSERT_TRUE(reset.ok()) << reset;
  }
  if (s.actor_uid != kRoot &&
      (absl::StartsWith(command, "ptrace") ||
       absl::StartsWith(command, "vm-") || command == "pidfd-getfd")) {
    SANDFENCE_REQUIRE_HOST(sandfence::testing::HostYamaAllowsPtrace());
  }
  // landlock: processes of a guarded sandbox run in its domain.
  const Zygote* target_zygote = nullptr;
  const Zygote* actor_zygote = nullptr;
  if (enforcer_ == Enforcer::kLandlock) {
    absl::StatusOr<const Zygote*> z = ZygoteFor(s.target_where);
    ASSERT_TRUE(z.ok()) << z.status();
    target_zygote = *z;
    z = ZygoteFor(s.actor_where);
    ASSERT_TRUE(z.ok()) << z.status();
    actor_zygote = *z;
  }
  absl::StatusOr<Target> target = StartTarget(
      s.target_uid, sandboxes_.DirFor(s.target_where), target_zygote);
  ASSERT_TRUE(target.ok()) << target.status();

  std::vector<std::string> argv = {ActorPath()};
  for (const std::string& a : s.args) {
    argv.push_back(Substitute(a, *target, *this, sandboxes_));
  }
  ClearEvents();
  absl::StatusOr<Child> actor =
      Child::Spawn({.argv = argv,
                    .uid = s.actor_uid,
                    .cgroup_dir = sandboxes_.DirFor(s.actor_where),
                    .zygote = actor_zygote});
  ASSERT_TRUE(actor.ok()) << actor.status();
  pid_t actor_pid = actor->pid();
  int status = actor->Wait();
  std::string out = actor->DrainOutput();
  std::vector<sf_guard_event> events = CollectEvents();

  std::string context =
      absl::StrCat("\nactor: ", absl::StrJoin(argv, " "), " as uid ",
                   s.actor_uid, "\nresult: ", DescribeWaitStatus(status),
                   ", output \"", out, "\"\nevents:\n", DescribeEvents(events));
  std::string errno_line = absl::StrCat("errno ", expect.err, "\n");
  if (const char* v = std::getenv("SANDFENCE_TEST_VERBOSE");
      v != nullptr && std::string(v) == "1") {
    std::printf("%s:%s\n", s.name, context.c_str());
  }

  const bool succeeded = WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                         absl::StrContains(out, "ok\n");
  switch (expect.outcome) {
    case Outcome::kAllowed:
      EXPECT_TRUE(succeeded) << "must succeed" << context;
      // The actor reports a refused read after a successful open (an
      // open alone would hide a refusal made at read time).
      for (int refused : {EPERM, EACCES}) {
        EXPECT_FALSE(
            absl::StrContains(out, absl::StrCat("read-failed ", refused, "\n")))
            << "must succeed, its read too" << context;
      }
      break;
    case Outcome::kAudited:
    case Outcome::kDeniedPartly:
      EXPECT_TRUE(succeeded) << "must succeed" << context;
      break;
    case Outcome::kReadRefused:
      EXPECT_TRUE(succeeded &&
                  absl::StrContains(
                      out, absl::StrCat("read-failed ", expect.err, "\n")))
          << "the open must succeed and its read fail with errno " << expect.err
          << " (" << ::strerror(expect.err) << ")" << context;
      break;
    case Outcome::kScopedOut: {
      EXPECT_TRUE(succeeded) << "must succeed" << context;
      // The target (outside) prints "signal 23 from <sender>" when a
      // SIGURG lands (other tests' kill(-1) may land, ours must not); give
      // one that was sent the time to be handled.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const std::string got = target->child.DrainOutput();
      EXPECT_FALSE(absl::StrContains(
          got, absl::StrCat("signal 23 from ", actor_pid, "\n")))
          << "the target outside must get nothing from the actor; it said \""
          << got << "\"" << context;
      break;
    }
    case Outcome::kNotApplicable:
      break;
    case Outcome::kKilled:
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
          << "must be killed by SIGKILL" << context;
      break;
    case Outcome::kDenied:
    case Outcome::kErrno:
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1 &&
                  absl::StrContains(out, errno_line))
          << "must fail with errno " << expect.err << " ("
          << ::strerror(expect.err) << ")" << context;
      break;
  }
  // Where the call was stopped (not where the row allows it).
  if (s.child_must_not_run && expect.outcome != Outcome::kAllowed &&
      expect.outcome != Outcome::kAudited) {
    EXPECT_FALSE(absl::StrContains(out, "child-ran"))
        << "the child placed outside the sandbox ran" << context;
  }
  if (expect.target_survives) {
    EXPECT_TRUE(target->child.Running())
        << "the target must survive (the signal must not land)" << context;
  }

  uint32_t action = ActionFor(expect.outcome);
  if (action == 0) {
    EXPECT_TRUE(events.empty()) << "must leave no event" << context;
    return;
  }
  uint32_t enforcer =
      enforcer_ == Enforcer::kLsm ? SF_ENFORCER_LSM : SF_ENFORCER_SIGNAL;
  bool found = false;
  for (const sf_guard_event& e : events) {
    if (e.actor.tgid == static_cast<uint32_t>(actor_pid) &&
        e.action == action && e.what == expect.what && e.enforcer == enforcer &&
        (expect.proc_class == 0 || e.proc_class == expect.proc_class)) {
      found = true;
      uint64_t sandbox =
          s.actor_where == Where::kAudited ? sandboxes_.audited().id
          : s.actor_where == Where::kUring ? sandboxes_.uring().id
                                           : sandboxes_.guarded().id;
      EXPECT_EQ(e.sandbox_id, sandbox) << context;
      EXPECT_EQ(e.actor.uid, s.actor_uid) << context;
    }
  }
  EXPECT_TRUE(found) << "expected a \"" << GuardActionName(action) << " "
                     << GuardWhatName(expect.what)
                     << (expect.proc_class
                             ? absl::StrCat(
                                   "(", ProcClassName(expect.proc_class), ")")
                             : "")
                     << "\" event by the " << GuardEnforcerName(enforcer)
                     << " enforcer" << context;
}

void GuardWorld::CheckUnprotect() {
  EXPECT_EQ(guard_->Unprotect("/nonexistent-sf-guard").code(),
            absl::StatusCode::kNotFound);
  const std::string& prot = files_.prot();
  ASSERT_TRUE(files_.Reset().ok());
  absl::Status s = guard_->Unprotect(prot);
  ASSERT_TRUE(s.ok()) << s;
  ClearEvents();
  absl::StatusOr<Child> actor =
      Child::Spawn({.argv = {ActorPath(), "unlink", prot + "/state"},
                    .cgroup_dir = sandboxes_.guarded().path});
  ASSERT_TRUE(actor.ok()) << actor.status();
  int status = actor->Wait();
  std::string out = actor->DrainOutput();
  std::vector<sf_guard_event> events = CollectEvents();
  s = guard_->Protect(prot);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
              absl::StrContains(out, "ok\n"))
      << "unprotected, the unlink must go through: "
      << DescribeWaitStatus(status) << " \"" << out << "\"";
  EXPECT_TRUE(events.empty()) << DescribeEvents(events);
  EXPECT_TRUE(guard_->Protect(prot).ok()) << "protecting again is a no-op";
  ASSERT_TRUE(files_.Reset().ok());
}

void GuardWorld::RunPsAux(uid_t uid) {
  constexpr char kPs[] = "/usr/bin/ps";
  if (::access(kPs, X_OK) != 0) GTEST_SKIP() << kPs << " is not installed";
  // landlock: ps and the inside target in the sandbox's domain.
  const Zygote* zygote = nullptr;
  if (enforcer_ == Enforcer::kLandlock) {
    absl::StatusOr<const Zygote*> z = ZygoteFor(Where::kGuarded);
    ASSERT_TRUE(z.ok()) << z.status();
    zygote = *z;
  }
  // Foreign processes for ps to see: another UID outside, one inside.
  absl::StatusOr<Target> outside = StartTarget(kOtherUid, "");
  ASSERT_TRUE(outside.ok()) << outside.status();
  absl::StatusOr<Target> inside =
      StartTarget(kOtherUid, sandboxes_.guarded().path, zygote);
  ASSERT_TRUE(inside.ok()) << inside.status();
  ClearEvents();
  absl::StatusOr<Child> ps =
      Child::Spawn({.argv = {kPs, "aux"},
                    .uid = uid,
                    .cgroup_dir = sandboxes_.guarded().path,
                    .zygote = zygote});
  ASSERT_TRUE(ps.ok()) << ps.status();
  pid_t ps_pid = ps->pid();
  std::string out = ps->ReadAll();
  int status = ps->Wait();
  std::vector<sf_guard_event> events = CollectEvents();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "ps aux: " << DescribeWaitStatus(status) << "\n"
      << out;
  int judged = 0;
  if (enforcer_ == Enforcer::kLandlock) {
    // No event to expect (Landlock records nothing); what Landlock leaves
    // readable (the /proc listing, stat, status, cmdline) still shows both
    // targets, each on its line.
    for (pid_t pid : {outside->child.pid(), inside->child.pid()}) {
      bool listed = false;
      for (absl::string_view line : absl::StrSplit(out, '\n')) {
        std::vector<absl::string_view> cols =
            absl::StrSplit(line, ' ', absl::SkipEmpty());
        if (cols.size() > 1 && cols[1] == absl::StrCat(pid) &&
            absl::StrContains(line, TargetPath())) {
          listed = true;
        }
      }
      EXPECT_TRUE(listed) << "ps aux lists target " << pid << ":\n" << out;
    }
    EXPECT_TRUE(events.empty()) << DescribeEvents(events);
    std::printf("ps aux as uid %u under landlock: %s, %d lines\n", uid,
                DescribeWaitStatus(status).c_str(),
                static_cast<int>(std::count(out.begin(), out.end(), '\n')));
    return;
  }
  for (const sf_guard_event& e : events) {
    if (e.actor.tgid != static_cast<uint32_t>(ps_pid)) continue;
    ++judged;
    EXPECT_NE(e.action, static_cast<uint32_t>(SF_ACTION_KILLED))
        << DescribeGuardEvent(e);
  }
  EXPECT_GT(judged, 0) << "ps read other UIDs' processes: the guard must "
                          "have recorded it";
  std::printf("ps aux: %s, %d lines, %d guard events\n",
              DescribeWaitStatus(status).c_str(),
              static_cast<int>(std::count(out.begin(), out.end(), '\n')),
              judged);
}

}  // namespace sandfence::guard_test
