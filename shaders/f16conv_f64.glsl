// A double as a float32 rounded to odd (see tvk_u32_odd): the conversion,
// stepped toward zero when it rounded away, with the last bit set when inexact.
// NaN keeps its sign and top payload bits.
precise float tvk_f64_odd(double d) {
  uvec2 w = unpackDouble2x32(d);
  uint hi = w.y & 0x7fffffffu;
  if (hi > 0x7ff00000u || (hi == 0x7ff00000u && w.x != 0u))
    return uintBitsToFloat((w.y & 0x80000000u) | 0x7f800000u | ((w.y & 0xfffffu) << 3) | 1u);
  float f = float(d);
  double back = double(f);
  if (back == d) return f;
  uint b = floatBitsToUint(f);
  if (abs(back) > abs(d)) b -= 1u;
  return uintBitsToFloat(b | 1u);
}
