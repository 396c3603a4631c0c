#include "bench/empty_programs.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sandfence::bench {
namespace {

struct HookType {
  const char* hook;
  bpf_prog_type type;
  bpf_attach_type attach;
};

constexpr HookType kHookTypes[] = {
    {"sock_create", BPF_PROG_TYPE_CGROUP_SOCK, BPF_CGROUP_INET_SOCK_CREATE},
    {"connect4", BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_CGROUP_INET4_CONNECT},
    {"connect6", BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_CGROUP_INET6_CONNECT},
    {"sendmsg4", BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_CGROUP_UDP4_SENDMSG},
    {"sendmsg6", BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_CGROUP_UDP6_SENDMSG},
    {"skb_egress", BPF_PROG_TYPE_CGROUP_SKB, BPF_CGROUP_INET_EGRESS},
};

}  // namespace

absl::StatusOr<std::unique_ptr<EmptyPrograms>> EmptyPrograms::Attach(
    int cgroup_fd, const std::vector<std::string>& hooks) {
  // r0 = 1 (allow, pass); exit.
  bpf_insn insns[2] = {};
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;
  insns[0].dst_reg = BPF_REG_0;
  insns[0].imm = 1;
  insns[1].code = BPF_JMP | BPF_EXIT;
  auto out = std::unique_ptr<EmptyPrograms>(new EmptyPrograms);
  for (const std::string& hook : hooks) {
    const HookType* t = nullptr;
    for (const HookType& h : kHookTypes) {
      if (hook == h.hook) t = &h;
    }
    if (t == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("no empty program for hook ", hook));
    }
    LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = t->attach);
    UniqueFd prog(bpf_prog_load(t->type, "sf_bench_empty", "GPL", insns,
                                sizeof(insns) / sizeof(insns[0]), &opts));
    if (!prog) return ErrnoError(errno, absl::StrCat("load empty ", hook));
    UniqueFd link(bpf_link_create(prog.get(), cgroup_fd, t->attach, nullptr));
    if (!link) return ErrnoError(errno, absl::StrCat("attach empty ", hook));
    out->progs_.emplace(hook, std::move(prog));
    out->links_.push_back(std::move(link));
  }
  return out;
}

int EmptyPrograms::prog_fd(const std::string& hook) const {
  auto it = progs_.find(hook);
  return it == progs_.end() ? -1 : it->second.get();
}

}  // namespace sandfence::bench
