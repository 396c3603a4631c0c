// sandfence: the command-line shell. Each subcommand lives in its own file
// and calls into the library modules; nothing is implemented here.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "common/status.h"

namespace {

void PrintUsage(FILE* out) {
  std::fputs(
      "usage: sandfence COMMAND [ARGS]\n"
      "\n"
      "commands:\n"
      "  check   compile a policy and print its rules, or the refusal\n"
      "  run     run a command in a sandbox under a policy\n",
      out);
}

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
  std::fprintf(stderr, "sandfence: unknown command \"%s\"\n", argv[1]);
  PrintUsage(stderr);
  return sandfence::kExitUsage;
}
