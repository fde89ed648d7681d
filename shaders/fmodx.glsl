// fmod(x, y) of finite x >= 0 and y > 0, exactly: subtract y * 2^k for the
// largest k that fits, each subtraction exact (the operands are within a factor
// of two of each other), halving x at least every step. The bound on the steps
// only guards against devices that flush denormals.
precise $T tvk_fmodx_$N($T x, $T y) {
  for (int i = 0; i < 2200 && x >= y; i++) {
    int ex, ey;
    frexp(x, ex);
    frexp(y, ey);
    $T s = ldexp(y, ex - ey);
    if (s > x) s *= $T(0.5);
    x -= s;
  }
  return x;
}
