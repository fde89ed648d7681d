/* The C language table (render.h) for the CPU device. The semantics are the
 * IR's (alu.h), spelled without undefined behaviour: signed integer math wraps
 * through unsigned types; division, modulo and shifts are guarded in helpers;
 * float -> int casts truncate and wrap; float16 / bfloat16 are uint16_t bits,
 * converted with exact round-to-nearest-even helpers. Out-of-range unsigned ->
 * signed conversions rely on two's complement wrapping (implementation-defined,
 * what gcc and clang do). */
#include "codegen/render.h"

/* The helpers read as the C they generate, the tables as tables. */
/* clang-format off */

/* ---------------------------------------------------------------- prelude */

/* What a kernel needs from <stdint.h>, <stdbool.h> and <math.h>, declared here
 * instead of included: a kernel then compiles where no C library headers are
 * installed (libtcc inside an application, on a machine without a compiler
 * package), and every compiler sees the same text. The types are exact on
 * every ABI tvk targets (LP64, LLP64, ILP32); a declaration that matches a
 * libm builtin keeps it a builtin for gcc and clang. C23 has bool built in.
 * The CPU backend's TinyCC tier resolves exactly these functions
 * (backend_cpu/cpu_tcc.c): a new one goes into both lists. TVK_INLINE
 * forces a helper inline: gcc stopped inlining tvk_exp2_f32 into a tile's
 * 128 GELU outputs (its size limits), and a call is something no
 * vectoriser widens (gelu(matmul) 1024: 21 -> 10 ms; the matmul alone: 9). */
static const char c_prelude[] =
    "typedef signed char int8_t;\n"
    "typedef unsigned char uint8_t;\n"
    "typedef short int16_t;\n"
    "typedef unsigned short uint16_t;\n"
    "typedef int int32_t;\n"
    "typedef unsigned int uint32_t;\n"
    "typedef long long int64_t;\n"
    "typedef unsigned long long uint64_t;\n"
    "#if !defined(__STDC_VERSION__) || __STDC_VERSION__ < 202311L\n"
    "typedef _Bool bool;\n"
    "#define true 1\n"
    "#define false 0\n"
    "#endif\n"
    "#if defined(__GNUC__) || defined(__clang__)\n"
    "#define TVK_INF __builtin_inf()\n"
    "#define TVK_NAN __builtin_nan(\"\")\n"
    "#define TVK_INLINE static inline __attribute__((always_inline))\n"
    "#else\n"
    "#define TVK_INLINE static inline\n"
    "#define TVK_INF (1e300 * 1e300)\n"
    "#define TVK_NAN (((union { uint64_t u; double d; }){0x7ff8000000000000ull}).d)\n"
    "#endif\n"
    "double exp2(double); float exp2f(float); double log2(double); float log2f(float);\n"
    "double sin(double); float sinf(float); double sqrt(double); float sqrtf(float);\n"
    "double floor(double); float floorf(float); double trunc(double); double rint(double);\n"
    "double fabs(double); double fmod(double, double); double copysign(double, double);\n"
    "double pow(double, double); double ldexp(double, int); double frexp(double, int *);\n";

/* ---------------------------------------------------------------- helpers */

/* x / 0 = 0; x / -1 = -x, wrapping (INT_MIN / -1 is INT_MIN). */
static const char h_sidiv[] = "static inline $T tvk_idiv_$N($T a, $T b) {\n"
                              "  return b == 0 ? 0 : b == -1 ? ($T)-($U)a : ($T)(a / b);\n}\n";
static const char h_uidiv[] =
    "static inline $T tvk_idiv_$N($T a, $T b) { return b == 0 ? 0 : ($T)(a / b); }\n";
/* The remainder takes the dividend's sign (C's %); x % 0 = x % -1 = 0. */
static const char h_smod[] = "static inline $T tvk_mod_$N($T a, $T b) {\n"
                             "  return b == 0 || b == -1 ? 0 : ($T)(a % b);\n}\n";
static const char h_umod[] =
    "static inline $T tvk_mod_$N($T a, $T b) { return b == 0 ? 0 : ($T)(a % b); }\n";
/* Shifts of the exact value: an amount past the width gives 0 (SHL) or the sign
 * (SHR, a floor shift); a negative amount gives 0. */
static const char h_sshl[] = "static inline $T tvk_shl_$N($T a, $T b) {\n"
                             "  return b < 0 || b >= $W ? 0 : ($T)(($U)a << b);\n}\n";
static const char h_ushl[] =
    "static inline $T tvk_shl_$N($T a, $T b) { return b >= $W ? 0 : ($T)(($U)a << b); }\n";
static const char h_sshr[] = "static inline $T tvk_shr_$N($T a, $T b) {\n"
                             "  if (b < 0) return 0;\n"
                             "  if (b >= $W) return a < 0 ? -1 : 0;\n"
                             "  return a < 0 ? ($T)~(~a >> b) : ($T)(a >> b);\n}\n";
static const char h_ushr[] =
    "static inline $T tvk_shr_$N($T a, $T b) { return b >= $W ? 0 : ($T)(a >> b); }\n";
/* Integer power by squaring, wrapping; a negative exponent gives 0. */
static const char h_spow[] = "static inline $T tvk_pow_$N($T a, $T b) {\n"
                             "  $U r = 1, x = ($U)a;\n"
                             "  if (b < 0) return 0;\n"
                             "  for ($U y = ($U)b; y; y >>= 1, x *= x) if (y & 1) r *= x;\n"
                             "  return ($T)r;\n}\n";
static const char h_upow[] = "static inline $T tvk_pow_$N($T a, $T b) {\n"
                             "  $U r = 1, x = ($U)a;\n"
                             "  for ($U y = ($U)b; y; y >>= 1, x *= x) if (y & 1) r *= x;\n"
                             "  return ($T)r;\n}\n";

/* float32 select: a where c holds, else b. In a register tile or an
 * unrolled reduce (lanes_header defines TVK_SEL_MASK) it is made of masks,
 * a's bits or b's (the same pick,
 * NaNs and signed zeros included). gcc keeps a float `?:` as a branch, and
 * each one splits the basic block; with the loop vectoriser off, as it is
 * in a tile, the block vectoriser then finds no group of stores to start
 * from, and a matmul whose epilogue had one (relu, the clamps of
 * tvk_exp2_f32 under GELU) ran its whole k loop scalar: relu(matmul) 1024
 * at 12 GFLOP/s against 255 without the relu. As masks the pick is
 * straight-line code the block vectoriser widens. The lanes of an unrolled
 * sum of exps over a masked row (a decoder's softmax) were left scalar the
 * same way, with the loop vectoriser on: 1.1 ms as `?:`, 0.46 as masks, for
 * 4 x 256 rows of 256 on one Zen 5 core. Elsewhere the `?:` stays:
 * the loop vectoriser widens it, and where nothing is widened (lanes whose
 * stores are masked one by one) the masks cost twice the branch's time. */
static const char h_sel_f32[] = "#ifdef TVK_SEL_MASK\n"
                                "TVK_INLINE float tvk_sel_f32(bool c, float a, float b) {\n"
                                "  union { float f; uint32_t u; } x = {a}, y = {b};\n"
                                "  uint32_t m = 0u - (uint32_t)c;\n"
                                "  x.u = (x.u & m) | (y.u & ~m);\n"
                                "  return x.f;\n}\n"
                                "#else\n"
                                "TVK_INLINE float tvk_sel_f32(bool c, float a, float b) "
                                "{ return c ? a : b; }\n"
                                "#endif\n";
/* a unless b > a: max(NaN, 1) = NaN */
static const char h_max_f32[] =
    "TVK_INLINE float tvk_max_f32(float a, float b) { return tvk_sel_f32(b > a, b, a); }\n";

/* float32 2^x without branches, so gcc's and clang's vectorisers can run it
 * on every lane of a vector: shaders/math_f32.glsl's tvk_exp2_f32 (the same
 * reduction and polynomial, about an ulp; the derivation is there), with its
 * early returns turned into selects made last, and every select a mask
 * (tvk_sel_f32). libm's exp2f is a call per element that no vectoriser can
 * widen. The argument is clamped first, so the float-to-int conversion never
 * sees NaN or a value out of range. 2^n is two normal factors, 2^h 2^(n-h)
 * with h = n >> 1 (n in [-151, 128]): p 2^h is exact and the second product
 * rounds once, as the shader's p 2^(n+100) 2^-100 does for a denormal result,
 * so it also makes overflow (inf), underflow (0) and denormals without the
 * three selects the shader's branches would be; the same bits for every one
 * of the 2^32 arguments, and a third fewer instructions: softmax 4096^2's sum
 * of exps 4.8 -> 3.7 ms, its exp-and-divide 4.8 -> 3.0 (Zen 5, 2 threads).
 * Where the target fuses multiply-adds (TVK_FMA, RenderInfo.fma) the
 * polynomial is Horner's rule in fmas: at most 0.91 ulp from 2^x over the
 * floats of [-160, 130] (a third of them, against exp2 in double) where
 * mul and add give 1.10, and a fifth fewer instructions; the bits then
 * differ from the shader's (no fma) in about 1% of arguments. TinyCC calls
 * libm's fmaf (h_fma), so both tiers give the same bits. */
static const char h_exp2_f32[] =
    "TVK_INLINE float tvk_exp2_f32(float x) {\n"
    "  float c = tvk_sel_f32(x > -151.0f, x, -151.0f);\n"
    "  c = tvk_sel_f32(c < 128.0f, c, 128.0f);\n"
    "  float n = floorf(c + 0.5f), f = c - n;\n"
    "  float r = 1.5444884343859824e-4f;\n"
    "#ifdef TVK_FMA\n"
    "  r = tvk_fmaf(r, f, 1.3381302547299695e-3f);\n"
    "  r = tvk_fmaf(r, f, 9.6181032523046569e-3f);\n"
    "  r = tvk_fmaf(r, f, 5.5503810137839864e-2f);\n"
    "  r = tvk_fmaf(r, f, 0.24022650695911564f);\n"
    "  float p = tvk_fmaf(tvk_fmaf(r, f, 0.693147181f), f, 1.0f);\n"
    "#else\n"
    "  r = r * f + 1.3381302547299695e-3f;\n"
    "  r = r * f + 9.6181032523046569e-3f;\n"
    "  r = r * f + 5.5503810137839864e-2f;\n"
    "  r = r * f + 0.24022650695911564f;\n"
    "  float p = 1.0f + (f * 0.693147181f + (f * f) * r);\n"
    "#endif\n"
    "  int32_t e = (int32_t)n, h = e >> 1;\n"
    "  union { float f; uint32_t u; } s = {.u = (uint32_t)(h + 127) << 23},\n"
    "    t = {.u = (uint32_t)(e - h + 127) << 23};\n"
    "  return tvk_sel_f32(x != x, x, (p * s.f) * t.f);\n}\n";

/* Float floor division of magnitudes, signed (Python's // as alu.c computes
 * it, in double); x // 0 = 0. */
static const char h_fidiv[] =
    "static inline double tvk_fidiv(double a, double b) {\n"
    "  if (b == 0) return 0.0;\n"
    "  double x = fabs(a), y = fabs(b), m = fmod(x, y), q = (x - m) / y, r;\n"
    "  if (q == 0) r = copysign(0.0, x / y);\n"
    "  else r = floor(q), r = q - r > 0.5 ? r + 1.0 : r;\n"
    "  return a * b < 0 ? -r : r;\n}\n";
/* MULACC on floats, and tvk_exp2_f32 on a target with fma: a fused
 * multiply-add, one rounding (legalize.c makes MULACC only for a CPU with
 * one). gcc and clang inline the builtin as one
 * instruction (-march=native) and vectorise it; TinyCC calls libm's, so both
 * tiers give the same bits. */
static const char h_fma[] =
    "#if (defined(__GNUC__) || defined(__clang__)) && !defined(__TINYC__)\n"
    "#define tvk_fmaf(a, b, c) __builtin_fmaf(a, b, c)\n"
    "#define tvk_fma(a, b, c) __builtin_fma(a, b, c)\n"
    "#else\n"
    "float fmaf(float, float, float); double fma(double, double, double);\n"
    "#define tvk_fmaf(a, b, c) fmaf(a, b, c)\n"
    "#define tvk_fma(a, b, c) fma(a, b, c)\n"
    "#endif\n";
/* |trunc(a)| % |trunc(b)| with a's sign; x % 0 = 0. */
static const char h_fmod[] =
    "static inline double tvk_fmod(double a, double b) {\n"
    "  double m = trunc(fabs(b)), q = m == 0 ? 0.0 : fmod(trunc(fabs(a)), m);\n"
    "  return a < 0 && q != 0 ? -q : q;\n}\n";
/* C's pow in double, as alu.c: IEEE 754's special cases ((-0) ** -1 = -inf). */
static const char h_fpow[] =
    "static inline double tvk_pow(double x, double y) { return pow(x, y); }\n";
/* Truncate toward zero, wrap modulo 2^64; NaN and inf give 0. */
static const char h_f2i[] =
    "static inline uint64_t tvk_f2i(double x) {\n"
    "  if (x > -9.2e18 && x < 9.2e18) return (uint64_t)(int64_t)x;\n"
    "  if (x != x || fabs(x) == TVK_INF) return 0;\n"
    "  uint64_t u = (uint64_t)fmod(trunc(fabs(x)), 18446744073709551616.0);\n"
    "  return x < 0 ? 0 - u : u;\n}\n";
static const char h_f16_to_f32[] =
    "static inline float tvk_f16_to_f32(uint16_t h) {\n"
    "  uint32_t e = h >> 10 & 31u, m = h & 1023u, s = (uint32_t)(h >> 15) << 31;\n"
    "  union { uint32_t u; float f; } v;\n"
    "  if (e == 0) return (s ? -1.0f : 1.0f) * ((float)m * 5.9604644775390625e-8f);\n"
    "  v.u = s | (e == 31 ? 0x7f800000u : (e + 112u) << 23) | m << 13;\n"
    "  return v.f;\n}\n";
static const char h_bf16_to_f32[] = "static inline float tvk_bf16_to_f32(uint16_t b) {\n"
                                    "  union { uint32_t u; float f; } v = {(uint32_t)b << 16};\n"
                                    "  return v.f;\n}\n";
/* A double rounded to nearest even into a binary format of eb exponent and mb
 * mantissa bits (float16: 5, 10; bfloat16: 8, 7); NaNs keep their sign and top
 * payload bits. One rounding, as dtype.c does. */
static const char h_round_small[] =
    "static inline uint16_t tvk_round_small(double x, int eb, int mb) {\n"
    "  union { double d; uint64_t u; } v = {x};\n"
    "  uint32_t sign = (uint32_t)(v.u >> 63) << (eb + mb), inf = sign | ((1u << eb) - 1) << mb;\n"
    "  if (x != x) {\n"
    "    uint32_t p = (uint32_t)((v.u & 0xfffffffffffffull) >> (52 - mb));\n"
    "    return (uint16_t)(inf | (p ? p : 1u << (mb - 1)));\n"
    "  }\n"
    "  int bias = (1 << (eb - 1)) - 1, e;\n"
    "  double a = fabs(x);\n"
    "  if (a >= ldexp(2.0 - ldexp(1.0, -mb - 1), bias)) return (uint16_t)inf;\n"
    "  frexp(a, &e);\n"
    "  e = a == 0 || e - 1 < 1 - bias ? 1 - bias : e - 1;\n"
    "  uint32_t q = (uint32_t)rint(ldexp(a, mb - e));\n"
    "  return (uint16_t)(sign | (((uint32_t)(e - 1 + bias) << mb) + q));\n}\n";

/* ---------------------------------------------------------------- ops */

#define S(e) {e, NULL, NULL, NULL}
#define H(e, h) {e, h, NULL, NULL}
#define HN(e, h, n) {e, h, n, NULL}
#define HN2(e, h, n, m) {e, h, n, m}

/* float32 overrides of the float row below. */
static const Spell c_f32_ops[OP_COUNT] = {
    [OP_EXP2] = HN2("tvk_exp2_f32($0)", h_exp2_f32, h_sel_f32, h_fma),
    [OP_MAX] = HN("tvk_max_f32($0, $1)", h_max_f32, h_sel_f32),
    [OP_WHERE] = H("tvk_sel_f32($0, $1, $2)", h_sel_f32),
};
/* Integer math that may overflow goes through the unsigned wrap type. */
#define WRAP2(o) S("(($T)(($U)$0" o "($U)$1))")

static const CastSpell c_casts[] = {
    {DT_BIT(DT_FLOAT16), DT_BIT(DT_FLOAT32), H("tvk_f16_to_f32($0)", h_f16_to_f32)},
    {DT_BIT(DT_BFLOAT16), DT_BIT(DT_FLOAT32), H("tvk_bf16_to_f32($0)", h_bf16_to_f32)},
    {~0u, DT_BIT(DT_FLOAT16), H("tvk_round_small((double)$0, 5, 10)", h_round_small)},
    {~0u, DT_BIT(DT_BFLOAT16), H("tvk_round_small((double)$0, 8, 7)", h_round_small)},
    {~0u, DT_BIT(DT_BOOL), S("($0!=0)")},
    {DT_BITS_FLOAT, DT_BITS_INT, H("(($T)tvk_f2i((double)$0))", h_f2i)},
    {~0u, ~0u, S("(($T)$0)")},
};

/* BITCAST: through a union, the one reinterpretation C allows without memcpy
 * (and that gcc and clang keep in registers and vectorise) */
#define B32 (DT_BIT(DT_FLOAT32) | DT_BIT(DT_INT32) | DT_BIT(DT_UINT32))
#define B64 (DT_BIT(DT_FLOAT64) | DT_BIT(DT_INT64) | DT_BIT(DT_UINT64))
static const CastSpell c_bitcasts[] = {
    {B32, B32, S("(((union { $S s; $T t; }){$0}).t)")},
    {B64, B64, S("(((union { $S s; $T t; }){$0}).t)")},
};

const Lang lang_c = {
    .name = "C",
    .type = {[DT_BOOL] = "bool", [DT_INT8] = "int8_t", [DT_UINT8] = "uint8_t",
             [DT_INT16] = "int16_t", [DT_UINT16] = "uint16_t", [DT_INT32] = "int32_t",
             [DT_UINT32] = "uint32_t", [DT_INT64] = "int64_t", [DT_UINT64] = "uint64_t",
             [DT_FLOAT16] = "uint16_t", [DT_BFLOAT16] = "uint16_t", [DT_FLOAT32] = "float",
             [DT_FLOAT64] = "double"},
    /* bool buffers are bytes: any nonzero byte loads as true */
    .buf_type = {[DT_BOOL] = "uint8_t", [DT_INT8] = "int8_t", [DT_UINT8] = "uint8_t",
                 [DT_INT16] = "int16_t", [DT_UINT16] = "uint16_t", [DT_INT32] = "int32_t",
                 [DT_UINT32] = "uint32_t", [DT_INT64] = "int64_t", [DT_UINT64] = "uint64_t",
                 [DT_FLOAT16] = "uint16_t", [DT_BFLOAT16] = "uint16_t", [DT_FLOAT32] = "float",
                 [DT_FLOAT64] = "double"},
    .wrap_type = {[DT_BOOL] = "uint32_t", [DT_INT8] = "uint32_t", [DT_UINT8] = "uint32_t",
                  [DT_INT16] = "uint32_t", [DT_UINT16] = "uint32_t", [DT_INT32] = "uint32_t",
                  [DT_UINT32] = "uint32_t", [DT_INT64] = "uint64_t", [DT_UINT64] = "uint64_t"},
    .short_name = {[DT_BOOL] = "b", [DT_INT8] = "i8", [DT_UINT8] = "u8", [DT_INT16] = "i16",
                   [DT_UINT16] = "u16", [DT_INT32] = "i32", [DT_UINT32] = "u32",
                   [DT_INT64] = "i64", [DT_UINT64] = "u64", [DT_FLOAT16] = "f16",
                   [DT_BFLOAT16] = "bf16", [DT_FLOAT32] = "f32", [DT_FLOAT64] = "f64"},
    .math_suffix = {[DT_FLOAT32] = "f", [DT_FLOAT64] = ""},
    .storage_only = DT_BIT(DT_FLOAT16) | DT_BIT(DT_BFLOAT16),
    .compute_type = DT_FLOAT32,

    .lit_suffix = {[DT_UINT32] = "u", [DT_INT64] = "LL", [DT_UINT64] = "ULL", [DT_FLOAT32] = "f"},
    .float_digits = {[DT_FLOAT32] = 9, [DT_FLOAT64] = 17},
    .true_lit = "true",
    .false_lit = "false",
    .inf = "(($T)TVK_INF)",
    .ninf = "(-($T)TVK_INF)",
    .nan = "(($T)TVK_NAN)",
    .storage_lit = "(($T)$0)",

    .file_header = c_prelude,
    /* gcc's loop vectoriser would vectorise a register tile's k loop across k
     * (strided, with shuffles) instead of leaving the tile's lanes to the
     * basic-block vectoriser, which packs the upcast copies: 5 vs 23 GFLOP/s
     * for a 4 x 16 matmul tile. clang's cost model picks the lanes itself.
     * Elsewhere the loop vectoriser is what widens selects and helpers like
     * tvk_exp2_f32, which the basic-block one cannot.
     * A tile's accumulators fill the registers (8 rows, 3 levels of the
     * blocked sum: 24 of AVX-512's 32), and gcc's allocator, working loop by
     * loop, spilled the innermost level's (used every k) while the outer
     * levels' (used once per 16 or 256 k) held registers: matmul 512 on
     * AVX-512 kept 7 of its 8 rows on the stack and ran at 60 GFLOP/s
     * against 1024's 210. Allocating the kernel as one region ranks the
     * accumulators by their uses: no spill in any matmul of the bench. */
    .tile_header = "#if defined(__GNUC__) && !defined(__clang__)\n"
                   "#pragma GCC optimize(\"no-tree-loop-vectorize\", \"ira-region=one\")\n"
                   "#endif\n",
    /* gcc's loop vectoriser at -O2 widens a loop only where no scalar
     * remainder is left, which it cannot know of a loop over a symbolic
     * size; its cost model then decides (the remainder runs scalar). */
    .open_loops_header = "#if defined(__GNUC__) && !defined(__clang__)\n"
                         "#pragma GCC optimize(\"vect-cost-model=dynamic\")\n"
                         "#endif\n",
    .lanes_header = "#define TVK_SEL_MASK 1\n",
    .fma_header = "#define TVK_FMA 1\n",
    .buf_decl_file = "",
    .func_open =
        "void $K(void *const *bufs, const int32_t *vals, int32_t core_id, int32_t n_cores) {\n",
    .buf_decl = "  $R$B *$V = ($R$B *)bufs[$I];\n",
    .ro_qualifier = "const ",
    .var_decl = "  const int32_t $V = vals[$I];\n",
    /* read through a union: the one reinterpretation C allows without memcpy */
    .var_decl_f32 = "  const float $V = ((const union { int32_t i; float f; } *)vals)[$I].f;\n",
    .no_vars = "  (void)vals;\n",
    .var_unused = "  (void)$V;\n",
    .func_close = "}\n",
    .specials = (const SpecialSpell[]){{"core_id", "core_id", "  (void)core_id;\n"},
                                       {"n_cores", "n_cores", "  (void)n_cores;\n"}},
    .nspecials = 2,
    .indent = "  ",

    .decl = "$T $V = $0;",
    .assign = "$V = $0;",
    .range_open = "for ($T $V = 0; $V < $0; $V++) {",
    .range_close = "}",
    .index = "$0[$1]",
    .load_gated = "($2 ? $0 : $1)",
    .store = "$0 = $1;",
    .store_gated = "if ($2) $0 = $1;",

    .max_vector = 0, /* vector types arrive with upcasting */
    .alu =
        {
            [CL_FLOAT] =
                {
                    [OP_NEG] = S("(-$0)"),
                    [OP_EXP2] = S("exp2$F($0)"),
                    [OP_LOG2] = S("log2$F($0)"),
                    [OP_SIN] = S("sin$F($0)"),
                    [OP_SQRT] = S("sqrt$F($0)"),
                    [OP_RECIP] = S("(1.0$F/$0)"),
                    [OP_ADD] = S("($0+$1)"),
                    [OP_SUB] = S("($0-$1)"),
                    [OP_MUL] = S("($0*$1)"),
                    [OP_FDIV] = S("($0/$1)"),
                    [OP_IDIV] = H("(($T)tvk_fidiv($0, $1))", h_fidiv),
                    [OP_MOD] = H("(($T)tvk_fmod($0, $1))", h_fmod),
                    [OP_POW] = H("(($T)tvk_pow($0, $1))", h_fpow),
                    [OP_MAX] = S("($1>$0?$1:$0)"), /* a unless b > a: max(NaN, 1) = NaN */
                    [OP_CMPLT] = S("($0<$1)"),
                    [OP_CMPNE] = S("($0!=$1)"),
                    [OP_WHERE] = S("($0?$1:$2)"),
                    [OP_MULACC] = H("tvk_fma$F($0, $1, $2)", h_fma),
                },
            [CL_SINT] =
                {
                    [OP_NEG] = S("(($T)-($U)$0)"),
                    [OP_ADD] = WRAP2("+"),
                    [OP_SUB] = WRAP2("-"),
                    [OP_MUL] = WRAP2("*"),
                    [OP_MULACC] = S("(($T)(($U)$0*($U)$1+($U)$2))"),
                    [OP_IDIV] = H("tvk_idiv_$N($0, $1)", h_sidiv),
                    [OP_MOD] = H("tvk_mod_$N($0, $1)", h_smod),
                    [OP_SHL] = H("tvk_shl_$N($0, $1)", h_sshl),
                    [OP_SHR] = H("tvk_shr_$N($0, $1)", h_sshr),
                    [OP_POW] = H("tvk_pow_$N($0, $1)", h_spow),
                    [OP_MAX] = S("($1>$0?$1:$0)"),
                    [OP_CMPLT] = S("($0<$1)"),
                    [OP_CMPNE] = S("($0!=$1)"),
                    [OP_AND] = S("(($T)($0&$1))"),
                    [OP_OR] = S("(($T)($0|$1))"),
                    [OP_XOR] = S("(($T)($0^$1))"),
                    [OP_WHERE] = S("($0?$1:$2)"),
                },
            [CL_UINT] =
                {
                    [OP_NEG] = S("(($T)-($U)$0)"),
                    [OP_ADD] = WRAP2("+"),
                    [OP_SUB] = WRAP2("-"),
                    [OP_MUL] = WRAP2("*"),
                    [OP_MULACC] = S("(($T)(($U)$0*($U)$1+($U)$2))"),
                    [OP_IDIV] = H("tvk_idiv_$N($0, $1)", h_uidiv),
                    [OP_MOD] = H("tvk_mod_$N($0, $1)", h_umod),
                    [OP_SHL] = H("tvk_shl_$N($0, $1)", h_ushl),
                    [OP_SHR] = H("tvk_shr_$N($0, $1)", h_ushr),
                    [OP_POW] = H("tvk_pow_$N($0, $1)", h_upow),
                    [OP_MAX] = S("($1>$0?$1:$0)"),
                    [OP_CMPLT] = S("($0<$1)"),
                    [OP_CMPNE] = S("($0!=$1)"),
                    [OP_AND] = S("(($T)($0&$1))"),
                    [OP_OR] = S("(($T)($0|$1))"),
                    [OP_XOR] = S("(($T)($0^$1))"),
                    [OP_WHERE] = S("($0?$1:$2)"),
                },
            /* bool math is the integer math truncated to bool (alu.c): + is |, * is & */
            [CL_BOOL] =
                {
                    [OP_NEG] = S("$0"),
                    [OP_ADD] = S("($0|$1)"),
                    [OP_SUB] = S("($0!=$1)"),
                    [OP_MUL] = S("($0&$1)"),
                    [OP_MAX] = S("($0|$1)"),
                    [OP_IDIV] = S("($0&$1)"),
                    [OP_CMPLT] = S("(!$0&$1)"),
                    [OP_CMPNE] = S("($0!=$1)"),
                    [OP_AND] = S("($0&$1)"),
                    [OP_OR] = S("($0|$1)"),
                    [OP_XOR] = S("($0!=$1)"),
                    [OP_WHERE] = S("($0?$1:$2)"),
                },
        },
    .alu_fits =
        {
            [OP_NEG] = S("(-$0)"),
            [OP_ADD] = S("($0+$1)"),
            [OP_SUB] = S("($0-$1)"),
            [OP_MUL] = S("($0*$1)"),
            [OP_IDIV] = S("($0/$1)"),
            [OP_MOD] = S("($0%$1)"),
            [OP_SHL] = S("($0<<$1)"),
            [OP_SHR] = S("($0>>$1)"),
        },
    .alu_dt = {[DT_FLOAT32] = c_f32_ops},
    .casts = c_casts,
    .ncasts = (int)(sizeof c_casts / sizeof c_casts[0]),
    .bitcasts = c_bitcasts,
    .nbitcasts = (int)(sizeof c_bitcasts / sizeof c_bitcasts[0]),
};
/* clang-format on */
