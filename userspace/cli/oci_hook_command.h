// `sandfence oci-hook [--socket PATH] [--timeout SECONDS] STAGE`: an OCI
// runtime hook (podman/CRI-O hooks.d, or a bundle's config.json).
//   createRuntime (or prestart): starts a rollout for the container from
//     its sandfence.dev/ annotations (cli/oci_annotations.h), in the
//     container's own cgroup, before its first instruction. Any refusal, or
//     no daemon, fails the hook: the runtime does not start the container.
//   poststop: ends the container's rollout (its record goes to the daemon's
//     records dir under the rollout id).
// The container state comes on stdin. A container without sandfence.dev/
// annotations is left alone. argv[0] is the command's name.
#ifndef SANDFENCE_CLI_OCI_HOOK_COMMAND_H_
#define SANDFENCE_CLI_OCI_HOOK_COMMAND_H_

namespace sandfence {

int OciHookCommand(int argc, char** argv);

}  // namespace sandfence

#endif  // SANDFENCE_CLI_OCI_HOOK_COMMAND_H_
