/* sha256: SHA-256 (FIPS 180-4), for cache keys. */
#ifndef GPT2GEN_SHA256_H
#define GPT2GEN_SHA256_H
#include <stddef.h>
#include <stdint.h>

typedef struct { uint32_t h[8]; uint64_t len; uint8_t buf[64]; size_t nbuf; } Sha256;
void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
void sha256_hex(Sha256 *s, char hex[65]);   /* hex must hold 65 bytes */
#endif
