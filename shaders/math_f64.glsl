// float64 math. GLSL has no double exp2, log2, sin or pow, so these are
// polynomials, to a few ulps over the reduced ranges; the edges are alu.c's.
// The tests are on the bits (a compiler may assume that no value is NaN). The
// functions are precise, as in math_f32.glsl.
bool tvk_isnan_f64(double x) {
  uvec2 w = unpackDouble2x32(x);
  uint hi = w.y & 0x7fffffffu;
  return hi > 0x7ff00000u || (hi == 0x7ff00000u && w.x != 0u);
}
bool tvk_isinf_f64(double x) {
  uvec2 w = unpackDouble2x32(x);
  return (w.y & 0x7fffffffu) == 0x7ff00000u && w.x == 0u;
}
precise double tvk_inf_f64(bool neg) { return packDouble2x32(uvec2(0u, neg ? 0xfff00000u : 0x7ff00000u)); }
precise double tvk_nan_f64() { return packDouble2x32(uvec2(0u, 0x7ff80000u)); }

// 2^x = 2^n e^(f ln 2) with n the nearest integer and |f| <= 1/2 (exact), e^t
// by its Taylor series to t^13 (|t| < 0.35: the rest is below 2^-60). 2^n is
// applied in two steps, as it may not be a double itself.
precise double tvk_exp2_f64(double x) {
  if (tvk_isnan_f64(x)) return x;
  if (x >= 1024.0lf) return tvk_inf_f64(false);
  if (x < -1080.0lf) return 0.0lf;
  double n = floor(x + 0.5lf), t = (x - n) * 0.6931471805599453lf;
  double p = 1.6059043836821613e-10lf;
  p = p * t + 2.08767569878681e-09lf;
  p = p * t + 2.505210838544172e-08lf;
  p = p * t + 2.755731922398589e-07lf;
  p = p * t + 2.7557319223985893e-06lf;
  p = p * t + 2.48015873015873e-05lf;
  p = p * t + 0.0001984126984126984lf;
  p = p * t + 0.001388888888888889lf;
  p = p * t + 0.008333333333333333lf;
  p = p * t + 0.041666666666666664lf;
  p = p * t + 0.16666666666666666lf;
  p = p * t + 0.5lf;
  p = p * t + 1.0lf;
  p = p * t + 1.0lf;
  int e = int(n);
  return ldexp(ldexp(p, e / 2), e - e / 2);
}

// log2 x = e + ln(m) / ln 2 with x = m 2^e, m in [sqrt(1/2), sqrt(2)), and
// ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, summed to s^23.
precise double tvk_log2_f64(double x) {
  if (tvk_isnan_f64(x)) return x;
  if (x == 0.0lf) return tvk_inf_f64(true);
  if (x < 0.0lf) return tvk_nan_f64();
  if (tvk_isinf_f64(x)) return x;
  int e, adj = 0;
  if (x < 2.2250738585072014e-308lf) x *= 18014398509481984.0lf, adj = 54; /* denormal: * 2^54 */
  double m = frexp(x, e);
  if (m < 0.7071067811865476lf) m *= 2.0lf, e -= 1;
  double s = (m - 1.0lf) / (m + 1.0lf), z = s * s, p = 1.0lf / 23.0lf;
  for (int k = 21; k >= 1; k -= 2) p = p * z + 1.0lf / double(k);
  return double(e - adj) + 2.0lf * s * p * 1.4426950408889634lf;
}

// sin: x - k pi/2 with pi/2 in three parts, the first two of 30 bits so that k
// times them is exact for |k| < 2^23, then Taylor polynomials on [-pi/4, pi/4]
// to r^19 and r^20. Accurate for |x| < 1.3e7; larger x is first taken modulo
// 2 pi in double, which loses the low bits of the result (the CPU's libm
// reduces exactly).
precise double tvk_sin_f64(double x) {
  if (tvk_isnan_f64(x) || tvk_isinf_f64(x)) return tvk_nan_f64();
  if (abs(x) > 1.3e7lf) x = mod(x, 6.283185307179586lf);
  double k = floor(x * 0.6366197723675814lf + 0.5lf);
  double r = ((x - k * 1.5707963276654482lf) - k * -8.705515692000731e-10lf) -
             k * -3.50343439808993e-19lf;
  double z = r * r, s = 8.22063524662433e-18lf, c = 4.110317623312165e-19lf;
  s = s * z - 2.8114572543455206e-15lf;
  s = s * z + 7.647163731819816e-13lf;
  s = s * z - 1.6059043836821613e-10lf;
  s = s * z + 2.505210838544172e-08lf;
  s = s * z - 2.7557319223985893e-06lf;
  s = s * z + 0.0001984126984126984lf;
  s = s * z - 0.008333333333333333lf;
  s = s * z + 0.16666666666666666lf;
  s = r - r * z * s;
  c = c * z - 1.5619206968586225e-16lf;
  c = c * z + 4.779477332387385e-14lf;
  c = c * z - 1.1470745597729725e-11lf;
  c = c * z + 2.08767569878681e-09lf;
  c = c * z - 2.755731922398589e-07lf;
  c = c * z + 2.48015873015873e-05lf;
  c = c * z - 0.001388888888888889lf;
  c = c * z + 0.041666666666666664lf;
  c = c * z - 0.5lf;
  c = 1.0lf + z * c;
  int q = int(mod(k, 4.0lf));
  return q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
}

precise double tvk_sqrt_f64(double x) {
  return tvk_isnan_f64(x) ? x : x < 0.0lf ? tvk_nan_f64() : sqrt(x);
}

precise double tvk_recip_f64(double x) {
  if (x == 0.0lf || tvk_isinf_f64(x)) {
    bool neg = (unpackDouble2x32(x).y >> 31) != 0u;
    return x == 0.0lf ? tvk_inf_f64(neg) : neg ? -0.0lf : 0.0lf;
  }
  return 1.0lf / x;
}

// a / b as tvk_fdiv_f32.
precise double tvk_fdiv_f64(double a, double b) {
  if (b == 0.0lf) {
    if (a == 0.0lf || isnan(a)) return tvk_nan_f64();
    bool neg = ((unpackDouble2x32(a).y ^ unpackDouble2x32(b).y) >> 31) != 0u;
    return tvk_inf_f64(neg);
  }
  return a / b;
}

// pow as tvk_pow_f32 (C's pow), through the polynomials.
precise double tvk_pow_f64(double x, double y) {
  if (y == 0.0lf || x == 1.0lf) return 1.0lf;
  if (tvk_isnan_f64(x) || tvk_isnan_f64(y)) return tvk_nan_f64();
  double ax = abs(x);
  bool yint = floor(y) == y;
  bool yodd = yint && abs(y) < 9007199254740992.0lf && floor(y * 0.5lf) * 2.0lf != y;
  if (tvk_isinf_f64(y))
    return ax == 1.0lf ? 1.0lf : (ax < 1.0lf) == (y < 0.0lf) ? tvk_inf_f64(false) : 0.0lf;
  if (x == 0.0lf) {
    bool neg = (unpackDouble2x32(x).y >> 31) != 0u;
    return y < 0.0lf ? tvk_inf_f64(yodd && neg) : yodd ? x : 0.0lf;
  }
  if (tvk_isinf_f64(x)) {
    double m = y < 0.0lf ? 0.0lf : tvk_inf_f64(false);
    return x < 0.0lf && yodd ? -m : m;
  }
  if (x < 0.0lf && !yint) return tvk_nan_f64();
  double r = tvk_exp2_f64(y * tvk_log2_f64(ax));
  return x < 0.0lf && yodd ? -r : r;
}
