// What the daemon keeps on disk for a successor: one state file per open
// rollout (the request, the compiled policy, the phase it believed in, its
// journals), written whole or not at all, and the lock that makes one
// daemon per state directory. The kernel holds the rest (sandfence's pinned
// state): where the two disagree, the kernel wins.
#ifndef SANDFENCE_DAEMON_STATE_STORE_H_
#define SANDFENCE_DAEMON_STATE_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "sandfence/v1/daemon.pb.h"

namespace sandfence {

class StateStore {
 public:
  // Creates dir (0700) and locks it. Unavailable when another daemon holds
  // the lock.
  static absl::StatusOr<std::unique_ptr<StateStore>> Open(
      const std::string& dir);

  // Write-then-rename: a crash leaves the old state or the new, never half.
  absl::Status Save(const v1::RolloutState& state);
  void Remove(const std::string& rollout_id);

  struct Loaded {
    std::string path;
    absl::StatusOr<v1::RolloutState> state;
  };
  // Every state file, sorted by name; one that cannot be read says why.
  std::vector<Loaded> LoadAll() const;
  // Removes every state file (the lock stays).
  void RemoveAll();

  const std::string& dir() const { return dir_; }

  // For `daemon --cleanup`: the states of a directory no daemon holds.
  // Unavailable while a daemon runs on it.
  static absl::StatusOr<std::unique_ptr<StateStore>> OpenForCleanup(
      const std::string& dir);

 private:
  explicit StateStore(std::string dir) : dir_(std::move(dir)) {}
  std::string PathOf(const std::string& rollout_id) const;

  std::string dir_;
  UniqueFd lock_;
};

// Write-then-rename of a whole file (mode 0600).
absl::Status WriteFileAtomic(const std::string& path, const std::string& bytes);
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);
// The deterministic serialization of a message (for comparing requests).
std::string DeterministicBytes(const google::protobuf::Message& message);

}  // namespace sandfence

#endif  // SANDFENCE_DAEMON_STATE_STORE_H_
