// `sandfence run`: runs a command in a fresh sandbox under one phase of a
// policy and reports what it tried to reach. Exit status: the command's
// (128+N for signal N); 64 usage, 65 malformed policy, 66 unreadable policy
// file, 75 unavailable, 77 not root, 78 rejected -- all before anything
// starts.
#ifndef SANDFENCE_CLI_RUN_COMMAND_H_
#define SANDFENCE_CLI_RUN_COMMAND_H_

namespace sandfence {

// argv[0] is "run"; the rest are its arguments.
int RunCommand(int argc, char** argv);

// `sandfence demo`: starts two loopback listeners, a "model" and a
// forbidden host, and runs a model_only sandbox that reaches one and is
// denied the other, printing each step.
int DemoCommand(int argc, char** argv);

}  // namespace sandfence

#endif  // SANDFENCE_CLI_RUN_COMMAND_H_
