#include "common/sha256.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"

namespace sandfence {

std::string Sha256Hex(absl::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(),
                 nullptr) != 1) {
    return "";
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), length));
}

}  // namespace sandfence
