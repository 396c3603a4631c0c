// Structural validation: each row a policy a user might write, and whether
// sandfence accepts its structure (names, modes, ports, dns).
#include "policy/validate.h"

#include <cctype>
#include <string>
#include <vector>

#include "common/status.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace sandfence {
namespace {

using ::testing::HasSubstr;

struct Case {
  const char* title;
  const char* policy;  // PolicySet text
  // Empty: valid. Otherwise every part appears in the Malformed message.
  std::vector<std::string> error_parts;
};

// Rows print as their title in failure messages.
void PrintTo(const Case& c, std::ostream* os) { *os << c.title; }

class ValidateTest : public ::testing::TestWithParam<Case> {};

TEST_P(ValidateTest, Structure) {
  const Case& c = GetParam();
  v1::PolicySet policy;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(c.policy, &policy))
      << "bad test text: " << c.policy;
  absl::Status s = ValidatePolicySet(policy);
  if (c.error_parts.empty()) {
    EXPECT_TRUE(s.ok()) << c.title << ": " << s;
    return;
  }
  ASSERT_FALSE(s.ok()) << c.title << ": accepted";
  EXPECT_EQ(RefusalOf(s), Refusal::kMalformed) << s;
  for (const std::string& part : c.error_parts) {
    EXPECT_THAT(s.message(), HasSubstr(part)) << c.title;
  }
}

// The title as a test name: "unknown field" -> "unknown_field".
std::string CaseName(const ::testing::TestParamInfo<Case>& param) {
  std::string name;
  for (const char* p = param.param.title; *p; ++p) {
    name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Policy, ValidateTest,
    ::testing::Values(
        Case{"one inherit phase is valid",
             R"(phase { name: "setup" network_access: INHERIT })",
             {}},
        Case{"a full restricted phase is valid",
             R"(phase { name: "agent" network_access: MODEL_AND_TOOLS
                        model: "http://m:1" tool { url: "http://t" }
                        allow { host: "h" port: 443 }
                        allow { host: "h" port_range { first: 1 last: 1 } }
                        dns { mode: LISTED resolver: "10.0.0.53"
                              resolver: "[fd00::53]:5353" } })",
             {}},
        Case{"no phase at all",
             R"(name: "empty")",
             {"policy \"empty\" has no phase"}},
        Case{"unset network_access is not inherit",
             R"(phase { name: "agent" })",
             {"phase \"agent\"", "network_access is not set",
              "never taken as INHERIT"}},
        Case{"unknown numeric network_access",
             R"(phase { name: "agent" network_access: 9 })",
             {"phase \"agent\"", "network_access 9"}},
        Case{"an audit-only phase is valid",
             R"(phase { name: "agent" network_access: MODEL_ONLY
                        enforce: AUDIT })",
             {}},
        Case{"a policy-level AUDIT over inherit phases too is valid",
             R"(enforce: AUDIT
                phase { name: "setup" network_access: INHERIT }
                phase { name: "agent" network_access: MODEL_ONLY
                        enforce: AUDIT })",
             {}},
        Case{"a phase contradicting the policy's enforce",
             R"(name: "p" enforce: AUDIT
                phase { name: "agent" network_access: MODEL_ONLY
                        enforce: ENFORCE })",
             {"phase \"agent\"", "enforce: ENFORCE",
              "contradicts the policy's enforce: AUDIT"}},
        Case{"an enforcing policy with an audit phase",
             R"(enforce: ENFORCE
                phase { name: "agent" network_access: MODEL_ONLY
                        enforce: AUDIT })",
             {"phase \"agent\"", "enforce: AUDIT",
              "contradicts the policy's enforce: ENFORCE"}},
        Case{
            "enforce AUDIT on an inherit phase",
            R"(phase { name: "setup" network_access: INHERIT enforce: AUDIT })",
            {"phase \"setup\"", "enforce: AUDIT on an inherit phase"}},
        Case{"unknown numeric enforce on a phase",
             R"(phase { name: "agent" network_access: MODEL_ONLY enforce: 7 })",
             {"phase \"agent\"", "enforce 7", "not ENFORCE or AUDIT"}},
        Case{"unknown numeric enforce on the policy",
             R"(name: "p" enforce: 5
                phase { name: "agent" network_access: MODEL_ONLY })",
             {"policy \"p\"", "enforce 5", "not ENFORCE or AUDIT"}},
        Case{"phase without a name",
             R"(phase { network_access: INHERIT })",
             {"phase #1 has no name"}},
        Case{"phase name with a space",
             R"(phase { name: "my agent" network_access: INHERIT })",
             {"phase \"my agent\"", "letters, digits"}},
        Case{"phase defined twice",
             R"(phase { name: "a" network_access: INHERIT }
                phase { name: "b" network_access: INHERIT }
                phase { name: "a" network_access: INHERIT })",
             {"phase \"a\" is defined twice", "#1 and #3"}},
        Case{"empty model URL",
             R"(phase { name: "a" network_access: MODEL_ONLY model: "" })",
             {"phase \"a\": model #1 is empty"}},
        Case{"tool without a url",
             R"(phase { name: "a" network_access: MODEL_AND_TOOLS
                        tool { name: "search" } })",
             {"tool \"search\" has no url"}},
        Case{"allow without a host",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        allow { port: 80 } })",
             {"allow #1 has no host"}},
        Case{"allow without a port",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        allow { host: "10.0.0.1" } })",
             {"allow \"10.0.0.1\"", "has no port"}},
        Case{"allow with both port and port_range",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        allow { host: "h" port: 80
                                port_range { first: 1 last: 2 } } })",
             {"both port 80 and port_range"}},
        Case{"allow port above 65535",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        allow { host: "h" port: 65536 } })",
             {"allow \"h\"", "port 65536 is not in 1..65535"}},
        Case{"port range starting at 0",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        allow { host: "h" port_range { first: 0 last: 9 } } })",
             {"port_range.first 0"}},
        Case{"port range backwards",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        allow { host: "h"
                                port_range { first: 90 last: 80 } } })",
             {"port_range 90-80 is empty"}},
        Case{"resolver listed without mode LISTED",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        dns { mode: SYSTEM resolver: "10.0.0.53" } })",
             {"dns.resolver \"10.0.0.53\"", "only with mode: LISTED",
              "mode is SYSTEM"}},
        Case{"TTL limits on an inherit phase (its DNS is the host's)",
             R"(phase { name: "a" network_access: INHERIT
                        dns { grace_seconds: 5 } })",
             {"dns.grace_seconds 5", "only with mode: FILTERED",
              "mode is SYSTEM"}},
        Case{"a DNS budget where nothing is filtered",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        dns { mode: SYSTEM budget { wildcard_names: 9 } } })",
             {"dns.budget is given", "only with mode: FILTERED",
              "mode is SYSTEM"}},
        Case{"a DNS budget past its ceiling",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        dns { budget { max_wildcard_name_length: 300 } } })",
             {"dns.budget.max_wildcard_name_length 300", "above 253"}},
        Case{"a DNS budget window past a day",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        dns { mode: FILTERED
                              budget { window_seconds: 86401 } } })",
             {"dns.budget.window_seconds 86401", "above 86400"}},
        Case{"a DNS query rate past its ceiling",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        dns { budget { queries_per_second: 100001 } } })",
             {"dns.budget.queries_per_second 100001", "above 100000"}},
        Case{"answers_may_point_at where nothing is filtered",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        dns { mode: SYSTEM
                              answers_may_point_at: "127.0.0.0/8" } })",
             {"dns.answers_may_point_at \"127.0.0.0/8\" is given",
              "only with mode: FILTERED", "mode is SYSTEM"}},
        Case{"answers_may_point_at that is no prefix",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        dns { answers_may_point_at: "127.0.0.1/8" } })",
             {"dns.answers_may_point_at \"127.0.0.1/8\""}},
        Case{"answers_may_point_at a name",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        dns { answers_may_point_at: "localhost" } })",
             {"dns.answers_may_point_at \"localhost\""}},
        Case{"mode LISTED without resolvers",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        dns { mode: LISTED } })",
             {"LISTED lists no resolver"}},
        Case{"resolver given by name",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        dns { mode: LISTED resolver: "dns.internal" } })",
             {"dns.resolver \"dns.internal\"", "is not \"IP\""}},
        Case{"resolver with a bad port",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        dns { mode: LISTED resolver: "10.0.0.53:0" } })",
             {"dns.resolver \"10.0.0.53:0\""}},
        Case{"resolver port with a sign or a space",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        dns { mode: LISTED resolver: "10.0.0.53:+53"
                              resolver: "10.0.0.54: 53" } })",
             {"dns.resolver \"10.0.0.53:+53\"", "not in 1..65535"}},
        Case{"resolver port with a space after it",
             R"(phase { name: "a" network_access: MODEL_ONLY
                        dns { mode: LISTED resolver: "[::1]:53 " } })",
             {"dns.resolver \"[::1]:53 \""}},
        Case{"tool name with a control character",
             "phase { name: \"a\" network_access: MODEL_AND_TOOLS "
             "tool { name: \"a\\nb\" url: \"http://t\" } }",
             {"control character"}}),
    CaseName);

}  // namespace
}  // namespace sandfence
