// Which nameservers a resolv.conf names, read the way glibc reads it.
#include <string>
#include <vector>

#include "common/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "resolve/resolver.h"
#include "support/test_files.h"

namespace sandfence {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Strings(const std::vector<HostPort>& servers) {
  std::vector<std::string> out;
  for (const HostPort& server : servers) out.push_back(server.ToString());
  return out;
}

struct Case {
  const char* what;
  const char* text;
  std::vector<std::string> want;
};

const Case kCases[] = {
    {"one IPv4 nameserver", "nameserver 10.0.0.1\n", {"10.0.0.1:53"}},
    {"an IPv6 nameserver", "nameserver 2001:db8::1\n", {"[2001:db8::1]:53"}},
    {"IPv4 and IPv6 keep file order",
     "nameserver 2001:db8::1\nnameserver 10.0.0.1\n",
     {"[2001:db8::1]:53", "10.0.0.1:53"}},
    {"a scoped link-local address loses its scope",
     "nameserver fe80::1%eth0\n",
     {"[fe80::1]:53"}},
    {"a numeric scope is dropped too",
     "nameserver fe80::53%2\n",
     {"[fe80::53]:53"}},
    {"an IPv4-mapped address is kept as written",
     "nameserver ::ffff:10.0.0.1\n",
     {"[::ffff:10.0.0.1]:53"}},
    {"comment lines starting with # or ; are ignored",
     "# nameserver 10.0.0.9\n; nameserver 10.0.0.8\nnameserver 10.0.0.1\n",
     {"10.0.0.1:53"}},
    {"a comment after the address is ignored",
     "nameserver 10.0.0.1 # primary\nnameserver 10.0.0.2;secondary\n",
     {"10.0.0.1:53", "10.0.0.2:53"}},
    {"a tab separates like a space", "nameserver\t10.0.0.1\n", {"10.0.0.1:53"}},
    {"several blanks before the address",
     "nameserver  \t 10.0.0.1\n",
     {"10.0.0.1:53"}},
    {"the last line needs no newline", "nameserver 10.0.0.1", {"10.0.0.1:53"}},
    {"CRLF line endings",
     "nameserver 10.0.0.1\r\nnameserver 10.0.0.2\r\n",
     {"10.0.0.1:53", "10.0.0.2:53"}},
    {"search, domain and options lines are not nameservers",
     "search corp.example\ndomain corp.example\noptions ndots:2 timeout:1\n"
     "nameserver 10.0.0.1\n",
     {"10.0.0.1:53"}},
    {"the keyword must start the line, as in glibc",
     "  nameserver 10.0.0.1\n",
     {}},
    {"the keyword must be followed by a blank", "nameserver10.0.0.1\n", {}},
    {"a longer keyword is not nameserver", "nameservers 10.0.0.1\n", {}},
    {"the keyword is case-sensitive, as in glibc", "NAMESERVER 10.0.0.1\n", {}},
    {"a host name is not a nameserver address",
     "nameserver dns.example\nnameserver 10.0.0.1\n",
     {"10.0.0.1:53"}},
    {"a port is not resolv.conf syntax: skipped",
     "nameserver 10.0.0.1:5353\n",
     {}},
    {"brackets are not resolv.conf syntax: skipped", "nameserver [::1]\n", {}},
    {"a nameserver line without an address is skipped", "nameserver\n", {}},
    {"an empty file names no nameserver", "", {}},
    {"only the first three nameservers count (glibc MAXNS)",
     "nameserver 10.0.0.1\nnameserver 10.0.0.2\nnameserver 10.0.0.3\n"
     "nameserver 10.0.0.4\n",
     {"10.0.0.1:53", "10.0.0.2:53", "10.0.0.3:53"}},
    {"skipped lines do not count toward the three",
     "nameserver bogus\nnameserver 10.0.0.1\nnameserver 10.0.0.2\n"
     "nameserver 10.0.0.3\nnameserver 10.0.0.4\n",
     {"10.0.0.1:53", "10.0.0.2:53", "10.0.0.3:53"}},
    {"a repeated nameserver is listed once",
     "nameserver 10.0.0.1\nnameserver 10.0.0.2\nnameserver 10.0.0.1\n",
     {"10.0.0.1:53", "10.0.0.2:53"}},
    {"repeats use up glibc's three slots",
     "nameserver 10.0.0.1\nnameserver 10.0.0.1\nnameserver 10.0.0.1\n"
     "nameserver 10.0.0.2\n",
     {"10.0.0.1:53"}},
};

TEST(ResolvConfTest, ParsesNameserversAsGlibcDoes) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(Strings(ParseResolvConf(c.text)), c.want) << c.text;
  }
}

TEST(ResolvConfTest, ReadsTheSameFromAFile) {
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok()) << dir.status();
  int n = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<std::string> path =
        dir->WriteFile("resolv.conf." + std::to_string(n++), c.text);
    ASSERT_TRUE(path.ok()) << path.status();
    absl::StatusOr<std::vector<HostPort>> got = ReadResolvConf(*path);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(Strings(*got), c.want) << c.text;
  }
}

TEST(ResolvConfTest, UnreadableFileIsUnavailableAndNamed) {
  absl::StatusOr<ScopedTempDir> dir = ScopedTempDir::Create();
  ASSERT_TRUE(dir.ok()) << dir.status();
  struct Unreadable {
    const char* what;
    std::string path;
    const char* reason;
  };
  const Unreadable cases[] = {
      {"a missing file", dir->Path("missing.conf"),
       "No such file or directory"},
      {"a directory", dir->path(), "Is a directory"},
  };
  for (const Unreadable& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<std::vector<HostPort>> got = ReadResolvConf(c.path);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(RefusalOf(got.status()), Refusal::kUnavailable) << got.status();
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.path));
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.reason));
  }
}

}  // namespace
}  // namespace sandfence
