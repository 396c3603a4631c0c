// What each program of a BPF object calls, read from the object's ELF:
// the helpers (by id) and the kfuncs (by name) it reaches through its own
// code, the subprograms it calls and the callbacks it passes (bpf_loop),
// as libbpf will link them at load. bpf_load_test uses it to say which
// program needs which kernel feature, from the object itself rather than
// from a hand-kept list.
//
// A call the verifier never reaches (a branch on a read-only constant that
// the loader sets) is counted too: the reading is static.
#ifndef SANDFENCE_TESTS_PROBE_BPF_ELF_CALLS_H_
#define SANDFENCE_TESTS_PROBE_BPF_ELF_CALLS_H_

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sandfence::bpf_elf {

struct ProgramCalls {
  std::string name;     // the entry function: libbpf's program name
  std::string section;  // its ELF section ("cgroup/connect4")
  std::set<int32_t> helpers;
  std::set<std::string> kfuncs;
};

struct ObjectCalls {
  std::vector<ProgramCalls> programs;
  // Extern functions declared __weak (libbpf leaves them unresolved,
  // instead of failing, where the kernel lacks them).
  std::set<std::string> weak_externs;
};

// Reads an object in memory (a skeleton's elf_bytes()).
absl::StatusOr<ObjectCalls> ReadObjectCalls(const void* elf, size_t size);

}  // namespace sandfence::bpf_elf

#endif  // SANDFENCE_TESTS_PROBE_BPF_ELF_CALLS_H_
