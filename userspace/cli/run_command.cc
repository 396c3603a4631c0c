#include "cli/run_command.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/event_flags.h"
#include "cli/policy_flags.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "compile/compiler.h"
#include "egress/egress_controller.h"
#include "run/sandbox_run.h"

namespace sandfence {
namespace {

constexpr char kUsage[] =
    "usage: sandfence run [POLICY] [--phase NAME] [--network-access MODE]\n"
    "           [--model URL]... [--tool URL]... [--required-tool URL]...\n"
    "           [--allow HOST:PORT[/tcp|/udp]]... [--netns host|private]\n"
    "           [--user UID[:GID]] [--resolver IP[:PORT]] [--record PATH]\n"
    "           [--guard auto|lsm|landlock|signal|off] [--allow-audit]\n"
    "           [--events-out PATH|-] [--events-format jsonl|ocsf] [--json]\n"
    "           -- CMD [ARG]...\n"
    "\n"
    "Runs CMD in a fresh sandbox (a cgroup) under one phase of the policy:\n"
    "every connect and send is judged in the kernel, and what was denied is\n"
    "summarized on stderr when CMD ends. Needs root.\n"
    "\n"
    "CMD runs in its own PID and mount namespaces under a small init that\n"
    "forwards SIGTERM/SIGINT/SIGHUP/SIGQUIT and exits with CMD's status, in\n"
    "a session of its own (no controlling terminal); its /proc shows only\n"
    "the sandbox's processes, so it cannot see or signal sandfence. This\n"
    "hides processes, not files: another procfs mounted on the host is\n"
    "visible (the guard judges it). When CMD ends or sandfence dies,\n"
    "everything left in the namespace is killed.\n"
    "\n";

struct RunFlags {
  PolicyFlags policy;
  bool private_netns = false;
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  std::string record_path;
  std::optional<GuardMode> guard;
  bool allow_audit = false;
  events::StreamOptions events;  // --events-out and its kin
  std::shared_ptr<events::EventStream> stream;  // opened from `events`
  bool json = false;
};

// run's rollout id, in the record and in event lines.
std::string RunRolloutId() { return absl::StrCat("run-", ::getpid()); }

absl::Status ParseUser(absl::string_view text, RunFlags* flags) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() > 2 || parts[0].empty()) {
    return Malformed("expected UID, UID:GID or a user name");
  }
  uint32_t uid = 0;
  if (!absl::SimpleAtoi(parts[0], &uid)) {
    struct passwd* pw = ::getpwnam(parts[0].c_str());
    if (!pw) return Malformed(absl::StrCat("no user \"", parts[0], "\""));
    uid = pw->pw_uid;
  }
  flags->uid = uid;
  if (parts.size() == 2) {
    uint32_t gid = 0;
    if (!absl::SimpleAtoi(parts[1], &gid)) {
      return Malformed(absl::StrCat("GID \"", parts[1], "\" is not a number"));
    }
    flags->gid = gid;
  }
  return absl::OkStatus();
}

void PrintRefusal(const absl::Status& status, int code) {
  absl::FPrintF(stderr, "sandfence run: %s (%s, exit %d): %s\n",
                code == kExitConfig      ? "refused"
                : code == kExitTempFail  ? "unavailable, retry may help"
                : code == kExitDataErr   ? "malformed policy"
                : code == kExitNoPerm    ? "not permitted"
                                         : "failed",
                RefusalName(RefusalOf(status)), code, status.message());
}

// Compiles the phase the flags select (the whole policy, for the record);
// on failure returns the exit code and has printed why.
struct Selected {
  CompiledPolicy policy;
  CompiledPhase phase;
};
absl::StatusOr<Selected> CompileSelectedPhase(const PolicyFlags& flags,
                                              events::EventStream* stream,
                                              int* exit_code) {
  absl::StatusOr<v1::PolicySet> policy = LoadPolicyFromFlags(flags);
  if (!policy.ok()) {
    *exit_code = RefusalOf(policy.status()) == Refusal::kMalformed
                     ? kExitDataErr
                     : kExitNoInput;
    PrintRefusal(policy.status(), *exit_code);
    EmitRefusal(stream, RunRolloutId(), flags.phase, policy.status());
    return policy.status();
  }
  std::string phase = flags.phase;
  std::vector<std::string> names;
  for (const v1::Phase& p : policy->phase()) names.push_back(p.name());
  if (phase.empty() && names.size() == 1) phase = names[0];
  if (phase.empty() ||
      std::find(names.begin(), names.end(), phase) == names.end()) {
    *exit_code = kExitUsage;
    // Two calls: clang checks a format string only when it is a constant.
    const std::string has = absl::StrJoin(names, ", ");
    absl::Status s = Malformed(
        phase.empty()
            ? absl::StrFormat("the policy has several phases; pick one with "
                              "--phase (it has: %s)",
                              has)
            : absl::StrFormat(
                  "--phase \"%s\": the policy has no such phase (it has: %s)",
                  phase, has));
    absl::FPrintF(stderr, "sandfence run: usage: %s\n", s.message());
    EmitRefusal(stream, RunRolloutId(), phase, s);
    return s;
  }
  ResolverSetup setup = MakeResolverFromFlags(flags);
  PolicyCompiler compiler(setup.resolver.get(),
                          std::move(setup.system_resolvers));
  absl::StatusOr<CompiledPolicy> compiled =
      compiler.Compile(*policy, flags.endpoints, flags.context, phase);
  if (!compiled.ok()) {
    *exit_code = ExitCodeFor(compiled.status());
    PrintRefusal(compiled.status(), *exit_code);
    EmitRefusal(stream, RunRolloutId(), phase, compiled.status());
    return compiled.status();
  }
  const CompiledPhase* selected = compiled->FindPhase(phase);
  if (!selected) {
    *exit_code = kExitSoftware;
    return absl::InternalError("compiled policy lacks the selected phase");
  }
  return Selected{*compiled, *selected};
}

int Execute(const Selected& selected, const RunFlags& flags,
            std::vector<std::string> argv) {
  const CompiledPhase& phase = selected.phase;
  RunRequest request;
  request.phase = phase;
  request.record_path = flags.record_path;
  request.guard_mode = flags.guard;
  request.policy = &selected.policy;
  request.argv = std::move(argv);
  request.uid = flags.uid;
  request.gid = flags.gid;
  request.private_netns = flags.private_netns;
  request.allow_audit = flags.allow_audit;
  request.rollout_id = RunRolloutId();
  request.events = flags.stream;
  if (flags.allow_audit) {
    std::fputs(FormatRunBanner(phase).c_str(), stderr);
  }
  absl::StatusOr<RunSummary> summary = RunInSandbox(request);
  if (!summary.ok()) {
    int code = ExitCodeFor(summary.status());
    PrintRefusal(summary.status(), code);
    EmitRefusal(flags.stream.get(), request.rollout_id, phase.name,
                summary.status());
    return code;
  }
  std::fputs(flags.json ? FormatRunSummaryJson(*summary, phase).c_str()
                        : FormatRunSummary(*summary, phase).c_str(),
             stderr);
  return summary->exit_status;
}

}  // namespace

int RunCommand(int argc, char** argv) {
  RunFlags flags;
  FlagParser parser;
  RegisterPolicyFlags(&parser, &flags.policy);
  parser.AddValueFlag(
      "netns", "host|private",
      "private: CMD gets a fresh network namespace with only loopback",
      [&](absl::string_view v) {
        if (v == "private") {
          flags.private_netns = true;
        } else if (v != "host") {
          return Malformed("expected host or private");
        }
        return absl::OkStatus();
      });
  parser.AddValueFlag("user", "UID[:GID]", "run CMD as this user",
                      [&](absl::string_view v) { return ParseUser(v, &flags); });
  parser.AddValueFlag(
      "guard", "MODE",
      "process guard: auto (lsm where BPF LSM runs, else landlock, else "
      "signal), lsm or landlock (or refuse), signal (weaker: kills after the "
      "fact), off; default: the policy's guard block, else auto. CMD gets "
      "Landlock + seccomp wherever the host has them, whatever the mode",
      [&](absl::string_view v) -> absl::Status {
        absl::StatusOr<GuardMode> mode = ParseGuardMode(v);
        if (!mode.ok()) return mode.status();
        flags.guard = *mode;
        return absl::OkStatus();
      });
  parser.AddBoolFlag(
      "allow-audit",
      "run the phase even if it is audit only (enforce: AUDIT): nothing is "
      "denied and what would be is listed; without this flag such a phase "
      "is refused (exit 78)",
      &flags.allow_audit);
  parser.AddValueFlag("record", "PATH",
                      "write the rollout record (see sandfence records show)",
                      [&](absl::string_view v) {
                        if (v.empty()) return Malformed("empty path");
                        flags.record_path = std::string(v);
                        return absl::OkStatus();
                      });
  RegisterEventFlags(&parser, &flags.events);
  parser.AddBoolFlag("json",
                     "print the summary as one line of JSON on stderr "
                     "(instead of the text lines)",
                     &flags.json);

  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<FlagParser::Result> parsed = parser.Parse(args);
  if (parsed.ok() && parsed->help) {
    absl::PrintF("%s%s", kUsage, parser.Help());
    return kExitOk;
  }
  absl::Status usage = parsed.status();
  if (usage.ok() && parsed->after_dashes.empty()) {
    usage = Malformed("no command: put it after \"--\"");
  }
  if (usage.ok()) usage = FinishPolicyFlags(parsed->positionals, &flags.policy);
  if (!usage.ok()) {
    absl::FPrintF(stderr,
                  "sandfence run: usage: %s\n"
                  "(sandfence run --help lists the flags)\n",
                  usage.message());
    return kExitUsage;
  }
  if (flags.private_netns) flags.policy.context.own_netns = true;
  if (::geteuid() != 0) {
    absl::FPrintF(stderr,
                  "sandfence run: needs root: it loads BPF programs and "
                  "creates cgroups (try sudo)\n");
    return kExitNoPerm;
  }

  // Opened first: a refusal is a line of the stream too.
  absl::StatusOr<std::shared_ptr<events::EventStream>> stream =
      OpenEventStream(flags.events);
  if (!stream.ok()) {
    absl::FPrintF(stderr, "sandfence run: --events-out: %s\n",
                  stream.status().message());
    return kExitCantCreate;
  }
  flags.stream = *std::move(stream);
  int code = kExitOk;
  absl::StatusOr<Selected> selected =
      CompileSelectedPhase(flags.policy, flags.stream.get(), &code);
  if (!selected.ok()) return code;
  return Execute(*selected, flags, parsed->after_dashes);
}

namespace {

// A TCP listener on addr with a kernel-chosen port.
absl::StatusOr<std::pair<UniqueFd, uint16_t>> Listen(const char* addr) {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) return ErrnoError(errno, "socket");
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  ::inet_pton(AF_INET, addr, &sin.sin_addr);
  socklen_t len = sizeof(sin);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&sin), len) != 0 ||
      ::listen(s.get(), 16) != 0 ||
      ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&sin), &len) != 0) {
    return ErrnoError(errno, absl::StrCat("listen on ", addr));
  }
  return std::make_pair(std::move(s), ntohs(sin.sin_port));
}

}  // namespace

int DemoCommand(int argc, char** argv) {
  if (argc == 2 && (absl::string_view(argv[1]) == "--help" ||
                    absl::string_view(argv[1]) == "-h")) {
    absl::PrintF(
        "usage: sandfence demo\n"
        "\n"
        "Shows enforcement on loopback: starts two listeners (a \"model\" on\n"
        "127.0.0.2 and a forbidden one on 127.0.0.4), runs a shell in a\n"
        "sandbox under a model_only policy that allows the first, and prints\n"
        "that one connect succeeded and the other was denied. Needs root.\n");
    return kExitOk;
  }
  if (argc > 1) {
    absl::FPrintF(stderr, "sandfence demo: usage: sandfence demo\n");
    return kExitUsage;
  }
  if (::geteuid() != 0) {
    absl::FPrintF(stderr, "sandfence demo: needs root (try sudo)\n");
    return kExitNoPerm;
  }
  auto model = Listen("127.0.0.2");
  auto forbidden = Listen("127.0.0.4");
  if (!model.ok() || !forbidden.ok()) {
    absl::FPrintF(stderr, "sandfence demo: %s\n",
                  (model.ok() ? forbidden.status() : model.status()).message());
    return kExitSoftware;
  }
  const std::string model_url =
      absl::StrFormat("http://127.0.0.2:%d/v1", model->second);
  const std::string script = absl::StrFormat(
      "for target in 127.0.0.2/%d 127.0.0.4/%d; do "
      "if (exec 3<>/dev/tcp/$target) 2>/dev/null; "
      "then echo \"  connect $target: connected\"; "
      "else echo \"  connect $target: refused by the sandbox\"; fi; done",
      model->second, forbidden->second);
  absl::PrintF(
      "sandfence demo: a \"model\" listens on 127.0.0.2:%d and a forbidden "
      "host on 127.0.0.4:%d (loopback only).\n"
      "$ sandfence run --network-access model_only --model %s -- bash -c "
      "'<connect to both>'\n",
      model->second, forbidden->second, model_url);
  std::fflush(stdout);

  RunFlags flags;
  flags.policy.network_access = v1::MODEL_ONLY;
  flags.policy.endpoints.model.push_back(model_url);
  // It connects over TCP only: where nothing judges Unix sockets (before
  // 6.7 without BPF LSM: Debian 12's own 6.1 as it boots) a checked phase
  // would be refused, so it runs unchecked there, as `--unix unchecked`
  // would (the summary says so).
  if (!KernelChecksUnixSockets()) {
    flags.policy.endpoints.unix_mode = v1::Unix::UNCHECKED;
  }
  int code = kExitOk;
  absl::StatusOr<Selected> selected =
      CompileSelectedPhase(flags.policy, nullptr, &code);
  if (!selected.ok()) return code;
  return Execute(*selected, flags, {"bash", "-c", script});
}

}  // namespace sandfence
