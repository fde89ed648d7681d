/* The GLSL 450 language table (render.h) of the Vulkan backend: compute
 * shaders that follow the kernel ABI of vk_dispatch.h. Buffer i is the storage
 * buffer at (set 0, binding i), `readonly` when only read; one push-constant
 * block holds the launch grid and the symbolic values; the kernel is lowered in
 * grid mode (lower.c), and its prologue rebuilds the linear work-group id from
 * the dispatcher's split of large grids, returning early past the grid.
 *
 * The math is the CPU backend's (alu.c) bit for bit where GLSL allows it:
 * integer ops wrap natively, and what GLSL leaves undefined (division and
 * remainder signs and by 0, shifts past the width, float -> int out of range,
 * exp2/log2/sqrt/sin/pow edges) goes through the hand-written helpers of
 * shaders/, embedded at build time (tvk_glsl_shaders.h).
 *
 * Dtypes: 8- and 16-bit ints, float16 and bfloat16 are only stored; their math
 * is done in int32 / uint32 / float32 and rounded back after each op
 * (legalize.c), which is exactly their wrap-around and per-op rounding, so no
 * explicit-arithmetic extension is needed. Their buffers use the 8/16-bit
 * storage extensions where the device has them, and are packed into 32-bit
 * words where not (shaders/pack8.glsl, pack16.glsl). bool values are GLSL bools
 * stored as one byte each, as the host sees them. 64-bit ints and float64 need
 * shaderInt64 / shaderFloat64; float64's exp2, log2, sin and pow are the
 * polynomials of shaders/math_f64.glsl. docs/vulkan.md, "GLSL kernels". */
#include <stdlib.h>
#include <string.h>

#include "codegen/render.h"
#include "tvk_glsl_shaders.h"
#include "vk_core.h"
#include "vk_glsl.h"

/* The helpers read as the GLSL they generate, the tables as tables. */
/* clang-format off */

#define S(e) {e, NULL, NULL, NULL}
#define H(e, h) {e, tvk_glsl_##h, NULL, NULL}
#define HN(e, h, n) {e, tvk_glsl_##h, tvk_glsl_##n, NULL}

/* Dtype sets of the cast table. Small ints are held in int / uint. */
#define B_SMALL_S (DT_BIT(DT_INT8) | DT_BIT(DT_INT16))
#define B_SMALL_U (DT_BIT(DT_UINT8) | DT_BIT(DT_UINT16))
#define B_S32 (B_SMALL_S | DT_BIT(DT_INT32))
#define B_U32 (B_SMALL_U | DT_BIT(DT_UINT32))
#define B_F32_64 (DT_BIT(DT_FLOAT32) | DT_BIT(DT_FLOAT64))
#define B_INTS (DT_BITS_INT | DT_BIT(DT_BOOL))
#define F16 DT_BIT(DT_FLOAT16)
#define BF16 DT_BIT(DT_BFLOAT16)

/* 16-bit floats are their bits in a uint: to float32 exactly, from anything
 * rounded once to nearest even as dtype.c does (sources wider than float32 go
 * through a float32 rounded to odd, which keeps that single rounding). */
#define ROUND16(x, fmt) "tvk_round_small(floatBitsToUint(" x "), " fmt ")"
#define FMT_F16 "5u, 10u"
#define FMT_BF16 "8u, 7u"

/* BITCAST between the 32-bit dtypes (int <-> uint conversions keep the bits) */
static const CastSpell glsl_bitcasts[] = {
    {DT_BIT(DT_FLOAT32), DT_BIT(DT_INT32), S("floatBitsToInt($0)")},
    {DT_BIT(DT_FLOAT32), DT_BIT(DT_UINT32), S("floatBitsToUint($0)")},
    {DT_BIT(DT_INT32), DT_BIT(DT_FLOAT32), S("intBitsToFloat($0)")},
    {DT_BIT(DT_UINT32), DT_BIT(DT_FLOAT32), S("uintBitsToFloat($0)")},
    {DT_BIT(DT_INT32) | DT_BIT(DT_UINT32), DT_BIT(DT_INT32) | DT_BIT(DT_UINT32), S("$T($0)")},
};

static const CastSpell glsl_casts[] = {
    {F16, DT_BIT(DT_FLOAT32), H("tvk_f16_to_f32($0)", f16conv)},
    {BF16, DT_BIT(DT_FLOAT32), S("uintBitsToFloat($0 << 16)")},
    {DT_BIT(DT_BOOL), F16, S("($0 ? 15360u : 0u)")},  /* 0x3c00: 1.0 */
    {DT_BIT(DT_BOOL), BF16, S("($0 ? 16256u : 0u)")}, /* 0x3f80: 1.0 */
    {DT_BIT(DT_FLOAT32), F16, H(ROUND16("$0", FMT_F16), f16conv)},
    {DT_BIT(DT_FLOAT32), BF16, H(ROUND16("$0", FMT_BF16), f16conv)},
    {DT_BIT(DT_FLOAT64), F16, HN(ROUND16("tvk_f64_odd($0)", FMT_F16), f16conv_f64, f16conv)},
    {DT_BIT(DT_FLOAT64), BF16, HN(ROUND16("tvk_f64_odd($0)", FMT_BF16), f16conv_f64, f16conv)},
    /* an int beyond 2^24 is past float16's range either way: float() is exact enough */
    {DT_BITS_INT, F16, H(ROUND16("float($0)", FMT_F16), f16conv)},
    {B_S32, BF16, H(ROUND16("tvk_i32_odd($0)", FMT_BF16), f16conv)},
    {B_U32, BF16, H(ROUND16("tvk_u32_odd($0)", FMT_BF16), f16conv)},
    {DT_BIT(DT_INT64), BF16, HN(ROUND16("tvk_i64_odd($0)", FMT_BF16), f16conv64, f16conv)},
    {DT_BIT(DT_UINT64), BF16, HN(ROUND16("tvk_u64_odd($0)", FMT_BF16), f16conv64, f16conv)},
    {~0u, DT_BIT(DT_BOOL), S("($0 != $S(0))")},
    /* float -> int truncates toward zero and wraps (NaN and inf: 0), as the CPU does */
    {B_F32_64, DT_BIT(DT_INT32), H("int(tvk_f2u32_$M($0))", f2i)},
    {B_F32_64, DT_BIT(DT_UINT32), H("tvk_f2u32_$M($0)", f2i)},
    {B_F32_64, B_SMALL_S, H("bitfieldExtract(int(tvk_f2u32_$M($0)), 0, $W)", f2i)},
    {B_F32_64, B_SMALL_U, H("bitfieldExtract(tvk_f2u32_$M($0), 0, $W)", f2i)},
    {B_F32_64, DT_BIT(DT_INT64), H("int64_t(tvk_f2u64_$M($0))", f2i64)},
    {B_F32_64, DT_BIT(DT_UINT64), H("tvk_f2u64_$M($0)", f2i64)},
    /* 8/16-bit ints are held in int / uint already */
    {B_SMALL_S, DT_BIT(DT_INT32), S("$0")},
    {B_SMALL_U, DT_BIT(DT_UINT32), S("$0")},
    /* to 8/16-bit ints: the low bits, sign- or zero-extended into int / uint */
    {DT_BIT(DT_BOOL), B_SMALL_S | B_SMALL_U, S("$T($0)")},
    {B_S32, B_SMALL_S, S("bitfieldExtract($0, 0, $W)")},
    {B_U32, B_SMALL_U, S("bitfieldExtract($0, 0, $W)")},
    {B_INTS, B_SMALL_S, S("bitfieldExtract(int($0), 0, $W)")},
    {B_INTS, B_SMALL_U, S("bitfieldExtract(uint($0), 0, $W)")},
    {~0u, ~0u, S("$T($0)")},
};

/* float64: GLSL has no double exp2, log2, sin or pow. */
static const Spell glsl_f64_ops[OP_COUNT] = {
    [OP_EXP2] = H("tvk_exp2_f64($0)", math_f64),
    [OP_LOG2] = H("tvk_log2_f64($0)", math_f64),
    [OP_SIN] = H("tvk_sin_f64($0)", math_f64),
    [OP_SQRT] = H("tvk_sqrt_f64($0)", math_f64),
    [OP_RECIP] = H("tvk_recip_f64($0)", math_f64),
    [OP_FDIV] = H("tvk_fdiv_f64($0, $1)", math_f64),
    [OP_POW] = H("tvk_pow_f64($0, $1)", math_f64),
};

/* The ops of 32- and 64-bit ints, signed or not: + - * wrap natively in GLSL. */
#define GLSL_INT_OPS                                                                  \
  [OP_NEG] = S("(-$0)"),                                                              \
  [OP_ADD] = S("($0+$1)"),                                                            \
  [OP_SUB] = S("($0-$1)"),                                                            \
  [OP_MUL] = S("($0*$1)"),                                                            \
  [OP_MULACC] = S("($0*$1+$2)"),                                                      \
  [OP_IDIV] = H("tvk_idiv_$N($0, $1)", idiv),                                         \
  [OP_MOD] = H("tvk_mod_$N($0, $1)", mod),                                            \
  [OP_SHL] = H("tvk_shl_$N($0, $1)", shl),                                            \
  [OP_SHR] = H("tvk_shr_$N($0, $1)", shr),                                            \
  [OP_POW] = H("tvk_pow_$N($0, $1)", ipow),                                           \
  [OP_MAX] = S("max($0, $1)"),                                                        \
  [OP_CMPLT] = S("($0<$1)"),                                                          \
  [OP_CMPNE] = S("($0!=$1)"),                                                         \
  [OP_AND] = S("($0&$1)"),                                                            \
  [OP_OR] = S("($0|$1)"),                                                             \
  [OP_XOR] = S("($0^$1)"),                                                            \
  [OP_WHERE] = S("($0?$1:$2)")

/* 8 32-bit elements as one 32-byte access, a u64vec4 (VKFEAT_WIDE; only
 * where max_vector is 8, which vk_glsl_lang_new sets): lanes taken apart and
 * put together on the bits, so every value, NaN payloads included, arrives as
 * it was. */
#define OCTET(a, b, c, d, e, f, g, h)                                                              \
  "u64vec4(packUint2x32(uvec2(" a ", " b ")), packUint2x32(uvec2(" c ", " d ")), "                 \
  "packUint2x32(uvec2(" e ", " f ")), packUint2x32(uvec2(" g ", " h ")))"

static const Lang glsl_base = {
    .name = "GLSL",
    .type = {[DT_BOOL] = "bool", [DT_INT8] = "int", [DT_UINT8] = "uint", [DT_INT16] = "int",
             [DT_UINT16] = "uint", [DT_INT32] = "int", [DT_UINT32] = "uint",
             [DT_INT64] = "int64_t", [DT_UINT64] = "uint64_t", [DT_FLOAT16] = "uint",
             [DT_BFLOAT16] = "uint", [DT_FLOAT32] = "float", [DT_FLOAT64] = "double"},
    /* with the 8/16-bit storage extensions; vk_glsl_lang_new packs them where missing */
    .buf_type = {[DT_BOOL] = "uint8_t", [DT_INT8] = "int8_t", [DT_UINT8] = "uint8_t",
                 [DT_INT16] = "int16_t", [DT_UINT16] = "uint16_t", [DT_INT32] = "int",
                 [DT_UINT32] = "uint", [DT_INT64] = "int64_t", [DT_UINT64] = "uint64_t",
                 [DT_FLOAT16] = "uint16_t", [DT_BFLOAT16] = "uint16_t", [DT_FLOAT32] = "float",
                 [DT_FLOAT64] = "double"},
    .wrap_type = {[DT_INT32] = "uint", [DT_UINT32] = "uint", [DT_INT64] = "uint64_t",
                  [DT_UINT64] = "uint64_t"},
    .short_name = {[DT_BOOL] = "b", [DT_INT8] = "i8", [DT_UINT8] = "u8", [DT_INT16] = "i16",
                   [DT_UINT16] = "u16", [DT_INT32] = "i32", [DT_UINT32] = "u32",
                   [DT_INT64] = "i64", [DT_UINT64] = "u64", [DT_FLOAT16] = "f16",
                   [DT_BFLOAT16] = "bf16", [DT_FLOAT32] = "f32", [DT_FLOAT64] = "f64"},
    .storage_only = B_SMALL_S | B_SMALL_U | F16 | BF16,
    .compute_type = DT_FLOAT32,
    .compute_of = {[DT_INT8] = DT_INT32, [DT_INT16] = DT_INT32, [DT_UINT8] = DT_UINT32,
                   [DT_UINT16] = DT_UINT32},

    .lit_suffix = {[DT_UINT8] = "u", [DT_UINT16] = "u", [DT_UINT32] = "u", [DT_INT64] = "l",
                   [DT_UINT64] = "ul", [DT_FLOAT64] = "lf"},
    .float_digits = {[DT_FLOAT32] = 9, [DT_FLOAT64] = 17},
    .true_lit = "true",
    .false_lit = "false",
    /* from the bits: GLSL has no inf or NaN literal */
    .inf = "$T(uintBitsToFloat(0x7f800000u))",
    .ninf = "$T(uintBitsToFloat(0xff800000u))",
    .nan = "$T(uintBitsToFloat(0x7fc00000u))",
    /* lavapipe (gallivm) builds x * 0.0 as 0, x + 0.0 as x and 0.0 - x as -x
     * whenever an operand is the constant +0.0, whatever the execution modes:
     * wrong for inf, NaN and -0. A zero read from the push constants is not a
     * constant to it (func_open; grid_x < 2^31, as kernels have fewer than 2^31
     * elements, so its top bit is 0). */
    .pos_zero = "$T(tvk_zero)",
    .storage_lit = "$T($0)",

    /* precise (SPIR-V NoContraction, here and on every variable): the compiler
     * must compute each float op as written, without fusing a * b + c into an
     * fma or reassociating (a - b) - c, as the CPU backend's C is compiled
     * (-ffp-contract=off): so the two agree bit for bit, and the exact range
     * reductions of the math helpers stay exact. The one fma is MULACC, which
     * codegen makes only of a reduce's acc + a * b (legalize.c). glslang marks every op whose
     * value reaches a precise variable or buffer element. */
    .buf_decl_file =
        "layout(set = 0, binding = $I, std430) $Rbuffer tvk_buf$I { precise $B $V[]; };\n",
    .push_open = "layout(push_constant, std430) uniform tvk_push {\n"
                 "  uint grid_x, grid_y, grid_z;\n",
    .push_member = "  int $V;\n",
    .push_close = "} pc;\n",
    .launch_decl = "layout(local_size_x = $0, local_size_y = $1, local_size_z = $2) in;\n",
    /* the linear group id of a grid the dispatcher may have split across x, y, z;
     * whole groups past the grid return (vk_dispatch.h) */
    .func_open = "void main() {  // $K\n"
                 "  uint tvk_lin = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y +\n"
                 "                 gl_NumWorkGroups.y * gl_WorkGroupID.z);\n"
                 "  if (tvk_lin >= pc.grid_x * pc.grid_y * pc.grid_z) return;\n"
                 "  const float tvk_zero = uintBitsToFloat(pc.grid_x >> 31);\n",
    .buf_decl = "",
    .ro_qualifier = "readonly ",
    .var_decl = "  const int $V = pc.$V;\n",
    .var_decl_f32 = "  const float $V = intBitsToFloat(pc.$V);\n",
    .no_vars = "",
    .var_unused = "",
    .func_close = "}\n",
    .local_decl = "shared $T $V[$I];\n",
    .barrier = "memoryBarrierShared(); barrier();",
    .specials = (const SpecialSpell[]){{"group_id", "int(tvk_lin)", ""},
                                       {"local_id", "int(gl_LocalInvocationID.x)", ""},
                                       {"subgroup_id", "int(gl_SubgroupID)", ""},
                                       {"subgroup_lane", "int(gl_SubgroupInvocationID)", ""}},
    .nspecials = 4,
    .indent = "  ",

    .decl = "precise $T $V = $0;",
    .assign = "$V = $0;",
    .range_open = "for ($T $V = 0; $V < $0; $V++) {",
    .range_close = "}",
    .index = "$0[$1]",
    .load_gated = "($2 ? $0 : $1)", /* glslang branches: memory is not read when false */
    .load_conv = {[DT_BOOL] = "(uint($0) != 0u)", [DT_INT8] = "int($0)", [DT_UINT8] = "uint($0)",
                  [DT_INT16] = "int($0)", [DT_UINT16] = "uint($0)", [DT_FLOAT16] = "uint($0)",
                  [DT_BFLOAT16] = "uint($0)"},
    .store_conv = {[DT_BOOL] = "uint8_t(uint($0))", [DT_INT8] = "int8_t($0)",
                   [DT_UINT8] = "uint8_t($0)", [DT_INT16] = "int16_t($0)",
                   [DT_UINT16] = "uint16_t($0)", [DT_FLOAT16] = "uint16_t($0)",
                   [DT_BFLOAT16] = "uint16_t($0)"},
    .store = "$0 = $1;",
    .store_gated = "if ($2) $0 = $1;",

    .max_vector = 4,
    /* a buffer's quads through a second block on its binding (vectorize.c) */
    .vec_type = {[DT_INT32] = "ivec4", [DT_UINT32] = "uvec4", [DT_FLOAT32] = "vec4"},
    .vec_buf_decl_file =
        "layout(set = 0, binding = $I, std430) $Rbuffer tvk_vbuf$I { precise $B $Vv[]; };\n",
    .vec_index = "$0v[$1]",
    .gep = "$0[$I]",
    .vectorize = "$T($0, $1, $2, $3)",
    .wide_type = {[DT_INT32] = "u64vec4", [DT_UINT32] = "u64vec4", [DT_FLOAT32] = "u64vec4"},
    .wide_buf_decl_file =
        "layout(set = 0, binding = $I, std430) $Rbuffer tvk_wbuf$I { precise $B $Vw[]; };\n",
    .wide_index = "$0w[$1]",
    .wide_gep = {[DT_INT32] = "int(tvk_lane8($0, $I))",
                 [DT_UINT32] = "tvk_lane8($0, $I)",
                 [DT_FLOAT32] = "uintBitsToFloat(tvk_lane8($0, $I))"},
    .wide_vectorize = {[DT_INT32] = OCTET("uint($0)", "uint($1)", "uint($2)", "uint($3)",
                                          "uint($4)", "uint($5)", "uint($6)", "uint($7)"),
                       [DT_UINT32] = OCTET("$0", "$1", "$2", "$3", "$4", "$5", "$6", "$7"),
                       [DT_FLOAT32] = OCTET("floatBitsToUint($0)", "floatBitsToUint($1)",
                                            "floatBitsToUint($2)", "floatBitsToUint($3)",
                                            "floatBitsToUint($4)", "floatBitsToUint($5)",
                                            "floatBitsToUint($6)", "floatBitsToUint($7)")},
    .wide_header =
        "// runs of 8 32-bit elements accessed as one u64vec4 (VKFEAT_WIDE)\n"
        "uint tvk_lane8(u64vec4 v, int i) { return unpackUint2x32(v[i >> 1])[i & 1]; }\n",
    /* a GROUP's combine across subgroups (lower.c, subgroup_combine) */
    .subgroup_reduce = {[OP_ADD] = "subgroupAdd($0)", [OP_MUL] = "subgroupMul($0)",
                        [OP_MAX] = "subgroupMax($0)"},
    .subgroup_header = "#extension GL_KHR_shader_subgroup_arithmetic : require\n",
    .alu =
        {
            [CL_FLOAT] =
                {
                    [OP_NEG] = S("(-$0)"),
                    [OP_EXP2] = H("tvk_exp2_f32($0)", math_f32),
                    [OP_LOG2] = H("tvk_log2_f32($0)", math_f32),
                    [OP_SIN] = H("tvk_sin_f32($0)", math_f32),
                    [OP_SQRT] = H("tvk_sqrt_f32($0)", math_f32),
                    [OP_RECIP] = H("tvk_recip_f32($0)", math_f32),
                    [OP_ADD] = S("($0+$1)"),
                    [OP_SUB] = S("($0-$1)"),
                    [OP_MUL] = S("($0*$1)"),
                    [OP_FDIV] = H("tvk_fdiv_f32($0, $1)", math_f32),
                    [OP_IDIV] = HN("tvk_fidiv_$N($0, $1)", fidiv, fmodx),
                    [OP_MOD] = HN("tvk_fmod_$N($0, $1)", fmod, fmodx),
                    [OP_POW] = H("tvk_pow_f32($0, $1)", math_f32),
                    [OP_MAX] = S("($1>$0?$1:$0)"), /* a unless b > a: max(NaN, 1) = NaN */
                    [OP_CMPLT] = S("($0<$1)"),
                    [OP_CMPNE] = S("($0!=$1)"),    /* glslang: unordered, true with a NaN */
                    [OP_WHERE] = S("($0?$1:$2)"),
                    [OP_MULACC] = S("fma($0, $1, $2)"),
                },
            [CL_SINT] = {GLSL_INT_OPS},
            [CL_UINT] = {GLSL_INT_OPS},
            /* bool math is the integer math truncated to bool (alu.c): + is ||, * is && */
            [CL_BOOL] =
                {
                    [OP_NEG] = S("$0"),
                    [OP_ADD] = S("($0||$1)"),
                    [OP_SUB] = S("($0!=$1)"),
                    [OP_MUL] = S("($0&&$1)"),
                    [OP_MAX] = S("($0||$1)"),
                    [OP_IDIV] = S("($0&&$1)"),
                    [OP_CMPLT] = S("(!$0&&$1)"),
                    [OP_CMPNE] = S("($0!=$1)"),
                    [OP_AND] = S("($0&&$1)"),
                    [OP_OR] = S("($0||$1)"),
                    [OP_XOR] = S("($0!=$1)"),
                    [OP_WHERE] = S("($0?$1:$2)"),
                },
        },
    .alu_dt = {[DT_FLOAT64] = glsl_f64_ops},
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
    .fits_nonneg_divmod = true, /* GLSL's % takes the divisor's sign (OpSMod) */
    .casts = glsl_casts,
    .ncasts = (int)(sizeof glsl_casts / sizeof glsl_casts[0]),
    .bitcasts = glsl_bitcasts,
    .nbitcasts = (int)(sizeof glsl_bitcasts / sizeof glsl_bitcasts[0]),
};
/* clang-format on */

/* ---------------------------------------------------------------- per device */

typedef struct {
  Lang lang; /* first: the Lang * is the allocation */
  char header[];
} GlslLang;

/* 8-bit (bytes = 1) or 16-bit (2) elements packed into uint words: element i
 * is part i % per of word i / per, stored by a macro with atomics. */
static void pack_elems(Lang *L, uint32_t dts, int bytes) {
  bool b8 = bytes == 1;
  for (int d = 0; d < DT_COUNT; d++) {
    if (!(dts & DT_BIT(d))) continue;
    bool sign = d == DT_INT8 || d == DT_INT16;
    L->buf_type[d] = "uint";
    L->index_elem[d] = b8 ? "$0[($1) >> 2], ($1) & 3" : "$0[($1) >> 1], ($1) & 1";
    L->load_conv[d] =
        b8 ? (sign ? "tvk_ld8s($0)" : "tvk_ld8u($0)") : (sign ? "tvk_ld16s($0)" : "tvk_ld16u($0)");
    L->store_conv[d] = "uint($0)";
    L->store_elem[d] = b8 ? "TVK_ST8($0, $1);" : "TVK_ST16($0, $1);";
    L->store_gated_elem[d] = b8 ? "if ($2) TVK_ST8($0, $1);" : "if ($2) TVK_ST16($0, $1);";
  }
  if (b8) L->load_conv[DT_BOOL] = "(tvk_ld8u($0) != 0u)";
}

/* The execution modes that keep IEEE's inf, NaN and signed zeros: without them
 * a compiler may fold x - x and x * 0 to 0 and 0 - x to -x (spirv-opt and
 * Mesa's NIR do). 4461 is SignedZeroInfNanPreserve, 4466 its capability; the
 * operand is the float width. A Vulkan 1.1 device has them through
 * VK_KHR_shader_float_controls, whose SPIR-V extension the module then names. */
#define PRESERVE(ext, w) "spirv_execution_mode(" ext "capabilities = [4466], 4461, " w ");\n"
#define FC_EXT "extensions = [\"SPV_KHR_float_controls\"], "

Lang *vk_glsl_lang_new(uint32_t features) {
  bool s8 = features & VKFEAT_STORAGE8, s16 = features & VKFEAT_STORAGE16;
  bool p32 = features & VKFEAT_PRESERVE32;
  bool p64 = (features & VKFEAT_PRESERVE64) && (features & VKFEAT_FLOAT64);
  bool fc_ext = features & VKFEAT_FLOAT_CONTROLS_EXT;
  const char *parts[] = {
      "#version 450\n",
      p32 || p64 ? "#extension GL_EXT_spirv_intrinsics : require\n" : "",
      !p32     ? ""
      : fc_ext ? PRESERVE(FC_EXT, "32")
               : PRESERVE("", "32"),
      /* glslang keeps one execution mode per id, the last: with both widths
       * the 64-bit one is added to the SPIR-V by vk_compile.c, and this line
       * (a comment) keeps such modules apart in the cache */
      !p64     ? ""
      : p32    ? "// SignedZeroInfNanPreserve 64: added to the SPIR-V\n"
      : fc_ext ? PRESERVE(FC_EXT, "64")
               : PRESERVE("", "64"),
      s8 ? "#extension GL_EXT_shader_8bit_storage : require\n" : "",
      s16 ? "#extension GL_EXT_shader_16bit_storage : require\n" : "",
      features & VKFEAT_INT64 ? "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : "
                                "require\n"
                              : "",
      s8 ? "" : tvk_glsl_pack8,
      s16 ? "" : tvk_glsl_pack16,
  };
  size_t n = 1;
  for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) n += strlen(parts[i]);
  GlslLang *g = malloc(sizeof *g + n);
  if (!g) return NULL;
  g->header[0] = '\0';
  for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) strcat(g->header, parts[i]);
  Lang *L = &g->lang;
  *L = glsl_base;
  L->file_header = g->header;
  if (!s8) pack_elems(L, DT_BIT(DT_BOOL) | DT_BIT(DT_INT8) | DT_BIT(DT_UINT8), 1);
  if (!s16) pack_elems(L, DT_BIT(DT_INT16) | DT_BIT(DT_UINT16) | F16 | BF16, 2);
  if (!(features & VKFEAT_INT64)) {
    L->type[DT_INT64] = L->type[DT_UINT64] = NULL;
    L->no_type[DT_INT64] = L->no_type[DT_UINT64] =
        "64-bit integers need the Vulkan feature shaderInt64, which this device lacks";
  }
  if ((features & VKFEAT_WIDE) && (features & VKFEAT_INT64)) L->max_vector = 8; /* octets */
  if (!(features & VKFEAT_FLOAT64)) {
    L->type[DT_FLOAT64] = NULL;
    L->no_type[DT_FLOAT64] = "float64 needs the Vulkan feature shaderFloat64, which this device "
                             "lacks";
  }
  return L;
}

void vk_glsl_lang_free(Lang *lang) { free(lang); }

uint32_t vk_lang_features(const VkDev *v) {
  bool cpu = v->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  return v->features | (cpu ? (uint32_t)VKFEAT_WIDE : 0u);
}

tvk_status vk_glsl_attach(VkDev *v) {
  if (!(v->glsl = vk_glsl_lang_new(vk_lang_features(v))))
    return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "out of memory creating the Vulkan device");
  v->base.lang = v->glsl;
  v->base.codegen_mode = CG_MODE_GRID;
  return TVK_OK;
}
