// Programs are verified once per host and build (issue 34): the first
// `sandfence run` loads and pins the set, every later one opens it. A run
// after another loads no program: the ids of the set's pinned programs stay
// the same, and (where strace is installed) no BPF_PROG_LOAD is made at all,
// probes included. The set outlives the runs; `daemon --cleanup` removes it.
#include <bpf/bpf.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"
#include "host/build_id.h"
#include "host/host_state.h"
#include "host/pin_layout.h"
#include "support/host_probe.h"
#include "support/test_env.h"
#include "tests/run/run_fixture.h"

namespace sandfence::testing {
namespace {

// Every program pinned under dir (in a progs/ directory of the set), by
// path: its kernel id.
void PinnedProgramIds(const std::string& dir,
                      std::map<std::string, uint32_t>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string path = absl::StrCat(dir, "/", e->d_name);
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      PinnedProgramIds(path, out);
      continue;
    }
    if (path.find("/progs/") == std::string::npos) continue;
    UniqueFd fd(bpf_obj_get(path.c_str()));
    if (!fd) continue;
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd.get(), &info, &len) == 0) {
      (*out)[path] = info.id;
    }
  }
  closedir(d);
}

std::string StraceBinary() {
  for (const char* p : {"/usr/bin/strace", "/bin/strace"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

TEST(RunLoadOnce, ASecondRunLoadsNoProgram) {
  SANDFENCE_REQUIRE_ROOT();
  REQUIRE_KERNEL_FOR_RUN();
  const PinLayout set(PinLayout::SetDir(kDefaultPinRoot, BpfBuildId()));
  const std::vector<std::string> args = {
      "run", "--network-access", "model_only", "--model",
      "http://127.0.0.2:9/v1", "--", "true"};
  // The first run of this build on the host (or not: another test's run may
  // have come first) leaves the set pinned.
  Result first = Sandfence(args);
  ASSERT_EQ(first.status, 0) << first.err;
  std::map<std::string, uint32_t> before;
  PinnedProgramIds(set.set(), &before);
  ASSERT_FALSE(before.empty()) << "no program pinned under " << set.set();

  Result second = Sandfence(args);
  ASSERT_EQ(second.status, 0) << second.err;
  std::map<std::string, uint32_t> after;
  PinnedProgramIds(set.set(), &after);
  for (const auto& [path, id] : before) {
    auto it = after.find(path);
    ASSERT_NE(it, after.end()) << path << " was unpinned by the second run";
    EXPECT_EQ(it->second, id) << path << " was loaded again";
  }

  const std::string strace = StraceBinary();
  if (strace.empty()) {
    GTEST_SKIP() << "ids unchanged; strace is not installed (scripts/"
                    "install-deps.sh --test installs it), so the count of "
                    "BPF_PROG_LOAD calls was not taken";
  }
  const std::string log = absl::StrCat("/tmp/sandfence-loadonce-", getpid());
  std::string cmd = absl::StrCat(strace, " -f -qq -e trace=bpf -o ", log, " ",
                                 SANDFENCE_BIN);
  for (const std::string& a : args) absl::StrAppend(&cmd, " '", a, "'");
  absl::StrAppend(&cmd, " >/dev/null 2>&1");
  ASSERT_EQ(system(cmd.c_str()), 0) << cmd;
  std::string trace;
  {
    FILE* f = fopen(log.c_str(), "r");
    ASSERT_NE(f, nullptr) << log;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) trace.append(buf, n);
    fclose(f);
    unlink(log.c_str());
  }
  std::vector<std::string> loads;
  for (absl::string_view line : absl::StrSplit(trace, '\n')) {
    if (line.find("BPF_PROG_LOAD") != absl::string_view::npos) {
      loads.emplace_back(line.substr(0, 200));
    }
  }
  EXPECT_TRUE(loads.empty()) << "a warm run loaded " << loads.size()
                             << " programs; the first: "
                             << (loads.empty() ? "" : loads[0]);
}

}  // namespace
}  // namespace sandfence::testing
