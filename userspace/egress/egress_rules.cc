#include "egress/egress_rules.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "egress/egress_controller.h"

namespace sandfence {

absl::Status MapWriteError(int err, absl::string_view map_name) {
  if (err == E2BIG || err == ENOMEM || err == ENOSPC) {
    return Unavailable(
        absl::StrCat("map ", map_name, " is full: ", std::strerror(err)));
  }
  return ErrnoError(err, absl::StrCat("write ", map_name));
}

namespace {

// Maps take a whole generation in one bpf() call where the kernel has
// batch operations (hash maps 5.6+, LPM tries through the kernel's generic
// batch ops): a phase switch of 1,000 rules is then a handful of system
// calls instead of 2,000, and a 40,000-rule start no longer makes tens of
// thousands. A kernel without them (EINVAL) gets the loop.
template <typename K, typename V>
absl::Status UpdateAll(int map_fd, const std::vector<MapEntry<K, V>>& entries,
                       absl::string_view map_name, bool try_batch) {
  size_t done = 0;
  if (try_batch && !entries.empty()) {
    std::vector<K> keys;
    std::vector<V> values;
    keys.reserve(entries.size());
    values.reserve(entries.size());
    for (const auto& e : entries) {
      keys.push_back(e.key);
      values.push_back(e.value);
    }
    LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
    __u32 count = static_cast<__u32>(keys.size());
    if (bpf_map_update_batch(map_fd, keys.data(), values.data(), &count,
                             &opts) == 0) {
      return absl::OkStatus();
    }
    const int err = errno;
    // 524 is the kernel's ENOTSUPP: no batch operation for this map type.
    if (err != EINVAL && err != ENOTSUP && err != EOPNOTSUPP && err != 524) {
      return MapWriteError(err, map_name);
    }
    // A kernel that refuses the call outright leaves `count` as it was
    // (every entry), so it says nothing about what was written: the loop
    // writes them all again (BPF_ANY: the same result either way).
    done = 0;
  }
  for (size_t i = done; i < entries.size(); ++i) {
    if (bpf_map_update_elem(map_fd, &entries[i].key, &entries[i].value,
                            BPF_ANY) != 0) {
      return MapWriteError(errno, map_name);
    }
  }
  return absl::OkStatus();
}

template <typename K, typename V>
void DeleteAll(int map_fd, const std::vector<MapEntry<K, V>>& entries,
               bool try_batch) {
  if (try_batch && !entries.empty()) {
    std::vector<K> keys;
    keys.reserve(entries.size());
    for (const auto& e : entries) keys.push_back(e.key);
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    __u32 count = static_cast<__u32>(keys.size());
    // Stops at the first missing key (ENOENT): the loop finishes the rest.
    if (bpf_map_delete_batch(map_fd, keys.data(), &count, &opts) == 0) return;
  }
  for (const auto& e : entries) bpf_map_delete_elem(map_fd, &e.key);
}

// The keys of the map at fd that `matches`, counted, and deleted with
// `erase` (collected first: deleting while walking restarts the walk). A
// missing map (-1: no Unix enforcer here) has none.
template <typename K, typename Pred>
size_t SweepKeys(int fd, Pred matches, bool erase) {
  if (fd < 0) return 0;
  std::vector<K> matched;
  K key{}, next{};
  const K* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    if (matches(next)) matched.push_back(next);
    key = next;
    prev = &key;
  }
  if (erase) {
    for (const K& k : matched) bpf_map_delete_elem(fd, &k);
  }
  return matched.size();
}

}  // namespace

absl::Status EgressController::WriteEntries(const RuleEntries& e) {
  absl::Status s = UpdateAll(maps_.exact4.get(), e.exact4, "sf_exact4", true);
  if (s.ok()) s = UpdateAll(maps_.exact6.get(), e.exact6, "sf_exact6", true);
  if (s.ok()) s = UpdateAll(maps_.cidr4.get(), e.cidr4, "sf_cidr4", true);
  if (s.ok()) s = UpdateAll(maps_.cidr6.get(), e.cidr6, "sf_cidr6", true);
  if (s.ok() && !e.unix_names.empty()) {
    if (!maps_.unix_rules) {
      s = Rejected(absl::StrCat("Unix socket names: ", unix_unavailable_));
    } else {
      s = UpdateAll(maps_.unix_rules.get(), e.unix_names, "sf_unix_rules",
                    true);
    }
  }
  if (!s.ok()) DeleteEntries(e);
  return s;
}

absl::Status EgressController::WriteEntriesOrReap(const RuleEntries& e) {
  absl::Status s = WriteEntries(e);
  if (absl::IsUnavailable(s) && reaper_.pending() > 0) {
    reaper_.Drain();
    s = WriteEntries(e);
  }
  return s;
}

void EgressController::DeleteEntries(const RuleEntries& e) {
  DeleteAll(maps_.exact4.get(), e.exact4, true);
  DeleteAll(maps_.exact6.get(), e.exact6, true);
  DeleteAll(maps_.cidr4.get(), e.cidr4, true);
  DeleteAll(maps_.cidr6.get(), e.cidr6, true);
  if (maps_.unix_rules) DeleteAll(maps_.unix_rules.get(), e.unix_names, true);
}

void EgressController::DeleteGeneration(uint32_t generation) {
  auto of = [generation](const auto& k) { return k.generation == generation; };
  SweepKeys<sf_exact4_key>(maps_.exact4.get(), of, true);
  SweepKeys<sf_exact6_key>(maps_.exact6.get(), of, true);
  SweepKeys<sf_cidr4_key>(maps_.cidr4.get(), of, true);
  SweepKeys<sf_cidr6_key>(maps_.cidr6.get(), of, true);
  SweepKeys<sf_unix_key>(
      maps_.unix_rules.get(),
      [generation](const sf_unix_key& k) { return k.scope == generation; },
      true);
}

void EgressController::DeleteLearned(SandboxState& state) {
  for (const LearnedKey& key : state.learned) {
    if (key.is_v4()) {
      const sf_learned4_key k = key.Key4();
      bpf_map_delete_elem(maps_.learned4.get(), &k);
    } else {
      const sf_learned6_key k = key.Key6();
      bpf_map_delete_elem(maps_.learned6.get(), &k);
    }
  }
  state.learned.clear();
}

void EgressController::Doom(uint32_t generation) {
  const uint32_t slot = host_->slot();
  // A full journal (65,536 generations queued and not yet deleted) only
  // means a kill now would leave these for `daemon --cleanup`.
  bpf_map_update_elem(maps_.doomed.get(), &generation, &slot, BPF_ANY);
}

void EgressController::Undoom(uint32_t generation) {
  bpf_map_delete_elem(maps_.doomed.get(), &generation);
}

void EgressController::DeleteGenerationEverywhere(uint32_t generation) {
  DeleteGeneration(generation);
  SandboxState dead;
  dead.learned = ScanLearned(generation);
  DeleteLearned(dead);
  SweepKeys<sf_seen_key>(
      maps_.seen.get(),
      [&](const sf_seen_key& k) { return k.generation == generation; }, true);
  SweepKeys<sf_unix_key>(
      maps_.unix_seen.get(),
      [&](const sf_unix_key& k) { return k.aux == generation; }, true);
}

size_t EgressController::FinishDeletesOf(uint32_t slot) {
  std::vector<uint32_t> doomed;
  uint32_t key = 0, next = 0;
  const uint32_t* prev = nullptr;
  while (bpf_map_get_next_key(maps_.doomed.get(), prev, &next) == 0) {
    uint32_t owner = 0;
    if (bpf_map_lookup_elem(maps_.doomed.get(), &next, &owner) == 0 &&
        owner == slot) {
      doomed.push_back(next);
    }
    key = next;
    prev = &key;
  }
  for (uint32_t generation : doomed) {
    DeleteGenerationEverywhere(generation);
    Undoom(generation);
  }
  return doomed.size();
}

void EgressController::HoldDeletesForTest() {
  auto gate = std::make_shared<absl::Notification>();
  hold_ = gate;
  reaper_.Post([gate] { gate->WaitForNotification(); });
}

void EgressController::ReleaseDeletesForTest() {
  if (hold_ && !hold_->HasBeenNotified()) hold_->Notify();
}

void EgressController::DeleteSeen(uint64_t cgroup_id,
                                  std::optional<uint32_t> generation) {
  SweepSeen(cgroup_id, generation, /*erase=*/true);
}

size_t EgressController::SeenCount(uint64_t cgroup_id) const {
  return SweepSeen(cgroup_id, std::nullopt, /*erase=*/false);
}

size_t EgressController::SweepSeen(uint64_t cgroup_id,
                                   std::optional<uint32_t> generation,
                                   bool erase) const {
  return SweepKeys<sf_seen_key>(
             maps_.seen.get(),
             [&](const sf_seen_key& k) {
               return k.sandbox == cgroup_id &&
                      (!generation || k.generation == *generation);
             },
             erase) +
         SweepKeys<sf_unix_key>(
             maps_.unix_seen.get(),
             [&](const sf_unix_key& k) {
               return k.scope == cgroup_id &&
                      (!generation || k.aux == *generation);
             },
             erase);
}

absl::flat_hash_set<LearnedKey> EgressController::ScanLearned(
    uint32_t generation) const {
  absl::flat_hash_set<LearnedKey> out;
  auto scan = [&](int fd, auto key_type) {
    using K = decltype(key_type);
    K key{};
    K next{};
    const K* prev = nullptr;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
      if (next.generation == generation) out.insert(LearnedKeyOf(next));
      key = next;
      prev = &key;
    }
  };
  scan(maps_.learned4.get(), sf_learned4_key{});
  scan(maps_.learned6.get(), sf_learned6_key{});
  return out;
}

void EgressController::DeleteState(const SandboxState& state) {
  if (state.adopted) {
    DeleteGeneration(state.generation);
  } else {
    DeleteEntries(state.entries);
  }
}

}  // namespace sandfence
