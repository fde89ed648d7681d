// MOD on integers as alu.c: the remainder takes the dividend's sign, x % 0 = 0.
// On magnitudes: GLSL's % is undefined for negative operands (glslang emits
// OpSMod, whose result takes the divisor's sign).
$T tvk_mod_$N($T a, $T b) {
  if (b == $T(0)) return $T(0);
  bool na = a < $T(0);
  $U r = (na ? $U(0) - $U(a) : $U(a)) % (b < $T(0) ? $U(0) - $U(b) : $U(b));
  return $T(na ? $U(0) - r : r);
}
