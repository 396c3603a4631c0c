// The daemon and the commands that talk to a running one:
//   sandfence daemon [flags]              serve (see --help), or --cleanup
//   sandfence rollouts [--json]           the open rollouts
//   sandfence health [--json]             whether the daemon answers, and how
//   sandfence phase ROLLOUT PHASE         switch a rollout's phase
//   sandfence records get ROLLOUT [--json]  a rollout's record
// Each client command takes --socket PATH (default
// /run/sandfence/sandfence.sock). argv[0] is the command's name.
#ifndef SANDFENCE_CLI_DAEMON_COMMAND_H_
#define SANDFENCE_CLI_DAEMON_COMMAND_H_

namespace sandfence {

int DaemonCommand(int argc, char** argv);
int RolloutsCommand(int argc, char** argv);
int HealthCommand(int argc, char** argv);
int PhaseCommand(int argc, char** argv);
// `sandfence watch [ROLLOUT] [--json]`: the event lines as they come.
int WatchCommand(int argc, char** argv);
// `records get ...`: argv[0] is "records", argv[1] "get".
int RecordsGetCommand(int argc, char** argv);

}  // namespace sandfence

#endif  // SANDFENCE_CLI_DAEMON_COMMAND_H_
