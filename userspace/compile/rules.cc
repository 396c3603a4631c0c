#include "compile/rules.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace sandfence {

bool RuleLess(const Rule& a, const Rule& b) {
  auto key = [](const Rule& r) {
    return std::make_tuple(static_cast<int>(r.protocol),
                           r.dest.address().family(), r.dest.address(),
                           r.dest.length(), r.port_first, r.port_last,
                           static_cast<int>(r.source));
  };
  auto ka = key(a);
  auto kb = key(b);
  if (ka != kb) return ka < kb;
  return a.origin < b.origin;
}

bool RuleCovers(const Rule& outer, const Rule& inner) {
  return outer.protocol == inner.protocol && outer.dest.Contains(inner.dest) &&
         outer.port_first <= inner.port_first &&
         inner.port_last <= outer.port_last;
}

namespace {

// Rules whose blocks are the same prefix, in one protocol: a rule's block
// is contained in another's exactly when the other's bucket is the rule's
// address truncated to the other's length.
struct BucketKey {
  L4 protocol;
  int family;
  int length;
  std::array<uint8_t, 16> bits;  // the address truncated to `length`

  friend bool operator==(const BucketKey&, const BucketKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const BucketKey& k) {
    return H::combine(std::move(h), k.protocol, k.family, k.length, k.bits);
  }
};

BucketKey KeyOf(L4 protocol, const IpAddress& addr, int length) {
  BucketKey key{protocol, addr.family(), length, {}};
  const int bytes = addr.is_v4() ? 4 : 16;
  std::memcpy(key.bits.data(), addr.bytes(), bytes);
  for (int byte = 0; byte < 16; ++byte) {
    const int keep = std::clamp(length - byte * 8, 0, 8);
    key.bits[byte] &= static_cast<uint8_t>(0xff00 >> keep);
  }
  return key;
}

// One prefix's port ranges, sorted by (first, last, rule index), with the
// running maximum of `last`: "is [a, b] inside one of them" is then two
// binary searches.
struct Bucket {
  struct Range {
    uint16_t first, last;
    size_t index;  // in the sorted rule list
  };
  std::vector<Range> ranges;
  std::vector<uint16_t> max_last;  // max of ranges[0..i].last

  // Whether some range with first < a (or <= a, when `or_equal`) has
  // last >= b.
  bool CoveredBefore(uint16_t a, uint16_t b, bool or_equal) const {
    auto end =
        or_equal ? std::upper_bound(
                       ranges.begin(), ranges.end(), a,
                       [](uint16_t v, const Range& r) { return v < r.first; })
                 : std::lower_bound(
                       ranges.begin(), ranges.end(), a,
                       [](const Range& r, uint16_t v) { return r.first < v; });
    const size_t n = end - ranges.begin();
    return n > 0 && max_last[n - 1] >= b;
  }
};

}  // namespace

// A rule goes when another covers it and is not equal in effect, or is
// equal in effect (same protocol, block and ports) and earlier in order:
// the rules that can cover one are those of its own prefix and of the
// prefixes containing it, found by lookup instead of by comparing every
// pair (40,000 rules were 1.6e9 comparisons).
void SortAndMergeRules(std::vector<Rule>* rules) {
  std::sort(rules->begin(), rules->end(), RuleLess);
  absl::flat_hash_map<BucketKey, Bucket> buckets;
  // The prefix lengths present per (protocol, family): the only ones worth
  // looking up.
  std::map<std::pair<L4, int>, std::set<int>> lengths;
  for (size_t i = 0; i < rules->size(); ++i) {
    const Rule& r = (*rules)[i];
    const IpAddress& addr = r.dest.address();
    buckets[KeyOf(r.protocol, addr, r.dest.length())].ranges.push_back(
        {r.port_first, r.port_last, i});
    lengths[{r.protocol, addr.family()}].insert(r.dest.length());
  }
  for (auto& [key, bucket] : buckets) {
    std::sort(bucket.ranges.begin(), bucket.ranges.end(),
              [](const Bucket::Range& x, const Bucket::Range& y) {
                return std::tie(x.first, x.last, x.index) <
                       std::tie(y.first, y.last, y.index);
              });
    bucket.max_last.reserve(bucket.ranges.size());
    uint16_t max = 0;
    for (const Bucket::Range& r : bucket.ranges) {
      max = std::max(max, r.last);
      bucket.max_last.push_back(max);
    }
  }

  std::vector<Rule> kept;
  kept.reserve(rules->size());
  for (size_t i = 0; i < rules->size(); ++i) {
    const Rule& rule = (*rules)[i];
    const IpAddress& addr = rule.dest.address();
    const uint16_t a = rule.port_first;
    const uint16_t b = rule.port_last;
    bool covered = false;
    for (int length : lengths[{rule.protocol, addr.family()}]) {
      if (length > rule.dest.length()) break;
      auto it = buckets.find(KeyOf(rule.protocol, addr, length));
      if (it == buckets.end()) continue;
      const Bucket& bucket = it->second;
      if (length < rule.dest.length()) {
        // A wider block: any range containing the rule's covers it.
        covered = bucket.CoveredBefore(a, b, /*or_equal=*/true);
      } else {
        // The same block: a range strictly containing the rule's ...
        covered = bucket.CoveredBefore(a, b, /*or_equal=*/false);
        auto run = std::equal_range(
            bucket.ranges.begin(), bucket.ranges.end(), Bucket::Range{a, 0, 0},
            [](const Bucket::Range& x, const Bucket::Range& y) {
              return x.first < y.first;
            });
        // ... or starting with it and ending later, or the same range
        // earlier in order.
        if (!covered && run.first != run.second) {
          covered = std::prev(run.second)->last > b;
          auto same = std::lower_bound(
              run.first, run.second, b,
              [](const Bucket::Range& x, uint16_t v) { return x.last < v; });
          covered = covered ||
                    (same != run.second && same->last == b && same->index < i);
        }
      }
      if (covered) break;
    }
    if (!covered) kept.push_back(rule);
  }
  *rules = std::move(kept);
}

absl::string_view L4Name(L4 protocol) {
  return protocol == L4::kUdp ? "udp" : "tcp";
}

absl::string_view RuleSourceName(RuleSource s) {
  switch (s) {
    case RuleSource::kModel:
      return "model";
    case RuleSource::kTool:
      return "tool";
    case RuleSource::kAllow:
      return "allow";
    case RuleSource::kDns:
      return "dns";
  }
  return "allow";
}

}  // namespace sandfence
