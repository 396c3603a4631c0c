// The phase switch's cut: a sandbox's connections that the new phase no
// longer allows, destroyed by socket iterators (loaded in egress_load.cc).
#include "egress/egress_controller.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "egress/controller_internal.h"
#include "host/bpf_object.h"

namespace sandfence {

absl::StatusOr<std::vector<CutConnection>> EgressController::CutConnections(
    const CgroupRef& cgroup, int netns_fd) {
  if (!cut_tcp_) return absl::FailedPreconditionError(cut_unavailable_);
  std::vector<CutConnection> out;
  if (absl::Status s = CutHere(cgroup, &out); !s.ok()) return s;
  if (netns_fd < 0) return out;
  // An iterator walks the namespace its creator is in: a thread of our
  // own enters the sandbox's (setns moves only the calling thread).
  absl::Status in_netns;
  std::thread walker([&] {
    if (::setns(netns_fd, CLONE_NEWNET) != 0) {
      in_netns = ErrnoError(errno, "cut: enter the sandbox's netns");
      return;
    }
    in_netns = CutHere(cgroup, &out);
  });
  walker.join();
  if (!in_netns.ok()) return in_netns;
  return out;
}

absl::Status EgressController::CutHere(const CgroupRef& cgroup,
                                       std::vector<CutConnection>* out) {
  // The programs are shared by every thread of every driver: each asks
  // under its own thread id, which the iterator runs as.
  const uint32_t tid = static_cast<uint32_t>(::gettid());
  const sf_cut_request req{
      .sandbox = cgroup.id, .level = cgroup.level, .pad = 0};
  if (bpf_map_update_elem(cut_req_.get(), &tid, &req, BPF_ANY) != 0) {
    return ErrnoError(errno, "cut: the request");
  }
  struct Drop {
    int fd;
    uint32_t tid;
    ~Drop() { bpf_map_delete_elem(fd, &tid); }
  } drop{cut_req_.get(), tid};
  for (int link : {cut_tcp_.get(), cut_udp_.get()}) {
    UniqueFd iter(bpf_iter_create(link));
    if (!iter) return ErrnoError(errno, "cut: the iterator");
    std::string data;
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::read(iter.get(), chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError(errno, "cut: read the iterator");
      if (n == 0) break;
      data.append(chunk, static_cast<size_t>(n));
    }
    if (data.size() % sizeof(sf_cut_entry) != 0) {
      return absl::InternalError(
          absl::StrCat("cut: the iterator wrote ", data.size(),
                       " bytes, not a whole number of entries"));
    }
    for (size_t at = 0; at < data.size(); at += sizeof(sf_cut_entry)) {
      sf_cut_entry e;
      std::memcpy(&e, data.data() + at, sizeof(e));
      CutConnection c;
      c.sandbox = e.sandbox;
      c.peer = IpAddress::FromBytes(e.family == AF_INET6 ? AF_INET6 : AF_INET,
                                    reinterpret_cast<const uint8_t*>(e.addr));
      c.port = e.port;
      c.protocol = e.protocol;
      c.tcp_state = e.state;
      c.reason = static_cast<sf_reason>(e.reason);
      c.destroy_errno = e.destroy_err < 0 ? -e.destroy_err : 0;
      out->push_back(c);
    }
  }
  return absl::OkStatus();
}

}  // namespace sandfence
