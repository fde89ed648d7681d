// A float cast to a 32-bit integer as the CPU backend does: truncated toward
// zero and wrapped modulo 2^32 (GLSL leaves out-of-range casts undefined); NaN
// and inf give 0. The low 32 bits of the result, as a uint.
precise uint tvk_f2u32_$M($S x) {
  if (isnan(x) || isinf(x)) return 0u;
  $S t = trunc(abs(x));
  t -= $S(4294967296.0) * floor(t / $S(4294967296.0));  // exact: t mod 2^32
  uint u = uint(t);
  return x < $S(0) ? 0u - u : u;
}
