// An in-memory Resolver for unit tests: fixed answers, fixed failures, and
// a log of the names asked (to prove that some compiles resolve nothing).
#ifndef SANDFENCE_TESTS_COMPILE_FAKE_RESOLVER_H_
#define SANDFENCE_TESTS_COMPILE_FAKE_RESOLVER_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/ip.h"
#include "common/status.h"
#include "resolve/resolver.h"

namespace sandfence {

class FakeResolver : public Resolver {
 public:
  // `addresses` are literals; an unparsable one is a bug in the test.
  FakeResolver& Add(const std::string& name,
                    const std::vector<std::string>& addresses) {
    std::vector<IpAddress>& out = answers_[name];
    for (const std::string& a : addresses) out.push_back(*IpAddress::Parse(a));
    return *this;
  }
  FakeResolver& Fail(const std::string& name, absl::Status status) {
    failures_[name] = std::move(status);
    return *this;
  }

  absl::StatusOr<std::vector<IpAddress>> Resolve(
      absl::string_view name) override {
    asked_.emplace_back(name);
    std::string key(name);
    if (auto it = failures_.find(key); it != failures_.end()) return it->second;
    if (auto it = answers_.find(key); it != answers_.end()) return it->second;
    return Rejected(absl::StrCat("name \"", name,
                                 "\" does not exist (NXDOMAIN from fake)"));
  }

  const std::vector<std::string>& asked() const { return asked_; }

 private:
  std::map<std::string, std::vector<IpAddress>> answers_;
  std::map<std::string, absl::Status> failures_;
  std::vector<std::string> asked_;
};

}  // namespace sandfence

#endif  // SANDFENCE_TESTS_COMPILE_FAKE_RESOLVER_H_
