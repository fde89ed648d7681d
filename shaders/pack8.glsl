// 8-bit elements on a device without storageBuffer8BitAccess: four to a uint,
// element i in byte i & 3 of word i >> 2 (the host's little-endian bytes). A
// store changes only its own byte, with two atomics, because other invocations
// may store the other bytes of the word at the same time.
// The value goes through a precise variable: glslang marks the float ops
// behind a precise store (NoContraction), but not behind an atomic's operand.
int tvk_ld8s(uint w, int k) { return bitfieldExtract(int(w), k * 8, 8); }
uint tvk_ld8u(uint w, int k) { return bitfieldExtract(w, k * 8, 8); }
#define TVK_ST8(w, k, v) { precise uint tvk_v_ = uint(v); uint tvk_sh_ = uint(k) * 8u; atomicAnd(w, ~(0xffu << tvk_sh_)); atomicOr(w, (tvk_v_ & 0xffu) << tvk_sh_); }
