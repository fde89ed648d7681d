// SHR as alu.c: a floor shift (arithmetic for signed, logical for unsigned); an
// amount past the width gives the sign (-1 or 0), a negative amount 0.
$T tvk_shr_$N($T a, $T b) {
  if (b < $T(0)) return $T(0);
  if (b >= $T($W)) return a < $T(0) ? ~$T(0) : $T(0);
  return a >> b;
}
