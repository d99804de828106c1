#ifndef DARKROOM_CCRYPTO_SHIM_H
#define DARKROOM_CCRYPTO_SHIM_H
// OpenSSL's libcrypto, for SHA-256 only: its SHA-256 uses the CPU's SHA
// instructions (SHA-NI on x86, the SHA2 extension on ARMv8) when present,
// which Swift code cannot reach. SHA256_Init/Update/Final are deprecated in
// OpenSSL 3 in favour of EVP, but they are still there, and they skip the
// EVP method lookup, which costs about as much as hashing a thumbnail;
// OPENSSL_SUPPRESS_DEPRECATED leaves the deprecation attributes off them.
// A SHA256_CTX is plain data, so Swift keeps one by value.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <stddef.h>
#include <openssl/sha.h>

static inline int darkroom_sha256_init(SHA256_CTX *context) {
    return SHA256_Init(context);
}

// `bytes` may be NULL when `length` is 0.
static inline int darkroom_sha256_update(SHA256_CTX *context, const void *bytes, size_t length) {
    if (length == 0) return 1;
    return SHA256_Update(context, bytes, length);
}

// Writes the 32-byte digest to `digest`; the context must be initialized
// again before it is used for another message.
static inline int darkroom_sha256_final(SHA256_CTX *context, unsigned char *digest) {
    return SHA256_Final(digest, context);
}

#endif
