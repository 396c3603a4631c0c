// The logic of `sandfence records suggest RECORD... [--phase P]
// [--model URL]...`, kept out of the CLI so that the command is testable.
#ifndef SANDFENCE_RECORDS_SUGGEST_COMMAND_H_
#define SANDFENCE_RECORDS_SUGGEST_COMMAND_H_

#include <string>
#include <vector>

#include "records/show_command.h"

namespace sandfence {

// The usage text of `records suggest`.
extern const char kSuggestUsage[];

// `args` are what follows "suggest". Prints the suggested policy
// (records/suggest.h) on stdout, lossy records' warnings on stderr.
// Exit status (sysexits): 0 printed, 64 usage (an unknown phase too), 65 a
// file that is not a record, 66 an unreadable file.
CommandOutput RunSuggestCommand(const std::vector<std::string>& args);

}  // namespace sandfence

#endif  // SANDFENCE_RECORDS_SUGGEST_COMMAND_H_
