/* Legalisation (codegen.h), the last rewrite before linearizing.
 *
 * Spelling: the seed writes a - b on ints as a + b * -1; put SUB and NEG back
 * so the source reads as written and bounds stay tight. On a device
 * with a fast fused multiply-add (DeviceLimits.fma), a reduce that
 * accumulates a product, acc + a * b on float32 or float64 (a matmul, a
 * convolution), becomes MULACC, which each language spells as its fma
 * (render_c.c, vk_glsl.c): one rounding instead of two, one instruction in
 * the inner loop instead of two. Only
 * there: elementwise math (the polynomials of sin and log that tvk_randn
 * uses) keeps its two roundings, so it stays bit-identical across devices
 * whether or not they fuse. Float16 and bfloat16 are not fused either: their
 * product rounds to the storage type before the add, as the IR says.
 *
 * Dtypes: a language that only stores some dtypes (C: float16 and bfloat16,
 * kept as uint16_t bits; GLSL also 8- and 16-bit ints, held in 32-bit ones)
 * computes on them in their compute type. Each op converts its operands up,
 * computes, and rounds its result back, so every op rounds once to the storage
 * type as the IR's constant evaluation does (computing in float32 and rounding
 * to float16 or bfloat16 gives the correctly rounded result for + - * / sqrt, as
 * float32 has more than twice their precision plus two bits; for ints, the
 * conversion back is the wrap-around). */
#include "codegen/codegen.h"
#include "codegen/render.h"
#include "ir/pattern.h"

typedef struct {
  const Lang *lang;
  Error *err;
} LegalCtx;

static bool storage(const LegalCtx *lc, DType d) {
  return (lc->lang->storage_only >> d.scalar) & 1u;
}
/* The type storage-only d is computed in. */
static DType compute(const LegalCtx *lc, DType d) {
  uint8_t c = lc->lang->compute_of[d.scalar];
  return dt_make((ScalarType)(c ? c : lc->lang->compute_type));
}

enum { X = 1 };

/* A rule's builder ran out of memory: "no change" would leave math on storage
 * dtypes in the graph, so record the error. */
static UOp *oom(const LegalCtx *lc) {
  err_first(lc->err, TVK_ERR_OUT_OF_MEMORY, "legalize: out of memory");
  return NULL;
}

/* op(a, b) on storage dtypes -> cast(op(cast(a), cast(b))) */
static UOp *alu_up(void *ctx, UOp **c) {
  const LegalCtx *lc = ctx;
  UOp *u = c[X], *src[3];
  bool any = storage(lc, u->dtype);
  for (uint32_t i = 0; i < u->nsrc && i < 3; i++) {
    any |= storage(lc, u->src[i]->dtype);
    DType d = u->src[i]->dtype;
    src[i] = storage(lc, d) ? uop_cast(u->src[i], compute(lc, d)) : u->src[i];
    if (!src[i]) return oom(lc);
  }
  if (!any || u->nsrc > 3) return NULL;
  UOp *r = uop_alu((Op)u->op, (int)u->nsrc, src);
  if (r && storage(lc, u->dtype)) r = uop_cast(r, u->dtype);
  return r ? r : oom(lc);
}

/* cast(x: storage, T) -> cast(cast(x, compute), T)  for T other than the compute type;
 * cast(cast(x: S, compute), S) -> x  (exact round trip);
 * cast(CONST: storage, compute) -> CONST  (exact) */
static UOp *cast_up(void *ctx, UOp **c) {
  const LegalCtx *lc = ctx;
  UOp *u = c[X], *x = u->src[0];
  if (x->op == OP_CAST && storage(lc, x->src[0]->dtype) &&
      dt_eq(x->dtype, compute(lc, x->src[0]->dtype)) && dt_eq(x->src[0]->dtype, u->dtype))
    return x->src[0];
  if (!storage(lc, x->dtype)) return NULL;
  DType cd = compute(lc, x->dtype);
  UOp *r = NULL;
  if (dt_eq(u->dtype, cd)) {
    if (x->op != OP_CONST) return NULL;
    CVal v = cval_cast(uop_const_val(x), (ScalarType)x->dtype.scalar, (ScalarType)cd.scalar);
    r = uop_const(u->ctx, cd, v);
  } else {
    UOp *up = uop_cast(x, cd);
    r = up ? uop_cast(up, u->dtype) : NULL;
  }
  return r ? r : oom(lc);
}

enum { Y = 2, Z = 3 };

static UOp *to_neg(void *ctx, UOp **c) { return (void)ctx, uop_neg(c[X]); }
static UOp *to_sub(void *ctx, UOp **c) { return (void)ctx, uop_alu2(OP_SUB, c[X], c[Y]); }
/* acc + a * b -> MULACC(a, b, acc) */
static UOp *to_mulacc(void *ctx, UOp **c) {
  UOp *r = uop_alu(OP_MULACC, 3, (UOp *[]){c[X], c[Y], c[Z]});
  return r ? r : oom(ctx);
}

static const Rule legal_rules[] = {
    /* op(a, b) on storage dtypes -> cast(op(cast(a), cast(b))) */
    {UPAT(.groups = G_ALU, .slot = X), alu_up},
    /* casts from storage dtypes go through the compute type */
    {PAT_OP0(OP_CAST, X), cast_up},
    /* x * -1 -> -x  (ints: the same value, wrap-around included) */
    {UPAT(.ops = P_OPS(OP_MUL), .dtypes = DT_BITS_INT, .kind = UPAT_SRC_PERM, .nsrc = 2,
          .src = P_SRC(PAT_ANY(X), PAT_CONST_VAL(-1))),
     to_neg},
    /* x + -y -> x - y  (ints) */
    {UPAT(.ops = P_OPS(OP_ADD), .dtypes = DT_BITS_INT, .kind = UPAT_SRC_PERM, .nsrc = 2,
          .src = P_SRC(PAT_ANY(X), PAT_OP(OP_NEG, 0, PAT_ANY(Y)))),
     to_sub},
    /* last two, as only a device with a fast fma has them (legalize_dtypes):
     * acc + a * b -> MULACC(a, b, acc)  (float32, float64) */
    {UPAT(.ops = P_OPS(OP_ADD), .dtypes = DT_BIT(DT_FLOAT32) | DT_BIT(DT_FLOAT64),
          .kind = UPAT_SRC_PERM, .nsrc = 2,
          .src = P_SRC(PAT_OP(OP_MUL, 0, PAT_ANY(X), PAT_ANY(Y)), PAT_OP0(OP_DEFINE_ACC, Z))),
     to_mulacc},
    /* and the next of a chain of them (a loop unrolled in order, vectorize.c):
     * MULACC(..) + a * b -> MULACC(a, b, MULACC(..)) */
    {UPAT(.ops = P_OPS(OP_ADD), .dtypes = DT_BIT(DT_FLOAT32) | DT_BIT(DT_FLOAT64),
          .kind = UPAT_SRC_PERM, .nsrc = 2,
          .src = P_SRC(PAT_OP(OP_MUL, 0, PAT_ANY(X), PAT_ANY(Y)), PAT_OP0(OP_MULACC, Z))),
     to_mulacc},
};

tvk_status legalize_dtypes(UOp *sink, const Lang *lang, bool fma, UOp **out, Error *err) {
  *out = sink;
  LegalCtx lc = {lang, err};
  PatternMatcher *pm = pm_new(legal_rules, RULES_N(legal_rules) - (fma ? 0 : 2));
  UOp *res = pm ? graph_rewrite(sink, pm, &lc, false) : NULL;
  pm_free(pm);
  if (err->status != TVK_OK) return err->status;
  if (!res) return err_first(err, TVK_ERR_OUT_OF_MEMORY, "legalize: out of memory");
  *out = res;
  return TVK_OK;
}
