// The comparison point for sandfence's connect cost: the same allowlist
// enforced the way a DNS + nftables egress sidecar does it. Each sandbox
// gets a set of allowed addresses (a sidecar resolves names and fills it)
// and a chain that accepts those and drops the rest; one verdict map keyed
// by the packet's socket cgroup (`socket cgroupv2`) sends each sandbox's
// packets to its chain, so dispatch costs one lookup however many sandboxes
// there are. The output base chain judges only what sandfence judges: UDP
// datagrams and TCP SYNs (no conntrack, which would tax every packet on the
// host). That is the cheapest nftables layout we know for this job, so the
// comparison does not flatter sandfence.
//
// The base chain is attached only while the nftables variant is measured:
// once hooked, nftables would tax the baseline's packets too.
#ifndef SANDFENCE_BENCH_NFT_SIDECAR_H_
#define SANDFENCE_BENCH_NFT_SIDECAR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sandfence::bench {

struct NftSandbox {
  std::string cgroup_path;          // absolute, under the cgroup2 mount
  std::vector<uint32_t> addresses;  // IPv4, host order
};

// How nftables names a cgroup: its path relative to /sys/fs/cgroup (on a
// hybrid host the cgroup2 mount is /sys/fs/cgroup/unified, so /x there is
// "unified/x") and its level in the cgroup2 hierarchy (/x is level 1).
struct NftCgroupName {
  std::string path;
  int level = 0;
};
absl::StatusOr<NftCgroupName> NftNameOf(const std::string& cgroup_path,
                                        const std::string& cgroup2_mount);

class NftSidecar {
 public:
  // Creates `table` (inet) with no base chain. `level` is the cgroup level
  // of every sandbox; scripts are written under work_dir.
  static absl::StatusOr<std::unique_ptr<NftSidecar>> Create(
      std::string table, std::string cgroup2_mount, int level,
      std::string work_dir);
  NftSidecar(const NftSidecar&) = delete;
  NftSidecar& operator=(const NftSidecar&) = delete;
  // Deletes the table, whatever state it is in.
  ~NftSidecar();

  // Adds sandboxes numbered from sandbox_count() on, in one transaction.
  absl::Status AddSandboxes(const std::vector<NftSandbox>& sandboxes);
  // Replaces sandbox `index`'s address set.
  absl::Status ReplaceAddresses(size_t index,
                                const std::vector<uint32_t>& addresses);
  size_t sandbox_count() const { return count_; }

  // Hooks the table into output / unhooks it.
  absl::Status Attach();
  absl::Status Detach();

 private:
  NftSidecar(std::string table, std::string mount, int level,
             std::string work_dir)
      : table_(std::move(table)),
        mount_(std::move(mount)),
        level_(level),
        work_dir_(std::move(work_dir)) {}
  absl::Status Apply(const std::string& script);

  std::string table_, mount_;
  int level_;
  std::string work_dir_;
  size_t count_ = 0;
  bool attached_ = false;
  int scripts_ = 0;
};

}  // namespace sandfence::bench

#endif  // SANDFENCE_BENCH_NFT_SIDECAR_H_
