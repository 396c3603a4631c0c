// The reaper runs an old generation's deletion after the switch returned:
// in order, every piece exactly once, Drain waits for all of it, and the
// destructor runs what is still queued (a process that exits right after a
// switch leaves no dead generation behind).
#include "egress/reaper.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace sandfence {
namespace {

TEST(Reaper, RunsEverythingInOrderAndDrainWaitsForIt) {
  Reaper reaper;
  absl::Mutex mu;
  std::vector<int> ran;
  for (int i = 0; i < 100; ++i) {
    reaper.Post([&, i] {
      absl::MutexLock lock(&mu);
      ran.push_back(i);
    });
  }
  reaper.Drain();
  EXPECT_EQ(reaper.pending(), 0u);
  absl::MutexLock lock(&mu);
  ASSERT_EQ(ran.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ran[i], i);
}

TEST(Reaper, DrainWaitsForTheWorkThatIsRunning) {
  Reaper reaper;
  absl::Notification started, release;
  std::atomic<bool> done{false};
  reaper.Post([&] {
    started.Notify();
    release.WaitForNotification();
    done = true;
  });
  started.WaitForNotification();
  EXPECT_EQ(reaper.pending(), 1u) << "running work is pending work";
  release.Notify();
  reaper.Drain();
  EXPECT_TRUE(done.load());
}

TEST(Reaper, TheDestructorRunsWhatIsStillQueued) {
  std::atomic<int> ran{0};
  absl::Notification release;
  {
    Reaper reaper;
    reaper.Post([&] {
      release.WaitForNotification();
      ++ran;
    });
    for (int i = 0; i < 10; ++i) reaper.Post([&] { ++ran; });
    release.Notify();
  }
  EXPECT_EQ(ran.load(), 11);
}

TEST(Reaper, NothingPostedStartsNoThreadAndDrainReturns) {
  Reaper reaper;
  reaper.Drain();
  EXPECT_EQ(reaper.pending(), 0u);
}

}  // namespace
}  // namespace sandfence
