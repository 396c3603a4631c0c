// The libbpf log capture is per thread: a load that fails in one thread
// gets its own libbpf warning, never another thread's, and a thread that
// captures nothing still logs to stderr (one print hook for the process,
// installed once; swapping the global hook per load used to steal the log
// of a load running in another thread).
#include "common/libbpf_log.h"

#include <bpf/libbpf.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sandfence {
namespace {

// Makes libbpf warn with a line that names `tag` (an object it cannot
// parse: its name is in the warning), and returns the captured first line.
std::string FailAnOpen(const std::string& tag) {
  LibbpfLogCapture capture;
  // Widens the window in which another thread's capture begins.
  std::this_thread::sleep_for(std::chrono::microseconds(50));
  const char garbage[] = "not an ELF object at all";
  LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = tag.c_str());
  bpf_object* obj = bpf_object__open_mem(garbage, sizeof(garbage), &opts);
  if (obj != nullptr) bpf_object__close(obj);
  return capture.first_line();
}

TEST(LibbpfLogCapture, EachThreadGetsItsOwnWarning) {
  const std::string alone = FailAnOpen("sf-alone");
  ASSERT_NE(alone.find("sf-alone"), std::string::npos)
      << "libbpf's warning should name the object: \"" << alone << "\"";

  constexpr int kThreads = 8, kRounds = 200;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &wrong] {
      for (int r = 0; r < kRounds; ++r) {
        const std::string tag = absl::StrCat("sf-thread-", t, "-round-", r);
        const std::string line = FailAnOpen(tag);
        if (line.find(tag) == std::string::npos) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0) << "captures got another thread's warning";
}

TEST(LibbpfLogCapture, NestedCapturesRestoreTheOuterOne) {
  LibbpfLogCapture outer;
  EXPECT_NE(FailAnOpen("sf-inner").find("sf-inner"), std::string::npos);
  EXPECT_TRUE(outer.first_line().empty())
      << "the inner capture's line leaked into the outer one";
}

TEST(LibbpfLogCapture, TheVerifiersReasonIsTheLogsLastLine) {
  EXPECT_EQ(LibbpfLogCapture::VerifierReason(
                "libbpf: prog 'x': -- BEGIN PROG LOAD LOG --\n"
                "0: R1=ctx() R10=fp0\n"
                "0: (85) call unknown#158\n"
                "invalid func unknown#158\n"
                "processed 1 insns (limit 1000000)\n"
                "-- END PROG LOAD LOG --\n"),
            "invalid func unknown#158");
  EXPECT_EQ(LibbpfLogCapture::VerifierReason("libbpf: nothing of the kind"),
            "");
}

}  // namespace
}  // namespace sandfence
