// What sandfence could leave behind on a host, counted: pins, BPF objects,
// cgroups, the pinned maps' entries, open files, and a process's own fds,
// threads and memory. The run and soak suites take a snapshot before and
// after and report the difference.
#ifndef SANDFENCE_BENCH_LEFTOVERS_H_
#define SANDFENCE_BENCH_LEFTOVERS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "bench/options.h"

namespace sandfence::bench {

// Everything under dir, recursively (files and directories); `each` sees
// every path.
void CountTree(const std::string& dir, int64_t* n,
               const std::function<void(const std::string&)>& each = {});

// Entries of the hash and trie maps pinned under dir (arrays and rings
// have no entries to leak).
int64_t CountMapEntries(const std::string& dir);
// The same, per map: its pin path (relative to dir) and its entries.
std::map<std::string, int64_t> MapEntriesByPin(const std::string& dir);

// Host-wide: BPF programs, links and maps.
std::map<std::string, int64_t> BpfObjectCounts();

// Host-wide: pins under /sys/fs/bpf, BPF programs, links and maps, files
// under the cgroup2 mount, the entries of the host set's maps
// (/sys/fs/bpf/sandfence), open files.
std::map<std::string, int64_t> HostSnapshot(const BenchOptions& o);

// One process's own: open fds, threads, resident memory (KiB).
std::map<std::string, int64_t> ProcessSnapshot(pid_t pid);

}  // namespace sandfence::bench

#endif  // SANDFENCE_BENCH_LEFTOVERS_H_
