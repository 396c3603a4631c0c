// The DNS parser on hostile packets and the builders (each built message is
// parsed back and checked field by field).
#include "dns/message.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "dns/wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandfence::dns {
namespace {

using ::sandfence::dns::testing::NameBytes;
using ::sandfence::dns::testing::Query;
using ::sandfence::dns::testing::V4;
using ::sandfence::dns::testing::V6;
using ::sandfence::dns::testing::Wire;
using ::testing::HasSubstr;

// An answer with a compressed CNAME chain, addresses and an OPT record:
//   Api.Model.TEST CNAME edge.cdn.test; edge.cdn.test A, AAAA.
std::string ChainAnswer() {
  Wire w;
  w.Header(0x1234, 0x8180, 1, 3, 0, 1);
  w.Question("Api.Model.TEST", kTypeA);  // name at offset 12
  const size_t cname_owner = w.size();
  (void)cname_owner;
  // Owner: pointer to the question's name.
  w.Ptr(12).U16(kTypeCname).U16(1).U32(300);
  Wire target;
  target.Name("edge.cdn.test");
  w.U16(static_cast<uint16_t>(target.size()));
  const uint16_t target_at = static_cast<uint16_t>(w.size());
  w.Bytes(target.str());
  w.Ptr(target_at).U16(kTypeA).U16(1).U32(60).U16(4).Bytes(V4("10.1.2.3"));
  w.Ptr(target_at).U16(kTypeAaaa).U16(1).U32(60).U16(16).Bytes(V6("fd00::3"));
  w.Opt(1232, false);
  return w.str();
}

TEST(ParseMessage, AQueryWithEdns) {
  absl::StatusOr<Message> m =
      ParseMessage(Query("WWW.Example.Test", kTypeAaaa, 42, 4096, true));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->header.id, 42);
  EXPECT_TRUE(m->header.rd());
  ASSERT_EQ(m->questions.size(), 1u);
  EXPECT_EQ(m->questions[0].name, "www.example.test");
  EXPECT_EQ(m->questions[0].name_wire, NameBytes("WWW.Example.Test"));
  EXPECT_EQ(m->questions[0].type, kTypeAaaa);
  ASSERT_TRUE(m->edns.has_value());
  EXPECT_EQ(m->edns->udp_size, 4096);
  EXPECT_TRUE(m->edns->dnssec_ok);
  EXPECT_EQ(CheckQuery(*m), std::nullopt);
}

TEST(ParseMessage, ACompressedChainAnswer) {
  absl::StatusOr<Message> m = ParseMessage(ChainAnswer());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->answers.size(), 3u);
  EXPECT_EQ(m->answers[0].name, "api.model.test");
  EXPECT_EQ(m->answers[0].target, "edge.cdn.test");
  EXPECT_EQ(m->answers[1].name, "edge.cdn.test");
  EXPECT_EQ(m->answers[1].rdata, V4("10.1.2.3"));
  EXPECT_EQ(m->answers[2].rdata, V6("fd00::3"));
  EXPECT_TRUE(m->edns.has_value());
  EXPECT_EQ(m->additional.size(), 0u);
}

TEST(ParseMessage, EveryTruncationIsAnErrorNeverACrash) {
  for (const std::string& full :
       {ChainAnswer(), Query("a.b.test", kTypeA, 1, 1232)}) {
    ASSERT_TRUE(ParseMessage(full).ok());
    for (size_t n = 0; n < full.size(); ++n) {
      absl::StatusOr<Message> m = ParseMessage(full.substr(0, n));
      EXPECT_FALSE(m.ok()) << "a prefix of " << n << " bytes parsed";
      if (!m.ok()) {
        EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
      }
    }
  }
}

struct BadCase {
  const char* title;
  std::string wire;
  const char* error_part;
};

std::vector<BadCase> BadCases() {
  std::vector<BadCase> cases;
  {
    Wire w;  // the question's name is a pointer to itself
    w.Header(1, 0x0100, 1, 0, 0, 0).Ptr(12).U16(1).U16(1);
    cases.push_back({"pointer to itself", w.str(), "does not point backwards"});
  }
  {
    Wire w;  // label "a", then a pointer back to that label: a loop
    w.Header(1, 0x0100, 1, 0, 0, 0).U8(1).Bytes("a").Ptr(12).U16(1).U16(1);
    cases.push_back(
        {"pointer loop through a label", w.str(), "does not point backwards"});
  }
  {
    Wire w;  // a forward pointer to a name after it
    w.Header(1, 0x0100, 1, 0, 0, 0).Ptr(18).U16(1).U16(1).Name("x");
    cases.push_back({"forward pointer", w.str(), "does not point backwards"});
  }
  {
    Wire w;
    w.Header(1, 0x0100, 1, 0, 0, 0).Ptr(2).U16(1).U16(1);
    cases.push_back(
        {"pointer into the header", w.str(), "does not point backwards"});
  }
  {
    Wire w;  // answer record's owner points at the answer itself
    w.Header(1, 0x8100, 1, 1, 0, 0).Question("a.test", 1);
    const uint16_t at = static_cast<uint16_t>(w.size());
    w.Ptr(at).U16(1).U16(1).U32(1).U16(4).Bytes(V4("1.2.3.4"));
    cases.push_back(
        {"owner pointing at itself", w.str(), "does not point backwards"});
  }
  {
    Wire w;
    w.Header(1, 0x0100, 1, 0, 0, 0)
        .U8(64)
        .Bytes(std::string(64, 'a'))
        .U8(0)
        .U16(1)
        .U16(1);
    cases.push_back({"64-byte label", w.str(), "label type"});
  }
  {
    Wire w;
    w.Header(1, 0x0100, 1, 0, 0, 0);
    for (int i = 0; i < 5; ++i) w.U8(63).Bytes(std::string(63, 'a'));
    w.U8(0).U16(1).U16(1);
    cases.push_back({"name over 255 bytes", w.str(), "longer than 255"});
  }
  {
    // A name made long by pointers: each run adds labels and points back
    // to the previous one; the total exceeds 255 bytes.
    Wire w;
    w.Header(1, 0x8100, 1, 5, 0, 0).Question("x", 1);
    uint16_t prev = 12;
    for (int i = 0; i < 5; ++i) {
      const uint16_t at = static_cast<uint16_t>(w.size());
      w.U8(60).Bytes(std::string(60, 'b')).Ptr(prev);
      w.U16(1).U16(1).U32(1).U16(4).Bytes(V4("1.2.3.4"));
      prev = at;
    }
    cases.push_back(
        {"name over 255 bytes through pointers", w.str(), "longer than 255"});
  }
  {
    Wire w;
    w.Header(1, 0x0100, 2, 0, 0, 0).Question("a.test", 1).Question("b.test", 1);
    cases.push_back({"two questions", w.str(), "2 questions"});
  }
  {
    Wire w;
    w.Header(1, 0x0100, 65535, 0, 0, 0).Question("a.test", 1);
    cases.push_back({"65535 questions", w.str(), "65535 questions"});
  }
  {
    Wire w;
    w.Header(1, 0x8100, 1, 65535, 65535, 65535).Question("a.test", 1);
    cases.push_back({"196605 records claimed", w.str(), "records (at most"});
  }
  {
    Wire w;
    w.Header(1, 0x8100, 1, 1, 0, 0).Question("a.test", 1).Opt(512, false);
    cases.push_back({"OPT in the answer section", w.str(),
                     "outside the additional section"});
  }
  {
    Wire w;
    w.Header(1, 0x0100, 1, 0, 0, 2)
        .Question("a.test", 1)
        .Opt(512, false)
        .Opt(512, false);
    cases.push_back({"two OPT records", w.str(), "a second OPT"});
  }
  {
    Wire w;
    w.Header(1, 0x0100, 1, 0, 0, 1)
        .Question("a.test", 1)
        .Name("x")
        .U16(41)
        .U16(512)
        .U32(0)
        .U16(0);
    cases.push_back(
        {"OPT not owned by the root", w.str(), "not owned by the root"});
  }
  {
    Wire w;  // option claims 10 bytes, 2 present
    w.Header(1, 0x0100, 1, 0, 0, 1)
        .Question("a.test", 1)
        .U8(0)
        .U16(41)
        .U16(512)
        .U32(0)
        .U16(6)
        .U16(15)
        .U16(10)
        .Bytes("ab");
    cases.push_back({"EDNS option past its rdata", w.str(), "truncated"});
  }
  {
    Wire w;  // 3 bytes of options: not even an option header
    w.Header(1, 0x0100, 1, 0, 0, 1)
        .Question("a.test", 1)
        .U8(0)
        .U16(41)
        .U16(512)
        .U32(0)
        .U16(3)
        .Bytes("abc");
    cases.push_back(
        {"EDNS option header truncated", w.str(), "option header truncated"});
  }
  {
    Wire w;
    w.Header(1, 0x8100, 1, 1, 0, 0)
        .Question("a.test", 1)
        .Rr("a.test", 1, 1, "12345");
    cases.push_back({"A record of 5 bytes", w.str(), "A record with 5"});
  }
  {
    Wire w;
    w.Header(1, 0x8100, 1, 1, 0, 0)
        .Question("a.test", 1)
        .Rr("a.test", kTypeCname, 1, NameBytes("b.test") + "zz");
    cases.push_back(
        {"CNAME with bytes after its name", w.str(), "bytes after the name"});
  }
  {
    Wire w;
    w.Header(1, 0x0100, 1, 0, 0, 0).Question("a.test", 1).Bytes("junk");
    cases.push_back({"bytes after the last record", w.str(),
                     "bytes after the last record"});
  }
  {
    cases.push_back(
        {"oversized message", std::string(70000, '\0'), "longer than 65535"});
  }
  return cases;
}

TEST(ParseMessage, RejectsHostilePackets) {
  for (const BadCase& c : BadCases()) {
    absl::StatusOr<Message> m = ParseMessage(c.wire);
    ASSERT_FALSE(m.ok()) << c.title << " parsed";
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << c.title;
    EXPECT_THAT(m.status().message(), HasSubstr(c.error_part)) << c.title;
  }
}

TEST(ParseMessage, ThousandsOfRecordsWithinTheLimitAreFine) {
  Wire w;
  w.Header(1, 0x8180, 1, 1000, 0, 0).Question("many.test", 1);
  for (int i = 0; i < 1000; ++i) {
    w.Ptr(12).U16(kTypeA).U16(1).U32(5).U16(4).Bytes(V4("10.0.0.1"));
  }
  absl::StatusOr<Message> m = ParseMessage(w.str());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->answers.size(), 1000u);
}

TEST(NameText, LowerCasesAndEscapesWhatNoHostNameHas) {
  std::string wire = Wire()
                         .U8(3)
                         .Bytes("A.b")
                         .U8(2)
                         .Bytes("C\x01")
                         .U8(3)
                         .Bytes("x\\Y")
                         .U8(0)
                         .str();
  EXPECT_EQ(NameText(wire), "a\\.b.c\\001.x\\\\y");
  EXPECT_EQ(NameText(std::string(1, '\0')), "");
  EXPECT_EQ(NameText(NameBytes("Foo-Bar_1.TEST")), "foo-bar_1.test");
}

TEST(NameWire, RoundTripsAndRefusesBadLabels) {
  EXPECT_EQ(*NameWire("a.bc"), NameBytes("a.bc"));
  EXPECT_EQ(*NameWire(""), std::string(1, '\0'));
  EXPECT_FALSE(NameWire("a..b").ok());
  EXPECT_FALSE(NameWire(std::string(64, 'a')).ok());
}

struct CheckCase {
  const char* title;
  std::string wire;
  std::optional<Rcode> rcode;  // nullopt with `drop`: no answer
  bool ok;
  bool drop;
};

TEST(CheckQuery, ServesOnlyStandardQueries) {
  std::vector<CheckCase> cases = {
      {"an A query", Query("a.test", kTypeA), std::nullopt, true, false},
      {"an HTTPS query", Query("a.test", kTypeHttps), std::nullopt, true,
       false},
      {"a response",
       Wire().Header(1, 0x8100, 1, 0, 0, 0).Question("a.test", 1).str(),
       std::nullopt, false, true},
      {"opcode NOTIFY",
       Wire().Header(1, 0x2000, 1, 0, 0, 0).Question("a.test", 1).str(),
       Rcode::kNotImp, false, false},
      {"no question", Wire().Header(1, 0x0100, 0, 0, 0, 0).str(),
       Rcode::kFormErr, false, false},
      {"AXFR", Query("a.test", kTypeAxfr), Rcode::kNotImp, false, false},
      {"class CH",
       Wire()
           .Header(1, 0x0100, 1, 0, 0, 0)
           .Question("version.bind", kTypeTxt, 3)
           .str(),
       Rcode::kRefused, false, false},
      {"EDNS version 1",
       Wire()
           .Header(1, 0x0100, 1, 0, 0, 1)
           .Question("a.test", 1)
           .U8(0)
           .U16(41)
           .U16(512)
           .U32(0x00010000)
           .U16(0)
           .str(),
       Rcode::kBadVers, false, false},
  };
  for (const CheckCase& c : cases) {
    absl::StatusOr<Message> m = ParseMessage(c.wire);
    ASSERT_TRUE(m.ok()) << c.title << ": " << m.status();
    std::optional<QueryProblem> p = CheckQuery(*m);
    if (c.ok) {
      EXPECT_EQ(p, std::nullopt) << c.title;
      continue;
    }
    ASSERT_TRUE(p.has_value()) << c.title;
    EXPECT_EQ(p->rcode, c.rcode) << c.title << ": " << p->reason;
  }
}

Message MustParse(const std::string& wire) {
  absl::StatusOr<Message> m = ParseMessage(wire);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : Message{};
}

TEST(BuildResponse, NxdomainWithBlockedEdeForAnEdnsQuery) {
  Message q =
      MustParse(Query("Secret.Attacker.Example", kTypeA, 99, 1232, true));
  const std::string r = BuildResponse(
      q, Rcode::kNxDomain, Ede{EdeCode::kBlocked, "blocked by policy"});
  Message m = MustParse(r);
  EXPECT_EQ(m.header.id, 99);
  EXPECT_TRUE(m.header.qr());
  EXPECT_TRUE(m.header.rd());
  EXPECT_TRUE(m.header.flags & kFlagRa);
  EXPECT_FALSE(m.header.flags & kFlagAa);
  EXPECT_EQ(m.rcode(), 3);
  ASSERT_EQ(m.questions.size(), 1u);
  EXPECT_EQ(m.questions[0].name_wire, NameBytes("Secret.Attacker.Example"));
  EXPECT_EQ(m.questions[0].type, kTypeA);
  ASSERT_TRUE(m.edns.has_value());
  EXPECT_TRUE(m.edns->dnssec_ok);
  EXPECT_EQ(m.edns->udp_size, kFilterUdpSize);
  std::vector<Ede> ede = EdeOptions(m);
  ASSERT_EQ(ede.size(), 1u);
  EXPECT_EQ(ede[0].code, EdeCode::kBlocked);
  EXPECT_EQ(ede[0].text, "blocked by policy");
  EXPECT_TRUE(m.answers.empty());
}

TEST(BuildResponse, NoOptAndNoEdeForAQueryWithoutEdns) {
  Message q = MustParse(Query("a.test", kTypeA, 5));
  Message m = MustParse(
      BuildResponse(q, Rcode::kNxDomain, Ede{EdeCode::kBlocked, "x"}));
  EXPECT_EQ(m.rcode(), 3);
  EXPECT_FALSE(m.edns.has_value());
  EXPECT_EQ(m.header.arcount, 0);
}

TEST(BuildResponse, ServfailAndRefusedAndBadvers) {
  Message q = MustParse(Query("a.test", kTypeA, 5, 512));
  Message s = MustParse(BuildResponse(
      q, Rcode::kServFail, Ede{EdeCode::kNoReachableAuthority, "timeout"}));
  EXPECT_EQ(s.rcode(), 2);
  ASSERT_EQ(EdeOptions(s).size(), 1u);
  EXPECT_EQ(EdeOptions(s)[0].code, EdeCode::kNoReachableAuthority);
  EXPECT_EQ(MustParse(BuildResponse(q, Rcode::kRefused)).rcode(), 5);
  Message b = MustParse(BuildResponse(q, Rcode::kBadVers));
  EXPECT_EQ(b.rcode(), 16);
  EXPECT_EQ(b.header.header_rcode(), 0);
  EXPECT_EQ(b.edns->version, 0);
}

TEST(BuildFormErr, EchoesTheHeaderOnly) {
  std::string junk = Wire().Header(0xbeef, 0x0100, 1, 0, 0, 0).U8(200).str();
  std::optional<std::string> r = BuildFormErr(junk);
  ASSERT_TRUE(r.has_value());
  Message m = MustParse(*r);
  EXPECT_EQ(m.header.id, 0xbeef);
  EXPECT_EQ(m.rcode(), 1);
  EXPECT_TRUE(m.header.qr());
  EXPECT_TRUE(m.questions.empty());
  EXPECT_EQ(BuildFormErr("short"), std::nullopt);
  EXPECT_EQ(BuildFormErr(Wire().Header(1, 0x8000, 0, 0, 0, 0).str()),
            std::nullopt)
      << "a response is never answered";
}

TEST(BuildTruncated, SetsTcAndKeepsTheQuestion) {
  Message q = MustParse(Query("Big.Test", kTypeA, 3, 1232));
  Message m = MustParse(BuildTruncated(q));
  EXPECT_TRUE(m.header.tc());
  EXPECT_EQ(m.rcode(), 0);
  EXPECT_EQ(m.questions[0].name_wire, NameBytes("Big.Test"));
  EXPECT_TRUE(m.edns.has_value());
}

TEST(BuildUpstreamQuery, FreshIdLowerCaseNoClientOptions) {
  Wire w;
  w.Header(11, 0x0110, 1, 0, 0, 1)
      .Question("MiXeD.Test", kTypeAaaa)
      .Opt(4096, true, {{10, "cookie-cookie"}, {8, "subnet"}});
  Message q = MustParse(w.str());
  Message u = MustParse(BuildUpstreamQuery(q, 0x4242));
  EXPECT_EQ(u.header.id, 0x4242);
  EXPECT_FALSE(u.header.qr());
  EXPECT_TRUE(u.header.rd());
  EXPECT_TRUE(u.header.flags & kFlagCd);
  EXPECT_EQ(u.questions[0].name_wire, NameBytes("mixed.test"));
  EXPECT_EQ(u.questions[0].type, kTypeAaaa);
  ASSERT_TRUE(u.edns.has_value());
  EXPECT_TRUE(u.edns->dnssec_ok);
  EXPECT_TRUE(u.edns->options.empty());

  Message plain = MustParse(Query("a.test", kTypeA));
  EXPECT_FALSE(MustParse(BuildUpstreamQuery(plain, 1)).edns.has_value());
}

TEST(RewriteAnswer, ClientIdAndCaseTtlCapOptRemoved) {
  const std::string up = ChainAnswer();
  Message upstream = MustParse(up);
  Message client = MustParse(Query("API.model.test", kTypeA, 777));
  absl::StatusOr<std::string> out =
      RewriteAnswer(up, upstream, client, /*ttl_cap=*/100, 512);
  ASSERT_TRUE(out.ok()) << out.status();
  Message m = MustParse(*out);
  EXPECT_EQ(m.header.id, 777);
  EXPECT_EQ(m.questions[0].name_wire, NameBytes("API.model.test"));
  EXPECT_FALSE(m.edns.has_value()) << "the client sent no OPT";
  ASSERT_EQ(m.answers.size(), 3u);
  EXPECT_EQ(m.answers[0].ttl, 100u);  // capped from 300
  EXPECT_EQ(m.answers[1].ttl, 60u);   // below the cap: untouched
  EXPECT_EQ(m.answers[0].target, "edge.cdn.test");
}

TEST(RewriteAnswer, TooBigForTheClientBecomesTruncated) {
  const std::string up = ChainAnswer();
  Message upstream = MustParse(up);
  Message client = MustParse(Query("api.model.test", kTypeA, 1, 1232));
  absl::StatusOr<std::string> out =
      RewriteAnswer(up, upstream, client, 100, up.size() - 1);
  ASSERT_TRUE(out.ok());
  Message m = MustParse(*out);
  EXPECT_TRUE(m.header.tc());
  EXPECT_TRUE(m.answers.empty());
}

TEST(RewriteAnswer, RefusesAnOptThatIsNotLastForAClientWithoutEdns) {
  Wire w;
  w.Header(1, 0x8180, 1, 0, 0, 2)
      .Question("a.test", 1)
      .Opt(512, false)
      .Rr("a.test", kTypeA, 5, V4("10.0.0.1"));
  Message upstream = MustParse(w.str());
  Message client = MustParse(Query("a.test", kTypeA));
  EXPECT_FALSE(RewriteAnswer(w.str(), upstream, client, 100, 512).ok());
}

TEST(ClientUdpLimit, ClassicOrAdvertised) {
  EXPECT_EQ(ClientUdpLimit(MustParse(Query("a.test", 1))), 512u);
  EXPECT_EQ(ClientUdpLimit(MustParse(Query("a.test", 1, 1, 4096))), 4096u);
  EXPECT_EQ(ClientUdpLimit(MustParse(Query("a.test", 1, 1, 100))), 512u);
}


// Found by fuzz_dns_message: a name whose compression pointer lands inside a
// TTL field that the rewrite caps. The rewritten answer must parse and say
// what the parsed upstream answer said (the filter learns from the latter,
// the client reads the former), or be refused.
TEST(RewriteAnswer, APointerIntoARewrittenFieldIsRefusedNotPassedOn) {
  std::string up;
  ASSERT_TRUE(absl::Base64Unescape(
      "AIEEgAABAAMAAAABA2FwaQVtb2RlbAR0ZXN0AAABAAHADADALAAAAAEsAA8EZWRnZSNjZG4E"
      "dGVzdADALAAAngAAAAAAAAAECgECA8AsAAMAACkE0AAAEAAAAAAAAAAAAAAAAAAAAAMABCkE"
      "0AAAAAAAAA==",
      &up));
  absl::StatusOr<Message> upstream = ParseMessage(up);
  ASSERT_TRUE(upstream.ok()) << upstream.status();
  absl::StatusOr<std::string> out =
      RewriteAnswer(up, *upstream, *upstream, 300, ClientUdpLimit(*upstream));
  ASSERT_FALSE(out.ok()) << "capping the TTL changes a name the client reads";
  EXPECT_THAT(out.status().message(), ::testing::HasSubstr("rewritten"));
  // Untouched (every TTL already under the cap), the same answer passes.
  absl::StatusOr<std::string> same =
      RewriteAnswer(up, *upstream, *upstream, 0xffffffffu, 4096);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(*same, up);
}

}  // namespace
}  // namespace sandfence::dns
