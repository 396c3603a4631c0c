#include "bench/nft_sidecar.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/host.h"
#include "common/status.h"

namespace sandfence::bench {
namespace {

constexpr char kNftCgroupRoot[] = "/sys/fs/cgroup/";
// Elements per "add element" command: keeps lines short for nft's parser.
constexpr size_t kElementsPerLine = 2000;

std::string Ipv4(uint32_t host_order) {
  in_addr a{htonl(host_order)};
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return buf;
}

void AppendElements(std::string* script, const std::string& table,
                    const std::string& set,
                    const std::vector<uint32_t>& addresses) {
  for (size_t i = 0; i < addresses.size(); i += kElementsPerLine) {
    absl::StrAppend(script, "add element inet ", table, " ", set, " { ");
    for (size_t j = i; j < addresses.size() && j < i + kElementsPerLine; ++j) {
      absl::StrAppend(script, j > i ? ", " : "", Ipv4(addresses[j]));
    }
    absl::StrAppend(script, " }\n");
  }
}

}  // namespace

absl::StatusOr<NftCgroupName> NftNameOf(const std::string& cgroup_path,
                                        const std::string& cgroup2_mount) {
  absl::string_view rel = cgroup_path;
  if (!absl::ConsumePrefix(&rel, kNftCgroupRoot)) {
    return Rejected(absl::StrCat("nftables names cgroups relative to ",
                                 kNftCgroupRoot, "; ", cgroup_path,
                                 " is not under it"));
  }
  absl::string_view in_mount = cgroup_path;
  if (!absl::ConsumePrefix(&in_mount, cgroup2_mount)) {
    return absl::InvalidArgumentError(
        absl::StrCat(cgroup_path, " is not under ", cgroup2_mount));
  }
  NftCgroupName n;
  n.path = std::string(rel);
  for (absl::string_view part :
       absl::StrSplit(in_mount, '/', absl::SkipEmpty())) {
    (void)part;
    ++n.level;
  }
  return n;
}

absl::StatusOr<std::unique_ptr<NftSidecar>> NftSidecar::Create(
    std::string table, std::string cgroup2_mount, int level,
    std::string work_dir) {
  std::unique_ptr<NftSidecar> n(new NftSidecar(
      std::move(table), std::move(cgroup2_mount), level, std::move(work_dir)));
  // The table exists from here on: the destructor removes it even if the
  // rest fails.
  absl::Status s = n->Apply(absl::StrCat(
      "add table inet ", n->table_, "\n", "add map inet ", n->table_,
      " sandboxes { typeof socket cgroupv2 level ", level, " : verdict; }\n"));
  if (!s.ok()) return s;
  return n;
}

NftSidecar::~NftSidecar() {
  Apply(absl::StrCat("delete table inet ", table_, "\n")).IgnoreError();
}

absl::Status NftSidecar::Apply(const std::string& script) {
  const std::string path =
      absl::StrCat(work_dir_, "/nft-", table_, "-", scripts_++, ".nft");
  {
    std::ofstream f(path, std::ios::trunc);
    if (!f) return ErrnoError(errno, absl::StrCat("create ", path));
    f << script;
    if (!f.flush()) return ErrnoError(errno, absl::StrCat("write ", path));
  }
  absl::Status s = RunCommand({"nft", "-f", path});
  ::unlink(path.c_str());
  return s;
}

absl::Status NftSidecar::AddSandboxes(
    const std::vector<NftSandbox>& sandboxes) {
  std::string script;
  size_t index = count_;
  for (const NftSandbox& sb : sandboxes) {
    absl::StatusOr<NftCgroupName> name = NftNameOf(sb.cgroup_path, mount_);
    if (!name.ok()) return name.status();
    if (name->level != level_) {
      return absl::InvalidArgumentError(
          absl::StrCat(sb.cgroup_path, " is at level ", name->level,
                       ", the table matches level ", level_));
    }
    const std::string set = absl::StrCat("allow_", index);
    const std::string chain = absl::StrCat("sb_", index);
    absl::StrAppend(&script, "add set inet ", table_, " ", set,
                    " { type ipv4_addr; }\n");
    AppendElements(&script, table_, set, sb.addresses);
    absl::StrAppend(&script, "add chain inet ", table_, " ", chain, "\n",
                    "add rule inet ", table_, " ", chain, " ip daddr @", set,
                    " accept\n", "add rule inet ", table_, " ", chain,
                    " drop\n", "add element inet ", table_, " sandboxes { \"",
                    name->path, "\" : jump ", chain, " }\n");
    ++index;
  }
  if (absl::Status s = Apply(script); !s.ok()) return s;
  count_ = index;
  return absl::OkStatus();
}

absl::Status NftSidecar::ReplaceAddresses(
    size_t index, const std::vector<uint32_t>& addresses) {
  const std::string set = absl::StrCat("allow_", index);
  std::string script = absl::StrCat("flush set inet ", table_, " ", set, "\n");
  AppendElements(&script, table_, set, addresses);
  return Apply(script);
}

absl::Status NftSidecar::Attach() {
  if (attached_) return absl::OkStatus();
  absl::Status s = Apply(absl::StrCat(
      "add chain inet ", table_,
      " out { type filter hook output priority 0; policy accept; }\n",
      // Only a TCP SYN opens a connection: later segments pass at once.
      "add rule inet ", table_,
      " out meta l4proto tcp tcp flags & (syn | ack) != syn accept\n",
      "add rule inet ", table_, " out socket cgroupv2 level ", level_,
      " vmap @sandboxes\n"));
  if (s.ok()) attached_ = true;
  return s;
}

absl::Status NftSidecar::Detach() {
  if (!attached_) return absl::OkStatus();
  absl::Status s = Apply(absl::StrCat("delete chain inet ", table_, " out\n"));
  if (s.ok()) attached_ = false;
  return s;
}

}  // namespace sandfence::bench
