#include "daemon/data/mds/mds_hash.h"

#include <openssl/evp.h>
#include <xxhash.h>

#include <cstdio>

namespace ember::daemon {
namespace {

// Python's name -> OpenSSL's.
struct Digest {
  const char* name;
  const char* openssl;
};
constexpr Digest kDigests[] = {
    {"blake2b", "BLAKE2B-512"}, {"blake2s", "BLAKE2S-256"}, {"md5", "MD5"},
    {"sha1", "SHA1"},           {"sha224", "SHA224"},       {"sha256", "SHA256"},
    {"sha384", "SHA384"},       {"sha3_224", "SHA3-224"},   {"sha3_256", "SHA3-256"},
    {"sha3_384", "SHA3-384"},   {"sha3_512", "SHA3-512"},   {"sha512", "SHA512"},
};
constexpr const char* kXxHashes[] = {"xxh128", "xxh32", "xxh3_128", "xxh3_64", "xxh64"};

const char* OpenSslName(const std::string& algorithm) {
  for (const Digest& digest : kDigests)
    if (algorithm == digest.name) return digest.openssl;
  return nullptr;
}

bool IsXxHash(const std::string& algorithm) {
  for (const char* name : kXxHashes)
    if (algorithm == name) return true;
  return false;
}

std::string Hex(const unsigned char* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

std::string XxHex(const std::string& algorithm, const char* data, size_t size) {
  if (algorithm == "xxh32") {
    XXH32_canonical_t canonical;
    XXH32_canonicalFromHash(&canonical, XXH32(data, size, 0));
    return Hex(canonical.digest, sizeof(canonical.digest));
  }
  if (algorithm == "xxh64") {
    XXH64_canonical_t canonical;
    XXH64_canonicalFromHash(&canonical, XXH64(data, size, 0));
    return Hex(canonical.digest, sizeof(canonical.digest));
  }
  if (algorithm == "xxh3_64") {
    XXH64_canonical_t canonical;
    XXH64_canonicalFromHash(&canonical, XXH3_64bits(data, size));
    return Hex(canonical.digest, sizeof(canonical.digest));
  }
  XXH128_canonical_t canonical;  // xxh3_128, and xxh128 (its other name)
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(data, size));
  return Hex(canonical.digest, sizeof(canonical.digest));
}

}  // namespace

bool IsMdsHash(const std::string& algorithm) {
  return OpenSslName(algorithm) != nullptr || IsXxHash(algorithm);
}

std::string MdsHashNames() {
  std::string names;
  for (const Digest& digest : kDigests)
    names += std::string(names.empty() ? "" : ", ") + digest.name;
  for (const char* name : kXxHashes) names += std::string(", ") + name;
  return names;
}

Result<std::string> MdsHexDigest(const std::string& algorithm, const char* data, size_t size) {
  if (IsXxHash(algorithm)) return XxHex(algorithm, data, size);
  const char* openssl = OpenSslName(algorithm);
  if (openssl == nullptr) {
    return InvalidArgument("hash '" + algorithm +
                           "' is not one Ember checks (known: " + MdsHashNames() + ")");
  }
  const EVP_MD* md = EVP_get_digestbyname(openssl);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (md == nullptr || EVP_Digest(data, size, digest, &length, md, nullptr) != 1)
    return Internal("OpenSSL's libcrypto cannot compute " + algorithm + " (" + openssl + ")");
  return Hex(digest, length);
}

}  // namespace ember::daemon
