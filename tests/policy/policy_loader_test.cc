// Parsing policy text: what a user sees when a file has a typo.
#include "policy/policy_loader.h"

#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/test_files.h"

namespace sandfence {
namespace {

using ::testing::HasSubstr;

TEST(ParsePolicySetText, ReadsAPhasedPolicy) {
  absl::StatusOr<v1::PolicySet> p = ParsePolicySetText(
      R"pb(
        # comments are allowed
        name: "gym-default"
        phase { name: "setup" network_access: INHERIT }
        phase {
          name: "agent"
          network_access: MODEL_ONLY
          model: "http://model.internal:8000/v1"
          tool { name: "search" url: "https://search.internal" required: true }
          allow {
            host: "10.0.0.0/8"
            port_range { first: 80 last: 90 }
            protocol: ANY
          }
          dns { mode: LISTED resolver: "10.0.0.53" }
        }
      )pb",
      "gym.textproto");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name(), "gym-default");
  ASSERT_EQ(p->phase_size(), 2);
  EXPECT_EQ(p->phase(1).network_access(), v1::MODEL_ONLY);
  EXPECT_EQ(p->phase(1).tool(0).name(), "search");
  EXPECT_TRUE(p->phase(1).tool(0).required());
  EXPECT_EQ(p->phase(1).allow(0).port_range().last(), 90u);
  EXPECT_EQ(p->phase(1).dns().resolver(0), "10.0.0.53");
}

struct BadText {
  const char* title;
  const char* text;
  // Every part must appear in the message.
  std::vector<std::string> message_parts;
};

// Rows print as their title in failure messages.
void PrintTo(const BadText& c, std::ostream* os) { *os << c.title; }

class ParseErrorTest : public ::testing::TestWithParam<BadText> {};

TEST_P(ParseErrorTest, IsMalformedAndSaysWhere) {
  const BadText& c = GetParam();
  absl::StatusOr<v1::PolicySet> p = ParsePolicySetText(c.text, "p.textproto");
  ASSERT_FALSE(p.ok()) << c.title;
  EXPECT_EQ(RefusalOf(p.status()), Refusal::kMalformed) << p.status();
  for (const std::string& part : c.message_parts) {
    EXPECT_THAT(p.status().message(), HasSubstr(part)) << c.title;
  }
}

// The title as a test name: "unknown field" -> "unknown_field".
std::string CaseName(const ::testing::TestParamInfo<BadText>& param) {
  std::string name;
  for (const char* p = param.param.title; *p; ++p) {
    name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Policy, ParseErrorTest,
    ::testing::Values(
        BadText{"unknown field names the field, line and column",
                "name: \"x\"\nphase {\n  name: \"a\"\n  nework_access: "
                "INHERIT\n}\n",
                {"p.textproto:4:3:", "\"nework_access\"",
                 "Phase has: name, network_access"}},
        BadText{"unknown top-level field",
                "policy_name: \"x\"\n",
                {"p.textproto:1:1:", "\"policy_name\""}},
        BadText{"unknown enum value names the value, field and choices",
                "phase {\n  name: \"a\"\n  network_access: MODEL_ONY\n}\n",
                {"p.textproto:3:19:", "\"MODEL_ONY\"", "\"network_access\"",
                 "INHERIT, MODEL_ONLY, MODEL_AND_TOOLS"}},
        BadText{"lower-case enum value is unknown",
                "phase { name: \"a\" network_access: inherit }",
                {"p.textproto:1:", "\"inherit\""}},
        BadText{"unknown protocol in an allow rule",
                "phase { name: \"a\" allow { host: \"h\" port: 1 protocol: "
                "SCTP } }",
                {"\"SCTP\"", "\"protocol\"", "TCP, UDP, ANY"}},
        BadText{"singular field given twice",
                "phase { name: \"a\" name: \"b\" }",
                {"p.textproto:1:", "\"name\""}},
        BadText{"negative port does not parse",
                "phase { name: \"a\" allow { host: \"h\" port: -1 } }",
                {"p.textproto:1:43:", "Expected integer"}},
        BadText{"unclosed brace", "phase { name: \"a\"\n", {"p.textproto:2:"}},
        BadText{"string where a message belongs",
                "phase: \"agent\"",
                {"p.textproto:1:"}}),
    CaseName);

TEST(LoadPolicySetFile, MissingFileKeepsErrno) {
  absl::StatusOr<v1::PolicySet> p =
      LoadPolicySetFile("/nonexistent/sandfence/policy.textproto");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr("/nonexistent/sandfence"));
}

TEST(LoadPolicySetFile, ErrorsNameTheFile) {
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<std::string> path =
      dir->WriteFile("bad.textproto", "phase {\n  nme: \"a\"\n}\n");
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<v1::PolicySet> p = LoadPolicySetFile(*path);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(RefusalOf(p.status()), Refusal::kMalformed);
  EXPECT_THAT(p.status().message(), HasSubstr(absl::StrCat(*path, ":2:3:")));
}

TEST(LoadPolicySetFile, ADirectoryIsNotAPolicy) {
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<v1::PolicySet> p = LoadPolicySetFile(dir->path());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(RefusalOf(p.status()), Refusal::kNone);
}

TEST(LoadPolicySetFile, ReadsEveryShippedPolicy) {
  for (const char* name :
       {"inherit", "model_only", "model_and_tools", "phased"}) {
    absl::StatusOr<v1::PolicySet> p = LoadPolicySetFile(
        SourcePath(absl::StrCat("policies/", name, ".textproto")));
    EXPECT_TRUE(p.ok()) << name << ": " << p.status();
  }
}

}  // namespace
}  // namespace sandfence
