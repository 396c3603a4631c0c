// `sandfence enter`: how a process sandfence does not start itself gets the
// kernel-enforced process guard. A container entrypoint or a rollout
// framework execs through it: it joins the sandbox's cgroup, confines
// itself with Landlock + seccomp (no_new_privs, capabilities dropped) and
// execs the agent in its place. Exit status: the command's (it replaces
// this process); before exec: 64 usage, 75 unavailable (no daemon), 77 not
// root, 78 rejected (this host cannot confine, or the rollout cannot be
// entered), 127 a failure after the point of no return (said on stderr).
#ifndef SANDFENCE_CLI_ENTER_COMMAND_H_
#define SANDFENCE_CLI_ENTER_COMMAND_H_

namespace sandfence {

// argv[0] is "enter"; the rest are its arguments.
int EnterCommand(int argc, char** argv);

}  // namespace sandfence

#endif  // SANDFENCE_CLI_ENTER_COMMAND_H_
