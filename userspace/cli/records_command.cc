#include "cli/records_command.h"

#include <cstdio>
#include <string>
#include <vector>

#include "records/show_command.h"

namespace sandfence {

int RecordsCommand(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  CommandOutput out = RunRecordsCommand(args);
  std::fputs(out.out.c_str(), stdout);
  std::fputs(out.err.c_str(), stderr);
  return out.exit_code;
}

}  // namespace sandfence
