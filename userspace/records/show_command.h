// The logic of `sandfence records show PATH [--json]`, kept out of the CLI
// so that the CLI file is a shell and the command is testable.
#ifndef SANDFENCE_RECORDS_SHOW_COMMAND_H_
#define SANDFENCE_RECORDS_SHOW_COMMAND_H_

#include <string>
#include <vector>

namespace sandfence {

struct CommandOutput {
  int exit_code = 0;
  std::string out;  // for stdout
  std::string err;  // for stderr
};

// `sandfence records ARGS...`, args being what follows "records":
//   show PATH [--json]   the report (text or JSON) of the record at PATH
//   suggest RECORD...    a policy learned from records (suggest_command.h)
//   --help, help         usage
// Exit status (sysexits): 0 shown (a record cut short is shown too, with
// its warnings on stderr), 64 usage, 65 not a record, 66 unreadable file.
CommandOutput RunRecordsCommand(const std::vector<std::string>& args);

}  // namespace sandfence

#endif  // SANDFENCE_RECORDS_SHOW_COMMAND_H_
