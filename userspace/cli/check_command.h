// `sandfence check`: compiles a policy and prints its rules per phase, or
// the refusal. Exit status (sysexits): 0 valid, 64 usage, 65 malformed
// policy, 66 unreadable policy file, 75 unavailable (retry may help),
// 78 rejected (can never be enforced).
#ifndef SANDFENCE_CLI_CHECK_COMMAND_H_
#define SANDFENCE_CLI_CHECK_COMMAND_H_

namespace sandfence {

// argv[0] is "check"; the rest are its arguments.
int CheckCommand(int argc, char** argv);

}  // namespace sandfence

#endif  // SANDFENCE_CLI_CHECK_COMMAND_H_
