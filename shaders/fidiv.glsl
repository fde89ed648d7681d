// IDIV on floats as alu.c (Python's //): the quotient of the magnitudes rounded
// down, with the sign of a * b; x // 0 = 0; NaN or an infinite dividend gives NaN.
precise $T tvk_fidiv_$N($T a, $T b) {
  if (b == $T(0)) return $T(0);
  if (isnan(a) || isnan(b) || isinf(a)) return $T(uintBitsToFloat(0x7fc00000u));
  $T x = abs(a), y = abs(b), r = $T(0);
  if (!isinf(y)) {
    $T q = (x - tvk_fmodx_$N(x, y)) / y;
    if (q != $T(0)) {
      r = floor(q);
      if (q - r > $T(0.5)) r += $T(1);
    }
  }
  return a * b < $T(0) ? -r : r;
}
