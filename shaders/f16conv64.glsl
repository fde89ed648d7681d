// 64-bit integers as float32 rounded to odd (see tvk_u32_odd).
precise float tvk_u64_odd(uint64_t m) {
  uvec2 w = unpackUint2x32(m);
  if (w.y == 0u) return tvk_u32_odd(w.x);
  int sh = findMSB(w.y) + 32 - 23;
  uint64_t q = m >> sh;
  if ((m & ((uint64_t(1) << sh) - uint64_t(1))) != uint64_t(0)) q |= uint64_t(1);
  return ldexp(float(uint(q)), sh);
}
precise float tvk_i64_odd(int64_t x) {
  float f = tvk_u64_odd(x < int64_t(0) ? uint64_t(0) - uint64_t(x) : uint64_t(x));
  return x < int64_t(0) ? -f : f;
}
