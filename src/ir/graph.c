/* The tensor graph's helpers: see graph.h. */
#include "ir/graph.h"

#include <string.h>

UOp *graph_buffer_on(UCtx *ctx, ScalarType s, int64_t id, int64_t numel, int device) {
  return uop_new(ctx, OP_BUFFER, dt_make(s), 0, NULL,
                 arg_ints(3, (const int64_t[]){id, numel, device}));
}

UOp *graph_multi(int n, UOp *const *parts, int axis) {
  return n > 0 && parts[0]
             ? uop_new(parts[0]->ctx, OP_MULTI, parts[0]->dtype, n, parts, arg_int(axis))
             : NULL;
}

UOp *graph_copy(UOp *x, int device) {
  if (!x) return NULL;
  return uop_new(x->ctx, OP_COPY, x->dtype, 1, &x, arg_int(device));
}

UOp *graph_value(UCtx *ctx, uint64_t serial, float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  return uop_new(ctx, OP_VALUE, dt_make(DT_FLOAT32), 0, NULL,
                 arg_ints(2, (const int64_t[]){(int64_t)serial, (int64_t)bits}));
}

int graph_shape(UOp *u, int64_t *shape) {
  for (;;) {
    if (u->op == OP_VIEW) {
      int nd = st_ndim(u->arg.st);
      memcpy(shape, st_shape(u->arg.st), (size_t)nd * sizeof *shape);
      return nd;
    }
    if (u->op == OP_REDUCE_AXIS) {
      int nd = graph_shape(u->src[0], shape);
      for (int i = 0; i < u->arg.red.n; i++) shape[u->arg.red.axes[i]] = 1;
      return nd;
    }
    if (u->op == OP_MULTI && u->arg.i >= 0) { /* the parts' lengths along the axis, summed */
      int nd = graph_shape(u->src[0], shape);
      int64_t part[TVK_MAX_DIMS];
      for (uint32_t k = 1; k < u->nsrc; k++) {
        graph_shape(u->src[k], part);
        shape[u->arg.i] = sint_add(shape[u->arg.i], part[u->arg.i]);
      }
      return nd;
    }
    if (u->nsrc == 0) return 0; /* a bare CONST or BUFFER: scalar */
    /* WHERE's condition has the same shape as the values: any source will do */
    u = u->src[0];
  }
}

sint graph_numel(UOp *u) {
  sint shape[TVK_MAX_DIMS], n = 1;
  int nd = graph_shape(u, shape);
  for (int d = 0; d < nd; d++) n = sint_mul(n, shape[d]);
  return n;
}

UOp *graph_view(UOp *x, const ShapeTracker *st) {
  if (!x || !st) return NULL; /* a source that ran out of memory, as uop_new */
  if (x->op != OP_VIEW) return uop_new(x->ctx, OP_VIEW, x->dtype, 1, &x, arg_st(st));
  ShapeTracker *c = st_compose(x->arg.st, st);
  if (!c) return NULL;
  UOp *base = x->src[0];
  UOp *v = uop_new(x->ctx, OP_VIEW, x->dtype, 1, &base, arg_st(c));
  st_free(c);
  return v;
}
