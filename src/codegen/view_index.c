/* A ShapeTracker's index arithmetic as UOps (the seed's to_indexed_uops):
 * what lowering turns each load's and store's view into. */
#include "codegen/codegen.h"
#include "ir/sint_expr.h"
#include "ir/symbolic.h"

/* Builders that pass NULL (out of memory) through. */
static UOp *b_alu2(Op op, UOp *a, UOp *b) { return a && b ? uop_alu2(op, a, b) : NULL; }
static UOp *b_and(UOp *acc, UOp *cond) { return !acc ? cond : b_alu2(OP_AND, acc, cond); }

/* idx = offset + sum idx[d]*stride[d]; valid &= lo <= idx[d] < hi for masked
 * dims (the seed's View.to_indexed_uops). *valid NULL means "true so far".
 * A symbolic size becomes its expression over DEFINE_VARs (sint_uop). */
static bool view_uops(const View *v, UCtx *ctx, DType idt, UOp *const *idxs, UOp **index,
                      UOp **valid) {
  UOp *sum = NULL;
  for (int d = 0; d < v->ndim; d++) {
    if (v->shape[d] == 1 || v->strides[d] == 0) continue;
    UOp *term = idxs[d];
    if (v->strides[d] != 1) term = b_alu2(OP_MUL, term, sint_uop(ctx, idt, v->strides[d]));
    /* NULL is out of memory here, never "no terms yet" */
    if (!(sum = sum ? b_alu2(OP_ADD, sum, term) : term)) return false;
  }
  UOp *off = sint_uop(ctx, idt, v->offset);
  *index = !sum ? off : v->offset ? b_alu2(OP_ADD, sum, off) : sum;
  if (!*index) return false;
  for (int d = 0; v->has_mask && d < v->ndim; d++) {
    if (v->mask[d][0] != 0) { /* idx >= lo, written as the seed does: !(idx < lo) */
      UOp *lt = b_alu2(OP_CMPLT, idxs[d], sint_uop(ctx, idt, v->mask[d][0]));
      if (!(*valid = b_and(*valid, b_alu2(OP_CMPNE, lt, uop_const_int(ctx, DT(BOOL), 1)))))
        return false;
    }
    if (sint_may_differ(v->mask[d][1], v->shape[d])) {
      UOp *lt = b_alu2(OP_CMPLT, idxs[d], sint_uop(ctx, idt, v->mask[d][1]));
      if (!(*valid = b_and(*valid, lt))) return false;
    }
  }
  return true;
}

/* Digits of a flat index UOp in shape: (flat // acc) % shape[d]. */
static bool unravel_uops(const View *v, UCtx *ctx, DType idt, UOp *flat, UOp **out) {
  sint acc = 1;
  for (int d = v->ndim - 1; d >= 0; d--) {
    UOp *q = acc == 1 ? flat : b_alu2(OP_IDIV, flat, sint_uop(ctx, idt, acc));
    out[d] = v->shape[d] == 1 ? uop_const_int(ctx, idt, 0)
                              : b_alu2(OP_MOD, q, sint_uop(ctx, idt, v->shape[d]));
    if (!out[d]) return false;
    acc = sint_mul(acc, v->shape[d]);
  }
  return true;
}

bool st_to_indexed_uops(const ShapeTracker *st, UCtx *ctx, DType idt, UOp *const *idxs, UOp **index,
                        UOp **valid) {
  UOp *idx = NULL, *vld = NULL, *sub[TVK_MAX_DIMS];
  if (!view_uops(st_top(st), ctx, idt, idxs, &idx, &vld)) return false;
  for (int i = st->nviews - 2; i >= 0; i--) {
    View m = view_minify(&st->views[i]);
    if (!unravel_uops(&m, ctx, idt, idx, sub) || !view_uops(&m, ctx, idt, sub, &idx, &vld))
      return false;
  }
  if (!vld) vld = uop_const_int(ctx, DT(BOOL), 1);
  *index = uop_simplify(idx);
  *valid = uop_simplify(vld);
  return *index && *valid;
}
