#include "cli/daemon_command.h"

#include <grp.h>
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "cli/daemon_client.h"
#include "cli/event_flags.h"
#include "cli/policy_flags.h"
#include "common/ip.h"
#include "common/status.h"
#include "daemon/daemon_server.h"
#include "daemon/grpc_service.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "records/boot_clock.h"
#include "records/report.h"
#include "sandfence/v1/daemon.grpc.pb.h"

namespace sandfence {
namespace {

int Fail(absl::string_view command, const absl::Status& status) {
  std::fprintf(stderr, "sandfence %s: %s\n", std::string(command).c_str(),
               std::string(status.message()).c_str());
  return ExitCodeFor(status);
}

absl::Status NonEmptyValue(absl::string_view v, std::string* out) {
  if (v.empty()) return Malformed("the value is empty");
  *out = std::string(v);
  return absl::OkStatus();
}

void Deadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::seconds(60));
}

std::string Json(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

}  // namespace

int DaemonCommand(int argc, char** argv) {
  DaemonOptions options;
  bool cleanup = false;
  bool no_pin = false;
  bool metrics_address_given = false;
  FlagParser flags;
  flags.AddValueFlag(
      "socket", "PATH",
      "the gRPC Unix socket (default " + std::string(kDefaultSocketPath) + ")",
      [&](absl::string_view v) {
        return NonEmptyValue(v, &options.socket_path);
      });
  flags.AddValueFlag(
      "socket-group", "GROUP",
      "let GROUP (a name or a number) call the daemon: the socket becomes "
      "root:GROUP 0660; calls from inside sandboxes stay refused",
      [&](absl::string_view v) -> absl::Status {
        gid_t gid = 0;
        if (!absl::SimpleAtoi(v, &gid)) {
          const std::string name(v);
          struct group* g = ::getgrnam(name.c_str());
          if (g == nullptr) return Malformed("no such group");
          gid = g->gr_gid;
        }
        options.socket_group = gid;
        return absl::OkStatus();
      });
  flags.AddValueFlag(
      "records-dir", "DIR",
      "where records are written (default " + options.manager.records_dir + ")",
      [&](absl::string_view v) {
        return NonEmptyValue(v, &options.manager.records_dir);
      });
  flags.AddValueFlag("state-dir", "DIR",
                     "open rollouts' state, for a restarted daemon (default " +
                         options.manager.state_dir + ")",
                     [&](absl::string_view v) {
                       return NonEmptyValue(v, &options.manager.state_dir);
                     });
  flags.AddValueFlag("pin-dir", "DIR",
                     "bpffs directory for pinned maps and links (default " +
                         options.manager.pin_dir + ")",
                     [&](absl::string_view v) {
                       return NonEmptyValue(v, &options.manager.pin_dir);
                     });
  flags.AddBoolFlag("no-pin",
                    "pin nothing: enforcement ends with the daemon (tests)",
                    &no_pin);
  flags.AddValueFlag("policy-dir", "DIR",
                     "where StartRollout's policy_file names are found",
                     [&](absl::string_view v) {
                       return NonEmptyValue(v, &options.manager.policy_dir);
                     });
  flags.AddValueFlag("cgroup-parent", "DIR",
                     "where created sandboxes go (default <cgroup2>/sandfence)",
                     [&](absl::string_view v) {
                       return NonEmptyValue(v, &options.manager.cgroup_parent);
                     });
  flags.AddValueFlag(
      "resolver", "IP[:PORT]",
      "DNS server for names in policies (default: /etc/resolv.conf's)",
      [&](absl::string_view v) -> absl::Status {
        absl::StatusOr<HostPort> hp = HostPort::Parse(v, 53);
        if (!hp.ok()) return hp.status();
        options.manager.resolvers.push_back(*hp);
        return absl::OkStatus();
      },
      /*repeatable=*/true);
  flags.AddValueFlag(
      "metrics-port", "PORT",
      "serve Prometheus metrics on --metrics-address's PORT (0: a free "
      "port, named in the log)",
      [&](absl::string_view v) -> absl::Status {
        uint32_t port = 0;
        if (!absl::SimpleAtoi(v, &port) || port > 65535) {
          return Malformed("not a port in 0..65535");
        }
        options.metrics_port = static_cast<uint16_t>(port);
        return absl::OkStatus();
      });
  flags.AddValueFlag(
      "metrics-address", "ADDR",
      "the IPv4 or IPv6 address --metrics-port listens on (default "
      "127.0.0.1; 0.0.0.0 or :: for every address)",
      [&](absl::string_view v) -> absl::Status {
        std::optional<IpAddress> addr = IpAddress::Parse(v);
        if (!addr.has_value()) {
          return Malformed("not an IPv4 or IPv6 address");
        }
        options.metrics_address = *addr;
        metrics_address_given = true;
        return absl::OkStatus();
      });
  RegisterEventFlags(&flags, &options.events);
  flags.AddBoolFlag("metrics-per-rollout",
                    "label the per-rollout metrics (DNS) with rollout=\"ID\" "
                    "instead of summing them: a series set per rollout",
                    &options.metrics.per_rollout);
  flags.AddValueFlag(
      "watch-queue", "N",
      "events held per WatchEvents caller; a slower one misses the rest "
      "and is told how many (default 65536)",
      [&](absl::string_view v) -> absl::Status {
        uint32_t n = 0;
        if (!absl::SimpleAtoi(v, &n) || n == 0) {
          return Malformed("not a count of 1 or more");
        }
        options.watch_queue = n;
        return absl::OkStatus();
      });
  flags.AddBoolFlag("cleanup",
                    "detach every pinned sandbox, remove the pins and the "
                    "state, kill created sandboxes, and exit",
                    &cleanup);
  absl::StatusOr<FlagParser::Result> parsed =
      flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) {
    std::fprintf(stderr, "sandfence daemon: %s\n",
                 std::string(parsed.status().message()).c_str());
    return kExitUsage;
  }
  if (parsed->help) {
    std::printf("usage: sandfence daemon [flags]\n\n%s", flags.Help().c_str());
    return kExitOk;
  }
  if (!parsed->positionals.empty()) {
    std::fprintf(stderr, "sandfence daemon: unexpected argument \"%s\"\n",
                 parsed->positionals[0].c_str());
    return kExitUsage;
  }
  // Metrics are served only with a port: the other metrics flags alone
  // would be silently ignored.
  if ((metrics_address_given || options.metrics.per_rollout) &&
      !options.metrics_port.has_value()) {
    std::fprintf(
        stderr, "sandfence daemon: --%s needs --metrics-port\n",
        metrics_address_given ? "metrics-address" : "metrics-per-rollout");
    return kExitUsage;
  }
  if (no_pin) options.manager.pin_dir.clear();
  if (cleanup) {
    absl::Status s = RolloutManager::Cleanup(options.manager);
    if (!s.ok()) return Fail("daemon --cleanup", s);
    std::fprintf(stderr, "sandfence daemon: cleaned up %s and %s\n",
                 options.manager.pin_dir.c_str(),
                 options.manager.state_dir.c_str());
    return kExitOk;
  }
  absl::Status s = RunDaemon(options);
  if (!s.ok()) return Fail("daemon", s);
  return kExitOk;
}

namespace {

// The flags every client command takes; returns the positionals.
absl::StatusOr<std::vector<std::string>> ParseClientFlags(
    int argc, char** argv, int first, std::string* socket, bool* json,
    absl::string_view usage) {
  FlagParser flags;
  flags.AddValueFlag(
      "socket", "PATH", "the daemon's socket",
      [socket](absl::string_view v) { return NonEmptyValue(v, socket); });
  if (json != nullptr) flags.AddBoolFlag("json", "print JSON", json);
  absl::StatusOr<FlagParser::Result> parsed =
      flags.Parse(std::vector<std::string>(argv + first, argv + argc));
  if (!parsed.ok()) return parsed.status();
  if (parsed->help) {
    std::printf("usage: %s\n\n%s", std::string(usage).c_str(),
                flags.Help().c_str());
    return std::vector<std::string>{"--help"};
  }
  return parsed->positionals;
}

}  // namespace

int RolloutsCommand(int argc, char** argv) {
  std::string socket = kDefaultSocketPath;
  bool json = false;
  absl::StatusOr<std::vector<std::string>> pos = ParseClientFlags(
      argc, argv, 1, &socket, &json, "sandfence rollouts [--json]");
  if (!pos.ok()) {
    Fail("rollouts", pos.status());
    return kExitUsage;
  }
  if (!pos->empty() && (*pos)[0] == "--help") return kExitOk;
  if (!pos->empty()) {
    std::fprintf(stderr, "sandfence rollouts: takes no arguments\n");
    return kExitUsage;
  }
  auto stub = ConnectDaemon(socket);
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::ListRolloutsResponse resp;
  grpc::Status s = stub->ListRollouts(&ctx, {}, &resp);
  if (!s.ok()) return Fail("rollouts", DaemonCallStatus(s, socket));
  if (json) {
    std::printf("%s", Json(resp).c_str());
    return kExitOk;
  }
  std::printf("%-24s %-12s %8s %8s  %s\n", "ROLLOUT", "PHASE", "ALLOWED",
              "DENIED", "SANDBOX");
  for (const v1::RolloutSummary& r : resp.rollout()) {
    std::string note;
    if (r.adopted()) note += " (adopted)";
    if (r.audit_only()) {
      note += absl::StrCat(" AUDIT ONLY (nothing denied; ", r.would_deny(),
                           " would have been)");
    }
    if (!r.borrowed_from().empty()) {
      note += absl::StrCat(" (borrowed from ", r.borrowed_from(), ")");
    }
    std::printf("%-24s %-12s %8llu %8llu  %s%s\n", r.rollout_id().c_str(),
                r.phase().c_str(), static_cast<unsigned long long>(r.allowed()),
                static_cast<unsigned long long>(r.denied()),
                r.cgroup_path().c_str(), note.c_str());
  }
  return kExitOk;
}

namespace {

// One event line as a person reads it: time, rollout, kind, verdict and
// what was decided; the line itself when it is not an object we know.
std::string EventText(const std::string& line) {
  google::protobuf::Struct s;
  if (!google::protobuf::util::JsonStringToMessage(line, &s).ok()) return line;
  const auto str = [&s](const char* key) -> std::string {
    auto it = s.fields().find(key);
    return it == s.fields().end() ? "" : it->second.string_value();
  };
  const auto sub = [&s](const char* key, const char* member) -> std::string {
    auto it = s.fields().find(key);
    if (it == s.fields().end()) return "";
    const auto& f = it->second.struct_value().fields();
    auto m = f.find(member);
    if (m == f.end()) return "";
    return m->second.has_number_value()
               ? absl::StrCat(static_cast<int64_t>(m->second.number_value()))
               : m->second.string_value();
  };
  std::string what;
  const std::string kind = str("kind");
  if (kind == "network") {
    what = absl::StrCat(str("protocol"), " ", sub("destination", "address"),
                        ":", sub("destination", "port"));
  } else if (kind == "unix") {
    what = sub("peer", "path");
  } else if (kind == "dns") {
    what = absl::StrCat(str("name"), " ", str("type"), " ", str("rcode"));
  } else if (kind == "guard") {
    what = absl::StrCat(str("action"), " ", str("detail"), " -> pid ",
                        sub("target", "pid"));
  } else if (kind == "phase") {
    what = s.fields().count("ended") ? "ended" : str("from");
  } else {
    what = str("reason");
  }
  std::string who;
  if (!sub("process", "comm").empty()) {
    who = absl::StrCat("  pid ", sub("process", "pid"), " (",
                       sub("process", "comm"), ")");
  }
  return absl::StrCat(str("time"), " ", str("rollout"), " ", str("phase"), " ",
                      kind, " ", str("verdict"), " ", what, who);
}

}  // namespace

int WatchCommand(int argc, char** argv) {
  std::string socket = kDefaultSocketPath;
  bool json = false;
  absl::StatusOr<std::vector<std::string>> pos = ParseClientFlags(
      argc, argv, 1, &socket, &json,
      "sandfence watch [ROLLOUT] [--json]\n\n"
      "Prints the daemon's decisions as they are made, one line each: of the\n"
      "rollout until it ends, or of every rollout until interrupted. --json:\n"
      "each as its line of the event stream (docs/events.md)");
  if (!pos.ok()) {
    Fail("watch", pos.status());
    return kExitUsage;
  }
  if (!pos->empty() && (*pos)[0] == "--help") return kExitOk;
  if (pos->size() > 1) {
    std::fprintf(stderr, "sandfence watch: takes at most one rollout\n");
    return kExitUsage;
  }
  auto stub = ConnectDaemon(socket);
  grpc::ClientContext ctx;
  v1::WatchEventsRequest req;
  if (!pos->empty()) req.set_rollout_id((*pos)[0]);
  req.set_lines(true);
  std::unique_ptr<grpc::ClientReader<v1::RolloutEvent>> reader =
      stub->WatchEvents(&ctx, req);
  v1::RolloutEvent event;
  while (reader->Read(&event)) {
    if (event.missed() > 0) {
      std::fprintf(stderr,
                   "sandfence watch: %llu events missed (read too slowly; "
                   "the records have them)\n",
                   static_cast<unsigned long long>(event.missed()));
    }
    const std::string text = json ? event.line() : EventText(event.line());
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return Fail("watch", DaemonCallStatus(s, socket));
  return kExitOk;
}

int PhaseCommand(int argc, char** argv) {
  std::string socket = kDefaultSocketPath;
  absl::StatusOr<std::vector<std::string>> pos = ParseClientFlags(
      argc, argv, 1, &socket, nullptr, "sandfence phase ROLLOUT PHASE");
  if (!pos.ok()) {
    Fail("phase", pos.status());
    return kExitUsage;
  }
  if (!pos->empty() && (*pos)[0] == "--help") return kExitOk;
  if (pos->size() != 2) {
    std::fprintf(stderr, "usage: sandfence phase ROLLOUT PHASE\n");
    return kExitUsage;
  }
  auto stub = ConnectDaemon(socket);
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::SetPhaseRequest req;
  req.set_rollout_id((*pos)[0]);
  req.set_phase((*pos)[1]);
  v1::SetPhaseResponse resp;
  grpc::Status s = stub->SetPhase(&ctx, req, &resp);
  if (!s.ok()) return Fail("phase", DaemonCallStatus(s, socket));
  std::printf("%s: %s -> %s (generation %u)\n", req.rollout_id().c_str(),
              resp.previous_phase().c_str(), resp.phase().c_str(),
              resp.generation());
  if (resp.audit_only()) {
    std::printf(
        "%s: AUDIT ONLY: phase \"%s\" denies nothing (enforce: "
        "AUDIT)\n",
        req.rollout_id().c_str(), resp.phase().c_str());
  }
  // What the switch cut of the connections the sandbox had open, or why
  // it could not (issue 15).
  for (const v1::CutConnection& c : resp.cut()) {
    const bool v6 = c.address().find(':') != std::string::npos;
    std::printf("  cut %s %s%s%s:%u (%s)%s%s\n", c.protocol().c_str(),
                v6 ? "[" : "", c.address().c_str(), v6 ? "]" : "", c.port(),
                c.reason().c_str(),
                c.error().empty() ? "" : " NOT destroyed: ", c.error().c_str());
  }
  if (!resp.not_cut().empty()) {
    std::printf("  not cut: %s\n", resp.not_cut().c_str());
  }
  return kExitOk;
}

// What a liveness probe asks: the daemon answers Health (exit 0), or not
// (exit 75, retryable).
int HealthCommand(int argc, char** argv) {
  std::string socket = kDefaultSocketPath;
  bool json = false;
  absl::StatusOr<std::vector<std::string>> pos = ParseClientFlags(
      argc, argv, 1, &socket, &json, "sandfence health [--json]");
  if (!pos.ok()) {
    Fail("health", pos.status());
    return kExitUsage;
  }
  if (!pos->empty() && (*pos)[0] == "--help") return kExitOk;
  if (!pos->empty()) {
    std::fprintf(stderr, "sandfence health: takes no arguments\n");
    return kExitUsage;
  }
  auto stub = ConnectDaemon(socket);
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::HealthResponse resp;
  grpc::Status s = stub->Health(&ctx, {}, &resp);
  if (!s.ok()) return Fail("health", DaemonCallStatus(s, socket));
  if (json) {
    std::printf("%s", Json(resp).c_str());
    return kExitOk;
  }
  std::printf(
      "sandfence %s: egress %s, guard %s, pins %s; %u open rollouts (%u "
      "adopted, %u audit only)\n",
      resp.version().c_str(), resp.egress().c_str(), resp.guard().c_str(),
      resp.pin_dir().c_str(), resp.open_rollouts(), resp.adopted_rollouts(),
      resp.audit_only_rollouts());
  return kExitOk;
}

int RecordsGetCommand(int argc, char** argv) {
  std::string socket = kDefaultSocketPath;
  bool json = false;
  absl::StatusOr<std::vector<std::string>> pos = ParseClientFlags(
      argc, argv, 2, &socket, &json, "sandfence records get ROLLOUT [--json]");
  if (!pos.ok()) {
    Fail("records get", pos.status());
    return kExitUsage;
  }
  if (!pos->empty() && (*pos)[0] == "--help") return kExitOk;
  if (pos->size() != 1) {
    std::fprintf(stderr, "usage: sandfence records get ROLLOUT [--json]\n");
    return kExitUsage;
  }
  auto stub = ConnectDaemon(socket);
  grpc::ClientContext ctx;
  Deadline(&ctx);
  v1::GetRecordRequest req;
  req.set_rollout_id((*pos)[0]);
  v1::GetRecordResponse resp;
  grpc::Status s = stub->GetRecord(&ctx, req, &resp);
  if (!s.ok()) return Fail("records get", DaemonCallStatus(s, socket));
  if (json) {
    absl::StatusOr<std::string> out = FormatRecordJson(resp.record());
    if (!out.ok()) return Fail("records get", out.status());
    std::printf("%s", out->c_str());
  } else {
    std::printf("%s%s", resp.open() ? "(open: the record so far)\n" : "",
                FormatRecordText(resp.record()).c_str());
  }
  return kExitOk;
}

}  // namespace sandfence
