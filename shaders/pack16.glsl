// 16-bit elements on a device without storageBuffer16BitAccess: two to a uint,
// element i in half i & 1 of word i >> 1 (little-endian). A store changes only
// its own half, with two atomics, the value through a precise variable (see
// pack8.glsl).
int tvk_ld16s(uint w, int k) { return bitfieldExtract(int(w), k * 16, 16); }
uint tvk_ld16u(uint w, int k) { return bitfieldExtract(w, k * 16, 16); }
#define TVK_ST16(w, k, v) { precise uint tvk_v_ = uint(v); uint tvk_sh_ = uint(k) * 16u; atomicAnd(w, ~(0xffffu << tvk_sh_)); atomicOr(w, (tvk_v_ & 0xffffu) << tvk_sh_); }
