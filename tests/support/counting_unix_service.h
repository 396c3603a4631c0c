// A Unix stream service outside every sandbox that counts what it accepted:
// the attack tests' proof that nothing reached it.
#ifndef SANDFENCE_TESTS_SUPPORT_COUNTING_UNIX_SERVICE_H_
#define SANDFENCE_TESTS_SUPPORT_COUNTING_UNIX_SERVICE_H_

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>

#include "common/unique_fd.h"
#include "gtest/gtest.h"

namespace sandfence::testing {

// A stream service outside every sandbox that answers each connection's
// byte and counts the connections it accepted.
class CountingService {
 public:
  explicit CountingService(const std::string& path) : path_(path) {
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    // "@name": an abstract name (no file, no permissions).
    const bool abstract = path[0] == '@';
    std::strncpy(a.sun_path + (abstract ? 1 : 0),
                 path.c_str() + (abstract ? 1 : 0), sizeof(a.sun_path) - 2);
    const socklen_t len =
        abstract ? static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) +
                                          path.size())
                 : sizeof(a);
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), len), 0)
        << path << ": " << std::strerror(errno);
    // Only sandfence's check stands between the agent and the service.
    if (!abstract) ::chmod(path.c_str(), 0666);
    EXPECT_EQ(::listen(fd_.get(), 16), 0);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_.get(), POLLIN, 0};
        if (::poll(&p, 1, 50) != 1) continue;
        UniqueFd c(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!c) continue;
        ++accepted_;
        char ch;
        pollfd q{c.get(), POLLIN, 0};
        if (::poll(&q, 1, 2000) == 1 && ::read(c.get(), &ch, 1) == 1) {
          (void)!::write(c.get(), &ch, 1);
        }
      }
    });
  }
  ~CountingService() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (path_[0] != '@') ::unlink(path_.c_str());
  }
  int accepted() const { return accepted_; }

 private:
  std::string path_;
  UniqueFd fd_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace sandfence::testing

#endif  // SANDFENCE_TESTS_SUPPORT_COUNTING_UNIX_SERVICE_H_
