// Files for tests: a temporary directory that cleans up after itself, the
// source and build trees (ctest sets SANDFENCE_SOURCE_DIR and
// SANDFENCE_BINARY_DIR; a test binary run by hand falls back to the trees it
// was configured from), reading files, and golden files.
#ifndef SANDFENCE_TESTS_SUPPORT_TEST_FILES_H_
#define SANDFENCE_TESTS_SUPPORT_TEST_FILES_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sandfence {

// A fresh directory under $TMPDIR (else /tmp), removed with everything in it
// when the object goes away.
class ScopedTempDir {
 public:
  static absl::StatusOr<ScopedTempDir> Create();

  ScopedTempDir(ScopedTempDir&& other) noexcept;
  ScopedTempDir& operator=(ScopedTempDir&& other) noexcept;
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  ~ScopedTempDir();

  const std::string& path() const { return path_; }

  // path()/relative, without touching the file system.
  std::string Path(absl::string_view relative) const;

  // Writes `contents` to path()/relative (creating parent directories) and
  // returns the file's full path.
  absl::StatusOr<std::string> WriteFile(absl::string_view relative,
                                        absl::string_view contents) const;

 private:
  explicit ScopedTempDir(std::string path) : path_(std::move(path)) {}
  void Remove();

  std::string path_;  // empty once moved from
};

// The source tree's root, and a path under it.
std::string SourceDir();
std::string SourcePath(absl::string_view relative);

// The build tree's root, and a path under it.
std::string BinaryDir();
std::string BinaryPath(absl::string_view relative);

// The whole file at `path`, as it is; "" when it cannot be read.
std::string FileContents(const std::string& path);

// Whether anything is at `path` (lstat: a dangling link counts).
bool PathExists(const std::string& path);

// Expects `actual` to equal the golden file at SourcePath(golden). With
// SANDFENCE_UPDATE_GOLDEN=1 (only "1") it rewrites the file instead, and
// fails: a golden is blessed by reading its diff, not by a green run.
void ExpectGolden(absl::string_view golden, const std::string& actual);

}  // namespace sandfence

#endif  // SANDFENCE_TESTS_SUPPORT_TEST_FILES_H_
