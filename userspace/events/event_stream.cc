#include "events/event_stream.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "events/journal_entry.h"

namespace sandfence::events {
namespace {

int64_t NowUnixNs() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

absl::StatusOr<std::shared_ptr<EventStream>> EventStream::Open(
    StreamOptions options) {
  if (options.keep < 0) options.keep = 0;
  std::shared_ptr<EventStream> s(new EventStream(std::move(options)));
  if (s->journal()) {
    s->fd_ = UniqueFd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s->fd_) return ErrnoError(errno, "events: journald socket");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (s->options_.journal_socket.size() >= sizeof(addr.sun_path)) {
      return Malformed("events: the journal socket path is too long");
    }
    s->options_.journal_socket.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    if (::connect(s->fd_.get(), reinterpret_cast<sockaddr*>(&addr),
                  sizeof(addr)) != 0) {
      return ErrnoError(errno, absl::StrCat("events: journald at ",
                                            s->options_.journal_socket,
                                            " (is systemd-journald running?)"));
    }
  } else if (s->options_.path == "-") {
    s->fd_ = UniqueFd(::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3));
    if (!s->fd_) return ErrnoError(errno, "events: standard output");
  } else if (!s->options_.path.empty()) {
    absl::Status opened = s->OpenFile();
    if (!opened.ok()) return opened;
  }
  s->writer_ = std::thread([raw = s.get()] { raw->Loop(); });
  return s;
}

absl::Status EventStream::OpenFile() {
  // O_NOFOLLOW: the file may sit in a directory others can write to, and a
  // link planted there must not turn the stream into a write elsewhere.
  fd_ = UniqueFd(::open(options_.path.c_str(),
                        O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
                        0640));
  if (!fd_) {
    return ErrnoError(errno, absl::StrCat("events: open ", options_.path));
  }
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) {
    return ErrnoError(errno, absl::StrCat("events: stat ", options_.path));
  }
  regular_file_ = S_ISREG(st.st_mode);
  file_bytes_ = regular_file_ ? static_cast<uint64_t>(st.st_size) : 0;
  return absl::OkStatus();
}

EventStream::~EventStream() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (writer_.joinable()) writer_.join();
}

void EventStream::Emit(const Event& event) {
  {
    absl::MutexLock lock(&mu_);
    ++counts_.emitted;
    // Nowhere to go: nothing to render.
    if (options_.path.empty() && watchers_.empty()) return;
    if (stop_ || queue_.size() >= options_.max_queued) {
      ++counts_.lost;
      return;
    }
    queue_.push_back(event);
    ++enqueued_;
  }
}

void EventStream::Flush() {
  absl::MutexLock lock(&mu_);
  struct Until {
    EventStream* stream;
    uint64_t enqueued;
  } until{this, enqueued_};
  mu_.Await(absl::Condition(
      +[](Until* u) {
        u->stream->mu_.AssertHeld();
        return u->stream->done_ >= u->enqueued;
      },
      &until));
}

StreamCounts EventStream::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

uint64_t EventStream::AddWatcher(Watcher watcher) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_watcher_++;
  watchers_.emplace_back(id, std::move(watcher));
  return id;
}

void EventStream::RemoveWatcher(uint64_t id) {
  absl::MutexLock lock(&mu_);
  for (auto it = watchers_.begin(); it != watchers_.end(); ++it) {
    if (it->first == id) {
      watchers_.erase(it);
      return;
    }
  }
}

void EventStream::Rotate() {
  // PATH.<keep-1> -> PATH.<keep>, ..., PATH -> PATH.1: the names collectors
  // (logrotate's, imfile's, filelog's) expect of a rotated file.
  for (int i = options_.keep - 1; i >= 1; --i) {
    ::rename(absl::StrCat(options_.path, ".", i).c_str(),
             absl::StrCat(options_.path, ".", i + 1).c_str());
  }
  if (options_.keep > 0) {
    ::rename(options_.path.c_str(), absl::StrCat(options_.path, ".1").c_str());
  } else {
    ::unlink(options_.path.c_str());
  }
  fd_.reset();
  if (!OpenFile().ok()) fd_.reset();  // counted as lost line by line
  absl::MutexLock lock(&mu_);
  ++counts_.rotations;
}

bool EventStream::SendJournal(const Event& event, const std::string& line) {
  const std::string entry = EncodeJournalEntry(JournalFields(event, line));
  for (;;) {
    if (::send(fd_.get(), entry.data(), entry.size(), MSG_NOSIGNAL) >= 0) {
      return true;
    }
    if (errno != EINTR) return false;
  }
}

bool EventStream::WriteLine(const std::string& line) {
  if (regular_file_ && options_.max_bytes > 0 && file_bytes_ > 0 &&
      file_bytes_ + line.size() + 1 > options_.max_bytes) {
    Rotate();
  }
  if (!fd_) {
    // The file could not be reopened after a rotation: try again.
    if (options_.path.empty() || options_.path == "-" || !OpenFile().ok()) {
      return false;
    }
  }
  // One write per line: on a pipe a line of up to PIPE_BUF bytes cannot be
  // torn by another writer of the same pipe (the command's own output).
  const std::string with_newline = absl::StrCat(line, "\n");
  if (!WriteAll(fd_.get(), with_newline)) return false;
  file_bytes_ += with_newline.size();
  return true;
}

void EventStream::Loop() {
  for (;;) {
    std::deque<Event> batch;
    std::vector<Watcher> watchers;
    uint64_t lost_total = 0;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](EventStream* s) {
            s->mu_.AssertHeld();
            return s->stop_ || !s->queue_.empty() ||
                   s->counts_.lost > s->lost_reported_;
          },
          this));
      if (stop_ && queue_.empty() && counts_.lost == lost_reported_) return;
      batch.swap(queue_);
      for (const auto& [id, w] : watchers_) watchers.push_back(w);
      if (counts_.lost > lost_reported_) lost_total = counts_.lost;
    }
    if (lost_total > 0) {
      Event loss;
      loss.unix_ns = NowUnixNs();
      loss.kind = Kind::kLoss;
      loss.verdict = "lost";
      loss.reason = "event lines the stream could not deliver";
      loss.counts = {{"event_lines_lost", lost_total}};
      const std::string json = RenderJson(loss);
      const bool ok =
          options_.path.empty() ||
          (journal() ? SendJournal(loss, json)
                     : WriteLine(Render(loss, options_.format)));
      if (!watchers.empty()) {
        const std::string& line = json;
        for (const Watcher& w : watchers) w(loss, line);
      }
      absl::MutexLock lock(&mu_);
      if (ok) {
        ++counts_.written;
        lost_reported_ = lost_total;
      } else if (batch.empty()) {
        // Nothing else to do until more arrives: don't spin on a dead file.
        lost_reported_ = lost_total;
      }
    }
    for (const Event& event : batch) {
      const bool has_output = !options_.path.empty();
      std::string line;
      if (has_output || !watchers.empty()) line = RenderJson(event);
      const bool ok =
          !has_output ||
          (options_.format == Format::kJsonLines
               ? (journal() ? SendJournal(event, line) : WriteLine(line))
               : (journal()
                      ? SendJournal(event, Render(event, options_.format))
                      : WriteLine(Render(event, options_.format))));
      for (const Watcher& w : watchers) w(event, line);
      absl::MutexLock lock(&mu_);
      if (ok && has_output) ++counts_.written;
      if (!ok) ++counts_.lost;
      ++done_;
    }
  }
}

}  // namespace sandfence::events
