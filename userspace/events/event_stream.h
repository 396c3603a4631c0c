// Where the event lines go: a file (rotated by size) or standard output,
// and any live watchers (the daemon's `watch --json`).
//
// Emit never waits for the disk: lines are queued (bounded) and a writer
// thread writes them, so the thread that reads the kernel's ring never
// stalls behind a slow consumer. The verdict was given before the event
// was built; what the stream could not deliver (a full queue, a failed
// write) is counted, and the next line written is a `loss` event that says
// how many were lost. Nothing is lost silently.
#ifndef SANDFENCE_EVENTS_EVENT_STREAM_H_
#define SANDFENCE_EVENTS_EVENT_STREAM_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "events/event.h"
#include "events/journal_entry.h"

namespace sandfence::events {

struct StreamOptions {
  // A file path, "-" for standard output, or "journald": native journal
  // entries with every field (events/journal_entry.h).
  std::string path;
  // journald's socket (tests point it elsewhere).
  std::string journal_socket = kJournalSocket;
  Format format = Format::kJsonLines;
  // Rotate a file once it would pass this many bytes (PATH -> PATH.1 ->
  // ... -> PATH.<keep>); 0: never.
  uint64_t max_bytes = 64ull << 20;
  int keep = 4;
  // Lines queued for the writer; past it, lines are counted as lost.
  size_t max_queued = 65536;
};

struct StreamCounts {
  uint64_t emitted = 0;  // lines handed to Emit
  uint64_t written = 0;  // lines written (loss lines included)
  uint64_t lost = 0;     // lines dropped: queue full or write failed
  uint64_t rotations = 0;
};

class EventStream {
 public:
  // Opens (appends to) the file, or takes standard output, and starts the
  // writer. A file is created 0640, never through a symbolic link.
  static absl::StatusOr<std::shared_ptr<EventStream>> Open(
      StreamOptions options);
  // Writes what is queued, then stops.
  ~EventStream();
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;

  Format format() const { return options_.format; }

  // Queues (the writer renders); thread-safe, never blocks on I/O.
  void Emit(const Event& event);
  // Waits until everything emitted before the call is written (or lost).
  void Flush();
  StreamCounts counts() const;

  // A watcher sees every event as it is written, with its line in
  // sandfence's own schema (whatever the file's format), without the
  // newline; on the writer thread, so it must not block.
  using Watcher =
      std::function<void(const Event& event, const std::string& line)>;
  uint64_t AddWatcher(Watcher watcher);
  void RemoveWatcher(uint64_t id);

 private:
  explicit EventStream(StreamOptions options) : options_(std::move(options)) {}
  absl::Status OpenFile();
  void Loop();
  // Writes one line (and rotates before it when due); false if it failed.
  bool WriteLine(const std::string& line);
  bool SendJournal(const Event& event, const std::string& line);
  bool journal() const { return options_.path == "journald"; }
  void Rotate();

  const StreamOptions options_;
  UniqueFd fd_;
  bool regular_file_ = false;
  uint64_t file_bytes_ = 0;

  mutable absl::Mutex mu_;
  std::deque<Event> queue_ ABSL_GUARDED_BY(mu_);
  StreamCounts counts_ ABSL_GUARDED_BY(mu_);
  uint64_t lost_reported_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;  // lines ever queued
  uint64_t done_ ABSL_GUARDED_BY(mu_) = 0;      // of those, written or lost
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::pair<uint64_t, Watcher>> watchers_ ABSL_GUARDED_BY(mu_);
  uint64_t next_watcher_ ABSL_GUARDED_BY(mu_) = 1;
  std::thread writer_;
};

}  // namespace sandfence::events

#endif  // SANDFENCE_EVENTS_EVENT_STREAM_H_
