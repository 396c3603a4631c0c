// `sandfence enter`: join a sandbox, confined, and exec a command
// (enter/enter.h says what it guarantees). The full binary's shell over
// enter::Enter: it adds --rollout, asking the daemon (EnterRollout) for
// the rollout's cgroup and what its phases allow, and looks users up
// through NSS. Exit status: the command's (it replaces this process);
// before exec: 64 usage, 75 unavailable (no daemon: retry), 77 not
// permitted (not root where root is needed; asked from inside a sandbox),
// 78 rejected (no such rollout or cgroup, a rollout with its guard off,
// this host cannot confine), 127 a failure after the point of no return
// (said on stderr).
#ifndef SANDFENCE_CLI_ENTER_COMMAND_H_
#define SANDFENCE_CLI_ENTER_COMMAND_H_

namespace sandfence {

// argv[0] is "enter"; the rest are its arguments.
int EnterCommand(int argc, char** argv);

}  // namespace sandfence

#endif  // SANDFENCE_CLI_ENTER_COMMAND_H_
