// What each /proc/<pid>/ entry is to the guard: its class (named in
// events) and whether any user may read it anyway. The BPF programs look
// entries up by name in sf_procnames, filled from this table at load.
//
// Readable entries are those the kernel lets any user open (mode 0444 and no
// ptrace_may_access() check at open): in signal mode they are audited, not
// killed, so that `ps aux` and `top` keep working. An entry not in the table
// is treated as gated (killed in signal mode), the stricter choice.
#ifndef SANDFENCE_GUARD_PROC_NAMES_H_
#define SANDFENCE_GUARD_PROC_NAMES_H_

#include <cstdint>

#include "absl/types/span.h"
#include "guard/guard_abi.h"

namespace sandfence {

struct ProcNameEntry {
  const char* name;
  uint16_t proc_class;  // enum sf_proc_class
  uint16_t flags;       // enum sf_procname_flag
  // For directories whose entries are numbers or ranges (fd/, fdinfo/,
  // map_files/, task/): the class and flags of those entries.
  uint16_t child_class = SF_PROC_NONE;
  uint16_t child_flags = 0;
};

absl::Span<const ProcNameEntry> ProcNameTable();

// The table's entry for name, or nullptr (then: gated).
const ProcNameEntry* FindProcName(const char* name);

}  // namespace sandfence

#endif  // SANDFENCE_GUARD_PROC_NAMES_H_
