#include "cli/policy_flags.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "compile/endpoint.h"
#include "compile/unix_name.h"
#include "policy/policy_loader.h"

namespace sandfence {
namespace {

std::string Quote(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

absl::Status Usage(absl::string_view message) { return Malformed(message); }

bool IsToolNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '-' || c == '.';
}

absl::StatusOr<uint16_t> ParsePortNumber(absl::string_view text) {
  uint32_t port = 0;
  bool digits = !text.empty() && text.size() <= 5;
  for (char c : text) {
    digits = digits && absl::ascii_isdigit(static_cast<unsigned char>(c));
  }
  if (!digits || !absl::SimpleAtoi(text, &port) || port == 0 || port > 65535) {
    return Usage(absl::StrCat("port ", Quote(text), " is not in 1..65535"));
  }
  return static_cast<uint16_t>(port);
}

}  // namespace

void FlagParser::AddValueFlag(absl::string_view name,
                              absl::string_view value_name,
                              absl::string_view help, Handler handler,
                              bool repeatable) {
  flags_.push_back(Flag{std::string(name), std::string(value_name),
                        std::string(help), std::move(handler), nullptr,
                        repeatable});
}

void FlagParser::AddBoolFlag(absl::string_view name, absl::string_view help,
                             bool* target) {
  flags_.push_back(
      Flag{std::string(name), "", std::string(help), nullptr, target, false});
}

const FlagParser::Flag* FlagParser::Find(absl::string_view name) const {
  for (const Flag& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

absl::StatusOr<FlagParser::Result> FlagParser::Parse(
    const std::vector<std::string>& args) const {
  Result result;
  std::map<std::string, int> seen;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (result.saw_dashes) {
      result.after_dashes.push_back(arg);
      continue;
    }
    if (arg == "--") {
      result.saw_dashes = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      result.help = true;
      return result;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      result.positionals.push_back(arg);  // "-" too: a file named "-"
      continue;
    }
    if (!absl::StartsWith(arg, "--")) {
      return Usage(absl::StrCat("unknown flag ", Quote(arg),
                                " (flags are written --name)"));
    }
    absl::string_view body = absl::string_view(arg).substr(2);
    absl::string_view name = body.substr(0, body.find('='));
    const Flag* flag = Find(name);
    if (flag == nullptr) {
      return Usage(
          absl::StrCat("unknown flag ", Quote(absl::StrCat("--", name))));
    }
    if (++seen[flag->name] > 1 && !flag->repeatable) {
      return Usage(absl::StrCat("--", flag->name, " is given more than once"));
    }
    bool inline_value = name.size() < body.size();
    if (flag->target != nullptr) {
      if (inline_value) {
        return Usage(absl::StrCat("--", flag->name, " takes no value (got ",
                                  Quote(body.substr(name.size() + 1)), ")"));
      }
      *flag->target = true;
      continue;
    }
    std::string value;
    if (inline_value) {
      value = std::string(body.substr(name.size() + 1));
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return Usage(absl::StrCat("--", flag->name, " needs a value (",
                                flag->value_name, ")"));
    }
    if (absl::Status s = flag->handler(value); !s.ok()) {
      return Usage(
          absl::StrCat("--", flag->name, " ", Quote(value), ": ", s.message()));
    }
  }
  return result;
}

std::string FlagParser::Help() const {
  size_t width = 0;
  std::vector<std::string> heads;
  for (const Flag& flag : flags_) {
    heads.push_back(flag.value_name.empty()
                        ? absl::StrCat("--", flag.name)
                        : absl::StrCat("--", flag.name, " ", flag.value_name));
    width = std::max(width, heads.back().size());
  }
  std::string out;
  for (size_t i = 0; i < flags_.size(); ++i) {
    absl::StrAppendFormat(&out, "  %-*s  %s\n", static_cast<int>(width),
                          heads[i], flags_[i].help);
  }
  return out;
}

absl::StatusOr<v1::ToolGrant> ParseToolFlag(absl::string_view text,
                                            bool required) {
  v1::ToolGrant tool;
  tool.set_required(required);
  absl::string_view url = text;
  size_t eq = text.find('=');
  if (eq != absl::string_view::npos && eq > 0 &&
      std::all_of(text.begin(), text.begin() + eq, IsToolNameChar)) {
    tool.set_name(std::string(text.substr(0, eq)));
    url = text.substr(eq + 1);
  }
  // The host may be a wildcard (the compiler asks for dns FILTERED).
  if (absl::StatusOr<ToolEndpoint> ep = ParseToolUrl(url); !ep.ok()) {
    return ep.status();
  }
  tool.set_url(std::string(url));
  return tool;
}

absl::StatusOr<v1::AllowRule> ParseAllowFlag(absl::string_view text) {
  v1::AllowRule rule;
  absl::string_view spec = text;
  rule.set_protocol(v1::TCP);
  if (size_t slash = spec.rfind('/'); slash != absl::string_view::npos) {
    std::string proto = absl::AsciiStrToLower(spec.substr(slash + 1));
    if (proto == "tcp" || proto == "udp" || proto == "any") {
      rule.set_protocol(proto == "tcp"   ? v1::TCP
                        : proto == "udp" ? v1::UDP
                                         : v1::ANY);
      spec = spec.substr(0, slash);
    }
  }

  absl::string_view host;
  absl::string_view host_as_written;  // with brackets, if any
  absl::string_view ports;
  if (absl::StartsWith(spec, "[")) {
    size_t close = spec.find(']');
    if (close == absl::string_view::npos || close + 1 >= spec.size() ||
        spec[close + 1] != ':') {
      return Usage("expected [IPv6]:PORT");
    }
    host = spec.substr(1, close - 1);
    host_as_written = spec.substr(0, close + 1);
    ports = spec.substr(close + 2);
  } else {
    size_t colon = spec.rfind(':');
    if (colon == absl::string_view::npos) {
      return Usage(
          "expected HOST:PORT[/tcp|/udp|/any] (sandfence allows host + port "
          "+ protocol, never a whole host)");
    }
    host = spec.substr(0, colon);
    host_as_written = host;
    ports = spec.substr(colon + 1);
    if (absl::StrContains(host, ':')) {
      return Usage("an IPv6 address is written in brackets: [2001:db8::1]:443");
    }
  }
  if (host.empty()) return Usage("the host is empty");
  // As a policy file takes it: a name pattern (the compiler asks for dns
  // FILTERED, the default) or one host or prefix.
  if (absl::StatusOr<AllowHost> h = ParseAllowHost(host_as_written); !h.ok()) {
    return h.status();
  }
  rule.set_host(std::string(host));

  size_t dash = ports.find('-');
  if (dash == absl::string_view::npos) {
    absl::StatusOr<uint16_t> port = ParsePortNumber(ports);
    if (!port.ok()) return port.status();
    rule.set_port(*port);
  } else {
    absl::StatusOr<uint16_t> first = ParsePortNumber(ports.substr(0, dash));
    if (!first.ok()) return first.status();
    absl::StatusOr<uint16_t> last = ParsePortNumber(ports.substr(dash + 1));
    if (!last.ok()) return last.status();
    if (*first > *last) {
      return Usage(absl::StrCat("port range ", Quote(ports),
                                " is empty (first > last)"));
    }
    rule.mutable_port_range()->set_first(*first);
    rule.mutable_port_range()->set_last(*last);
  }
  return rule;
}

void RegisterPolicyFlags(FlagParser* parser, PolicyFlags* flags) {
  parser->AddValueFlag(
      "network-access", "MODE",
      "a whole policy inline, without a file: one phase \"default\" in MODE "
      "(inherit, model_only, model_and_tools)",
      [flags](absl::string_view v) -> absl::Status {
        std::optional<v1::NetworkAccess> access = ParseAccessName(v);
        if (!access) {
          return Usage(
              "not a mode; use inherit, model_only or "
              "model_and_tools");
        }
        flags->network_access = *access;
        return absl::OkStatus();
      });
  parser->AddValueFlag("phase", "NAME", "only this phase of the policy",
                       [flags](absl::string_view v) -> absl::Status {
                         if (v.empty()) return Usage("the name is empty");
                         flags->phase = std::string(v);
                         return absl::OkStatus();
                       });
  parser->AddValueFlag(
      "model", "URL", "the model server's endpoint (http or https), repeatable",
      [flags](absl::string_view v) -> absl::Status {
        if (absl::StatusOr<Endpoint> ep = ParseEndpointUrl(v); !ep.ok()) {
          return ep.status();
        }
        flags->endpoints.model.push_back(std::string(v));
        return absl::OkStatus();
      },
      /*repeatable=*/true);
  parser->AddValueFlag(
      "tool", "[NAME=]URL",
      "an optional tool grant: dropped when it cannot be honoured, repeatable",
      [flags](absl::string_view v) -> absl::Status {
        absl::StatusOr<v1::ToolGrant> tool = ParseToolFlag(v, false);
        if (!tool.ok()) return tool.status();
        flags->endpoints.tools.push_back(*std::move(tool));
        return absl::OkStatus();
      },
      /*repeatable=*/true);
  parser->AddValueFlag(
      "required-tool", "[NAME=]URL",
      "a required tool grant: the policy is refused when it cannot be "
      "honoured, repeatable",
      [flags](absl::string_view v) -> absl::Status {
        absl::StatusOr<v1::ToolGrant> tool = ParseToolFlag(v, true);
        if (!tool.ok()) return tool.status();
        flags->endpoints.tools.push_back(*std::move(tool));
        return absl::OkStatus();
      },
      /*repeatable=*/true);
  parser->AddBoolFlag(
      "tools-any-port",
      "every --tool and --required-tool opens every TCP port of its host, "
      "not only its URL's (check and the record say \"any port\")",
      &flags->tools_any_port);
  parser->AddValueFlag(
      "allow", "HOST:PORT[/tcp|/udp|/any]",
      "an extra rule; PORT may be FIRST-LAST, HOST a name, address, CIDR "
      "or [IPv6], repeatable",
      [flags](absl::string_view v) -> absl::Status {
        absl::StatusOr<v1::AllowRule> rule = ParseAllowFlag(v);
        if (!rule.ok()) return rule.status();
        flags->endpoints.allow.push_back(*std::move(rule));
        return absl::OkStatus();
      },
      /*repeatable=*/true);
  parser->AddValueFlag(
      "unix", "checked|unchecked",
      "Unix sockets in restricted phases: checked (the default: only the "
      "sandbox's own and --unix-allow names) or unchecked (all reachable; "
      "for kernels without the connect_unix hooks, Linux 6.7+)",
      [flags](absl::string_view v) -> absl::Status {
        if (v == "checked") {
          flags->endpoints.unix_mode = v1::Unix::CHECKED;
        } else if (v == "unchecked") {
          flags->endpoints.unix_mode = v1::Unix::UNCHECKED;
        } else {
          return Usage("not a mode; use checked or unchecked");
        }
        return absl::OkStatus();
      });
  parser->AddValueFlag(
      "unix-allow", "/PATH|@NAME",
      "a Unix socket restricted phases may reach (a path, or an abstract "
      "name after @), repeatable",
      [flags](absl::string_view v) -> absl::Status {
        if (absl::StatusOr<UnixName> n = ParseUnixName(v); !n.ok()) {
          return n.status();
        }
        flags->endpoints.unix_allow.push_back(std::string(v));
        return absl::OkStatus();
      },
      /*repeatable=*/true);
  parser->AddValueFlag(
      "dns-answers-may-point-at", "PREFIX",
      "a protected range (loopback, link-local, multicast, the host's own "
      "addresses) that allowed names' answers may open in filtered phases, "
      "e.g. 127.0.0.0/8 (dns.answers_may_point_at), repeatable",
      [flags](absl::string_view v) -> absl::Status {
        if (absl::StatusOr<IpPrefix> p = IpPrefix::Parse(v); !p.ok()) {
          return p.status();
        }
        flags->endpoints.dns_answers_may_point_at.push_back(std::string(v));
        return absl::OkStatus();
      },
      /*repeatable=*/true);
  // The policy set's egress_budget, field by field.
  struct BudgetFlag {
    const char* name;
    const char* help;
    void (v1::EgressBudget::*set)(uint64_t);
  };
  static constexpr BudgetFlag kBudgetFlags[] = {
      {"egress-budget-connections",
       "connections the rollout may open, across its phases "
       "(egress_budget.connections)",
       &v1::EgressBudget::set_connections},
      {"egress-budget-bytes",
       "payload bytes the rollout may send, across its phases; past them "
       "its packets are dropped (egress_budget.bytes)",
       &v1::EgressBudget::set_bytes},
      {"egress-budget-bytes-per-address",
       "payload bytes the rollout may send to any one address "
       "(egress_budget.bytes_per_address)",
       &v1::EgressBudget::set_bytes_per_address},
  };
  for (const BudgetFlag& f : kBudgetFlags) {
    parser->AddValueFlag(
        f.name, "N", f.help, [flags, f](absl::string_view v) -> absl::Status {
          uint64_t n = 0;
          if (!absl::SimpleAtoi(v, &n) || n == 0) {
            return Usage("not a positive whole number");
          }
          (flags->endpoints.egress_budget.*f.set)(n);
          return absl::OkStatus();
        });
  }
  parser->AddBoolFlag("own-netns",
                      "the sandbox has its own network namespace (host "
                      "loopback is unreachable)",
                      &flags->context.own_netns);
  parser->AddBoolFlag("borrowed",
                      "the sandbox belongs to another owner (only inherit "
                      "applies)",
                      &flags->context.borrowed);
  parser->AddValueFlag(
      "resolver", "IP[:PORT]",
      "the DNS server to resolve names with, instead of /etc/resolv.conf's "
      "(also the one dns SYSTEM allows), repeatable",
      [flags](absl::string_view v) -> absl::Status {
        absl::StatusOr<HostPort> hp = HostPort::Parse(v, 53);
        if (!hp.ok()) return hp.status();
        flags->resolvers.push_back(*hp);
        return absl::OkStatus();
      },
      /*repeatable=*/true);
}

absl::Status FinishPolicyFlags(const std::vector<std::string>& positionals,
                               PolicyFlags* flags) {
  if (positionals.size() > 1) {
    return Usage(absl::StrCat("one policy file at most (got ",
                              Quote(positionals[0]), " and ",
                              Quote(positionals[1]), ")"));
  }
  if (!positionals.empty()) flags->policy_path = positionals[0];
  if (!flags->policy_path.empty() && flags->network_access) {
    return Usage(absl::StrCat(
        "--network-access ", AccessName(*flags->network_access),
        " makes a whole policy, and a policy file ", Quote(flags->policy_path),
        " is given too; use one or the other"));
  }
  if (flags->policy_path.empty() && !flags->network_access) {
    return Usage("no policy: give a policy file, or --network-access MODE");
  }
  if (flags->tools_any_port) {
    if (flags->endpoints.tools.empty()) {
      return Usage(
          "--tools-any-port is given, but no --tool or "
          "--required-tool");
    }
    for (v1::ToolGrant& tool : flags->endpoints.tools) tool.set_any_port(true);
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::PolicySet> LoadPolicyFromFlags(const PolicyFlags& flags) {
  if (flags.network_access) return InlinePolicySet(*flags.network_access);
  return LoadPolicySetFile(flags.policy_path);
}

ResolverSetup MakeResolverFromFlags(const PolicyFlags& flags) {
  ResolverSetup setup;
  ResolverOptions options;
  options.servers = flags.resolvers;
  setup.resolver = std::make_unique<LazyResolver>(options);
  if (!flags.resolvers.empty()) {
    setup.system_resolvers = flags.resolvers;
  } else {
    setup.system_resolvers = ReadResolvConf();
  }
  return setup;
}

}  // namespace sandfence
