// The BPF object layer: what every feature (the egress hooks, the Unix
// enforcers, the cut, the guard's enforcers) does with the kernel's BPF
// objects, written once. A feature says which programs and maps it has and
// where they attach; this layer owns how a refusal is classed, how objects
// are pinned and found again (the paths: PinLayout), how a program's links
// are made and kept, and how a process's event ring sits in its slot.
// Business logic above it never calls bpf() for these.
#ifndef SANDFENCE_HOST_BPF_OBJECT_H_
#define SANDFENCE_HOST_BPF_OBJECT_H_

#include <bpf/libbpf.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/libbpf_log.h"
#include "common/unique_fd.h"

namespace sandfence {

// The kernel refused to load (or open, or attach) an object. One policy for
// every feature:
//  - EPERM/EACCES without root: PermissionDenied (run as root);
//  - out of fds or memory: Unavailable (the host's limits; retry later);
//  - anything else: Rejected. A kernel that refuses a program refuses it on
//    every retry, whatever the policy says.
// With `log`, libbpf's first line and the verifier's reason are named.
absl::Status BpfLoadError(int err, absl::string_view what,
                          const LibbpfLogCapture* log = nullptr);

// Attaching to a cgroup: as BpfLoadError, but EPERM as root is the cgroup
// refusing another program on that hook (one attached exclusively by
// someone else): Rejected, and said so.
absl::Status BpfAttachError(int err, absl::string_view what);

// A close-on-exec duplicate (an fd libbpf owns, kept past its object);
// invalid for fd < 0.
UniqueFd DupFd(int fd);

// The kernel's id of a program, and of the program a link runs (0 when
// the fd is not one).
uint32_t BpfProgId(int fd);
uint32_t BpfLinkProgId(int fd);

// The names in a pin directory, sorted, without dot files ({} if absent).
std::vector<std::string> ListPins(const std::string& dir);

// Unpins everything in dir and removes it (links come off with their pins
// once no fd holds them).
void UnpinDir(const std::string& dir);

// Pins fd at path, replacing whatever a process that died half-way left
// there.
absl::Status PinFresh(int fd, const std::string& path);

// Sets the pin path of each of obj's own maps (not .rodata and the like):
// libbpf then reuses a compatible pinned map of that name or creates and
// pins it, so that what running sandboxes hold survives a new process.
// path_of returns "" for a map that stays unpinned (one shared by fd).
absl::Status SetMapPinPaths(
    bpf_object* obj, absl::FunctionRef<std::string(absl::string_view)> path_of);

// An open pinned object, or an invalid fd.
UniqueFd OpenPinned(const std::string& path);

// Event rings: each process has one ring buffer, installed in its slot
// (HostState::slot()) of a feature's rings map (an array of maps); the
// kernel side emits into the ring of the sandbox's owner. Creates a ring
// of `bytes` (a power of two, at least a page) and installs it.
absl::StatusOr<UniqueFd> CreateSlotRing(int rings_fd, uint32_t slot,
                                        const char* name, uint32_t bytes);

// The ring in a slot (another process's, to read what it left).
absl::StatusOr<UniqueFd> RingOfMapSlot(int rings_fd, uint32_t slot);

}  // namespace sandfence

#endif  // SANDFENCE_HOST_BPF_OBJECT_H_
