#include "cli/oci_hook_command.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/daemon_client.h"
#include "cli/oci_annotations.h"
#include "cli/policy_flags.h"
#include "common/status.h"
#include "daemon/daemon_server.h"
#include "daemon/grpc_service.h"
#include "oci/container.h"
#include "sandfence/v1/daemon.grpc.pb.h"

namespace sandfence {
namespace {

constexpr char kUsage[] =
    "usage: sandfence oci-hook [--socket PATH] [--timeout SECONDS] STAGE\n"
    "\n"
    "An OCI runtime hook. STAGE: createRuntime (or prestart) starts a\n"
    "rollout for the container from its sandfence.dev/ annotations, in its\n"
    "own cgroup, before it runs anything; poststop ends it. The container\n"
    "state is read from stdin. Any refusal, or no daemon, fails the hook,\n"
    "and the runtime does not start the container.\n\n";

constexpr char kNotStarted[] = "the container is not started unenforced";

struct HookCall {
  std::string socket = kDefaultSocketPath;
  int timeout_s = 30;
};

void SetDeadline(const HookCall& call, grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::seconds(call.timeout_s));
  // A daemon restarting is waited for (within the deadline), not failed.
  ctx->set_wait_for_ready(true);
}

absl::Status Start(const HookCall& call, const OciState& state) {
  absl::StatusOr<ContainerPlacement> placement = PlaceContainer(state.pid);
  if (!placement.ok()) return placement.status();
  absl::StatusOr<v1::StartRolloutRequest> req =
      StartRequestFromAnnotations(state.annotations, state.id, *placement);
  if (!req.ok()) return req.status();
  auto stub = ConnectDaemon(call.socket);
  grpc::ClientContext ctx;
  SetDeadline(call, &ctx);
  v1::StartRolloutResponse resp;
  grpc::Status s = stub->StartRollout(&ctx, *req, &resp);
  if (!s.ok()) return DaemonCallStatus(s, call.socket, kNotStarted);
  std::fprintf(stderr,
               "sandfence oci-hook: container %s: rollout %s in phase \"%s\" "
               "(%s)\n",
               state.id.c_str(), resp.rollout_id().c_str(),
               resp.phase().c_str(), resp.cgroup_path().c_str());
  return absl::OkStatus();
}

absl::Status End(const HookCall& call, const OciState& state) {
  const std::string id = RolloutIdOf(state.annotations, state.id);
  auto stub = ConnectDaemon(call.socket);
  grpc::ClientContext ctx;
  SetDeadline(call, &ctx);
  v1::EndRolloutRequest req;
  req.set_rollout_id(id);
  v1::EndRolloutResponse resp;
  grpc::Status s = stub->EndRollout(&ctx, req, &resp);
  // Never started (its createRuntime hook refused it): nothing to end.
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) return absl::OkStatus();
  if (!s.ok())
    return DaemonCallStatus(s, call.socket, "the rollout is not ended");
  std::fprintf(stderr, "sandfence oci-hook: container %s: rollout %s ended%s%s\n",
               state.id.c_str(), id.c_str(),
               resp.record_path().empty() ? "" : ", record ",
               resp.record_path().c_str());
  return absl::OkStatus();
}

}  // namespace

int OciHookCommand(int argc, char** argv) {
  HookCall call;
  FlagParser flags;
  flags.AddValueFlag("socket", "PATH", "the daemon's socket",
                     [&call](absl::string_view v) -> absl::Status {
                       if (v.empty()) return Malformed("the value is empty");
                       call.socket = std::string(v);
                       return absl::OkStatus();
                     });
  flags.AddValueFlag(
      "timeout", "SECONDS", "how long to wait for the daemon (default 30)",
      [&call](absl::string_view v) -> absl::Status {
        if (!absl::SimpleAtoi(v, &call.timeout_s) || call.timeout_s < 1 ||
            call.timeout_s > 3600) {
          return Malformed("expected 1..3600 seconds");
        }
        return absl::OkStatus();
      });
  absl::StatusOr<FlagParser::Result> parsed =
      flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) {
    std::fprintf(stderr, "sandfence oci-hook: %s\n",
                 std::string(parsed.status().message()).c_str());
    return kExitUsage;
  }
  if (parsed->help) {
    std::printf("%s%s", kUsage, flags.Help().c_str());
    return kExitOk;
  }
  const std::string stage =
      parsed->positionals.size() == 1 ? parsed->positionals[0] : "";
  const bool starting = stage == "createRuntime" || stage == "prestart";
  if (!starting && stage != "poststop") {
    std::fprintf(stderr,
                 "sandfence oci-hook: expected one STAGE (createRuntime, "
                 "prestart or poststop), got \"%s\"\n%s",
                 stage.c_str(), kUsage);
    return kExitUsage;
  }

  const std::string input(std::istreambuf_iterator<char>(std::cin), {});
  absl::StatusOr<OciState> state = ParseOciState(input);
  absl::Status status = state.status();
  if (state.ok() && state->annotations.empty() && !state->bundle.empty()) {
    // Older runtimes leave the annotations out of the state.
    absl::StatusOr<std::map<std::string, std::string>> a =
        BundleAnnotations(state->bundle);
    if (a.ok()) state->annotations = *std::move(a);
  }
  if (status.ok() && HasSandfenceAnnotations(state->annotations) &&
      !IsPodInfraContainer(state->annotations)) {
    status = starting ? Start(call, *state) : End(call, *state);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "sandfence oci-hook %s: container %s: %s (%s)\n",
                 stage.c_str(), state.ok() ? state->id.c_str() : "?",
                 std::string(status.message()).c_str(),
                 std::string(RefusalName(RefusalOf(status))).c_str());
    return ExitCodeFor(status);
  }
  return kExitOk;
}

}  // namespace sandfence
