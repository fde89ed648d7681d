// MOD on floats as alu.c: |trunc(a)| % |trunc(b)| with a's sign; x % 0 = 0.
precise $T tvk_fmod_$N($T a, $T b) {
  $T m = trunc(abs(b)), x = trunc(abs(a)), q;
  if (m == $T(0)) return $T(0);
  if (isnan(a) || isnan(b) || isinf(a)) return $T(uintBitsToFloat(0x7fc00000u));
  q = isinf(m) ? x : tvk_fmodx_$N(x, m);
  return a < $T(0) && q != $T(0) ? -q : q;
}
