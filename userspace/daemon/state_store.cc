#include "daemon/state_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "host/host_state.h"

namespace sandfence {

absl::Status WriteFileAtomic(const std::string& path,
                             const std::string& bytes) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  UniqueFd fd(
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) return ErrnoError(errno, absl::StrCat("create ", tmp));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, absl::StrCat("write ", tmp));
    }
    done += static_cast<size_t>(n);
  }
  if (::fdatasync(fd.get()) != 0) {
    return ErrnoError(errno, absl::StrCat("sync ", tmp));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("rename ", tmp));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError(errno, absl::StrCat("open ", path));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string DeterministicBytes(const google::protobuf::Message& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return out;
}

namespace {

absl::StatusOr<UniqueFd> LockDir(const std::string& dir, bool wait) {
  const std::string path = absl::StrCat(dir, "/.lock");
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return ErrnoError(errno, absl::StrCat("open ", path));
  if (::flock(fd.get(), LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
    return Unavailable(absl::StrCat("another sandfence daemon is running on ",
                                    dir, " (", path, " is locked)"));
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<StateStore>> StateStore::Open(
    const std::string& dir) {
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  std::unique_ptr<StateStore> store(new StateStore(dir));
  absl::StatusOr<UniqueFd> lock = LockDir(dir, /*wait=*/false);
  if (!lock.ok()) return lock.status();
  store->lock_ = *std::move(lock);
  return store;
}

absl::StatusOr<std::unique_ptr<StateStore>> StateStore::OpenForCleanup(
    const std::string& dir) {
  std::unique_ptr<StateStore> store(new StateStore(dir));
  if (::access(dir.c_str(), F_OK) != 0) return store;  // nothing to clean
  absl::StatusOr<UniqueFd> lock = LockDir(dir, /*wait=*/false);
  if (!lock.ok()) {
    return Unavailable(absl::StrCat("a sandfence daemon is running on ", dir,
                                    "; stop it first"));
  }
  store->lock_ = *std::move(lock);
  return store;
}

std::string StateStore::PathOf(const std::string& rollout_id) const {
  return absl::StrCat(dir_, "/", rollout_id, ".state");
}

absl::Status StateStore::Save(const v1::RolloutState& state) {
  return WriteFileAtomic(PathOf(state.request().rollout_id()),
                         state.SerializeAsString());
}

void StateStore::Remove(const std::string& rollout_id) {
  ::unlink(PathOf(rollout_id).c_str());
}

std::vector<StateStore::Loaded> StateStore::LoadAll() const {
  std::vector<std::string> files;
  if (DIR* d = ::opendir(dir_.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (absl::EndsWith(e->d_name, ".state")) {
        files.push_back(absl::StrCat(dir_, "/", e->d_name));
      }
    }
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  std::vector<Loaded> out;
  for (const std::string& f : files) {
    Loaded l{f, absl::InternalError("")};
    absl::StatusOr<std::string> bytes = ReadWholeFile(f);
    v1::RolloutState state;
    if (!bytes.ok()) {
      l.state = bytes.status();
    } else if (!state.ParseFromString(*bytes)) {
      l.state = absl::DataLossError(absl::StrCat(f, " does not parse"));
    } else {
      l.state = std::move(state);
    }
    out.push_back(std::move(l));
  }
  return out;
}

void StateStore::RemoveAll() {
  for (const Loaded& l : LoadAll()) ::unlink(l.path.c_str());
  if (DIR* d = ::opendir(dir_.c_str())) {
    std::vector<std::string> tmp;
    while (dirent* e = ::readdir(d)) {
      if (absl::EndsWith(e->d_name, ".tmp")) {
        tmp.push_back(absl::StrCat(dir_, "/", e->d_name));
      }
    }
    ::closedir(d);
    for (const std::string& t : tmp) ::unlink(t.c_str());
  }
}

}  // namespace sandfence
