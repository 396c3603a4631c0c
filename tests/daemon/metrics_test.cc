// The daemon's Prometheus text (issue 38), rendered from ManagerMetrics
// values (no root, no manager): the per-rollout label only when asked for,
// sums otherwise; counter names end in _total and nothing else's does; the
// build is named. RolloutTotals, the sums that never go down, too. What the
// manager puts in ManagerMetrics is rollout_manager_unit_test's; the served
// page is daemon_e2e_test's.
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/metrics_server.h"
#include "daemon/rollout_manager.h"
#include "daemon/rollout_totals.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandfence/version.h"

namespace sandfence::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// One filter's counts: `allowed` and `blocked` queries, each answered in
// 2 ms (the 2.5 ms bucket).
DnsQueryStats Queries(uint64_t allowed, uint64_t blocked) {
  DnsQueryStats q;
  q.by_verdict["allowed"] = allowed;
  q.by_verdict["blocked"] = blocked;
  q.latency_buckets[5] = allowed + blocked;
  q.latency_count = allowed + blocked;
  q.latency_sum_seconds = 0.002 * static_cast<double>(allowed + blocked);
  return q;
}

// Two open DNS-filtered rollouts, and the sums the manager keeps (one more
// rollout, ended, counted 1 allowed query).
ManagerMetrics TwoDnsRollouts() {
  ManagerMetrics m;
  m.rollouts_open = 2;
  m.events_lost = 7;
  m.dns.push_back({"r1", Queries(2, 1), 4});
  m.dns.push_back({"r2", Queries(1, 0), std::nullopt});
  m.dns_total = Queries(4, 1);
  m.dns_learned_total = 4;
  return m;
}

TEST(RenderMetricsTest, ByDefaultNoSeriesIsLabelledByRollout) {
  const std::string out = RenderMetrics(TwoDnsRollouts());
  EXPECT_THAT(out, Not(HasSubstr("rollout=")));
  for (const char* want : {
           "\nsandfence_dns_queries_total{verdict=\"allowed\"} 4\n",
           "\nsandfence_dns_queries_total{verdict=\"blocked\"} 1\n",
           "\nsandfence_dns_queries_total{verdict=\"malformed\"} 0\n",
           "\nsandfence_dns_learned_addresses 4\n",
           "\nsandfence_dns_filter_latency_seconds_bucket{le=\"0.001\"} 0\n",
           "\nsandfence_dns_filter_latency_seconds_bucket{le=\"0.0025\"} 5\n",
           "\nsandfence_dns_filter_latency_seconds_bucket{le=\"+Inf\"} 5\n",
           "\nsandfence_dns_filter_latency_seconds_sum 0.01\n",
           "\nsandfence_dns_filter_latency_seconds_count 5\n",
       }) {
    EXPECT_THAT(out, HasSubstr(want));
  }
}

// A saturated daemon shows on its page, not only in its callers' retries.
TEST(RenderMetricsTest, TheCallPoolsStateIsOnThePage) {
  const std::string out =
      RenderMetrics(ManagerMetrics{}, {},
                    CallMetrics{.in_flight = 1056, .refused = 7,
                                .capacity = 1056});
  EXPECT_THAT(out, HasSubstr("\nsandfence_calls_in_flight 1056\n"));
  EXPECT_THAT(out, HasSubstr("\nsandfence_calls_capacity 1056\n"));
  EXPECT_THAT(out, HasSubstr("\n# TYPE sandfence_calls_refused_busy_total "
                             "counter\nsandfence_calls_refused_busy_total 7\n"));
}

TEST(RenderMetricsTest, ByDefaultTheDnsSeriesExistBeforeAnyDnsRollout) {
  // Zeros from the start: a rate over them is defined, and the series
  // count does not change with the rollouts.
  const std::string out = RenderMetrics(ManagerMetrics{});
  EXPECT_THAT(
      out, HasSubstr("\nsandfence_dns_queries_total{verdict=\"allowed\"} 0\n"));
  EXPECT_THAT(out, HasSubstr("\nsandfence_dns_learned_addresses 0\n"));
  EXPECT_THAT(out,
              HasSubstr("\nsandfence_dns_filter_latency_seconds_count 0\n"));
}

TEST(RenderMetricsTest, PerRolloutLabelsEachOpenRolloutsSeries) {
  const std::string out =
      RenderMetrics(TwoDnsRollouts(), MetricsOptions{.per_rollout = true});
  for (const char* want : {
           "\nsandfence_dns_queries_total{rollout=\"r1\",verdict=\"allowed\"} "
           "2\n",
           "\nsandfence_dns_queries_total{rollout=\"r2\",verdict=\"allowed\"} "
           "1\n",
           "\nsandfence_dns_queries_total{rollout=\"r2\",verdict=\"blocked\"} "
           "0\n",
           "\nsandfence_dns_learned_addresses{rollout=\"r1\"} 4\n",
           "\nsandfence_dns_filter_latency_seconds_bucket{rollout=\"r1\",le="
           "\"+Inf\"} 3\n",
           "\nsandfence_dns_filter_latency_seconds_sum{rollout=\"r2\"} 0.002\n",
           "\nsandfence_dns_filter_latency_seconds_count{rollout=\"r2\"} 1\n",
       }) {
    EXPECT_THAT(out, HasSubstr(want));
  }
  // r2's learned addresses are not known: no sample rather than a zero.
  EXPECT_THAT(out, Not(HasSubstr("learned_addresses{rollout=\"r2\"}")));
  // No unlabelled sums beside them (they would be counted twice).
  EXPECT_THAT(out, Not(HasSubstr("\nsandfence_dns_queries_total{verdict=")));
  EXPECT_THAT(out, Not(HasSubstr("\nsandfence_dns_learned_addresses ")));
  // Every rollout ended: no DNS series at all, as before issue 38.
  EXPECT_THAT(RenderMetrics(ManagerMetrics{}, {.per_rollout = true}),
              Not(HasSubstr("sandfence_dns_")));
}

// Each family's TYPE, by name, from "# TYPE name type" lines; a family
// typed twice is a failure.
std::map<std::string, std::string> Types(const std::string& out) {
  std::map<std::string, std::string> types;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (!absl::StartsWith(line, "# TYPE ")) continue;
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() != 4) {
      ADD_FAILURE() << "malformed: " << line;
      continue;
    }
    EXPECT_TRUE(types.emplace(f[2], f[3]).second) << "typed twice: " << f[2];
  }
  return types;
}

TEST(RenderMetricsTest, CounterNamesEndInTotalAndNoOtherDoes) {
  for (bool per_rollout : {false, true}) {
    const std::string out =
        RenderMetrics(TwoDnsRollouts(), {.per_rollout = per_rollout});
    const std::map<std::string, std::string> types = Types(out);
    ASSERT_GT(types.size(), 10u);
    for (const auto& [name, type] : types) {
      if (type == "counter") {
        EXPECT_TRUE(absl::EndsWith(name, "_total")) << name;
      } else {
        EXPECT_FALSE(absl::EndsWith(name, "_total")) << name << " " << type;
      }
    }
    // Every sample belongs to a family typed above it.
    std::set<std::string> seen;
    for (absl::string_view line : absl::StrSplit(out, '\n')) {
      if (line.empty() || line[0] == '#') continue;
      std::string name(line.substr(0, line.find_first_of("{ ")));
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (absl::EndsWith(name, suffix) && types.count(name) == 0) {
          std::string family = name.substr(0, name.size() - strlen(suffix));
          if (types.count(family) != 0 && types.at(family) == "histogram") {
            name = family;
          }
        }
      }
      EXPECT_EQ(types.count(name), 1u)
          << "per_rollout " << per_rollout << ": untyped sample: " << line;
    }
  }
}

TEST(RenderMetricsTest, EventsLostIsACounter) {
  const std::string out = RenderMetrics(TwoDnsRollouts());
  EXPECT_THAT(out, HasSubstr("\n# TYPE sandfence_events_lost_total counter\n"));
  EXPECT_THAT(out, HasSubstr("\nsandfence_events_lost_total 7\n"));
  EXPECT_THAT(out, Not(HasSubstr("sandfence_events_lost ")));
}

TEST(RenderMetricsTest, BuildInfoNamesTheVersionAndCommit) {
  const std::string out = RenderMetrics(ManagerMetrics{});
  EXPECT_THAT(out, HasSubstr("# TYPE sandfence_build_info gauge\n"));
  const std::string commit =
      *SANDFENCE_GIT_COMMIT ? SANDFENCE_GIT_COMMIT : "unknown";
  EXPECT_THAT(out, HasSubstr(absl::StrCat("\nsandfence_build_info{version=\"",
                                          SANDFENCE_VERSION, "\",commit=\"",
                                          commit, "\"} 1\n")));
}

TEST(MetricsUrlTest, BracketsAnIpv6Address) {
  EXPECT_EQ(MetricsUrl(IpAddress::V4(0x7f000001), 9464),
            "http://127.0.0.1:9464/metrics");
  EXPECT_EQ(MetricsUrl(*IpAddress::Parse("::1"), 9464),
            "http://[::1]:9464/metrics");
  EXPECT_EQ(MetricsUrl(*IpAddress::Parse("::"), 80), "http://[::]:80/metrics");
}

TEST(MetricsServerTest, AnAddressNotOnTheHostIsRefusedByName) {
  // 192.0.2.0/24 is TEST-NET-1: no host has it.
  absl::StatusOr<std::unique_ptr<MetricsServer>> s = MetricsServer::Start(
      *IpAddress::Parse("192.0.2.1"), 0, [] { return std::string(); });
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("192.0.2.1:0"));
}

// --- RolloutTotals: the sums behind the counters ---

RolloutReading Reading(uint64_t lost, uint64_t allowed) {
  return RolloutReading{.events_lost = lost, .dns = Queries(allowed, 0)};
}

TEST(RolloutTotalsTest, AnEndedRolloutStaysInTheSum) {
  RolloutTotals t;
  t.Observe("r1", Reading(5, 2));
  t.Observe("r2", Reading(3, 1));
  EXPECT_EQ(t.Sum().events_lost, 8u);
  EXPECT_EQ(t.Sum().dns.by_verdict.at("allowed"), 3u);
  // r1 lost 2 more and answered 1 more after the last look, then ended.
  t.Retire("r1", Reading(7, 3));
  const RolloutReading sum = t.Sum();
  EXPECT_EQ(sum.events_lost, 10u);
  EXPECT_EQ(sum.dns.by_verdict.at("allowed"), 4u);
  EXPECT_EQ(sum.dns.latency_count, 4u);
  EXPECT_EQ(sum.dns.latency_buckets[5], 4u);
}

TEST(RolloutTotalsTest, AFailedReadingNeverLowersTheSum) {
  RolloutTotals t;
  t.Observe("r1", Reading(5, 2));
  t.Observe("r1", RolloutReading{});  // the counters could not be read
  EXPECT_EQ(t.Sum().events_lost, 5u);
  t.Retire("r1", RolloutReading{});  // nor at the end: the last look stands
  EXPECT_EQ(t.Sum().events_lost, 5u);
  EXPECT_EQ(t.Sum().dns.by_verdict.at("allowed"), 2u);
}

TEST(RolloutTotalsTest, ARolloutNeverObservedIsCountedAtItsEnd) {
  RolloutTotals t;
  t.Retire("brief", Reading(1, 1));
  EXPECT_EQ(t.Sum().events_lost, 1u);
}

TEST(RolloutTotalsTest, AnIdUsedAgainAfterItsEndCountsAfresh) {
  RolloutTotals t;
  t.Observe("r1", Reading(5, 0));
  t.Retire("r1", Reading(5, 0));
  t.Observe("r1", Reading(1, 0));  // a new rollout, its counters from zero
  EXPECT_EQ(t.Sum().events_lost, 6u);
}

}  // namespace
}  // namespace sandfence::testing
