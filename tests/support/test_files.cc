#include "support/test_files.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "gtest/gtest.h"

namespace sandfence {
namespace {

std::string EnvOr(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string Join(const std::string& dir, absl::string_view relative) {
  return (std::filesystem::path(dir) / std::string(relative)).string();
}

}  // namespace

absl::StatusOr<ScopedTempDir> ScopedTempDir::Create() {
  std::string pattern = Join(EnvOr("TMPDIR", "/tmp"), "sandfence-test-XXXXXX");
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    return ErrnoError(errno, absl::StrCat("mkdtemp ", pattern));
  }
  return ScopedTempDir(std::string(buf.data()));
}

ScopedTempDir::ScopedTempDir(ScopedTempDir&& other) noexcept
    : path_(std::exchange(other.path_, std::string())) {}

ScopedTempDir& ScopedTempDir::operator=(ScopedTempDir&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::exchange(other.path_, std::string());
  }
  return *this;
}

ScopedTempDir::~ScopedTempDir() { Remove(); }

void ScopedTempDir::Remove() {
  if (path_.empty()) return;
  std::error_code ignored;  // best effort: a leftover in /tmp is harmless
  std::filesystem::remove_all(path_, ignored);
  path_.clear();
}

std::string ScopedTempDir::Path(absl::string_view relative) const {
  return Join(path_, relative);
}

absl::StatusOr<std::string> ScopedTempDir::WriteFile(
    absl::string_view relative, absl::string_view contents) const {
  const std::string path = Path(relative);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(),
                                      ec);
  if (ec) {
    return ErrnoError(ec.value(),
                      absl::StrCat("create the directory of ", path));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return path;
}

std::string SourceDir() {
  return EnvOr("SANDFENCE_SOURCE_DIR", SANDFENCE_DEFAULT_SOURCE_DIR);
}

std::string SourcePath(absl::string_view relative) {
  return Join(SourceDir(), relative);
}

std::string BinaryDir() {
  return EnvOr("SANDFENCE_BINARY_DIR", SANDFENCE_DEFAULT_BINARY_DIR);
}

std::string BinaryPath(absl::string_view relative) {
  return Join(BinaryDir(), relative);
}

std::string FileContents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool PathExists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void ExpectGolden(absl::string_view golden, const std::string& actual) {
  const std::string path = SourcePath(golden);
  const char* update = std::getenv("SANDFENCE_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    ADD_FAILURE() << "rewrote " << path << ": review the diff, then run "
                  << "again without SANDFENCE_UPDATE_GOLDEN";
    return;
  }
  EXPECT_EQ(actual, FileContents(path))
      << "output differs from " << path
      << " (SANDFENCE_UPDATE_GOLDEN=1 rewrites it); the output was:\n"
      << actual;
}

}  // namespace sandfence
