// A float cast to a 64-bit integer: truncated toward zero and wrapped modulo
// 2^64; NaN and inf give 0 (see f2i.glsl).
precise uint64_t tvk_f2u64_$M($S x) {
  if (isnan(x) || isinf(x)) return uint64_t(0);
  $S t = trunc(abs(x));
  t -= $S(18446744073709551616.0) * floor(t / $S(18446744073709551616.0));
  uint64_t u = uint64_t(t);
  return x < $S(0) ? uint64_t(0) - u : u;
}
