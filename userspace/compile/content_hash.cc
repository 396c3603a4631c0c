#include "compile/content_hash.h"

#include "common/sha256.h"
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
  // "" from libcrypto without sha256: no identity rather than a wrong one.
  return Sha256Hex(bytes);
}

}  // namespace sandfence
