#include "records/folding.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sandfence {

FoldKey FoldKey::Of(const NetEvent& e, uint32_t phase_index) {
  FoldKey k;
  k.phase_index = phase_index;
  k.uid = e.uid;
  k.port = e.port;
  k.verdict = static_cast<uint8_t>(e.verdict);
  k.reason = static_cast<uint8_t>(e.reason);
  k.hook = static_cast<uint8_t>(e.hook);
  k.protocol = e.protocol;
  k.sock_type = e.sock_type;
  k.family = static_cast<uint8_t>(e.addr.family());
  std::memcpy(k.addr.data(), e.addr.bytes(), e.addr.is_v4() ? 4 : 16);
  std::memcpy(k.comm.data(), e.comm.data(),
              std::min(e.comm.size(), k.comm.size()));
  if (e.is_unix()) k.unix_name = e.unix_name->ToString();
  return k;
}

AttemptFolder::Result AttemptFolder::Add(const NetEvent& e,
                                         uint32_t phase_index,
                                         int64_t unix_ns) {
  ++total_;
  const FoldKey key = FoldKey::Of(e, phase_index);
  auto fold = [&](uint32_t id) {
    FoldedEntry& f = entries_[id];
    ++f.count;
    f.first_unix_ns = std::min(f.first_unix_ns, unix_ns);
    f.last_unix_ns = std::max(f.last_unix_ns, unix_ns);
    f.last_pid = e.pid;
    f.last_tgid = e.tgid;
    if (!f.dirty) {
      f.dirty = true;
      dirty_.push_back(id);
    }
    return Result{id, false};
  };
  auto open = [&](bool overflow) {
    const uint32_t id = static_cast<uint32_t>(entries_.size());
    FoldedEntry& f = entries_.emplace_back();
    f.first = e;
    f.phase_index = phase_index;
    f.count = 1;
    f.first_unix_ns = f.last_unix_ns = unix_ns;
    f.last_pid = e.pid;
    f.last_tgid = e.tgid;
    f.overflow = overflow;
    return Result{id, true};
  };

  if (auto it = index_.find(key); it != index_.end()) return fold(it->second);
  if (index_.size() < max_entries_) {
    Result r = open(false);
    index_.emplace(key, r.id);
    return r;
  }
  ++overflowed_;
  const uint64_t okey = (static_cast<uint64_t>(phase_index) << 8) |
                        static_cast<uint8_t>(e.verdict);
  if (auto it = overflow_index_.find(okey); it != overflow_index_.end()) {
    return fold(it->second);
  }
  Result r = open(true);
  overflow_index_.emplace(okey, r.id);
  return r;
}

std::vector<uint32_t> AttemptFolder::TakeDirty() {
  std::vector<uint32_t> out;
  out.swap(dirty_);
  std::sort(out.begin(), out.end());
  for (uint32_t id : out) entries_[id].dirty = false;
  return out;
}


DnsQueryFolder::Result DnsQueryFolder::Add(const DnsQueryInfo& q,
                                           uint32_t phase_index,
                                           int64_t unix_ns) {
  ++total_;
  auto fold = [&](uint32_t id) {
    DnsFoldedEntry& f = entries_[id];
    ++f.count;
    f.first_unix_ns = std::min(f.first_unix_ns, unix_ns);
    if (unix_ns >= f.last_unix_ns) {
      f.last_unix_ns = unix_ns;
      f.rcode = q.rcode;
    }
    return id;
  };
  auto open = [&](Key key, bool overflow) {
    const uint32_t id = static_cast<uint32_t>(entries_.size());
    DnsFoldedEntry& f = entries_.emplace_back();
    f.phase_index = phase_index;
    f.name = std::move(key.name);
    f.type = key.type;
    f.verdict = std::move(key.verdict);
    f.count = 1;
    f.first_unix_ns = f.last_unix_ns = unix_ns;
    f.rcode = q.rcode;
    f.overflow = overflow;
    if (!overflow) {
      f.matched = q.matched;
      f.detail = q.detail;
    }
    return id;
  };

  Key key{phase_index, q.type, q.name, q.verdict};
  Result r;
  if (auto it = index_.find(key); it != index_.end()) {
    r.id = fold(it->second);
  } else if (index_.size() < max_entries_) {
    r.id = open(key, false);
    r.added = true;
    index_.emplace(std::move(key), r.id);
  } else {
    ++overflowed_;
    Key okey{phase_index, 0, "", q.verdict};
    if (auto o = overflow_index_.find(okey); o != overflow_index_.end()) {
      r.id = fold(o->second);
    } else if (overflow_index_.size() >= kMaxOverflowEntries) {
      // Verdicts are text from the caller: however many it invents, the
      // overflow entries stay bounded (the count stays exact).
      r.id = fold(last_overflow_);
    } else {
      r.id = open(okey, true);
      r.added = true;
      overflow_index_.emplace(std::move(okey), r.id);
      last_overflow_ = r.id;
    }
  }

  // What every query adds, new entry or not: the reply, the transport and
  // the answer's addresses (an overflow entry keeps no addresses).
  DnsFoldedEntry& f = entries_[r.id];
  if (!q.replied) ++f.unreplied;
  if (!q.transport.empty() && f.transport.size() < kMaxTransportBytes) {
    bool seen = false;
    for (absl::string_view t : absl::StrSplit(f.transport, ',')) {
      if (t == q.transport) seen = true;
    }
    if (!seen) {
      f.transport = f.transport.empty()
                        ? q.transport
                        : absl::StrCat(f.transport, ",", q.transport);
    }
  }
  if (!f.overflow) {
    for (const IpAddress& a : q.addresses) {
      if (std::find(f.addresses.begin(), f.addresses.end(), a) !=
          f.addresses.end()) {
        continue;
      }
      if (f.addresses.size() < kDnsAddressesKept) {
        f.addresses.push_back(a);
      } else {
        ++f.addresses_more;
      }
    }
  }
  if (!r.added && !f.dirty) {
    f.dirty = true;
    dirty_.push_back(r.id);
  }
  return r;
}

std::vector<uint32_t> DnsQueryFolder::TakeDirty() {
  std::vector<uint32_t> out;
  out.swap(dirty_);
  std::sort(out.begin(), out.end());
  for (uint32_t id : out) entries_[id].dirty = false;
  return out;
}

}  // namespace sandfence
