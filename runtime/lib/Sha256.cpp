//===- Sha256.cpp - SHA-256, portable and on x86's SHA extensions ---------===//
//
// See Sha256.h. Whole 64-byte blocks are compressed straight from the
// caller's bytes; only the padded tail is copied.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Sha256.h"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KILN_SHA_NI 1
#endif

namespace kiln::rt {
namespace {

constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

constexpr uint32_t kInitial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

using BlockFn = void (*)(uint32_t state[8], const uint8_t *blocks, size_t count);

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void compressPortable(uint32_t state[8], const uint8_t *blocks, size_t count) {
  for (; count; --count, blocks += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(blocks[4 * i]) << 24 | uint32_t(blocks[4 * i + 1]) << 16 |
             uint32_t(blocks[4 * i + 2]) << 8 | uint32_t(blocks[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                    kRound[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
  }
}

#ifdef KILN_SHA_NI
// The SHA extensions keep the state as two vectors, (A, B, E, F) and
// (C, D, G, H), and do two rounds per sha256rnds2; sha256msg1/msg2 extend
// the message schedule four words at a time.
__attribute__((target("sha,sse4.1,ssse3"))) void
compressShaNi(uint32_t state[8], const uint8_t *blocks, size_t count) {
  const __m128i byteSwap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i *>(state));
  __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i *>(state + 4));
  __m128i badc = _mm_shuffle_epi32(dcba, 0xB1);
  __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
  __m128i abef = _mm_alignr_epi8(badc, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, badc, 0xF0);
  for (; count; --count, blocks += 64) {
    __m128i abefStart = abef, cdghStart = cdgh;
    __m128i w[4];
    for (int g = 0; g < 16; ++g) {
      if (g < 4)
        w[g] = _mm_shuffle_epi8(
            _mm_loadu_si128(reinterpret_cast<const __m128i *>(blocks + 16 * g)), byteSwap);
      __m128i msg = _mm_add_epi32(
          w[g % 4], _mm_loadu_si128(reinterpret_cast<const __m128i *>(kRound + 4 * g)));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, msg);
      // Words of group g + 1 from groups g - 3 .. g.
      if (g >= 3 && g < 15) {
        __m128i &next = w[(g + 1) % 4];
        next = _mm_add_epi32(next, _mm_alignr_epi8(w[g % 4], w[(g + 3) % 4], 4));
        next = _mm_sha256msg2_epu32(next, w[g % 4]);
      }
      abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(msg, 0x0E));
      if (g >= 1 && g < 13)
        w[(g + 3) % 4] = _mm_sha256msg1_epu32(w[(g + 3) % 4], w[g % 4]);
    }
    abef = _mm_add_epi32(abef, abefStart);
    cdgh = _mm_add_epi32(cdgh, cdghStart);
  }
  __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i *>(state), _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i *>(state + 4), _mm_alignr_epi8(dchg, feba, 8));
}
#endif

bool cpuHasShaNi() {
#ifdef KILN_SHA_NI
  static const bool has = __builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1") &&
                          __builtin_cpu_supports("ssse3");
  return has;
#else
  return false;
#endif
}

Sha256Digest hashWith(BlockFn compress, const uint8_t *data, size_t size) {
  uint32_t state[8];
  std::memcpy(state, kInitial, sizeof state);
  size_t whole = size / 64;
  if (whole)
    compress(state, data, whole);
  // The tail, a 1 bit, zeros, and the length in bits (big-endian).
  uint8_t tail[128] = {};
  size_t rest = size - whole * 64;
  if (rest)
    std::memcpy(tail, data + whole * 64, rest);
  tail[rest] = 0x80;
  size_t tailBlocks = rest + 9 <= 64 ? 1 : 2;
  uint64_t bits = uint64_t(size) * 8;
  for (int i = 0; i < 8; ++i)
    tail[tailBlocks * 64 - 1 - i] = uint8_t(bits >> (8 * i));
  compress(state, tail, tailBlocks);
  Sha256Digest digest;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j)
      digest[4 * i + j] = uint8_t(state[i] >> (24 - 8 * j));
  return digest;
}
} // namespace

bool sha256UsesCpuInstructions() { return cpuHasShaNi(); }

Sha256Digest sha256Portable(const uint8_t *data, size_t size) {
  return hashWith(compressPortable, data, size);
}

Sha256Digest sha256(const uint8_t *data, size_t size) {
#ifdef KILN_SHA_NI
  if (cpuHasShaNi())
    return hashWith(compressShaNi, data, size);
#endif
  return hashWith(compressPortable, data, size);
}

std::string toHex(const Sha256Digest &digest) {
  static const char *digits = "0123456789abcdef";
  std::string text;
  for (uint8_t byte : digest) {
    text += digits[byte >> 4];
    text += digits[byte & 15];
  }
  return text;
}

} // namespace kiln::rt
