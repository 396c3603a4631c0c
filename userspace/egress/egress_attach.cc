// A sandbox's links: attached to its cgroup, pinned, detached, and taken
// over from another process or build (adoption).
#include "egress/egress_controller.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "egress/controller_internal.h"
#include "egress/egress_rules.h"
#include "host/bpf_object.h"

namespace sandfence {

size_t EgressController::LinksPerSandbox() const {
  size_t n = 0;
  for (const HookSpec& h : kHookSpecs) {
    if (!h.enforcing) continue;
    if (h.unix_program != nullptr &&
        unix_enforcer_ != UnixEnforcer::kCgroupHooks) {
      continue;
    }
    ++n;
  }
  return n;
}

absl::Status EgressController::Attach(int cgroup_fd, const CgroupRef& cgroup,
                                      SandboxState& state) {
  const uint64_t id = cgroup.id;
  const std::string dir = LinkDir(id);
  if (host_->pinned()) {
    if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  }
  for (const HookSpec& h : kHookSpecs) {
    // The reply-side hooks come with a DNS filter target (SetDnsTarget):
    // four link fds per sandbox that most sandboxes never need.
    if (!h.enforcing) continue;
    if (h.unix_program != nullptr &&
        unix_enforcer_ != UnixEnforcer::kCgroupHooks) {
      continue;
    }
    absl::StatusOr<UniqueFd> link =
        AttachHook(cgroup_fd, id, cgroup.path, h.hook);
    if (!link.ok()) {
      Detach(id, state);
      return link.status();
    }
    state.links.push_back(*std::move(link));
  }
  return absl::OkStatus();
}

absl::Status EgressController::AttachReplyHooks(uint64_t cgroup_id,
                                                SandboxState& state) {
  if (state.reply_hooks) return absl::OkStatus();
  absl::StatusOr<std::string> path = CgroupPathOfId(cgroup_id);
  if (!path.ok()) return path.status();
  UniqueFd cg(::open(path->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cg) return ErrnoError(errno, absl::StrCat("open ", *path));
  std::vector<UniqueFd> links;
  for (const HookSpec& h : kHookSpecs) {
    if (h.enforcing) continue;
    absl::StatusOr<UniqueFd> link =
        AttachHook(cg.get(), cgroup_id, *path, h.hook);
    if (!link.ok()) {
      if (host_->pinned()) {
        for (const HookSpec& r : kHookSpecs) {
          if (!r.enforcing) {
            ::unlink(absl::StrCat(LinkDir(cgroup_id), "/", r.hook).c_str());
          }
        }
      }
      return link.status();
    }
    links.push_back(*std::move(link));
  }
  for (UniqueFd& l : links) state.links.push_back(std::move(l));
  state.reply_hooks = true;
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> EgressController::AttachHook(
    int cgroup_fd, uint64_t cgroup_id, absl::string_view cgroup_path,
    absl::string_view hook) {
  const HookSpec* h = FindHookSpec(hook);
  if (h == nullptr) return absl::InternalError(absl::StrCat("hook ", hook));
  UniqueFd link(
      bpf_link_create(prog_fd(h->hook), cgroup_fd, h->attach, nullptr));
  if (!link) {
    return BpfAttachError(
        errno, absl::StrCat("attach ", h->hook, " to cgroup ", cgroup_path));
  }
  if (host_->pinned()) {
    const std::string path = absl::StrCat(LinkDir(cgroup_id), "/", h->hook);
    if (bpf_obj_pin(link.get(), path.c_str()) != 0) {
      // The link goes with its fd: nothing attached stays behind.
      return ErrnoError(errno, absl::StrCat("pin ", path));
    }
  }
  return link;
}

void EgressController::Detach(uint64_t cgroup_id, SandboxState& state) {
  // The sandbox entry goes first: while the links come off one by one,
  // the hooks still attached find no sandbox and deny (fail closed).
  bpf_map_delete_elem(maps_.sandboxes.get(), &cgroup_id);
  if (host_->pinned()) {
    UnpinDir(LinkDir(cgroup_id));
  }
  state.links.clear();
}

absl::StatusOr<AdoptedSandbox> EgressController::AdoptSandbox(
    uint64_t cgroup_id) {
  if (!host_->pinned()) {
    return absl::FailedPreconditionError(
        "adopting a sandbox needs a pinned host");
  }
  absl::MutexLock lock(&mu_);
  if (sandboxes_.contains(cgroup_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("cgroup ", cgroup_id, " is already this process's"));
  }
  absl::StatusOr<KernelSandbox> kernel = KernelSandboxOf(cgroup_id);
  if (!kernel.ok()) return kernel.status();
  AdoptedSandbox out;
  out.kernel = *kernel;
  SandboxState state;
  state.generation = kernel->generation;
  state.phase = kernel->phase;
  state.flags = kernel->flags;
  state.unix_traits = kernel->flags & kUnixTraitFlags;
  state.adopted = true;
  const std::string dir = LinkDir(cgroup_id);
  sf_dns_target target{};
  const bool has_target =
      bpf_map_lookup_elem(maps_.dns_targets.get(), &cgroup_id, &target) == 0;
  for (const HookSpec& h : kHookSpecs) {
    const bool unix_hook = h.unix_program != nullptr;
    if (unix_hook && unix_enforcer_ != UnixEnforcer::kCgroupHooks) continue;
    UniqueFd link(bpf_obj_get(absl::StrCat(dir, "/", h.hook).c_str()));
    // Without a DNS filter target a sandbox has no reply-side hooks.
    if (!link && !h.enforcing && !has_target) continue;
    if (link && !h.enforcing) state.reply_hooks = true;
    // A build before the Unix hooks never set SF_SB_UNIX_CHECKED, so the
    // sandbox lost nothing for their absence: attach them now, as the
    // reply-side hooks of a build before the DNS filter.
    if (!link && (!h.enforcing || unix_hook)) {
      // Nothing ran unenforced for their absence.
      absl::StatusOr<std::string> path = CgroupPathOfId(cgroup_id);
      UniqueFd cg(
          path.ok() ? ::open(path->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                    : -1);
      if (cg) {
        absl::StatusOr<UniqueFd> attached =
            AttachHook(cg.get(), cgroup_id, *path, h.hook);
        if (attached.ok()) link = *std::move(attached);
      }
    }
    if (!link) {
      out.missing_hooks.push_back(h.hook);
      continue;
    }
    // Another build's program: swap in ours, atomically, so that the
    // events of this sandbox are ours to read and judged by our code.
    const int mine = prog_fd(h.hook);
    if (BpfLinkProgId(link.get()) != BpfProgId(mine) &&
        bpf_link_update(link.get(), mine, nullptr) != 0) {
      return ErrnoError(errno, absl::StrCat("move the ", h.hook, " link of ",
                                            cgroup_id, " to this build"));
    }
    state.links.push_back(std::move(link));
  }
  // Its events come to this process's ring from now on.
  if (absl::Status s = WriteSandbox(cgroup_id, state, BPF_EXIST); !s.ok()) {
    return s;
  }
  out.kernel.ring = static_cast<uint8_t>(host_->slot());
  state.learned = ScanLearned(state.generation);
  sandboxes_.emplace(cgroup_id, std::move(state));
  return out;
}

}  // namespace sandfence
