// The built `sandfence` binary run as a child process, the way a user runs
// it: its exit code and what it printed.
#ifndef SANDFENCE_TESTS_SUPPORT_SANDFENCE_CLI_H_
#define SANDFENCE_TESTS_SUPPORT_SANDFENCE_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace sandfence {

struct CliRun {
  int exit_code = -1;  // -1: it did not run, or did not exit normally
  std::string out;
  std::string err;
};

// "exit N", then stdout and stderr: for failure messages.
std::ostream& operator<<(std::ostream& os, const CliRun& run);

// Runs BinaryPath("userspace/cli/sandfence") with `args`; stdout and
// stderr go to files (no pipe to drain, so no deadlock whatever the output
// size). A binary that cannot be started, or that does not exit normally,
// is a test failure.
CliRun RunSandfence(const std::vector<std::string>& args);

}  // namespace sandfence

#endif  // SANDFENCE_TESTS_SUPPORT_SANDFENCE_CLI_H_
