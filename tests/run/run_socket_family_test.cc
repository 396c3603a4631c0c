// Socket families nobody judges (issue 33's "also"): an agent in a
// restricted phase asks for a socket of every family there is -- vsock
// reaches the hypervisor, a packet socket sends frames no cgroup hook sees
// -- and for an io_uring, whose IORING_OP_SOCKET makes sockets without
// socket(). Every one is refused with EPERM before the kernel looks at
// the family, and the record names it. An inherit phase carries them on.
//
// Only sockets are made: nothing is connected or sent anywhere.
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "tests/run/run_fixture.h"

namespace sandfence::testing {
namespace {

constexpr int kVsock = 40;
constexpr int kMaxFamily = 45;  // AF_MCTP; AF_MAX is 46 on 6.18

bool Judged(int family) {
  return family == AF_UNIX || family == AF_INET || family == AF_INET6 ||
         family == AF_NETLINK;
}

class RunSocketFamilyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    REQUIRE_KERNEL_FOR_RUN();
    record_ = absl::StrCat("/tmp/sandfence-socket-family-", getpid(), ".sfrec");
  }
  void TearDown() override { unlink(record_.c_str()); }

  // `run` in `access` with the probe trying `attempts`; what each got.
  std::map<std::string, int> Probe(const std::string& access,
                                   const std::vector<std::string>& attempts,
                                   std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"run", "--network-access", access};
    if (access != "inherit") {
      args.insert(args.end(), {"--model", "http://127.0.0.2:9/v1"});
    }
    args.insert(args.end(), {"--record", record_});
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--", "/usr/bin/python3",
                             SANDFENCE_SOURCE "/tests/run/socket_families.py"});
    args.insert(args.end(), attempts.begin(), attempts.end());
    last_ = Sandfence(args);
    std::map<std::string, int> got;
    for (absl::string_view line : absl::StrSplit(last_.out, '\n')) {
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      int err = -1;
      if (f.size() == 2 && absl::SimpleAtoi(f[1], &err)) got[f[0]] = err;
    }
    return got;
  }

  std::string RecordJson() {
    Result show = Sandfence({"records", "show", "--json", record_});
    EXPECT_EQ(show.status, 0) << show.err;
    return show.out;
  }

  // Whether the summary's denied list has a "<protocol> <what>" line
  // (columns padded).
  bool SummaryDenies(absl::string_view protocol,
                     absl::string_view what = "socket creation") const {
    for (absl::string_view line : absl::StrSplit(last_.err, '\n')) {
      std::vector<absl::string_view> f =
          absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() < 2 || f[0] != protocol) continue;
      if (absl::StrContains(line, absl::StrCat(" ", what, " "))) return true;
    }
    return false;
  }

  std::string record_;
  Result last_;
};

// Every family from 1 to AF_MCTP, stream and datagram: the four the hooks
// judge are made (or refused by the kernel for its own reasons, never
// EPERM); every other is EPERM -- even those this kernel does not have,
// which would otherwise say EAFNOSUPPORT -- and recorded by name.
TEST_F(RunSocketFamilyTest, ARestrictedPhaseRefusesEveryFamilyNoHookJudges) {
  std::vector<std::string> attempts;
  for (int family = 1; family <= kMaxFamily; ++family) {
    attempts.push_back(absl::StrCat(family, ":", SOCK_STREAM));
    attempts.push_back(absl::StrCat(family, ":", SOCK_DGRAM));
  }
  attempts.push_back("socketpair");
  std::map<std::string, int> got = Probe("model_only", attempts);
  ASSERT_EQ(last_.status, 0) << last_.err;
  ASSERT_EQ(got.size(), attempts.size()) << last_.out << last_.err;
  for (int family = 1; family <= kMaxFamily; ++family) {
    for (int type : {SOCK_STREAM, SOCK_DGRAM}) {
      const std::string key = absl::StrCat(family, ":", type);
      if (Judged(family)) {
        EXPECT_NE(got[key], EPERM) << "family " << family << " type " << type;
      } else {
        EXPECT_EQ(got[key], EPERM) << "family " << family << " type " << type;
      }
    }
  }
  EXPECT_EQ(got["socketpair"], 0) << "socketpair(AF_UNIX) must still work";
  EXPECT_EQ(got["1:1"], 0) << "AF_UNIX stream sockets must still work";

  const std::string json = RecordJson();
  for (const char* name : {"vsock", "packet", "bluetooth", "can", "tipc", "rds",
                           "xdp", "smc", "rxrpc", "kcm", "alg", "mctp"}) {
    EXPECT_TRUE(absl::StrContains(
        json, absl::StrCat("\"protocol\": \"", name, "\"")))
        << name << " not in the record:\n"
        << json;
  }
  EXPECT_TRUE(absl::StrContains(json, "\"hook\": \"socket\"")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"reason\": \"socket family not judged\""))
      << json;
  EXPECT_FALSE(absl::StrContains(json, "\"protocol\": \"netlink\"")) << json;
  EXPECT_FALSE(absl::StrContains(json, "\"protocol\": \"inet6\"")) << json;
  // The summary names it too, and the record balances: the supervisor's
  // decisions are counted apart from the kernel's.
  EXPECT_TRUE(SummaryDenies("vsock")) << last_.err;
  EXPECT_FALSE(absl::StrContains(last_.err, "balance is off")) << last_.err;
  EXPECT_TRUE(absl::StrContains(json, "\"supervisor_decided\": \"82\""))
      << "41 unjudged families x 2 types:\n" << json;
}

// The same as nobody: a family needs no capability to be refused.
TEST_F(RunSocketFamilyTest, AnUnprivilegedAgentGetsNoVsock) {
  std::map<std::string, int> got =
      Probe("model_only", {absl::StrCat(kVsock, ":", SOCK_STREAM)},
            {"--user", "65534"});
  ASSERT_EQ(last_.status, 0) << last_.err;
  EXPECT_EQ(got[absl::StrCat(kVsock, ":", SOCK_STREAM)], EPERM) << last_.out;
  EXPECT_TRUE(absl::StrContains(RecordJson(), "\"protocol\": \"vsock\""));
}

// io_uring is refused twice over: the landlock guard's seccomp filter
// refuses it in every phase (unless the policy allows it), before the
// supervisor is asked; without a guard, the supervisor refuses it in a
// restricted phase and records it.
TEST_F(RunSocketFamilyTest, ARestrictedPhaseRefusesIoUring) {
  std::map<std::string, int> got = Probe("model_only", {"io_uring"});
  ASSERT_EQ(last_.status, 0) << last_.err;
  EXPECT_EQ(got["io_uring"], EPERM) << last_.out << last_.err;

  got = Probe("model_only", {"io_uring"}, {"--guard", "off"});
  ASSERT_EQ(last_.status, 0) << last_.err;
  EXPECT_EQ(got["io_uring"], EPERM) << last_.out << last_.err;
  const std::string json = RecordJson();
  EXPECT_TRUE(absl::StrContains(json, "\"hook\": \"io_uring_setup\"")) << json;
  EXPECT_TRUE(SummaryDenies("io_uring", "io_uring_setup")) << last_.err;
}

// The control: in an inherit phase the same calls are carried on (so the
// refusals above are the phase's, not the filter's or the host's).
TEST_F(RunSocketFamilyTest, InheritCarriesThemOn) {
  const int vsock = ::socket(kVsock, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (vsock < 0) {
    GTEST_SKIP() << "SKIPPED: this host makes no vsock socket (errno "
                 << errno << "): nothing to carry on";
  }
  ::close(vsock);
  std::map<std::string, int> got = Probe(
      "inherit", {absl::StrCat(kVsock, ":", SOCK_STREAM), "socketpair"});
  ASSERT_EQ(last_.status, 0) << last_.err;
  EXPECT_EQ(got[absl::StrCat(kVsock, ":", SOCK_STREAM)], 0) << last_.out;
  EXPECT_EQ(got["socketpair"], 0) << last_.out;
  EXPECT_FALSE(absl::StrContains(RecordJson(), "\"hook\": \"socket\""));
}

}  // namespace
}  // namespace sandfence::testing
