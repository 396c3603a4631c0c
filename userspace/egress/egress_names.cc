// The kernel half of the DNS filter: a sandbox's filter target and the
// addresses its answers taught (learned under its generation).
#include "egress/egress_controller.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "egress/controller_internal.h"
#include "egress/egress_rules.h"
#include "host/bpf_object.h"

namespace sandfence {

absl::Status EgressController::SetDnsTarget(uint64_t cgroup_id,
                                            const HostPort& target) {
  const std::string text = target.ToString();
  uint32_t host_order = 0;
  if (target.addr.is_v4()) {
    std::memcpy(&host_order, target.addr.bytes(), 4);
    host_order = ntohl(host_order);
  }
  if (!target.addr.is_v4() ||
      (host_order & SF_DNS_FILTER_MASK) != SF_DNS_FILTER_NET) {
    return Malformed(absl::StrCat(
        "DNS filter target ", text,
        ": the address must be IPv4 in the reserved range 127.83.0.0/",
        SF_DNS_FILTER_PREFIX));
  }
  if (target.port == 0) {
    return Malformed(
        absl::StrCat("DNS filter target ", text, ": the port must not be 0"));
  }
  sf_dns_target value{};
  std::memcpy(&value.addr, target.addr.bytes(), 4);
  value.port = target.port;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SandboxState*> found = Find(cgroup_id);
  if (!found.ok()) return found.status();
  // The filter knows a sandbox by the target its queries arrive at: two
  // sandboxes on one target would be taken for each other.
  const int fd = maps_.dns_targets.get();
  uint64_t key = 0, next = 0;
  const uint64_t* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    sf_dns_target other{};
    if (next != cgroup_id && bpf_map_lookup_elem(fd, &next, &other) == 0 &&
        other.addr == value.addr && other.port == value.port) {
      return absl::AlreadyExistsError(absl::StrCat(
          "DNS filter target ", text, " is sandbox ", next, "'s already"));
    }
    key = next;
    prev = &key;
  }
  // The reply side first: a query redirected before its answer's source
  // can be restored would confuse the client that checks it.
  if (absl::Status s = AttachReplyHooks(cgroup_id, **found);
      !s.ok()) {
    return s;
  }
  if (bpf_map_update_elem(fd, &cgroup_id, &value, BPF_ANY) != 0) {
    return MapWriteError(errno, "sf_dns_targets");
  }
  return absl::OkStatus();
}

absl::Status EgressController::ClearDnsTarget(uint64_t cgroup_id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SandboxState*> found = Find(cgroup_id);
  if (!found.ok()) return found.status();
  if (bpf_map_delete_elem(maps_.dns_targets.get(), &cgroup_id) != 0 &&
      errno != ENOENT) {
    return ErrnoError(errno, "delete from sf_dns_targets");
  }
  return absl::OkStatus();
}

absl::Status EgressController::Learn(uint64_t cgroup_id, uint32_t generation,
                                     const std::vector<LearnedEntry>& entries) {
  // Under mu_ throughout: SwitchPhase cannot flip the generation (and
  // delete what is learned under it) between the check and the writes.
  absl::MutexLock lock(&mu_);
  absl::StatusOr<SandboxState*> found = Find(cgroup_id);
  if (!found.ok()) return found.status();
  SandboxState& state = **found;
  if (generation != state.generation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sandbox ", cgroup_id, " is on generation ", state.generation, ", not ",
        generation, " (its phase changed): nothing learned"));
  }
  if (!(state.flags & SF_SB_DNS_FILTER)) {
    return absl::FailedPreconditionError(
        absl::StrCat("sandbox ", cgroup_id,
                     "'s phase does not filter DNS: nothing learned"));
  }
  // Every entry is checked and merged before anything is written.
  std::vector<std::pair<LearnedKey, sf_learned_value>> values;
  absl::flat_hash_map<LearnedKey, size_t> index;
  for (const LearnedEntry& e : entries) {
    const LearnedKey key = LearnedKeyOf(generation, e);
    sf_learned_value old{};
    const sf_learned_value* base = nullptr;
    if (auto at = index.find(key); at != index.end()) {
      base = &values[at->second].second;
    } else {
      int rc = -1;
      if (key.is_v4()) {
        const sf_learned4_key k = key.Key4();
        rc = bpf_map_lookup_elem(maps_.learned4.get(), &k, &old);
      } else {
        const sf_learned6_key k = key.Key6();
        rc = bpf_map_lookup_elem(maps_.learned6.get(), &k, &old);
      }
      if (rc == 0) base = &old;
    }
    absl::StatusOr<sf_learned_value> merged = MergeLearned(base, e);
    if (!merged.ok()) return merged.status();
    if (auto at = index.find(key); at != index.end()) {
      values[at->second].second = *merged;
    } else {
      index.emplace(key, values.size());
      values.emplace_back(key, *merged);
    }
  }
  for (const auto& [key, value] : values) {
    int rc;
    if (key.is_v4()) {
      const sf_learned4_key k = key.Key4();
      rc = bpf_map_update_elem(maps_.learned4.get(), &k, &value, BPF_ANY);
    } else {
      const sf_learned6_key k = key.Key6();
      rc = bpf_map_update_elem(maps_.learned6.get(), &k, &value, BPF_ANY);
    }
    if (rc != 0) {
      return MapWriteError(errno, key.is_v4() ? "sf_learned4" : "sf_learned6");
    }
    state.learned.insert(key);
  }
  return absl::OkStatus();
}

size_t EgressController::CollectExpired(uint64_t now_boot_ns) {
  absl::MutexLock lock(&mu_);
  size_t collected = 0;
  // Only this process's sandboxes: another process may be extending one
  // of its own entries between a read here and a delete.
  for (auto& [id, state] : sandboxes_) {
    std::vector<LearnedKey> gone;
    for (const LearnedKey& key : state.learned) {
      sf_learned_value v{};
      int rc;
      if (key.is_v4()) {
        const sf_learned4_key k = key.Key4();
        rc = bpf_map_lookup_elem(maps_.learned4.get(), &k, &v);
        if (rc == 0 && v.expires_ns <= now_boot_ns &&
            bpf_map_delete_elem(maps_.learned4.get(), &k) == 0) {
          ++collected;
        }
      } else {
        const sf_learned6_key k = key.Key6();
        rc = bpf_map_lookup_elem(maps_.learned6.get(), &k, &v);
        if (rc == 0 && v.expires_ns <= now_boot_ns &&
            bpf_map_delete_elem(maps_.learned6.get(), &k) == 0) {
          ++collected;
        }
      }
      if (rc != 0 || v.expires_ns <= now_boot_ns) gone.push_back(key);
    }
    for (const LearnedKey& key : gone) state.learned.erase(key);
  }
  return collected;
}

absl::StatusOr<size_t> EgressController::LearnedCount(
    uint64_t cgroup_id) const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<const SandboxState*> found = Find(cgroup_id);
  if (!found.ok()) return found.status();
  return (*found)->learned.size();
}

}  // namespace sandfence
