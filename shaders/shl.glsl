// SHL of the exact value as the CPU backend: an amount past the width or a
// negative amount gives 0 (GLSL leaves both undefined). Wraps at the width.
$T tvk_shl_$N($T a, $T b) { return b < $T(0) || b >= $T($W) ? $T(0) : a << b; }
