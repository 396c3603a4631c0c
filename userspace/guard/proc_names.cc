#include "guard/proc_names.h"

#include <cstring>

namespace sandfence {
namespace {

constexpr uint16_t kReadable = SF_PROCNAME_F_READABLE;
constexpr uint16_t kIgnore = SF_PROCNAME_F_IGNORE;
constexpr uint16_t kParent = SF_PROCNAME_F_PARENT;
constexpr uint16_t kGated = 0;

constexpr ProcNameEntry kTable[] = {
    // Gated by ptrace access: they map or reveal the target's memory,
    // environment, files and execution.
    {"mem", SF_PROC_MEM, kGated},
    {"environ", SF_PROC_ENVIRON, kGated},
    {"maps", SF_PROC_MAPS, kGated},
    {"smaps", SF_PROC_SMAPS, kGated},
    {"smaps_rollup", SF_PROC_SMAPS, kGated},
    {"numa_maps", SF_PROC_MAPS, kGated},
    {"pagemap", SF_PROC_PAGEMAP, kGated},
    {"auxv", SF_PROC_AUXV, kGated},
    {"stack", SF_PROC_STACK, kGated},
    {"syscall", SF_PROC_SYSCALL, kGated},
    {"cwd", SF_PROC_CWD, kGated},
    {"root", SF_PROC_ROOT, kGated},
    {"exe", SF_PROC_EXE, kGated},
    {"fd", SF_PROC_FD_DIR, kGated | kParent, SF_PROC_FD_LINK, kGated},
    {"fdinfo", SF_PROC_FDINFO, kGated | kParent, SF_PROC_FDINFO, kGated},
    {"map_files", SF_PROC_MAP_FILES, kGated | kParent, SF_PROC_MAP_FILES,
     kGated},
    {"io", SF_PROC_GATED_OTHER, kGated},
    {"personality", SF_PROC_GATED_OTHER, kGated},
    {"ns", SF_PROC_NS, kGated | kParent, SF_PROC_NS, kGated},
    {"attr", SF_PROC_GATED_OTHER, kGated},
    {"mountstats", SF_PROC_GATED_OTHER, kGated},
    {"timers", SF_PROC_GATED_OTHER, kGated},
    {"timerslack_ns", SF_PROC_GATED_OTHER, kGated},
    {"clear_refs", SF_PROC_GATED_OTHER, kGated},
    // Readable by any user anyway: what ps, top and pgrep read.
    {"cmdline", SF_PROC_CMDLINE, kReadable},
    {"stat", SF_PROC_STAT, kReadable},
    {"status", SF_PROC_STATUS, kReadable},
    {"statm", SF_PROC_READABLE_OTHER, kReadable},
    {"comm", SF_PROC_READABLE_OTHER, kReadable},
    {"limits", SF_PROC_READABLE_OTHER, kReadable},
    {"cgroup", SF_PROC_READABLE_OTHER, kReadable},
    {"cpuset", SF_PROC_READABLE_OTHER, kReadable},
    {"oom_score", SF_PROC_READABLE_OTHER, kReadable},
    {"oom_score_adj", SF_PROC_READABLE_OTHER, kReadable},
    {"oom_adj", SF_PROC_READABLE_OTHER, kReadable},
    {"loginuid", SF_PROC_READABLE_OTHER, kReadable},
    {"sessionid", SF_PROC_READABLE_OTHER, kReadable},
    {"sched", SF_PROC_READABLE_OTHER, kReadable},
    {"schedstat", SF_PROC_READABLE_OTHER, kReadable},
    {"wchan", SF_PROC_READABLE_OTHER, kReadable},
    {"mountinfo", SF_PROC_READABLE_OTHER, kReadable},
    {"mounts", SF_PROC_READABLE_OTHER, kReadable},
    {"uid_map", SF_PROC_READABLE_OTHER, kReadable},
    {"gid_map", SF_PROC_READABLE_OTHER, kReadable},
    {"projid_map", SF_PROC_READABLE_OTHER, kReadable},
    {"setgroups", SF_PROC_READABLE_OTHER, kReadable},
    {"children", SF_PROC_READABLE_OTHER, kReadable},
    {"coredump_filter", SF_PROC_READABLE_OTHER, kReadable},
    {"net", SF_PROC_READABLE_OTHER, kReadable},
    // Directories that only list thread ids: never judged.
    {"task", SF_PROC_PID_DIR, kIgnore | kParent, SF_PROC_PID_DIR, kIgnore},
};

static_assert(sizeof("timerslack_ns") <= SF_GUARD_PROCNAME_LEN);
static_assert(sizeof("coredump_filter") <= SF_GUARD_PROCNAME_LEN);

}  // namespace

absl::Span<const ProcNameEntry> ProcNameTable() { return kTable; }

const ProcNameEntry* FindProcName(const char* name) {
  for (const ProcNameEntry& e : kTable) {
    if (std::strcmp(e.name, name) == 0) return &e;
  }
  return nullptr;
}

}  // namespace sandfence
