// Issue 33's four attacks on the Unix-socket checks, as an unprivileged
// agent would make them under `sandfence run`'s defaults (model_only, the
// landlock guard): a host socket the phase does not list must not answer.
//   1. io_uring's IORING_OP_CONNECT (no connect(2) to hand over):
//      io_uring_setup is refused (the guard's seccomp; without a guard, the
//      socket-family supervisor in a restricted phase).
//   2. and 4. a tmpfs or a bind mount over a path, in a user and mount
//      namespace of the agent's own: unshare is refused (the guard).
//   3. the swap with a fork: refused before anything is reached.
// And the plain swap (a link where the agent's own socket was), a relative
// name resolved in another directory, an address too short for the
// supervisor to see: each refused before the host's service accepts
// anything, since run's supervisor judges the socket a path reaches
// (confine/unix_broker.h) and the hooks never take a path for the
// sandbox's own by its name. The controls: a multi-threaded program
// reaches its own socket, and a listed path is reached.
//
// Every socket is a Unix socket in a directory this test makes.
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"
#include "support/counting_unix_service.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "support/unix_attacks.h"
#include "tests/run/run_fixture.h"

namespace sandfence::testing {
namespace {

class RunUnixAttackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SANDFENCE_REQUIRE_ROOT();
    REQUIRE_KERNEL_FOR_RUN();
    SANDFENCE_REQUIRE_HOST(HostChecksUnixSockets());
    char tmpl[] = "/tmp/sf-unix-attack-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // The agent (nobody) may bind names of its own here.
    ASSERT_EQ(::chmod(dir_.c_str(), 01777), 0);
    record_ = absl::StrCat(dir_, ".sfrec");
  }
  void TearDown() override {
    ::unlink(record_.c_str());
    for (const char* leaf :
         {"own-plain.sock", "own-fork.sock", "own-threaded.sock", "o16.sock"}) {
      ::unlink(absl::StrCat(dir_, "/", leaf).c_str());
    }
    ::rmdir(dir_.c_str());
  }

  // What unix_attacks.py printed, and what the services outside accepted.
  struct Outcome {
    Result run;
    std::map<std::string, int> got;
    int host_accepted = 0, listed_accepted = 0, abstract_accepted = 0;
    std::string host_path;
  };

  // The attacks as nobody under `run` (guard flags: `extra`).
  Outcome Attack(const std::vector<std::string>& extra) {
    // The listed service lives in a directory the agent cannot write (as
    // the README advises); the host one beside the agent's names.
    char listed_tmpl[] = "/tmp/sf-unix-listed-XXXXXX";
    Outcome o;
    if (::mkdtemp(listed_tmpl) == nullptr) {
      ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
      return o;
    }
    ::chmod(listed_tmpl, 0755);
    const std::string listed_path = absl::StrCat(listed_tmpl, "/listed.sock");
    o.host_path = absl::StrCat(dir_, "/host.sock");
    const std::string host_abstract =
        absl::StrCat("@sf-unix-attack-", ::getpid());
    {
      CountingService host(o.host_path);
      CountingService listed(listed_path);
      CountingService abstract_host(host_abstract);
      // A private network namespace has no host loopback: there the model
      // is a rule only (nothing is sent; the namespace has no route).
      const bool private_netns =
          std::find(extra.begin(), extra.end(), "--netns") != extra.end();
      std::vector<std::string> args = {
          "run", "--network-access", "model_only", "--model",
          private_netns ? "http://192.0.2.1:9/v1" : "http://127.0.0.2:9/v1",
          "--unix-allow", listed_path, "--user", "65534", "--record",
          record_};
      args.insert(args.end(), extra.begin(), extra.end());
      for (const std::string& a :
           {std::string("--"), std::string("/usr/bin/python3"),
            std::string(SANDFENCE_SOURCE "/tests/run/unix_attacks.py"), dir_,
            o.host_path, listed_path, host_abstract}) {
        args.push_back(a);
      }
      o.run = Sandfence(args);
      o.host_accepted = host.accepted();
      o.abstract_accepted = abstract_host.accepted();
      o.listed_accepted = listed.accepted();
    }
    ::rmdir(listed_tmpl);
    o.got = ParseUnixAttacks(o.run.out);
    return o;
  }

  std::string dir_, record_;
};

TEST_F(RunUnixAttackTest, AnUnprivilegedAgentReachesNoHostSocket) {
  Outcome o = Attack({});
  const std::string& host_path = o.host_path;
  ASSERT_EQ(o.run.status, 0) << o.run.out << o.run.err;
  ASSERT_EQ(o.got.size(), 12u) << o.run.out << o.run.err;
  ExpectUnixAttacksRefused(o.got);
  EXPECT_EQ(o.abstract_accepted, 0);
  EXPECT_EQ(o.listed_accepted, 1);
  EXPECT_EQ(o.host_accepted, 0)
      << "the host's service accepted a connection";

  Result show = Sandfence({"records", "show", "--json", record_});
  ASSERT_EQ(show.status, 0) << show.err;
  // Each refusal is recorded with the name the agent gave; the threaded
  // connect as the supervisor's, with its reason.
  for (const std::string& name :
       {absl::StrCat(dir_, "/own-plain.sock"),
        absl::StrCat(dir_, "/own-fork.sock"), std::string("host.sock"),
        std::string("o16.sock")}) {
    EXPECT_TRUE(absl::StrContains(show.out, absl::StrCat("\"", name, "\"")))
        << name << "\n"
        << show.out;
  }
  EXPECT_TRUE(absl::StrContains(
      show.out, "unix socket of the sandbox (checked by the supervisor)"))
      << show.out;
  // The swaps are refused by the supervisor, which names the socket each
  // name led to (the fork's, the plain and the relative one): with the
  // threaded connect, four of its decisions. The listed name, in the
  // namespace the command started in, went back to the kernel (the
  // command connected as itself).
  const std::string reached =
      absl::StrCat("\"reached\": \"", host_path, " (inode ");
  size_t swaps = 0;
  for (size_t at = show.out.find(reached); at != std::string::npos;
       at = show.out.find(reached, at + 1)) {
    ++swaps;
  }
  EXPECT_EQ(swaps, 3u) << show.out;
  EXPECT_TRUE(absl::StrContains(
      show.out, "unix socket outside the sandbox (checked by the supervisor)"))
      << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "\"supervisor_decided\": \"4\""))
      << show.out;
}

// Attacks 2 and 4 carried out: with the guard off nothing refuses the
// agent a user and mount namespace. In one, it binds the host socket's
// path again (its own, by that name) and connects to the path from the
// sandbox's namespace; in another, it mounts the host's socket over the
// listed path. The supervisor judges the socket each name leads to in the
// caller's view (the host's, and not the listed one): both refused.
TEST_F(RunUnixAttackTest, NamespaceAttacksReachNothingWithTheGuardOff) {
  // In the host's network namespace, and in one of the sandbox's own (the
  // host's sockets are then not in the caller's: the supervisor looks in
  // its own too).
  for (const bool private_netns : {false, true}) {
    SCOPED_TRACE(private_netns ? "--netns private" : "the host's netns");
    std::vector<std::string> flags = {"--guard", "off"};
    if (private_netns) {
      flags.push_back("--netns");
      flags.push_back("private");
    }
    Outcome o = Attack(flags);
    ASSERT_EQ(o.run.status, 0) << o.run.out << o.run.err;
    if (o.got["listed_overmount"] > 100 && o.got["listed_overmount"] < 150) {
      GTEST_SKIP() << "no user namespace for nobody here (errno "
                   << o.got["listed_overmount"] - 100
                   << "): attacks 2 and 4 need one";
    }
    EXPECT_EQ(o.got["userns_mount"], 0) << "with the guard off, it has one";
    EXPECT_EQ(o.got["listed_overmount"], EPERM)
        << "0: the listed name reached the host's socket";
    EXPECT_EQ(o.got["tmpfs_rebind"], EPERM)
        << "attack 2 (0: the host's path, bound again in the agent's own "
           "namespace, reached the host's socket)";
    EXPECT_EQ(o.got["listed"], 0) << "the control: the listed socket itself";
    EXPECT_EQ(o.got["swap_plain"], EPERM);
    EXPECT_EQ(o.got["io_uring"], EPERM) << "the supervisor, guard or not";
    EXPECT_EQ(o.host_accepted, 0)
        << "the host's service accepted a connection";
    EXPECT_EQ(o.listed_accepted, 1);
    Result show = Sandfence({"records", "show", "--json", record_});
    ASSERT_EQ(show.status, 0) << show.err;
    // The listed name, refused, and the socket it led to in the agent's
    // view.
    EXPECT_TRUE(absl::StrContains(
        show.out,
        absl::StrCat("\"reached\": \"", o.host_path, " (inode ")))
        << show.out;
    ::unlink(record_.c_str());
  }
}

}  // namespace
}  // namespace sandfence::testing
