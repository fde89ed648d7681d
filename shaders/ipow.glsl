// POW on integers as alu.c: the exact power wrapped at the width (0 ** 0 = 1),
// by squaring; a negative exponent gives 0.
$T tvk_pow_$N($T a, $T b) {
  if (b < $T(0)) return $T(0);
  $U r = $U(1), x = $U(a);
  for ($U y = $U(b); y != $U(0); y >>= 1u, x *= x)
    if ((y & $U(1)) != $U(0)) r *= x;
  return $T(r);
}
