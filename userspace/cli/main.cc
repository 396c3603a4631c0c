// sandfence: the command-line shell. Each subcommand lives in its own file
// and calls into the library modules; nothing is implemented here.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "cli/check_command.h"
#include "cli/daemon_command.h"
#include "cli/enter_command.h"
#include "cli/oci_hook_command.h"
#include "cli/records_command.h"
#include "cli/run_command.h"
#include "common/status.h"
#include "sandfence/version.h"

namespace {

void PrintUsage(FILE* out) {
  std::fputs(
      "usage: sandfence COMMAND [ARGS]\n"
      "\n"
      "commands:\n"
      "  check                compile a policy, print its rules or refusal\n"
      "  run                  run a command in a sandbox under a policy\n"
      "  demo                 show enforcement: one allowed, one denied\n"
      "  enter                join a sandbox, confined, and exec a command\n"
      "  records show PATH    show a rollout record file (--json for JSON)\n"
      "  records suggest RECORD...  a policy learned from rollout records\n"
      "  daemon               serve the gRPC API to rollout frameworks (root)\n"
      "  rollouts             list the daemon's open rollouts\n"
      "  health               whether the daemon answers (a probe)\n"
      "  phase ROLLOUT PHASE  switch a rollout's phase\n"
      "  watch                the daemon's decisions as they are made\n"
      "  records get ROLLOUT  a rollout's record, from the daemon\n"
      "  oci-hook STAGE       an OCI runtime hook: a container's rollout\n"
      "  version              print sandfence's version (also --version)\n"
      "\n"
      "sandfence COMMAND --help describes a command (see also sandfence(8)).\n",
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
    {"enter", sandfence::EnterCommand},
    {"records", sandfence::RecordsCommand},
    {"daemon", sandfence::DaemonCommand},
    {"rollouts", sandfence::RolloutsCommand},
    {"health", sandfence::HealthCommand},
    {"phase", sandfence::PhaseCommand},
    {"watch", sandfence::WatchCommand},
    {"oci-hook", sandfence::OciHookCommand},
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
  // The same string the daemon's Health and every record carry.
  if (command == "version" || command == "--version" || command == "-V") {
    if (argc > 2 && (std::strcmp(argv[2], "--help") == 0 ||
                     std::strcmp(argv[2], "-h") == 0)) {
      std::fputs(
          "usage: sandfence version\n"
          "\n"
          "Prints sandfence's version: the release, then \"+\" and the git\n"
          "description when built from a checkout (\"-dirty\": with local\n"
          "changes). The daemon's Health response and every rollout record\n"
          "carry the same string.\n",
          stdout);
      return sandfence::kExitOk;
    }
    std::printf("sandfence %s\n", SANDFENCE_VERSION);
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
