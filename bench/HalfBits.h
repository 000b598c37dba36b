//===- HalfBits.h - f16 bits for the bench tools ----------------*- C++ -*-===//
//
// The GPU replay tools write and read f16 buffers themselves (no compiler,
// no runtime conversion to borrow): round to nearest even, values below
// f16's normals flushed to zero (their inputs are normal numbers).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_BENCH_HALFBITS_H
#define KILN_BENCH_HALFBITS_H

#include <cmath>
#include <cstdint>
#include <cstring>

inline uint16_t toHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exponent = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = x & 0x7fffff;
  if (exponent <= 0)
    return uint16_t(sign); // below f16's normals: zero
  if (exponent >= 31)
    return uint16_t(sign | 0x7c00);
  uint32_t h = (uint32_t(exponent) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
    ++h; // a carry into the exponent is the right rounding too
  return uint16_t(sign | h);
}

inline float fromHalf(uint16_t h) {
  float magnitude = std::ldexp(float(h & 0x3ff), -24); // subnormal
  if (int exponent = (h >> 10) & 0x1f; exponent == 31)
    magnitude = (h & 0x3ff) ? NAN : INFINITY;
  else if (exponent > 0)
    magnitude = std::ldexp(float(1024 + (h & 0x3ff)), exponent - 25);
  return h & 0x8000 ? -magnitude : magnitude;
}

#endif // KILN_BENCH_HALFBITS_H
