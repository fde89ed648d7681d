// IDIV on integers as alu.c: truncates toward zero, x / 0 = 0, and the most
// negative value / -1 wraps to itself. Computed on magnitudes in the unsigned
// type: GLSL leaves / on negative operands and on 0 to the driver.
$T tvk_idiv_$N($T a, $T b) {
  if (b == $T(0)) return $T(0);
  bool na = a < $T(0), nb = b < $T(0);
  $U q = (na ? $U(0) - $U(a) : $U(a)) / (nb ? $U(0) - $U(b) : $U(b));
  return $T(na != nb ? $U(0) - q : q);
}
