// The outcomes of tests/run/unix_attacks.py (issue 33's attacks on the Unix
// socket checks), as the tests that run it under `sandfence run` and
// `sandfence enter` read them.
#ifndef SANDFENCE_TESTS_SUPPORT_UNIX_ATTACKS_H_
#define SANDFENCE_TESTS_SUPPORT_UNIX_ATTACKS_H_

#include <cerrno>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace sandfence::testing {

// The lines "<attack> <code>" of `out`, by attack: 0 means the outside
// service answered (the attack worked), anything else is the errno (or 128
// + signal) that stopped it. Other lines are passed over.
inline std::map<std::string, int> ParseUnixAttacks(absl::string_view out) {
  std::map<std::string, int> got;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    int code = -1;
    if (f.size() == 2 && absl::SimpleAtoi(f[1], &code)) got[f[0]] = code;
  }
  return got;
}

// Each attack refused, and each control reached, as under the defaults of
// `run` and `enter` (the landlock guard, a phase that lists one path). An
// attack missing from `got` counts as 0.
inline void ExpectUnixAttacksRefused(std::map<std::string, int> got) {
  EXPECT_EQ(got["tmpfs_rebind"], 100 + EPERM) << "attack 2's namespace";
  EXPECT_EQ(got["listed_overmount"], 100 + EPERM) << "attack 4's namespace";
  EXPECT_EQ(got["io_uring"], EPERM) << "attack 1's ring";
  EXPECT_EQ(got["userns_mount"], EPERM) << "attacks 2 and 4's namespaces";
  EXPECT_EQ(got["swap_plain"], EPERM) << "the plain swap (0: it talked)";
  EXPECT_EQ(got["fork_swap"], EPERM) << "attack 3 (0: the parent talked)";
  EXPECT_EQ(got["relative_swap"], EPERM) << "a relative name elsewhere";
  EXPECT_EQ(got["short_address"], EPERM)
      << "an own path by name, past the supervisor";
  EXPECT_EQ(got["own_threaded"], 0)
      << "the control: a threaded program reaches its own socket";
  EXPECT_EQ(got["listed"], 0) << "the control: a listed path is reached";
  // Abstract names the phase does not list are left to Landlock's scope
  // (the guard's, ABI 6+): the host's refused, the agent's own reached.
  EXPECT_EQ(got["abstract_host"], EPERM) << "the host's abstract socket";
  EXPECT_EQ(got["own_abstract"], 0) << "the control: its own abstract name";
}

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_SUPPORT_UNIX_ATTACKS_H_
