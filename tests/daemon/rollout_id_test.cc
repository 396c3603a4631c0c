// Rollout ids name files and cgroups: only a safe alphabet gets through.
#include <string>

#include "common/status.h"
#include "daemon/rollout_manager.h"
#include "gtest/gtest.h"

namespace sandfence {
namespace {

TEST(RolloutIdTest, OnlySafeIdsAreAccepted) {
  struct Case {
    const char* name;
    std::string id;
    bool ok;
  };
  const Case cases[] = {
      {"a plain id", "rollout-42", true},
      {"dots, underscores and digits", "gym.v2_run-7", true},
      {"128 characters", std::string(128, 'a'), true},
      {"empty", "", false},
      {"129 characters", std::string(129, 'a'), false},
      {"a path", "../etc/passwd", false},
      {"a slash", "a/b", false},
      {"a leading dot", ".hidden", false},
      {"a space", "a b", false},
      {"a NUL byte", std::string("a\0b", 3), false},
      {"non-ASCII", "r\xc3\xa9sum\xc3\xa9", false},
  };
  for (const Case& c : cases) {
    absl::Status s = ValidateRolloutId(c.id);
    EXPECT_EQ(s.ok(), c.ok) << c.name << ": " << s;
    if (!c.ok) {
      EXPECT_EQ(RefusalOf(s), Refusal::kMalformed) << c.name;
      EXPECT_LT(s.message().size(), 400u) << c.name;
    }
  }
}

}  // namespace
}  // namespace sandfence
