#include "records/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "google/protobuf/io/coded_stream.h"

namespace sandfence {

absl::StatusOr<RecordJournal> RecordJournal::Create(const std::string& path,
                                                    bool overwrite) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_APPEND;
  flags |= overwrite ? O_TRUNC : O_EXCL;
  UniqueFd fd(::open(path.c_str(), flags, 0640));
  if (!fd) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(
          absl::StrCat("record file ", path,
                       " already exists (a record is never "
                       "appended to another one)"));
    }
    return ErrnoError(errno, absl::StrCat("create record file ", path));
  }
  return RecordJournal(path, std::move(fd));
}

void RecordJournal::Append(const v1::RecordJournalEntry& entry) {
  if (failed()) return;
  const size_t size = entry.ByteSizeLong();
  uint8_t prefix[10];
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(
      static_cast<uint32_t>(size), prefix);
  buffer_.append(reinterpret_cast<const char*>(prefix), end - prefix);
  const size_t at = buffer_.size();
  buffer_.resize(at + size);
  entry.SerializeWithCachedSizesToArray(
      reinterpret_cast<uint8_t*>(buffer_.data() + at));
}

absl::Status RecordJournal::Flush(bool sync) {
  if (failed()) return error_;
  size_t done = 0;
  while (done < buffer_.size()) {
    ssize_t n =
        ::write(fd_.get(), buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      error_ = ErrnoError(errno, absl::StrCat("write record file ", path_));
      break;
    }
    done += static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
  }
  buffer_.clear();
  if (failed()) return error_;
  if (sync && ::fdatasync(fd_.get()) != 0 && errno != EINVAL) {
    error_ = ErrnoError(errno, absl::StrCat("sync record file ", path_));
  }
  return error_;
}

absl::Status RecordJournal::Close() {
  absl::Status s = Flush(/*sync=*/true);
  if (fd_ && ::close(fd_.release()) != 0 && s.ok()) {
    error_ = ErrnoError(errno, absl::StrCat("close record file ", path_));
    s = error_;
  }
  return s;
}

namespace {

std::string Events(uint64_t n) {
  return absl::StrCat(n, n == 1 ? " event" : " events");
}

// Applies one journal entry to the record being rebuilt; false (with a
// warning) for an entry that contradicts what came before.
bool Apply(const v1::RecordJournalEntry& e, size_t offset,
           v1::RolloutRecord* r) {
  auto warn = [&](absl::string_view what) {
    AddWarning(r, v1::WARNING_BAD_ENTRY,
               absl::StrCat("entry at byte ", offset, ": ", what));
    return false;
  };
  switch (e.entry_case()) {
    case v1::RecordJournalEntry::kHeader:
      return warn("a second header, ignored");
    case v1::RecordJournalEntry::kPhase: {
      const uint32_t index = e.phase().index();
      if (index > static_cast<uint32_t>(r->timeline_size())) {
        return warn(absl::StrCat("phase ", index, " before phase ",
                                 r->timeline_size(), ", ignored"));
      }
      if (index == static_cast<uint32_t>(r->timeline_size())) {
        r->add_timeline();
      }
      r->mutable_timeline(static_cast<int>(index))->MergeFrom(e.phase().span());
      return true;
    }
    case v1::RecordJournalEntry::kAttempt:
      if (e.attempt().id() != static_cast<uint32_t>(r->net_attempt_size())) {
        return warn(absl::StrCat("attempt ", e.attempt().id(), " out of order ",
                                 "(expected ", r->net_attempt_size(),
                                 "), ignored"));
      }
      *r->add_net_attempt() = e.attempt().attempt();
      return true;
    case v1::RecordJournalEntry::kCounts: {
      bool ok = true;
      for (const v1::NetAttemptCount& c : e.counts().count()) {
        if (c.id() >= static_cast<uint32_t>(r->net_attempt_size())) {
          ok = warn(
              absl::StrCat("count for unknown attempt ", c.id(), ", ignored"));
          continue;
        }
        v1::NetAttempt* a = r->mutable_net_attempt(static_cast<int>(c.id()));
        a->set_count(c.count());
        *a->mutable_last_time() = c.last_time();
        a->set_last_pid(c.last_pid());
        a->set_last_tgid(c.last_tgid());
      }
      return ok;
    }
    case v1::RecordJournalEntry::kDnsQuery:
      if (e.dns_query().id() != static_cast<uint32_t>(r->dns_query_size())) {
        return warn(absl::StrCat("dns query ", e.dns_query().id(),
                                 " out of order (expected ",
                                 r->dns_query_size(), "), ignored"));
      }
      *r->add_dns_query() = e.dns_query().query();
      return true;
    case v1::RecordJournalEntry::kDnsCounts: {
      bool ok = true;
      for (const v1::DnsQueryCount& c : e.dns_counts().count()) {
        if (c.id() >= static_cast<uint32_t>(r->dns_query_size())) {
          ok = warn(absl::StrCat("count for unknown dns query ", c.id(),
                                 ", ignored"));
          continue;
        }
        v1::DnsQuery* q = r->mutable_dns_query(static_cast<int>(c.id()));
        q->set_count(c.count());
        *q->mutable_last_time() = c.last_time();
        q->set_rcode(c.rcode());
        q->set_transport(c.transport());
        *q->mutable_address() = c.address();
        q->set_addresses_more(c.addresses_more());
        q->set_unreplied(c.unreplied());
      }
      return ok;
    }
    case v1::RecordJournalEntry::kGuardEvent:
      *r->add_guard_event() = e.guard_event();
      return true;
    case v1::RecordJournalEntry::kLoss:
      *r->mutable_loss() = e.loss();
      return true;
    case v1::RecordJournalEntry::kEnforcement:
      r->mutable_enforcement()->MergeFrom(e.enforcement());
      return true;
    case v1::RecordJournalEntry::kWarning:
      *r->add_warning() = e.warning();
      return true;
    case v1::RecordJournalEntry::kTrailer:
      *r->mutable_end_time() = e.trailer().end_time();
      *r->mutable_loss() = e.trailer().loss();
      r->set_complete(true);
      return true;
    case v1::RecordJournalEntry::ENTRY_NOT_SET:
      return warn("an entry of a kind this build does not know, ignored");
  }
  return warn("unknown entry");
}

// Reads the varint length prefix at bytes[pos]; false if the bytes end
// inside it or it is longer than a varint32.
bool ReadLength(absl::string_view bytes, size_t pos, uint32_t* length,
                size_t* prefix_len) {
  uint64_t value = 0;
  for (size_t i = 0; i < 5; ++i) {
    if (pos + i >= bytes.size()) return false;
    const uint8_t b = static_cast<uint8_t>(bytes[pos + i]);
    value |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      if (value > UINT32_MAX) return false;
      *length = static_cast<uint32_t>(value);
      *prefix_len = i + 1;
      return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<v1::RolloutRecord> ReadRecord(absl::string_view bytes) {
  v1::RolloutRecord record;
  size_t pos = 0;
  bool header = false;
  bool after_trailer = false;
  while (pos < bytes.size()) {
    uint32_t length = 0;
    size_t prefix = 0;
    const bool whole_prefix = ReadLength(bytes, pos, &length, &prefix);
    if (!whole_prefix || length > bytes.size() - pos - prefix) {
      if (!header) break;  // said below: not a record
      AddWarning(&record, v1::WARNING_CUT, absl::StrCat(
          "record cut short: the file ends inside the entry that starts at "
          "byte ",
          pos, " (", bytes.size() - pos,
          " of its bytes are there); "
          "read up to byte ",
          pos));
      break;
    }
    if (length > kMaxJournalEntryBytes) {
      if (!header) break;
      AddWarning(&record, v1::WARNING_CUT,
                 absl::StrCat("entry at byte ", pos, " claims ", length,
                                      " bytes: corrupt; read up to "
                                      "byte ",
                                      pos));
      break;
    }
    v1::RecordJournalEntry entry;
    if (!entry.ParseFromArray(bytes.data() + pos + prefix,
                              static_cast<int>(length))) {
      if (!header) break;
      AddWarning(&record, v1::WARNING_CUT,
                 absl::StrCat("entry at byte ", pos,
                                      " does not parse: corrupt; read up to "
                                      "byte ",
                                      pos));
      break;
    }
    if (!header) {
      if (!entry.has_header() || entry.header().format() != kRecordFormat) {
        break;
      }
      record = entry.header().record();
      record.clear_warning();
      header = true;
    } else if (after_trailer) {
      AddWarning(&record, v1::WARNING_BAD_ENTRY,
                 absl::StrCat("entry at byte ", pos,
                              " comes after the trailer, ignored"));
    } else {
      Apply(entry, pos, &record);
      after_trailer = entry.has_trailer();
    }
    pos += prefix + length;
  }
  if (!header) {
    return Malformed(
        bytes.empty()
            ? absl::string_view("an empty file is not a sandfence record")
            : absl::string_view(
                  "not a sandfence rollout record (no whole record header at "
                  "the start)"));
  }
  if (!record.complete()) {
    AddWarning(
        &record, v1::WARNING_NOT_FINALIZED,
        "record not finalized: sandfence stopped before the rollout ended, "
        "or the rollout is still running; counts may lag by the flush "
        "interval and the loss counters are the last snapshot");
  }
  // The counts are exact where the record is complete: they must add up to
  // what the recorder says it received. Where it is not, the sum is the
  // best knowledge there is.
  uint64_t sum = 0;
  for (const v1::NetAttempt& a : record.net_attempt()) sum += a.count();
  uint64_t dns_sum = 0;
  for (const v1::DnsQuery& q : record.dns_query()) dns_sum += q.count();
  if (!record.complete()) {
    record.mutable_loss()->set_events_recorded(sum);
    record.mutable_loss()->set_dns_queries(dns_sum);
  } else {
    if (sum != record.loss().events_recorded()) {
      AddWarning(&record, v1::WARNING_IMBALANCE,
                 absl::StrCat("the entries count ", sum,
                              " attempts but the recorder received ",
                              record.loss().events_recorded()));
    }
    if (dns_sum != record.loss().dns_queries()) {
      AddWarning(&record, v1::WARNING_IMBALANCE,
                 absl::StrCat("the dns entries count ", dns_sum,
                              " queries but the recorder received ",
                              record.loss().dns_queries()));
    }
  }
  EvaluateLoss(&record);
  if (record.complete() && (sum != record.loss().events_recorded() ||
                            dns_sum != record.loss().dns_queries())) {
    record.set_lossy(true);
  }
  return record;
}

absl::StatusOr<v1::RolloutRecord> ReadRecordFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoError(errno, absl::StrCat("open ", path));
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  absl::StatusOr<v1::RolloutRecord> r = ReadRecord(bytes);
  if (!r.ok()) {
    // The daemon's <id>.record.pb: the journal merged into one message
    // when the rollout ended. Taken only when it is plainly one (a parse
    // alone accepts too much: protobuf's wire format is forgiving).
    v1::RolloutRecord whole;
    if (whole.ParseFromString(bytes) && !whole.rollout_id().empty() &&
        !whole.sandfence_version().empty() && whole.has_start_time() &&
        whole.phase_policy_size() > 0) {
      return whole;
    }
    return Malformed(absl::StrCat(path, ": ", r.status().message()));
  }
  return r;
}

uint64_t EventsToRecord(const v1::LossAccounting& loss) {
  return loss.kernel_allowed() + loss.kernel_denied() -
         loss.kernel_allowed_unreported() + loss.supervisor_decided();
}

uint64_t EventsAccountedFor(const v1::LossAccounting& loss) {
  return loss.events_recorded() + loss.kernel_events_lost() +
         loss.reader_dropped();
}

std::vector<std::string> WarningTexts(const v1::RolloutRecord& record) {
  std::vector<std::string> out;
  for (const v1::RecordWarning& w : record.warning()) out.push_back(w.text());
  return out;
}

void AddWarning(v1::RolloutRecord* record, v1::WarningKind kind,
                std::string text) {
  v1::RecordWarning* w = record->add_warning();
  w->set_kind(kind);
  w->set_text(std::move(text));
}

void EvaluateLoss(v1::RolloutRecord* record) {
  const v1::LossAccounting& loss = record->loss();
  bool lossy = !record->complete();
  if (loss.kernel_events_lost() > 0) {
    lossy = true;
    AddWarning(record, v1::WARNING_EVENTS_LOST,
               absl::StrCat(Events(loss.kernel_events_lost()),
                            " lost in the kernel (ring buffer full, or no "
                            "sandfence process reading it): those attempts "
                            "were judged and counted, but are not in the "
                            "entries"));
  }
  if (loss.reader_dropped() > 0) {
    lossy = true;
    AddWarning(record, v1::WARNING_READER_DROPPED,
               absl::StrCat(Events(loss.reader_dropped()),
                            " read but not recorded (the record file could "
                            "not be written)"));
  }
  if (loss.decode_errors() > 0) {
    lossy = true;
    AddWarning(record, v1::WARNING_DECODE_ERRORS,
               absl::StrCat(Events(loss.decode_errors()),
                            " from the kernel could not be decoded (possibly "
                            "this rollout's)"));
  }
  if (loss.overflowed() > 0) {
    lossy = true;
    AddWarning(record, v1::WARNING_OVERFLOW,
               absl::StrCat(loss.overflowed(),
                            loss.overflowed() == 1 ? " attempt" : " attempts",
                            " past the folding table's capacity counted "
                            "without their destinations (overflow entries)"));
  }
  if (loss.guard_events_lost() > 0) {
    lossy = true;
    AddWarning(record, v1::WARNING_GUARD_EVENTS_LOST,
               absl::StrCat(loss.guard_events_lost(), " process-guard ",
                            loss.guard_events_lost() == 1 ? "event" : "events",
                            " lost in the kernel (ring buffer full, or no "
                            "sandfence process reading it): the guard acted "
                            "on them, the record does not show them"));
  }
  if (loss.guard_decode_errors() > 0) {
    lossy = true;
    AddWarning(record, v1::WARNING_GUARD_DECODE_ERRORS,
               absl::StrCat(loss.guard_decode_errors(),
                            " process-guard records could not be decoded "
                            "(possibly this rollout's)"));
  }
  if (loss.dns_overflowed() > 0) {
    lossy = true;
    AddWarning(
        record, v1::WARNING_DNS_OVERFLOW,
        absl::StrCat(loss.dns_overflowed(),
                     loss.dns_overflowed() == 1 ? " DNS query" : " DNS queries",
                     " past the folding table's capacity counted "
                     "without their names (overflow entries)"));
  }
  if (loss.dns_dropped() > 0) {
    lossy = true;
    AddWarning(
        record, v1::WARNING_DNS_DROPPED,
        absl::StrCat(loss.dns_dropped(),
                     loss.dns_dropped() == 1 ? " DNS query" : " DNS queries",
                     " decided by the filter but not recorded (the "
                     "record file could not be written)"));
  }
  if (record->complete()) {
    if (!loss.kernel_counters_read()) {
      lossy = true;
      AddWarning(record, v1::WARNING_COUNTERS_UNREAD,
                 "the kernel's counters were not read: nothing shows the "
                 "record is whole");
    } else if (EventsToRecord(loss) != EventsAccountedFor(loss)) {
      lossy = true;
      AddWarning(
          record, v1::WARNING_IMBALANCE,
          absl::StrCat("the balance is off: the kernel",
                       loss.supervisor_decided() > 0
                           ? " and the socket-family supervisor"
                           : "",
                       " meant to report ", Events(EventsToRecord(loss)), ", ",
                       EventsAccountedFor(loss), " are accounted for (",
                       loss.events_recorded(), " recorded + ",
                       loss.kernel_events_lost(), " lost in the kernel + ",
                       loss.reader_dropped(), " dropped by the reader)"));
    }
  }
  record->set_lossy(lossy);
}

}  // namespace sandfence
