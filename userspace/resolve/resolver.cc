#include "resolve/resolver.h"

#include <ares.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "resolve/answer.h"

namespace sandfence {
namespace {

// glibc's MAXNS: nameserver lines after the third valid one are never used.
constexpr int kMaxNameservers = 3;
constexpr uint16_t kDnsPort = 53;
constexpr size_t kMaxNameLength = 253;
constexpr size_t kMaxLabelLength = 63;

absl::Status InitCaresOnce() {
  static std::once_flag once;
  static int init_status = ARES_SUCCESS;
  // Never paired with ares_library_cleanup(): resolvers may live until exit.
  std::call_once(once,
                 [] { init_status = ares_library_init(ARES_LIB_INIT_ALL); });
  if (init_status != ARES_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("ares_library_init: ", ares_strerror(init_status)));
  }
  return absl::OkStatus();
}

struct ChannelDeleter {
  void operator()(ares_channel channel) const { ares_destroy(channel); }
};
using Channel =
    std::unique_ptr<std::remove_pointer_t<ares_channel>, ChannelDeleter>;

struct AddrinfoDeleter {
  void operator()(ares_addrinfo* info) const { ares_freeaddrinfo(info); }
};

absl::Status ValidateName(absl::string_view name) {
  if (name.empty()) return Malformed("empty name");
  if (name.size() > kMaxNameLength) {
    return Malformed(absl::StrCat("name \"", name, "\" is longer than ",
                                  kMaxNameLength, " characters"));
  }
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (label.empty()) {
      return Malformed(absl::StrCat("name \"", name, "\" has an empty label"));
    }
    if (label.size() > kMaxLabelLength) {
      return Malformed(absl::StrCat("name \"", name,
                                    "\" has a label longer "
                                    "than ",
                                    kMaxLabelLength, " characters"));
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' &&
          c != '_') {
        return Malformed(absl::StrCat("name \"", name,
                                      "\" has a character that is not a "
                                      "letter, digit, '-' or '_'"));
      }
    }
  }
  return absl::OkStatus();
}

// One address-family lookup in flight; the c-ares callback fills it.
struct Pending {
  bool done = false;
  FamilyAnswer answer;
};

void OnAddrinfo(void* arg, int status, int /*timeouts*/,
                ares_addrinfo* result) {
  std::unique_ptr<ares_addrinfo, AddrinfoDeleter> owned(result);
  auto* pending = static_cast<Pending*>(arg);
  pending->done = true;
  pending->answer.ares_status = status;
  if (status != ARES_SUCCESS || result == nullptr) return;
  for (const ares_addrinfo_node* node = result->nodes; node != nullptr;
       node = node->ai_next) {
    if (node->ai_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(node->ai_addr);
      pending->answer.addrs.push_back(IpAddress::FromBytes(
          AF_INET, reinterpret_cast<const uint8_t*>(&sin->sin_addr)));
    } else if (node->ai_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(node->ai_addr);
      pending->answer.addrs.push_back(IpAddress::FromBytes(
          AF_INET6, reinterpret_cast<const uint8_t*>(&sin6->sin6_addr)));
    }
  }
}

class CaresResolver : public Resolver {
 public:
  CaresResolver(Channel channel, std::string servers)
      : channel_(std::move(channel)), servers_(std::move(servers)) {}

  absl::StatusOr<std::vector<IpAddress>> Resolve(
      absl::string_view name) override {
    if (std::optional<IpAddress> literal = IpAddress::Parse(name)) {
      return std::vector<IpAddress>{*literal};
    }
    if (absl::Status valid = ValidateName(name); !valid.ok()) return valid;

    // Two lookups rather than one AF_UNSPEC: c-ares 1.18 reports success
    // for AF_UNSPEC when one family answered and the other timed out, and
    // a policy compiled from half the addresses must not pass for whole.
    const std::string node(name);
    Pending a;
    Pending aaaa;
    ares_addrinfo_hints hints = {};
    // We sort ourselves; c-ares's RFC 6724 sort would connect() a UDP
    // socket to every address found.
    hints.ai_flags = ARES_AI_NOSORT;
    hints.ai_family = AF_INET;
    ares_getaddrinfo(channel_.get(), node.c_str(), nullptr, &hints, &OnAddrinfo,
                     &a);
    hints.ai_family = AF_INET6;
    ares_getaddrinfo(channel_.get(), node.c_str(), nullptr, &hints, &OnAddrinfo,
                     &aaaa);

    absl::Status waited = WaitFor(a, aaaa);
    if (!waited.ok()) {
      // Runs the callbacks of what is still pending while `a` and `aaaa`
      // are alive, so that no later ares call touches a dead stack frame.
      ares_cancel(channel_.get());
      return waited;
    }
    return CombineAnswers(name, servers_, a.answer, aaaa.answer);
  }

 private:
  absl::Status WaitFor(const Pending& a, const Pending& aaaa) {
    while (!a.done || !aaaa.done) {
      ares_socket_t socks[ARES_GETSOCK_MAXNUM];
      const int bits = ares_getsock(channel_.get(), socks, ARES_GETSOCK_MAXNUM);
      std::vector<pollfd> fds;
      for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
        short events = 0;
        if (ARES_GETSOCK_READABLE(bits, i)) events |= POLLIN;
        if (ARES_GETSOCK_WRITABLE(bits, i)) events |= POLLOUT;
        if (events != 0) fds.push_back(pollfd{socks[i], events, 0});
      }
      timeval tv = {};
      const timeval* next = ares_timeout(channel_.get(), nullptr, &tv);
      if (fds.empty() && next == nullptr) {
        return absl::InternalError(
            "c-ares has a query in flight but no socket or timer to wait on");
      }
      const int timeout_ms =
          next == nullptr ? -1
                          : static_cast<int>(next->tv_sec * 1000 +
                                             (next->tv_usec + 999) / 1000);
      const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
      if (ready < 0) {
        if (errno == EINTR) continue;
        return ErrnoError(errno, "poll on the DNS sockets");
      }
      if (ready == 0) {
        // Lets c-ares expire the query and move to the next server.
        ares_process_fd(channel_.get(), ARES_SOCKET_BAD, ARES_SOCKET_BAD);
        continue;
      }
      for (const pollfd& p : fds) {
        if (p.revents == 0) continue;
        const bool error = (p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0;
        const ares_socket_t readable =
            (p.revents & POLLIN) != 0 || error ? p.fd : ARES_SOCKET_BAD;
        const ares_socket_t writable =
            (p.revents & POLLOUT) != 0 || error ? p.fd : ARES_SOCKET_BAD;
        ares_process_fd(channel_.get(), readable, writable);
      }
    }
    return absl::OkStatus();
  }

  Channel channel_;
  std::string servers_;  // "127.0.0.1:53, [::1]:53", for messages
};

}  // namespace

std::vector<HostPort> ParseResolvConf(absl::string_view text) {
  constexpr absl::string_view kKeyword = "nameserver";
  std::vector<HostPort> out;
  int valid = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (valid == kMaxNameservers) break;
    // As glibc: the keyword starts the line and is followed by a blank.
    if (!absl::ConsumePrefix(&line, kKeyword)) continue;
    if (line.empty() || (line.front() != ' ' && line.front() != '\t')) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    absl::string_view addr_text = line.substr(0, line.find_first_of(" \t\r;#"));
    // The scope of a link-local address names an interface: dropped, see
    // the header.
    addr_text = addr_text.substr(0, addr_text.find('%'));
    std::optional<IpAddress> addr = IpAddress::Parse(addr_text);
    if (!addr) continue;
    ++valid;
    HostPort server{*addr, kDnsPort};
    if (std::find(out.begin(), out.end(), server) == out.end()) {
      out.push_back(server);
    }
  }
  return out;
}

absl::StatusOr<std::vector<HostPort>> ReadResolvConf(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    const int err = errno;
    return Unavailable(absl::StrCat("cannot read the nameservers from ", path,
                                    ": ", std::strerror(err)));
  }
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      return Unavailable(absl::StrCat("cannot read the nameservers from ", path,
                                      ": ", std::strerror(err)));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return ParseResolvConf(text);
}

absl::StatusOr<std::vector<IpAddress>> LazyResolver::Resolve(
    absl::string_view name) {
  if (!made_) {
    made_ = true;
    absl::StatusOr<std::unique_ptr<Resolver>> made =
        MakeCaresResolver(options_);
    if (made.ok()) {
      resolver_ = *std::move(made);
    } else {
      error_ = made.status();
    }
  }
  if (resolver_ == nullptr) return error_;
  return resolver_->Resolve(name);
}

absl::StatusOr<std::unique_ptr<Resolver>> MakeCaresResolver(
    const ResolverOptions& options) {
  if (options.tries < 1) {
    return Malformed(
        absl::StrCat("resolver tries must be at least 1, not ", options.tries));
  }
  const int64_t timeout_ms = absl::ToInt64Milliseconds(options.timeout);
  if (timeout_ms < 1 || timeout_ms > 3600 * 1000) {
    return Malformed(
        absl::StrCat("resolver timeout must be within 1ms..1h, "
                     "not ",
                     absl::FormatDuration(options.timeout)));
  }
  for (const HostPort& server : options.servers) {
    if (server.port == 0) {
      return Malformed(
          absl::StrCat("resolver ", server.ToString(), " has port 0"));
    }
  }
  if (absl::Status init = InitCaresOnce(); !init.ok()) return init;

  const bool system = options.servers.empty();
  std::vector<HostPort> servers = options.servers;
  if (system) {
    absl::StatusOr<std::vector<HostPort>> from_file =
        ReadResolvConf(options.resolv_conf);
    if (!from_file.ok()) return from_file.status();
    servers = *std::move(from_file);
    if (servers.empty()) {
      servers.push_back(HostPort{IpAddress::V4(0x7f000001), kDnsPort});
    }
  }

  ares_options opts = {};
  int mask =
      ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_NOROTATE;
  // Names are absolute: a search domain would make a policy mean different
  // hosts on different machines.
  opts.flags = ARES_FLAG_NOSEARCH;
  opts.timeout = static_cast<int>(timeout_ms);
  opts.tries = options.tries;
  char dns_only[] = "b";
  std::string resolv_conf = options.resolv_conf;
  if (system) {
    // c-ares reads the same file for its other settings (and nsswitch.conf
    // for whether /etc/hosts comes first); the servers are set below.
    mask |= ARES_OPT_RESOLVCONF;
    opts.resolvconf_path = resolv_conf.data();
  } else {
    mask |= ARES_OPT_LOOKUPS;
    opts.lookups = dns_only;
  }
  ares_channel raw = nullptr;
  const int init = ares_init_options(&raw, &opts, mask);
  Channel channel(raw);
  if (init != ARES_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("ares_init_options: ", ares_strerror(init)));
  }

  std::vector<ares_addr_port_node> nodes(servers.size());
  for (size_t i = 0; i < servers.size(); ++i) {
    ares_addr_port_node& node = nodes[i];
    node.next = i + 1 < nodes.size() ? &nodes[i + 1] : nullptr;
    node.family = servers[i].addr.family();
    if (servers[i].addr.is_v4()) {
      std::memcpy(&node.addr.addr4, servers[i].addr.bytes(), 4);
    } else {
      std::memcpy(&node.addr.addr6, servers[i].addr.bytes(), 16);
    }
    node.udp_port = servers[i].port;
    node.tcp_port = servers[i].port;
  }
  const int set = ares_set_servers_ports(channel.get(), nodes.data());
  if (set != ARES_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("ares_set_servers_ports: ", ares_strerror(set)));
  }

  std::vector<std::string> names;
  for (const HostPort& server : servers) names.push_back(server.ToString());
  return std::make_unique<CaresResolver>(std::move(channel),
                                         absl::StrJoin(names, ", "));
}

}  // namespace sandfence
