// float16 and bfloat16 values are held as their bits in a uint. Conversions
// round to nearest even exactly as the CPU backend (dtype.c), in integer
// arithmetic, so that denormals survive devices that flush them.

// The float32 value of float16 bits h (exact).
precise float tvk_f16_to_f32(uint h) {
  uint e = (h >> 10) & 31u, m = h & 1023u, s = (h >> 15) << 31;
  if (e == 0u) {
    float v = float(m) * 5.9604644775390625e-8;
    return s != 0u ? -v : v;
  }
  return uintBitsToFloat(s | (e == 31u ? 0x7f800000u : (e + 112u) << 23) | (m << 13));
}

// float32 bits b rounded to nearest even into a format of eb exponent and mb
// mantissa bits (float16: 5, 10; bfloat16: 8, 7), as its bits. Overflow gives
// inf; NaN keeps its sign and top payload bits (the quiet bit if none is left).
uint tvk_round_small(uint b, uint eb, uint mb) {
  uint sign = (b >> 31) << (eb + mb), a = b & 0x7fffffffu, inf = ((1u << eb) - 1u) << mb;
  if (a > 0x7f800000u) {
    uint p = (a & 0x7fffffu) >> (23u - mb);
    return sign | inf | (p != 0u ? p : 1u << (mb - 1u));
  }
  int bias = (1 << (eb - 1u)) - 1;
  int e = max(int(a >> 23), 1) - 127;                    // a = s * 2^(e - 23)
  uint s = a < 0x00800000u ? a : (a & 0x7fffffu) | 0x800000u;
  int et = max(e, 1 - bias);                             // the result's exponent
  int sh = et - e + 23 - int(mb);                        // bits to drop, > 0
  uint q = 0u;
  if (sh < 32) {
    uint rest = s & ((1u << sh) - 1u), tie = 1u << (sh - 1);
    q = s >> sh;
    if (rest > tie || (rest == tie && (q & 1u) != 0u)) q++;
  }
  return sign | min((uint(et + bias - 1) << mb) + q, inf);
}

// An integer as a float32 rounded to odd: exact when it fits in 24 bits, else
// truncated with the last bit set when bits were lost. Rounding that again to
// 16 bits (tvk_round_small) gives the integer rounded once, as dtype.c does.
precise float tvk_u32_odd(uint m) {
  int msb = findMSB(m);
  if (msb < 24) return float(m);
  int sh = msb - 23;
  uint q = m >> sh;
  if ((m & ((1u << sh) - 1u)) != 0u) q |= 1u;
  return ldexp(float(q), sh);
}
precise float tvk_i32_odd(int x) {
  float f = tvk_u32_odd(x < 0 ? 0u - uint(x) : uint(x));
  return x < 0 ? -f : f;
}
