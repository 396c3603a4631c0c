// The daemon's call pool (issue 36, "bounded resources"): at most `workers`
// calls run and `queue` wait; one more is refused at once, retryably, and
// never runs; a stopping pool still runs what it accepted.
#include "daemon/call_pool.h"

#include <atomic>
#include <string>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/status.h"
#include "gtest/gtest.h"

namespace sandfence {
namespace {

TEST(CallPool, PastItsWorkersAndQueueACallIsRefusedAndNeverRuns) {
  absl::Notification release;
  std::atomic<int> started{0}, ran{0};
  {
    CallPool pool(/*workers=*/2, /*queue=*/3);
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(pool.Submit([&] {
                        ++started;
                        release.WaitForNotification();
                        ++ran;
                      })
                      .ok())
          << "call " << i;
    }
    // Both workers hold a call; three wait.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (started.load() < 2 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_EQ(started.load(), 2);
    EXPECT_EQ(pool.in_flight(), 5u);
    bool extra_ran = false;
    absl::Status refused = pool.Submit([&] { extra_ran = true; });
    EXPECT_EQ(RefusalOf(refused), Refusal::kUnavailable) << refused;
    EXPECT_TRUE(absl::StrContains(refused.message(), "busy")) << refused;
    EXPECT_EQ(pool.refused(), 1u);
    release.Notify();
    // The destructor runs what was accepted, then joins.
  }
  EXPECT_EQ(ran.load(), 5);
}

TEST(CallPool, ACallThatWasRefusedLeavesRoomForTheNext) {
  CallPool pool(/*workers=*/1, /*queue=*/0);
  absl::Notification hold, done;
  ASSERT_TRUE(pool.Submit([&] { hold.WaitForNotification(); }).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  // Until the worker has it, the one slot may still be the queue's.
  absl::Status s;
  while ((s = pool.Submit([] {})).ok() && absl::Now() < deadline) {
  }
  EXPECT_FALSE(s.ok());
  hold.Notify();
  absl::Status next;
  while (!(next = pool.Submit([&] { done.Notify(); })).ok() &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(next.ok()) << next;
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

}  // namespace
}  // namespace sandfence
