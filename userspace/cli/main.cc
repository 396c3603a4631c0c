// sandfence: the command-line shell. Each subcommand lives in its own file
// and calls into the library modules; nothing is implemented here.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "cli/check_command.h"
#include "cli/daemon_command.h"
#include "cli/records_command.h"
#include "cli/run_command.h"
#include "common/status.h"

namespace {

void PrintUsage(FILE* out) {
  std::fputs(
      "usage: sandfence COMMAND [ARGS]\n"
      "\n"
      "commands:\n"
      "  check   compile a policy and print its rules, or the refusal\n"
      "  run     run a command in a sandbox under a policy\n"
      "  records show a rollout record (records show PATH [--json])\n"
      "  demo    show enforcement on loopback: one allowed, one denied\n"
      "  daemon  serve the gRPC API for rollout frameworks (root)\n"
      "  rollouts  list the daemon's open rollouts\n"
      "  phase   switch a rollout's phase (phase ROLLOUT PHASE)\n"
      "  records get ROLLOUT  a rollout's record, from the daemon\n"
      "\n"
      "sandfence COMMAND --help describes a command.\n",
      out);
}

struct Command {
  std::string_view name;
  int (*run)(int argc, char** argv);  // argv[0] is the command's name
};

constexpr Command kCommands[] = {
    {"check", sandfence::CheckCommand},
    {"run", sandfence::RunCommand},
    {"demo", sandfence::DemoCommand},
    {"records", sandfence::RecordsCommand},
    {"daemon", sandfence::DaemonCommand},
    {"rollouts", sandfence::RolloutsCommand},
    {"phase", sandfence::PhaseCommand},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return sandfence::kExitUsage;
  }
  std::string_view command = argv[1];
  if (command == "help" || command == "--help" || command == "-h") {
    PrintUsage(stdout);
    return sandfence::kExitOk;
  }
  // `records get` asks the daemon; `records show` reads a file.
  if (command == "records" && argc > 2 && std::string_view(argv[2]) == "get") {
    return sandfence::RecordsGetCommand(argc - 1, argv + 1);
  }
  for (const Command& c : kCommands) {
    if (c.name == command) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "sandfence: unknown command \"%s\"\n", argv[1]);
  PrintUsage(stderr);
  return sandfence::kExitUsage;
}
