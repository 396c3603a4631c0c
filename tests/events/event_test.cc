// The event stream's lines (events/event.h) and its writer
// (events/event_stream.h): every line is one valid JSON object whatever a
// sandboxed process names itself or its sockets, OCSF carries the classes
// collectors file it under, and the writer rotates, refuses links, and
// reports what it could not deliver.
#include "events/event.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <map>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/unique_fd.h"
#include "events/event_stream.h"
#include "events/journal_entry.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace sandfence::events {
namespace {

google::protobuf::Struct Parse(const std::string& line) {
  google::protobuf::Struct out;
  const auto status = google::protobuf::util::JsonStringToMessage(line, &out);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << line;
  return out;
}

const google::protobuf::Value& Field(const google::protobuf::Struct& s,
                                     const std::string& name) {
  static const google::protobuf::Value kMissing;
  auto it = s.fields().find(name);
  return it == s.fields().end() ? kMissing : it->second;
}

std::string Str(const google::protobuf::Struct& s, const std::string& name) {
  return Field(s, name).string_value();
}

Event DeniedConnect() {
  Event e;
  e.unix_ns = 1796533501123456789;  // 2026-12-06T05:05:01.123456789Z
  e.rollout = "r-1";
  e.phase = "agent";
  e.kind = Kind::kNetwork;
  e.verdict = "denied";
  e.reason = "no rule";
  e.hook = "connect4";
  e.protocol = "tcp";
  e.address = *IpAddress::Parse("127.0.0.4");
  e.port = 9000;
  e.process = {.pid = 42, .uid = 65534, .comm = "curl"};
  return e;
}

TEST(EventLine, CarriesTheCommonFieldsAndTheDestination) {
  const google::protobuf::Struct s = Parse(RenderJson(DeniedConnect()));
  EXPECT_EQ(Str(s, "schema"), kSchema);
  EXPECT_EQ(Str(s, "time"), "2026-12-06T05:05:01.123456789Z");
  EXPECT_EQ(Str(s, "rollout"), "r-1");
  EXPECT_EQ(Str(s, "phase"), "agent");
  EXPECT_EQ(Str(s, "kind"), "network");
  EXPECT_EQ(Str(s, "verdict"), "denied");
  const auto& dest = Field(s, "destination").struct_value();
  EXPECT_EQ(Str(dest, "address"), "127.0.0.4");
  EXPECT_EQ(Field(dest, "port").number_value(), 9000);
  const auto& proc = Field(s, "process").struct_value();
  EXPECT_EQ(Field(proc, "pid").number_value(), 42);
  EXPECT_EQ(Field(proc, "uid").number_value(), 65534);
  EXPECT_EQ(Str(proc, "comm"), "curl");
  // Members of other kinds are left out.
  EXPECT_EQ(s.fields().count("name"), 0u);
  EXPECT_EQ(s.fields().count("counts"), 0u);
}

// An agent names its process and its sockets: neither a newline nor bytes
// that are not UTF-8 may split a line or make it unparsable.
TEST(EventLine, HostileNamesStayOneValidLine) {
  Event e = DeniedConnect();
  e.kind = Kind::kUnix;
  e.address.reset();
  e.path = "/tmp/x\n{\"kind\":\"network\",\"verdict\":\"allowed\"}\xff\xfe";
  e.process.comm = "a\"b\\c\x01\xc3(\xed\xa0\x80";
  for (Format f : {Format::kJsonLines, Format::kOcsf}) {
    const std::string line = Render(e, f);
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    const google::protobuf::Struct s = Parse(line);
    if (f == Format::kJsonLines) {
      EXPECT_EQ(Str(s, "kind"), "unix");
      EXPECT_EQ(Str(s, "verdict"), "denied");
      const std::string path = Str(Field(s, "peer").struct_value(), "path");
      EXPECT_EQ(path.substr(0, 7), "/tmp/x\n");
      EXPECT_NE(path.find("\u00ff\u00fe"), std::string::npos) << path;
    }
  }
}

TEST(EventLine, EveryKindNamesItself) {
  const std::vector<std::pair<Kind, std::string>> kinds = {
      {Kind::kNetwork, "network"}, {Kind::kDns, "dns"},
      {Kind::kUnix, "unix"},       {Kind::kGuard, "guard"},
      {Kind::kPhase, "phase"},     {Kind::kLoss, "loss"},
      {Kind::kRefusal, "refusal"}};
  for (const auto& [kind, name] : kinds) {
    Event e;
    e.kind = kind;
    e.verdict = "x";
    EXPECT_EQ(Str(Parse(RenderJson(e)), "kind"), name);
  }
}

TEST(EventLine, DnsGuardLossAndRefusalFields) {
  Event dns;
  dns.kind = Kind::kDns;
  dns.verdict = "allowed";
  dns.name = "a.tool.test";
  dns.query_type = "A";
  dns.rcode = "NOERROR";
  dns.answers = {*IpAddress::Parse("127.0.0.8"), *IpAddress::Parse("::1")};
  dns.matched = "*.tool.test";
  google::protobuf::Struct s = Parse(RenderJson(dns));
  EXPECT_EQ(Str(s, "name"), "a.tool.test");
  EXPECT_EQ(Str(s, "type"), "A");
  ASSERT_EQ(Field(s, "answers").list_value().values_size(), 2);
  EXPECT_EQ(Field(s, "answers").list_value().values(1).string_value(), "::1");

  Event guard;
  guard.kind = Kind::kGuard;
  guard.verdict = "denied";
  guard.action = "ptrace_attach";
  guard.layer = "lsm";
  guard.target = {.pid = 1, .uid = 0, .comm = "init"};
  s = Parse(RenderJson(guard));
  EXPECT_EQ(Str(s, "action"), "ptrace_attach");
  EXPECT_EQ(Str(Field(s, "target").struct_value(), "comm"), "init");

  Event loss;
  loss.kind = Kind::kLoss;
  loss.verdict = "lost";
  loss.counts = {{"kernel_events_lost", 7}};
  s = Parse(RenderJson(loss));
  EXPECT_EQ(Field(Field(s, "counts").struct_value(), "kernel_events_lost")
                .number_value(),
            7);

  Event refusal;
  refusal.kind = Kind::kRefusal;
  refusal.verdict = "refused";
  refusal.cause = "rejected";
  refusal.retryable = false;
  s = Parse(RenderJson(refusal));
  EXPECT_EQ(Str(s, "cause"), "rejected");
  EXPECT_FALSE(Field(s, "retryable").bool_value());
  EXPECT_EQ(s.fields().count("retryable"), 1u);
}

TEST(EventLine, OcsfClasses) {
  const google::protobuf::Struct net = Parse(RenderOcsf(DeniedConnect()));
  EXPECT_EQ(Field(net, "class_uid").number_value(), 4001);
  EXPECT_EQ(Field(net, "category_uid").number_value(), 4);
  EXPECT_EQ(Field(net, "activity_id").number_value(), 5);  // Refuse
  EXPECT_EQ(Field(net, "type_uid").number_value(), 400105);
  EXPECT_EQ(Field(net, "action_id").number_value(), 2);  // Denied
  EXPECT_EQ(Field(net, "time").number_value(), 1796533501123.0);
  EXPECT_EQ(Str(Field(net, "dst_endpoint").struct_value(), "ip"), "127.0.0.4");
  EXPECT_EQ(Str(Field(net, "unmapped").struct_value(), "rollout"), "r-1");
  EXPECT_EQ(Str(Field(net, "metadata").struct_value(), "correlation_uid"),
            "r-1");

  Event dns;
  dns.kind = Kind::kDns;
  dns.verdict = "denied";
  dns.name = "evil.test";
  EXPECT_EQ(Field(Parse(RenderOcsf(dns)), "class_uid").number_value(), 4003);

  Event guard;
  guard.kind = Kind::kGuard;
  guard.verdict = "denied";
  guard.action = "ptrace_attach";
  const google::protobuf::Struct g = Parse(RenderOcsf(guard));
  EXPECT_EQ(Field(g, "class_uid").number_value(), 1007);
  EXPECT_EQ(Field(g, "activity_id").number_value(), 4);  // Inject

  Event loss;
  loss.kind = Kind::kLoss;
  loss.verdict = "lost";
  loss.counts = {{"event_lines_lost", 3}};
  const google::protobuf::Struct l = Parse(RenderOcsf(loss));
  EXPECT_EQ(Field(l, "class_uid").number_value(), 0);
  EXPECT_EQ(Field(Field(Field(l, "unmapped").struct_value(), "counts")
                      .struct_value(),
                  "event_lines_lost")
                .number_value(),
            3);
}

TEST(EventFormat, ParsesAndNamesABadValue) {
  EXPECT_EQ(*ParseFormat("jsonl"), Format::kJsonLines);
  EXPECT_EQ(*ParseFormat("ocsf"), Format::kOcsf);
  absl::StatusOr<Format> bad = ParseFormat("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"xml\""), std::string::npos);
}

class EventStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sf-events-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::system(absl::StrCat("rm -rf ", dir_).c_str());
  }
  static std::vector<std::string> Lines(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::vector<std::string> out = absl::StrSplit(ss.str(), '\n',
                                                  absl::SkipEmpty());
    return out;
  }
  std::string dir_;
};

TEST_F(EventStreamTest, AppendsOneLinePerEventAndWatchersSeeThem) {
  const std::string path = dir_ + "/events.jsonl";
  auto stream = EventStream::Open({.path = path});
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<std::string> watched;
  absl::Mutex mu;
  (*stream)->AddWatcher([&](const Event&, const std::string& line) {
    absl::MutexLock lock(&mu);
    watched.push_back(line);
  });
  for (int i = 0; i < 100; ++i) (*stream)->Emit(DeniedConnect());
  (*stream)->Flush();
  const std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 100u);
  for (const std::string& l : lines) EXPECT_EQ(Str(Parse(l), "kind"), "network");
  EXPECT_EQ((*stream)->counts().written, 100u);
  EXPECT_EQ((*stream)->counts().lost, 0u);
  absl::MutexLock lock(&mu);
  EXPECT_EQ(watched.size(), 100u);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST_F(EventStreamTest, RotatesBySizeAndKeepsN) {
  const std::string path = dir_ + "/events.jsonl";
  const size_t line = RenderJson(DeniedConnect()).size() + 1;
  auto stream = EventStream::Open(
      {.path = path, .max_bytes = line * 10, .keep = 2});
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (int i = 0; i < 45; ++i) (*stream)->Emit(DeniedConnect());
  (*stream)->Flush();
  // 45 lines, 10 per file: the live file holds 5, .1 and .2 hold 10 each,
  // and the oldest two files are gone (keep 2).
  EXPECT_EQ(Lines(path).size(), 5u);
  EXPECT_EQ(Lines(path + ".1").size(), 10u);
  EXPECT_EQ(Lines(path + ".2").size(), 10u);
  EXPECT_NE(::access((path + ".3").c_str(), F_OK), 0);
  EXPECT_EQ((*stream)->counts().rotations, 4u);
  EXPECT_EQ((*stream)->counts().lost, 0u);
}

// A link planted where the events file goes is not followed.
TEST_F(EventStreamTest, RefusesASymlink) {
  const std::string target = dir_ + "/elsewhere";
  const std::string path = dir_ + "/events.jsonl";
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);
  auto stream = EventStream::Open({.path = path});
  ASSERT_FALSE(stream.ok());
  EXPECT_NE(::access(target.c_str(), F_OK), 0);
}

// What the stream could not queue is counted and said in a loss line.
TEST_F(EventStreamTest, ALossLineSaysWhatWasDropped) {
  const std::string path = dir_ + "/events.jsonl";
  auto stream = EventStream::Open({.path = path, .max_queued = 0});
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (int i = 0; i < 5; ++i) (*stream)->Emit(DeniedConnect());
  stream->reset();  // writes what is due, then stops
  const std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 1u);
  const google::protobuf::Struct s = Parse(lines[0]);
  EXPECT_EQ(Str(s, "kind"), "loss");
  EXPECT_EQ(Field(Field(s, "counts").struct_value(), "event_lines_lost")
                .number_value(),
            5);
}

// journald's native protocol, parsed as journald parses it: KEY=VALUE
// lines, or KEY\n<u64 le length><bytes>\n.
std::map<std::string, std::string> ParseJournal(const std::string& d) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  while (i < d.size()) {
    const size_t nl = d.find('\n', i);
    if (nl == std::string::npos) {
      ADD_FAILURE() << "no newline after byte " << i;
      break;
    }
    const std::string head = d.substr(i, nl - i);
    if (const size_t eq = head.find('='); eq != std::string::npos) {
      out[head.substr(0, eq)] = head.substr(eq + 1);
      i = nl + 1;
      continue;
    }
    uint64_t n = 0;
    for (int b = 0; b < 8; ++b) {
      n |= static_cast<uint64_t>(static_cast<unsigned char>(d[nl + 1 + b]))
           << (8 * b);
    }
    out[head] = d.substr(nl + 9, n);
    EXPECT_EQ(d[nl + 9 + n], '\n');
    i = nl + 9 + n + 1;
  }
  return out;
}

class JournalTest : public EventStreamTest {};

// A journald stand-in (a datagram socket where journald's would be): the
// entry carries every field, byte for byte, a hostile process name too.
TEST_F(JournalTest, AnEventIsOneEntryWithItsFields) {
  const std::string sock = dir_ + "/journal.sock";
  UniqueFd server(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  sock.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(server.get(), reinterpret_cast<sockaddr*>(&addr),
                   sizeof(addr)),
            0);
  auto stream =
      EventStream::Open({.path = "journald", .journal_socket = sock});
  ASSERT_TRUE(stream.ok()) << stream.status();
  Event e = DeniedConnect();
  e.process.comm = "x\nSANDFENCE_VERDICT=allowed";
  (*stream)->Emit(e);
  (*stream)->Flush();
  char buf[65536];
  const ssize_t n = ::recv(server.get(), buf, sizeof(buf), MSG_DONTWAIT);
  ASSERT_GT(n, 0);
  std::map<std::string, std::string> f =
      ParseJournal(std::string(buf, static_cast<size_t>(n)));
  EXPECT_EQ(f["SYSLOG_IDENTIFIER"], "sandfence");
  EXPECT_EQ(f["PRIORITY"], "4");
  EXPECT_EQ(f["SANDFENCE_KIND"], "network");
  EXPECT_EQ(f["SANDFENCE_VERDICT"], "denied");
  EXPECT_EQ(f["SANDFENCE_ROLLOUT"], "r-1");
  EXPECT_EQ(f["SANDFENCE_DESTINATION_ADDRESS"], "127.0.0.4");
  EXPECT_EQ(f["SANDFENCE_DESTINATION_PORT"], "9000");
  EXPECT_EQ(f["SANDFENCE_COMM"], "x\nSANDFENCE_VERDICT=allowed");
  EXPECT_EQ(f["MESSAGE"], RenderJson(e));
}

TEST_F(JournalTest, NoJournaldIsAnErrorThatSaysSo) {
  auto stream = EventStream::Open(
      {.path = "journald", .journal_socket = dir_ + "/nothing.sock"});
  ASSERT_FALSE(stream.ok());
  EXPECT_NE(stream.status().message().find("journald"), std::string::npos);
}

}  // namespace
}  // namespace sandfence::events
