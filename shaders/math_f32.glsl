// float32 math with the CPU backend's results at the edges (alu.c). GLSL leaves
// these functions undefined on NaN, inf, zero or negative arguments, so each
// tests those first, on the bits (a compiler may assume that no value is NaN).
// The functions are precise (SPIR-V NoContraction): the range reductions below
// rely on every operation being rounded as written, never fused or reassociated.
bool tvk_isnan_f32(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }
bool tvk_isinf_f32(float x) { return (floatBitsToUint(x) & 0x7fffffffu) == 0x7f800000u; }
precise float tvk_inf_f32(bool neg) { return uintBitsToFloat(neg ? 0xff800000u : 0x7f800000u); }
precise float tvk_nan_f32() { return uintBitsToFloat(0x7fc00000u); }
bool tvk_signbit_f32(float x) { return (floatBitsToUint(x) >> 31) != 0u; }

// 2^x = 2^n 2^f with n = round(x) and f = x - n in [-1/2, 1/2], both exact:
// 2^f = 1 + f ln 2 + f^2 R(f), R the degree-4 polynomial through
// (2^f - 1 - f ln 2) / f^2 at the five Chebyshev nodes of [-1/2, 1/2]
// (computed with mpmath; it is within 3.2e-8 of that function, 8e-9 of 2^f),
// and 2^n is added to the exponent bits, exactly. About an ulp in all (9.3e-8
// relative at most), where Vulkan lets the device's exp2 be off by 3 + 2|x|
// ulps (lavapipe: 2.6e-7). Overflow gives inf; results below 2^-125 are made
// as (p 2^(n+100)) 2^-100, so that a device that keeps denormals rounds once.
precise float tvk_exp2_f32(float x) {
  if (tvk_isnan_f32(x)) return x;
  if (x >= 128.0) return tvk_inf_f32(false);
  if (x < -151.0) return 0.0;
  float n = floor(x + 0.5), f = x - n;
  float r = 1.5444884343859824e-4;
  r = r * f + 1.3381302547299695e-3;
  r = r * f + 9.6181032523046569e-3;
  r = r * f + 5.5503810137839864e-2;
  r = r * f + 0.24022650695911564;
  float p = 1.0 + (f * 0.693147181 + (f * f) * r);
  int e = int(n);
  if (e >= -125) return uintBitsToFloat(floatBitsToUint(p) + (uint(e) << 23));
  return uintBitsToFloat(floatBitsToUint(p) + (uint(e + 100) << 23)) * 7.888609052210118e-31;
}

// log2 x = e + log2(1 + f) for x = (1 + f) 2^e with 1 + f in [sqrt(1/2),
// sqrt(2)), taken apart on the bits (f = (1 + f) - 1 is exact), and
// log2(1 + f) = f H(f), H the degree-9 polynomial through log2(1 + f) / f at
// the ten Chebyshev nodes of [sqrt(1/2) - 1, sqrt(2) - 1] (mpmath; relative
// error below 4.7e-9). So the error is relative, about 1.5 ulps for every x
// and 1.2e-7 near 1, where the device's log2 is only bounded by an absolute
// 2^-21 (lavapipe: 13% relative at 1 - 2^-24). log2(0) = -inf, log2(x < 0) =
// NaN, log2(inf) = inf; a denormal x = b 2^-149 is float(b) 2^-149.
precise float tvk_log2_f32(float x) {
  uint b = floatBitsToUint(x);
  if (tvk_isnan_f32(x)) return x;
  if ((b & 0x7fffffffu) == 0u) return tvk_inf_f32(true);
  if ((b >> 31) != 0u) return tvk_nan_f32();
  if (b == 0x7f800000u) return x;
  int e = -127;
  if (b < 0x00800000u) {
    b = floatBitsToUint(float(b));
    e -= 149;
  }
  e += int(b >> 23);
  uint m = b & 0x7fffffu;
  if (m >= 0x3504f4u) { // 1.41421366: from sqrt(2) on, halve
    m |= 0x3f000000u;
    e += 1;
  } else {
    m |= 0x3f800000u;
  }
  float f = uintBitsToFloat(m) - 1.0;
  float h = -0.10749789418083205;
  h = h * f + 0.18476033365181379;
  h = h * f - 0.19138837656672539;
  h = h * f + 0.2048576477862193;
  h = h * f - 0.23960812190957285;
  h = h * f + 0.28855256143746741;
  h = h * f - 0.3606965418075051;
  h = h * f + 0.4808985203240642;
  h = h * f - 0.72134735447890533;
  h = h * f + 1.4426950399991884;
  return float(e) + f * h;
}

// sin(r + q pi/2) for |r| <= pi/4: Taylor polynomials of sin and cos (the
// first terms left out are below half an ulp).
precise float tvk_sin_quadrant_f32(float r, int q) {
  float z = r * r;
  float s = r + r * z * (-0.16666666666666666 + z * (0.008333333333333333 +
            z * (-0.0001984126984126984 + z * 2.7557319223985893e-06)));
  float c = 1.0 - 0.5 * z + z * z * (0.041666666666666664 + z * (-0.001388888888888889 +
            z * (2.48015873015873e-05 + z * -2.755731922398589e-07)));
  q &= 3;
  return q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
}

// 2/pi to 256 bits, most significant first.
const uint tvk_two_over_pi[8] = uint[8](0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u,
                                         0xdb629599u, 0x3c439041u, 0xfe5163abu, 0xdebbc561u);

// The 32 bits of 2/pi that follow its first s bits (s < 0: zeros first).
uint tvk_two_over_pi_bits(int s) {
  if (s < 0) return tvk_two_over_pi[0] >> (-s);
  int w = s >> 5, b = s & 31;
  return b == 0 ? tvk_two_over_pi[w]
                : (tvk_two_over_pi[w] << b) | (tvk_two_over_pi[w + 1] >> (32 - b));
}

// sin x for x >= 6433 (Payne-Hanek): x = m 2^e with m an integer of 24 bits,
// and x 2/pi modulo 4 is m times the 96 bits of 2/pi from bit e - 2 on, taken
// modulo 2^96 and read as 2.94 fixed point: bits before contribute multiples
// of 4, bits after less than 2^-70. The nearest quadrant, then the rest times
// pi/2 through the polynomials.
precise float tvk_sin_big_f32(float x) {
  uint b = floatBitsToUint(x), m = (b & 0x7fffffu) | 0x800000u;
  int s = int(b >> 23) - 152;
  uint h0, l0, h1, l1, h2, l2;
  umulExtended(m, tvk_two_over_pi_bits(s + 64), h0, l0);
  umulExtended(m, tvk_two_over_pi_bits(s + 32), h1, l1);
  umulExtended(m, tvk_two_over_pi_bits(s), h2, l2);
  uint p1 = l1 + h0, p2 = l2 + h1 + (p1 < h0 ? 1u : 0u), p0 = l0;
  int q = int(p2 >> 30);
  bool up = (p2 & 0x20000000u) != 0u; // fraction >= 1/2: the next quadrant, minus the rest
  if (up) {                            // 2^94 - fraction, on three words
    q += 1;
    p0 = ~p0 + 1u;
    p1 = ~p1 + (p0 == 0u ? 1u : 0u);
    p2 = ~p2 + (p0 == 0u && p1 == 0u ? 1u : 0u);
  }
  float f = (float(p0) * 5.048709793414476e-29 + float(p1) * 2.168404344971009e-19) +
            float(p2 & 0x3fffffffu) * 9.313225746154785e-10;
  float r = f * 1.5707963267948966;
  return tvk_sin_quadrant_f32(up ? -r : r, q);
}

// sin to about an ulp (Vulkan only promises 2^-11 absolute): for |x| < 6433,
// x - k pi/2 with pi/2 in three parts, the first two of 12 bits so that k times
// them is exact for |k| < 4096; beyond, tvk_sin_big_f32. NaN and inf give NaN.
precise float tvk_sin_f32(float x) {
  if (tvk_isnan_f32(x) || tvk_isinf_f32(x)) return tvk_nan_f32();
  if (abs(x) > 6433.0) {
    float s = tvk_sin_big_f32(abs(x));
    return x < 0.0 ? -s : s;
  }
  float k = floor(x * 0.636619772 + 0.5);
  float r = ((x - k * 1.57080078125) - k * -4.453584551811218e-06) - k * -8.705515752716053e-10;
  return tvk_sin_quadrant_f32(r, int(k));
}

// sqrt: negative x gives NaN (sqrt(-0) = -0).
precise float tvk_sqrt_f32(float x) {
  return tvk_isnan_f32(x) ? x : x < 0.0 ? tvk_nan_f32() : sqrt(x);
}

// 1 / x: +-0 gives +-inf and +-inf gives +-0, which Vulkan's precision rules
// leave undefined.
precise float tvk_recip_f32(float x) {
  if (x == 0.0 || tvk_isinf_f32(x)) {
    uint s = floatBitsToUint(x) & 0x80000000u;
    return uintBitsToFloat(s | (x == 0.0 ? 0x7f800000u : 0u));
  }
  return 1.0 / x;
}

// a / b with IEEE's answers for b = 0 (a zero divisor is undefined in SPIR-V,
// and software devices return 0): +-inf by the signs, NaN for 0/0 and NaN/0.
precise float tvk_fdiv_f32(float a, float b) {
  if (b == 0.0) {
    if (a == 0.0 || isnan(a)) return uintBitsToFloat(0x7fc00000u);
    uint s = (floatBitsToUint(a) ^ floatBitsToUint(b)) & 0x80000000u;
    return uintBitsToFloat(s | 0x7f800000u);
  }
  return a / b;
}

// pow as C's pow, with IEEE 754's special cases (alu.c): a zero base keeps
// its sign under an odd integer exponent ((-0) ** -1 = -inf, (-0) ** 3 = -0)
// and gives +inf / +0 under other negative / positive ones; otherwise
// exp2(y * log2 |x|) with the sign of an odd integer power of a negative base.
precise float tvk_pow_f32(float x, float y) {
  if (y == 0.0 || x == 1.0) return 1.0;
  if (tvk_isnan_f32(x) || tvk_isnan_f32(y)) return tvk_nan_f32();
  float ax = abs(x);
  bool yint = floor(y) == y, yodd = yint && abs(y) < 16777216.0 && floor(y * 0.5) * 2.0 != y;
  if (tvk_isinf_f32(y)) return ax == 1.0 ? 1.0 : (ax < 1.0) == (y < 0.0) ? tvk_inf_f32(false) : 0.0;
  if (x == 0.0) return y < 0.0 ? tvk_inf_f32(yodd && tvk_signbit_f32(x)) : yodd ? x : 0.0;
  if (tvk_isinf_f32(x)) {
    float m = y < 0.0 ? 0.0 : tvk_inf_f32(false);
    return x < 0.0 && yodd ? -m : m;
  }
  if (x < 0.0 && !yint) return tvk_nan_f32();
  float r = tvk_exp2_f32(y * tvk_log2_f32(ax));
  return x < 0.0 && yodd ? -r : r;
}
