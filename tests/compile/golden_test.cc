// Golden files: the exact `check` output of every shipped policy, under the
// endpoints of a typical rollout, compared byte for byte. Default-deny is
// explicit in every restricted phase, and a change in wording, order or
// rules shows up here as a diff.
//
// To accept new output after a deliberate change:
//   SANDFENCE_UPDATE_GOLDEN=1 ./golden_test
// and review the diff of tests/compile/golden/.
#include <cctype>
#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "compile/compiler.h"
#include "compile/fake_resolver.h"
#include "compile/format.h"
#include "gtest/gtest.h"
#include "policy/policy_loader.h"
#include "support/test_files.h"

namespace sandfence {
namespace {

struct Golden {
  const char* file;    // under tests/compile/golden/
  const char* policy;  // under policies/
  bool own_netns;
  bool required_tool;  // the search tool is required instead of optional
  bool json;
};

void PrintTo(const Golden& g, std::ostream* os) { *os << g.file; }

std::string GoldenName(const ::testing::TestParamInfo<Golden>& param) {
  std::string name;
  for (const char* p = param.param.file; *p; ++p) {
    name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  }
  return name;
}

// The rollout of the examples in policies/*.textproto.
RolloutEndpoints TypicalRollout(bool required_tool) {
  RolloutEndpoints endpoints;
  endpoints.model = {"http://model.internal:8000/v1"};
  v1::ToolGrant search;
  search.set_name("search");
  search.set_url("https://search.internal");
  search.set_required(required_tool);
  endpoints.tools = {search};
  return endpoints;
}

class GoldenTest : public ::testing::TestWithParam<Golden> {};

TEST_P(GoldenTest, MatchesTheGoldenFile) {
  const Golden& g = GetParam();
  absl::StatusOr<v1::PolicySet> policy =
      LoadPolicySetFile(SourcePath(absl::StrCat("policies/", g.policy)));
  ASSERT_TRUE(policy.ok()) << policy.status();

  FakeResolver resolver;
  resolver.Add("model.internal", {"10.1.2.3", "fd00::3"})
      .Add("search.internal", {"10.0.0.9"});
  PolicyCompiler compiler(
      &resolver, std::vector<HostPort>{*HostPort::Parse("10.0.0.53", 53),
                                       *HostPort::Parse("127.0.0.53", 53)});
  CompileContext context{.own_netns = g.own_netns, .borrowed = false};
  absl::StatusOr<CompiledPolicy> compiled =
      compiler.Compile(*policy, TypicalRollout(g.required_tool), context);

  std::string actual;
  if (!compiled.ok()) {
    actual =
        absl::StrCat("refused (", RefusalName(RefusalOf(compiled.status())),
                     ", exit ", ExitCodeFor(compiled.status()),
                     "): ", compiled.status().message(), "\n");
  } else if (g.json) {
    actual = FormatCompiledPolicyJson(*compiled);
  } else {
    actual = FormatCompiledPolicyText(*compiled);
  }

  ExpectGolden(absl::StrCat("tests/compile/golden/", g.file), actual);
}

INSTANTIATE_TEST_SUITE_P(
    ShippedPolicies, GoldenTest,
    ::testing::Values(
        Golden{"inherit.txt", "inherit.textproto", true, false, false},
        Golden{"inherit.json", "inherit.textproto", true, false, true},
        Golden{"model_only.txt", "model_only.textproto", true, false, false},
        Golden{"model_only.json", "model_only.textproto", true, false, true},
        Golden{"model_only.host_netns.txt", "model_only.textproto", false,
               false, false},
        Golden{"model_only.required_tool.txt", "model_only.textproto", true,
               true, false},
        Golden{"model_and_tools.txt", "model_and_tools.textproto", true, false,
               false},
        Golden{"model_and_tools.json", "model_and_tools.textproto", true, false,
               true},
        Golden{"phased.txt", "phased.textproto", true, false, false},
        Golden{"phased.json", "phased.textproto", true, false, true}),
    GoldenName);

}  // namespace
}  // namespace sandfence
