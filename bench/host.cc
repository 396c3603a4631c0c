#include "bench/host.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/allowlist.h"
#include "common/status.h"

extern char** environ;

namespace sandfence::bench {
namespace {

constexpr char kStatsSysctl[] = "/proc/sys/kernel/bpf_stats_enabled";

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return ErrnoError(errno, absl::StrCat("read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteSmallFile(const std::string& path, absl::string_view data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return ErrnoError(errno, absl::StrCat("open ", path));
  if (::write(fd.get(), data.data(), data.size()) < 0) {
    return ErrnoError(errno, absl::StrCat("write ", path));
  }
  return absl::OkStatus();
}

uint64_t ClockNs(clockid_t clock) {
  timespec ts;
  ::clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// The number after "key:" in a /proc status-style text, 0 if absent.
uint64_t Field(absl::string_view text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, key)) continue;
    line = absl::StripAsciiWhitespace(line);
    absl::ConsumeSuffix(&line, " kB");
    uint64_t v = 0;
    if (absl::SimpleAtoi(line, &v)) return v;
  }
  return 0;
}

}  // namespace

absl::Status EnterPrivateNetns() {
  if (::unshare(CLONE_NEWNET) != 0) {
    return ErrnoError(errno, "unshare(CLONE_NEWNET)");
  }
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) return ErrnoError(errno, "socket");
  ifreq ifr;
  std::memset(&ifr, 0, sizeof(ifr));
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (::ioctl(s.get(), SIOCGIFFLAGS, &ifr) != 0) {
    return ErrnoError(errno, "SIOCGIFFLAGS lo");
  }
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(s.get(), SIOCSIFFLAGS, &ifr) != 0) {
    return ErrnoError(errno, "bring up lo");
  }
  return absl::OkStatus();
}

absl::Status RaiseFdLimit(uint64_t n) {
  rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    return ErrnoError(errno, "getrlimit(RLIMIT_NOFILE)");
  }
  if (rl.rlim_cur >= n) return absl::OkStatus();
  rlimit want = {n, std::max<rlim_t>(n, rl.rlim_max)};
  if (::setrlimit(RLIMIT_NOFILE, &want) == 0) return absl::OkStatus();
  // Without CAP_SYS_RESOURCE only the soft limit moves, up to the hard one.
  rl.rlim_cur = rl.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    return ErrnoError(errno, "raise RLIMIT_NOFILE to its hard limit");
  }
  return absl::OkStatus();
}

uint64_t BootNs() { return ClockNs(CLOCK_BOOTTIME); }
uint64_t MonoNs() { return ClockNs(CLOCK_MONOTONIC); }

absl::StatusOr<BpfStatsEnabled> BpfStatsEnabled::Enable() {
  BpfStatsEnabled e;
  int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (fd >= 0) {
    e.fd_.reset(fd);
    return e;
  }
  absl::StatusOr<std::string> before = ReadSmallFile(kStatsSysctl);
  if (!before.ok()) return before.status();
  std::string old(absl::StripAsciiWhitespace(*before));
  if (absl::Status s = WriteSmallFile(kStatsSysctl, "1"); !s.ok()) return s;
  e.restore_ = old;
  return e;
}

BpfStatsEnabled::~BpfStatsEnabled() {
  if (!restore_.empty()) WriteSmallFile(kStatsSysctl, restore_).IgnoreError();
}

absl::StatusOr<ProgRunStats> ReadProgRunStats(int prog_fd) {
  bpf_prog_info info;
  std::memset(&info, 0, sizeof(info));
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) {
    return ErrnoError(errno, "BPF_OBJ_GET_INFO_BY_FD");
  }
  return ProgRunStats{info.run_time_ns, info.run_cnt};
}

absl::StatusOr<ProcessMemory> ReadProcessMemory() {
  absl::StatusOr<std::string> status = ReadSmallFile("/proc/self/status");
  if (!status.ok()) return status.status();
  return ProcessMemory{Field(*status, "VmRSS:") * 1024,
                       Field(*status, "VmHWM:") * 1024};
}

absl::StatusOr<std::vector<MapMemory>> ReadMapMemory() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return ErrnoError(errno, "opendir /proc/self/fd");
  std::vector<int> fds;
  while (dirent* e = ::readdir(dir)) {
    int fd;
    if (absl::SimpleAtoi(e->d_name, &fd) && fd != ::dirfd(dir)) {
      fds.push_back(fd);
    }
  }
  ::closedir(dir);

  std::vector<MapMemory> out;
  std::set<uint32_t> seen;
  for (int fd : fds) {
    char target[64] = {};
    std::string link = absl::StrCat("/proc/self/fd/", fd);
    if (::readlink(link.c_str(), target, sizeof(target) - 1) < 0) continue;
    if (std::strcmp(target, "anon_inode:bpf-map") != 0) continue;
    bpf_map_info info;
    std::memset(&info, 0, sizeof(info));
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) continue;
    if (!seen.insert(info.id).second) continue;  // the same map twice
    absl::StatusOr<std::string> fdinfo =
        ReadSmallFile(absl::StrCat("/proc/self/fdinfo/", fd));
    if (!fdinfo.ok()) return fdinfo.status();
    out.push_back(
        {info.name, info.type, info.max_entries, Field(*fdinfo, "memlock:")});
  }
  return out;
}

absl::Status RunCommand(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2");
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 2);
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc =
      ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return ErrnoError(rc, absl::StrCat("run ", argv[0]));
  write_end.reset();
  std::string err;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(read_end.get(), buf, sizeof(buf))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    err.append(buf, n);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(absl::StrJoin(argv, " "), " failed (status ", status,
                   "): ", absl::StripAsciiWhitespace(err.substr(0, 2000))));
}

std::string KernelRelease() {
  utsname u;
  if (::uname(&u) != 0) return "unknown";
  return absl::StrCat(u.sysname, " ", u.release, " ", u.machine);
}

std::string CpuModel() {
  absl::StatusOr<std::string> info = ReadSmallFile("/proc/cpuinfo");
  if (!info.ok()) return "unknown";
  for (absl::string_view line : absl::StrSplit(*info, '\n')) {
    if (absl::ConsumePrefix(&line, "model name")) {
      absl::ConsumePrefix(&line, "\t");
      absl::ConsumePrefix(&line, ":");
      return std::string(absl::StripAsciiWhitespace(line));
    }
  }
  return "unknown";
}

std::string LoadAverage() {
  absl::StatusOr<std::string> l = ReadSmallFile("/proc/loadavg");
  if (!l.ok()) return "unknown";
  std::vector<absl::string_view> f = absl::StrSplit(*l, ' ');
  if (f.size() < 3) return "unknown";
  return absl::StrCat(f[0], " ", f[1], " ", f[2]);
}

int CpuCount() { return static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)); }

namespace {

absl::StatusOr<uint16_t> BindLoopback(int fd) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, kAllowedDst, &a.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    return ErrnoError(errno, absl::StrCat("bind ", kAllowedDst));
  }
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

}  // namespace

absl::StatusOr<Listeners> ListenLoopback() {
  Listeners l;
  l.tcp.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  l.udp.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!l.tcp || !l.udp) return ErrnoError(errno, "socket");
  int one = 1;
  ::setsockopt(l.tcp.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  absl::StatusOr<uint16_t> port = BindLoopback(l.tcp.get());
  if (!port.ok()) return port.status();
  l.tcp_port = *port;
  if (::listen(l.tcp.get(), 4096) != 0) return ErrnoError(errno, "listen");
  port = BindLoopback(l.udp.get());
  if (!port.ok()) return port.status();
  l.udp_port = *port;
  // Room for a whole batch of datagrams between drains.
  int rcvbuf = 8 << 20;
  ::setsockopt(l.udp.get(), SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
               sizeof(rcvbuf));
  return l;
}

uint64_t ThreadCpuNs(pid_t tid) {
  absl::StatusOr<std::string> s =
      ReadSmallFile(absl::StrCat("/proc/self/task/", tid, "/schedstat"));
  uint64_t ns = 0;
  if (!s.ok()) return 0;
  std::vector<absl::string_view> fields =
      absl::StrSplit(*s, ' ', absl::SkipEmpty());
  if (fields.empty() || !absl::SimpleAtoi(fields[0], &ns)) return 0;
  return ns;
}

std::vector<pid_t> ThreadIds() {
  std::vector<pid_t> tids;
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return tids;
  while (dirent* e = ::readdir(d)) {
    int tid = 0;
    if (absl::SimpleAtoi(e->d_name, &tid)) tids.push_back(tid);
  }
  ::closedir(d);
  std::sort(tids.begin(), tids.end());
  return tids;
}

}  // namespace sandfence::bench
