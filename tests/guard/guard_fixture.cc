#include "guard_fixture.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
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
       {base, base + "/guarded", base + "/guarded/sub", base + "/audited",
        base + "/unguarded", base + "/escape"}) {
    if (absl::Status st = MakeDir(dir); !st.ok()) return st;
  }
  s.base_ = base;
  s.sub_ = base + "/guarded/sub";
  s.unguarded_ = base + "/unguarded";
  s.escape_ = base + "/escape";
  absl::StatusOr<CgroupRef> guarded = InspectCgroup(base + "/guarded");
  if (!guarded.ok()) return guarded.status();
  absl::StatusOr<CgroupRef> audited = InspectCgroup(base + "/audited");
  if (!audited.ok()) return audited.status();
  s.guarded_ = *guarded;
  s.audited_ = *audited;
  return s;
}

Sandboxes::Sandboxes(Sandboxes&& other) noexcept
    : base_(std::exchange(other.base_, std::string())),
      guarded_(other.guarded_),
      audited_(other.audited_),
      sub_(other.sub_),
      unguarded_(other.unguarded_),
      escape_(other.escape_) {}

Sandboxes::~Sandboxes() {
  if (base_.empty()) return;
  for (const std::string& dir :
       {sub_, guarded_.path, audited_.path, unguarded_, escape_}) {
    RemoveCgroup(dir);
  }
  RemoveCgroup(base_);
}

std::string Sandboxes::DirFor(Where where) const {
  switch (where) {
    case Where::kGuarded:
      return guarded_.path;
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

// --- Child -------------------------------------------------------------------

absl::StatusOr<Child> Child::Spawn(const Spec& spec) {
  // Everything the child needs is built before fork().
  std::vector<std::string> args;
  if (spec.uid != kRoot) {
    args = {kSetpriv, absl::StrCat("--reuid=", spec.uid),
            absl::StrCat("--regid=", spec.uid), "--clear-groups", "--"};
  }
  args.insert(args.end(), spec.argv.begin(), spec.argv.end());
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

absl::StatusOr<Target> StartTarget(uid_t uid, const std::string& cgroup_dir) {
  absl::StatusOr<Child> child = Child::Spawn(
      {.argv = {TargetPath()}, .uid = uid, .cgroup_dir = cgroup_dir});
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

GuardWorld::GuardWorld(GuardController guard, Sandboxes sandboxes,
                       ProcMount proc)
    : guard_(std::move(guard)),
      sandboxes_(std::move(sandboxes)),
      proc_(std::move(proc)) {}

absl::StatusOr<GuardWorld*> GuardWorld::Get(Enforcer enforcer) {
  static std::unique_ptr<GuardWorld> world;
  if (world != nullptr) {
    if (world->guard_.enforcer() != enforcer) {
      return absl::InternalError("one enforcer per test process");
    }
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
  if (absl::Status s = guard->AddSandbox({.cgroup_id = sandboxes->audited().id,
                                          .level = sandboxes->audited().level,
                                          .audit_only = true});
      !s.ok()) {
    return s;
  }
  auto w = std::make_unique<GuardWorld>(
      *std::move(guard), *std::move(sandboxes), *std::move(proc));
  GuardWorld* raw = w.get();
  absl::StatusOr<GuardEventReader> reader = GuardEventReader::Create(
      raw->guard_.events_fd(),
      [raw](const sf_guard_event& e) { raw->events_.push_back(e); });
  if (!reader.ok()) return reader.status();
  raw->reader_ = std::make_unique<GuardEventReader>(*std::move(reader));
  world = std::move(w);
  return raw;
}

void GuardWorld::ClearEvents() { (void)CollectEvents(); }

std::vector<sf_guard_event> GuardWorld::CollectEvents() {
  // Events are written before the system call returns, so everything an
  // ended process caused is already in the ring buffer.
  while (true) {
    absl::StatusOr<int> n = reader_->Poll(0);
    if (!n.ok() || *n == 0) break;
  }
  return std::exchange(events_, {});
}

namespace {

std::string Substitute(const std::string& arg, const Target& t,
                       const GuardWorld& w, const Sandboxes& s) {
  return absl::StrReplaceAll(arg,
                             {{"{pid}", absl::StrCat(t.child.pid())},
                              {"{addr}", absl::StrCat("0x", absl::Hex(t.addr))},
                              {"{len}", absl::StrCat(t.len)},
                              {"{fd}", absl::StrCat(t.fd)},
                              {"{procmnt}", w.proc_mount()},
                              {"{escape}", s.escape_dir()},
                              {"{sub}", s.DirFor(Where::kSub)},
                              {"{guarded}", s.DirFor(Where::kGuarded)}});
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
      return SF_ACTION_DENIED;
    default:
      return 0;
  }
}

}  // namespace

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
  if (UsesInt80(s)) SANDFENCE_REQUIRE_HOST(sandfence::testing::HostInt80());
  const std::string command = s.args.empty() ? "" : s.args[0];
  if (absl::StartsWith(command, "uring")) {
    SANDFENCE_REQUIRE_HOST(sandfence::testing::HostIoUring());
  }
  if (s.actor_uid != kRoot &&
      (absl::StartsWith(command, "ptrace") ||
       absl::StartsWith(command, "vm-") || command == "pidfd-getfd")) {
    SANDFENCE_REQUIRE_HOST(sandfence::testing::HostYamaAllowsPtrace());
  }
  absl::StatusOr<Target> target =
      StartTarget(s.target_uid, sandboxes_.DirFor(s.target_where));
  ASSERT_TRUE(target.ok()) << target.status();

  std::vector<std::string> argv = {ActorPath()};
  for (const std::string& a : s.args) {
    argv.push_back(Substitute(a, *target, *this, sandboxes_));
  }
  ClearEvents();
  absl::StatusOr<Child> actor =
      Child::Spawn({.argv = argv,
                    .uid = s.actor_uid,
                    .cgroup_dir = sandboxes_.DirFor(s.actor_where)});
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

  switch (expect.outcome) {
    case Outcome::kAllowed:
    case Outcome::kAudited:
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                  absl::StrContains(out, "ok\n"))
          << "must succeed" << context;
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
  if (s.child_must_not_run) {
    EXPECT_FALSE(absl::StrContains(out, "child-ran"))
        << "the child placed outside the sandbox ran" << context;
  }

  uint32_t action = ActionFor(expect.outcome);
  if (action == 0) {
    EXPECT_TRUE(events.empty()) << "must leave no event" << context;
    return;
  }
  uint32_t enforcer = guard_.enforcer() == Enforcer::kLsm ? SF_ENFORCER_LSM
                                                          : SF_ENFORCER_SIGNAL;
  bool found = false;
  for (const sf_guard_event& e : events) {
    if (e.actor.tgid == static_cast<uint32_t>(actor_pid) &&
        e.action == action && e.what == expect.what && e.enforcer == enforcer &&
        (expect.proc_class == 0 || e.proc_class == expect.proc_class)) {
      found = true;
      uint64_t sandbox = s.actor_where == Where::kAudited
                             ? sandboxes_.audited().id
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

void GuardWorld::RunPsAux(uid_t uid) {
  constexpr char kPs[] = "/usr/bin/ps";
  if (::access(kPs, X_OK) != 0) GTEST_SKIP() << kPs << " is not installed";
  // Foreign processes for ps to see: another UID outside, one inside.
  absl::StatusOr<Target> outside = StartTarget(kOtherUid, "");
  ASSERT_TRUE(outside.ok()) << outside.status();
  absl::StatusOr<Target> inside =
      StartTarget(kOtherUid, sandboxes_.guarded().path);
  ASSERT_TRUE(inside.ok()) << inside.status();
  ClearEvents();
  absl::StatusOr<Child> ps =
      Child::Spawn({.argv = {kPs, "aux"},
                    .uid = uid,
                    .cgroup_dir = sandboxes_.guarded().path});
  ASSERT_TRUE(ps.ok()) << ps.status();
  pid_t ps_pid = ps->pid();
  std::string out = ps->ReadAll();
  int status = ps->Wait();
  std::vector<sf_guard_event> events = CollectEvents();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "ps aux: " << DescribeWaitStatus(status) << "\n"
      << out;
  int judged = 0;
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
