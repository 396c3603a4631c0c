// `sandfence records show` against golden files: the text report of a
// complete record, of a lossy one, of one cut short and of ones with DNS
// queries, and the JSON of the complete one. Set SANDFENCE_UPDATE_GOLDEN=1 to
// rewrite the golden files after an intended change, then review the diff.
#include "records/report.h"

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/records_command.h"
#include "gtest/gtest.h"
#include "records/show_command.h"
#include "support/test_files.h"
#include "tests/records/gym_rollout.h"

namespace sandfence::testing {
namespace {

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = ScopedTempDir::Create();
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_.emplace(*std::move(dir));
  }

  // The path of the gym rollout's record, written as run says.
  std::string Record(absl::string_view name, const GymRun& run) {
    const std::string path = dir_->Path(name);
    auto outcome = RecordGymRollout(path, run);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    return path;
  }

  std::optional<ScopedTempDir> dir_;
};

struct GoldenCase {
  const char* golden;
  GymRun run;
  bool json;
  size_t cut_bytes;  // bytes cut off the end of the file
  bool warnings_on_stderr;
};

TEST_F(ReportTest, ShowMatchesTheGoldenFiles) {
  const GoldenCase cases[] = {
      {"show_complete.txt", {}, false, 0, false},
      {"show_complete.json", {}, true, 0, false},
      {"show_lossy.txt",
       {.max_entries = 4, .events_lost = 25, .decode_errors = 1},
       false,
       0,
       false},
      {"show_cut_short.txt", {.finalize = false}, false, 7, false},
      {"show_cut_short.json", {.finalize = false}, true, 7, true},
      // DNS queries: a section of their own and a line in the losses; the
      // rest is show_complete.txt unchanged.
      {"show_dns.txt", {.dns = true}, false, 0, false},
      {"show_dns_overflow.txt",
       {.dns = true, .max_dns_entries = 3},
       false,
       0,
       false},
      // Issue 15: the agent phase audit only. Said first, in the header,
      // the phase table, its own "would deny" table and the losses.
      {"show_audit.txt", {.dns = true, .audit_agent = true}, false, 0, false},
  };
  for (const GoldenCase& c : cases) {
    std::string path = Record(c.golden, c.run);
    if (c.cut_bytes > 0) {
      const std::string bytes = FileContents(path);
      std::ofstream(path, std::ios::binary | std::ios::trunc)
          << bytes.substr(0, bytes.size() - c.cut_bytes);
    }
    std::vector<std::string> args = {"show", path};
    if (c.json) args.push_back("--json");
    CommandOutput out = RunRecordsCommand(args);
    EXPECT_EQ(out.exit_code, 0) << c.golden << ": " << out.err;
    EXPECT_EQ(!out.err.empty(), c.warnings_on_stderr)
        << c.golden << ": " << out.err;
    ExpectGolden(absl::StrCat("tests/records/golden/", c.golden), out.out);
  }
}

// Found by fuzz/journal_fuzz: nanoseconds in an int64 reach only the years
// 1677..2262, and the report computed durations that way (a signed
// overflow). A record's times come from a file and may be anything.
TEST(ReportTimesTest, DurationsOutsideTheInt64NanosecondRangeAreExact) {
  struct Case {
    const char* name;
    int64_t start, end;  // seconds since the epoch
    const char* shown;   // the rollout's duration
  };
  const Case cases[] = {
      {"ends in the year 2748", 1764580000, 24581593760, "(22817013760.000s)"},
      {"ends in the year 1", 1764580000, -62135596800, "(-63900176800.000s)"},
      {"a span too long for any clock", INT64_MIN, INT64_MAX, "(?)"},
  };
  for (const Case& c : cases) {
    v1::RolloutRecord r;
    r.mutable_start_time()->set_seconds(c.start);
    r.mutable_end_time()->set_seconds(c.end);
    const std::string text = FormatRecordText(r);
    EXPECT_TRUE(absl::StrContains(text, c.shown)) << c.name << ":\n" << text;
  }
}

TEST(RecordsCommandTest, UsageAndErrors) {
  auto dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok());
  auto text = dir->WriteFile("policy.txtpb", "name: \"x\"\n");
  ASSERT_TRUE(text.ok());
  struct Case {
    const char* name;
    std::vector<std::string> args;
    int exit_code;
    const char* says;
  };
  const Case cases[] = {
      {"no subcommand", {}, 64, "a subcommand is needed"},
      {"help", {"--help"}, 0, "usage: sandfence records show PATH"},
      {"unknown subcommand", {"list"}, 64, "unknown subcommand \"list\""},
      {"no path", {"show"}, 64, "exactly one PATH"},
      {"two paths", {"show", "a", "b"}, 64, "exactly one PATH"},
      {"unknown flag", {"show", "a", "--yaml"}, 64, "unknown flag --yaml"},
      {"missing file", {"show", dir->Path("none.sfrec")}, 66, "No such file"},
      {"not a record", {"show", *text}, 65, "not a sandfence rollout record"},
  };
  for (const Case& c : cases) {
    CommandOutput out = RunRecordsCommand(c.args);
    EXPECT_EQ(out.exit_code, c.exit_code) << c.name;
    EXPECT_TRUE(absl::StrContains(out.out + out.err, c.says))
        << c.name << ": " << out.out << out.err;
  }
}

TEST(RecordsCommandTest, TheCliShellPassesArgumentsThrough) {
  char records[] = "records";
  char help[] = "--help";
  char* argv[] = {records, help, nullptr};
  ::testing::internal::CaptureStdout();
  const int code = RecordsCommand(2, argv);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(absl::StrContains(printed, "usage: sandfence records show"));
}

}  // namespace
}  // namespace sandfence::testing
