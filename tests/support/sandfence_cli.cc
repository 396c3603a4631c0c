#include "support/sandfence_cli.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gtest/gtest.h"
#include "support/test_files.h"

extern char** environ;

namespace sandfence {

std::ostream& operator<<(std::ostream& os, const CliRun& run) {
  return os << "exit " << run.exit_code << "\n--- stdout\n"
            << run.out << "--- stderr\n"
            << run.err;
}

CliRun RunSandfence(const std::vector<std::string>& args) {
  CliRun run;
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  EXPECT_TRUE(dir.ok()) << dir.status();
  if (!dir.ok()) return run;
  const std::string out_path = dir->Path("stdout");
  const std::string err_path = dir->Path("stderr");

  const std::string binary = BinaryPath("userspace/cli/sandfence");
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(rc, 0) << "cannot run " << binary << ": " << std::strerror(rc);
  if (rc != 0) return run;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  EXPECT_TRUE(WIFEXITED(status)) << binary << " did not exit normally";
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = FileContents(out_path);
  run.err = FileContents(err_path);
  return run;
}

}  // namespace sandfence
