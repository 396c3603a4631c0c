#include "bench/leftovers.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <linux/bpf.h>
#include <sys/stat.h>

#include <fstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/unique_fd.h"

namespace sandfence::bench {
namespace {

constexpr char kPinRoot[] = "/sys/fs/bpf";
constexpr char kSetRoot[] = "/sys/fs/bpf/sandfence";

int64_t CountIds(int (*next)(__u32, __u32*)) {
  int64_t n = 0;
  __u32 id = 0;
  while (next(id, &id) == 0) ++n;
  return n;
}

}  // namespace

void CountTree(const std::string& dir, int64_t* n,
               const std::function<void(const std::string&)>& each) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    ++*n;
    if (each) each(path);
    if (e->d_type == DT_DIR) CountTree(path, n, each);
  }
  ::closedir(d);
}

int64_t CountMapEntries(const std::string& dir) {
  int64_t entries = 0;
  for (const auto& [pin, n] : MapEntriesByPin(dir)) entries += n;
  return entries;
}

std::map<std::string, int64_t> MapEntriesByPin(const std::string& dir) {
  std::map<std::string, int64_t> out;
  int64_t files = 0;
  CountTree(dir, &files, [&](const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    UniqueFd fd(::bpf_obj_get(path.c_str()));
    if (fd.get() < 0) return;
    // Maps only (links and programs have no map_type), from fdinfo: the
    // Debian 12 libbpf has no bpf_map_get_info_by_fd.
    std::ifstream fdinfo(absl::StrCat("/proc/self/fdinfo/", fd.get()));
    int type = -1;
    uint32_t key_size = 0;
    for (std::string line; std::getline(fdinfo, line);) {
      if (line.rfind("map_type:", 0) == 0) type = std::stoi(line.substr(9));
      if (line.rfind("key_size:", 0) == 0) key_size = std::stoul(line.substr(9));
    }
    switch (type) {
      case BPF_MAP_TYPE_HASH:
      case BPF_MAP_TYPE_LRU_HASH:
      case BPF_MAP_TYPE_PERCPU_HASH:
      case BPF_MAP_TYPE_LRU_PERCPU_HASH:
      case BPF_MAP_TYPE_LPM_TRIE:
      case BPF_MAP_TYPE_HASH_OF_MAPS:
        break;
      default:
        return;
    }
    int64_t& entries = out[path.substr(dir.size() + 1)];
    std::vector<char> key(key_size), next(key_size);
    void* prev = nullptr;
    while (::bpf_map_get_next_key(fd.get(), prev, next.data()) == 0) {
      ++entries;
      key = next;
      prev = key.data();
    }
  });
  return out;
}

std::map<std::string, int64_t> BpfObjectCounts() {
  return {{"bpf_programs", CountIds(::bpf_prog_get_next_id)},
          {"bpf_links", CountIds(::bpf_link_get_next_id)},
          {"bpf_maps", CountIds(::bpf_map_get_next_id)}};
}

std::map<std::string, int64_t> HostSnapshot(const BenchOptions& o) {
  std::map<std::string, int64_t> s = BpfObjectCounts();
  int64_t pins = 0;
  CountTree(kPinRoot, &pins);
  s["pins"] = pins;
  int64_t cgroups = 0;
  CountTree(o.cgroup2_mount, &cgroups);
  s["cgroup_files"] = cgroups;
  s["map_entries"] = CountMapEntries(kSetRoot);
  // Open files, host-wide (the first field of file-nr).
  std::ifstream nr("/proc/sys/fs/file-nr");
  int64_t files = 0;
  nr >> files;
  s["open_files"] = files;
  return s;
}

std::map<std::string, int64_t> ProcessSnapshot(pid_t pid) {
  std::map<std::string, int64_t> s;
  int64_t fds = 0;
  CountTree(absl::StrCat("/proc/", pid, "/fd"), &fds);
  s["fds"] = fds;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    absl::string_view v = line;
    int64_t n = 0;
    if (absl::ConsumePrefix(&v, "Threads:") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(v), &n)) {
      s["threads"] = n;
    }
    if (absl::ConsumePrefix(&v, "VmRSS:") &&
        absl::SimpleAtoi(absl::StripSuffix(absl::StripAsciiWhitespace(v), " kB"),
                         &n)) {
      s["rss_kib"] = n;
    }
  }
  return s;
}

}  // namespace sandfence::bench
