#include "compile/content_hash.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace sandfence {

std::string PolicyContentHash(const v1::PolicySet& policy) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    // Map and unknown-field order would otherwise be unspecified.
    out.SetSerializationDeterministic(true);
    policy.SerializeToCodedStream(&out);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(),
                 nullptr) != 1) {
    return "";  // libcrypto without sha256: no identity rather than a wrong one
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), length));
}

}  // namespace sandfence
