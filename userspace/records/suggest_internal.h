// What the files of `records suggest` share (suggest.cc writes the policy,
// suggest_learning.cc learns each phase from the records): the tallies and
// the one phase's learning. Private to userspace/records.
#ifndef SANDFENCE_RECORDS_SUGGEST_INTERNAL_H_
#define SANDFENCE_RECORDS_SUGGEST_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/ip.h"
#include "compile/compiled_policy.h"
#include "records/record_set.h"
#include "records/suggest.h"
#include "sandfence/v1/record.pb.h"

namespace sandfence {
namespace suggest_internal {

// s C-escaped in double quotes, as the policy's text format reads it.
std::string Quote(absl::string_view s);
// "1 attempt", "3 attempts".
std::string Plural(uint64_t n, absl::string_view one, absl::string_view many);
// "[1] [2]": the records, as output refers to them.
std::string Tags(const std::set<size_t>& records);

// How many of what, and where from.
struct Seen {
  uint64_t count = 0;
  uint64_t denied = 0;
  std::set<size_t> records;

  void Add(uint64_t n, bool was_denied, size_t record) {
    count += n;
    if (was_denied) denied += n;
    records.insert(record);
  }
  void Merge(const Seen& o) {
    count += o.count;
    denied += o.denied;
    records.insert(o.records.begin(), o.records.end());
  }
  // "3 attempts (2 denied) [1] [2]"
  std::string Text(absl::string_view one = "attempt",
                   absl::string_view many = "attempts") const {
    std::string out = Plural(count, one, many);
    if (denied > 0) absl::StrAppend(&out, " (", denied, " denied)");
    if (!records.empty()) absl::StrAppend(&out, " ", Tags(records));
    return out;
  }
};

// A name the records' DNS queries asked.
struct NameSeen {
  Seen queries;
  std::set<std::string> types;     // "A", "AAAA"
  std::set<std::string> verdicts;  // "allowed", "blocked"
};

// One allow rule to be, before TCP and UDP are merged: a name, a wildcard
// or an address, a protocol and a port.
struct GrantKey {
  bool address = false;  // names (and wildcards) first, then addresses
  std::string name;
  IpAddress addr;
  uint16_t port = 0;
  L4 protocol = L4::kTcp;

  auto Tuple() const {
    return std::make_tuple(address, name, addr, port,
                           static_cast<int>(protocol));
  }
  friend bool operator<(const GrantKey& a, const GrantKey& b) {
    return a.Tuple() < b.Tuple();
  }
  std::string Host() const { return address ? addr.ToString() : name; }
};

struct GrantSeen {
  Seen attempts;
  std::set<IpAddress> reached;    // the addresses the attempts went to
  std::set<std::string> members;  // a wildcard's sibling names
};

// What the model grant covers: the records' model rules (or --model
// literals), and --model names by the records' DNS answers.
struct ModelMatch {
  std::vector<Rule> rules;
  std::vector<std::pair<std::string, uint16_t>> names;
};

// Everything learned about one phase.
class PhaseLearning {
 public:
  PhaseLearning(std::string name, const std::vector<RecordInput>& records,
                const SuggestOptions& options)
      : name_(std::move(name)), records_(records), options_(options) {}

  absl::Status Learn();
  std::string Render() const;

 private:
  void LearnQueries();
  absl::Status LearnModel();
  void LearnAttempt(size_t r, const v1::NetAttempt& a);
  bool IsModel(size_t r, L4 protocol, const IpAddress& addr,
               uint16_t port) const;
  void BuildGrants();
  void Note(const std::string& what, uint64_t n, bool denied, size_t r) {
    notes_[what].Add(n, denied, r);
  }

  const std::string name_;
  const std::vector<RecordInput>& records_;
  const SuggestOptions& options_;

  Seen recorded_attempts_;
  Seen recorded_queries_;
  std::map<std::string, NameSeen> names_;
  // Per record: which names' answers held an address.
  std::map<size_t, std::map<IpAddress, std::set<std::string>>> answered_;
  std::set<std::string> model_urls_;
  std::string model_from_;
  ModelMatch model_;
  Seen model_attempts_;
  std::map<std::tuple<int, IpAddress, uint16_t>, Seen> destinations_;
  std::map<GrantKey, GrantSeen> grants_;
  std::map<std::string, Seen> unix_;
  std::map<HostPort, Seen> resolvers_;
  bool dns_filtered_ = false;  // some record ran this phase's DNS filtered
  std::map<std::string, Seen> notes_;
  // Protected addresses (dns/rebinding.h) allowed answers opened.
  std::map<std::string, Seen> point_at_;
  std::vector<std::string> ran_as_;  // "[1] inherit"
  std::vector<std::string> warnings_;
};

}  // namespace suggest_internal
}  // namespace sandfence

#endif  // SANDFENCE_RECORDS_SUGGEST_INTERNAL_H_
