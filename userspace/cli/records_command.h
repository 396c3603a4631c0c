// `sandfence records show PATH [--json]`: prints a rollout record. The logic
// is in records/show_command.h; this is the shell.
#ifndef SANDFENCE_CLI_RECORDS_COMMAND_H_
#define SANDFENCE_CLI_RECORDS_COMMAND_H_

namespace sandfence {

// argv[0] is "records"; the rest are its arguments.
int RecordsCommand(int argc, char** argv);

}  // namespace sandfence

#endif  // SANDFENCE_CLI_RECORDS_COMMAND_H_
