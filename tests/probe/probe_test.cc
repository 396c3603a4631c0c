// The build machinery end to end: the skeleton of a trivial program opens,
// loads into the running kernel, and runs under BPF_PROG_TEST_RUN.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <memory>

#include "gtest/gtest.h"
#include "sf_probe.skel.h"
#include "support/test_env.h"

namespace {

struct SkelDeleter {
  void operator()(sf_probe* s) const { sf_probe::destroy(s); }
};

TEST(ProbeSkeleton, OpensWithoutPrivileges) {
  std::unique_ptr<sf_probe, SkelDeleter> skel(sf_probe::open());
  ASSERT_NE(skel, nullptr);
  EXPECT_STREQ(bpf_program__name(skel->progs.sf_probe), "sf_probe");
}

TEST(ProbeSkeleton, LoadsAndRunsInTheKernel) {
  SANDFENCE_REQUIRE_ROOT();
  std::unique_ptr<sf_probe, SkelDeleter> skel(sf_probe::open_and_load());
  ASSERT_NE(skel, nullptr) << "the kernel refused a trivial BPF program";
  LIBBPF_OPTS(bpf_test_run_opts, opts);
  int fd = bpf_program__fd(skel->progs.sf_probe);
  ASSERT_EQ(bpf_prog_test_run_opts(fd, &opts), 0);
  ASSERT_EQ(bpf_prog_test_run_opts(fd, &opts), 0);
  EXPECT_EQ(skel->bss->sf_probe_runs, 2u);
}

}  // namespace
