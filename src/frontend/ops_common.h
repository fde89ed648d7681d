/* What the tensor ops (ops_*.c) share: input checks, shapes and their
 * messages, broadcasting and dtype promotion (the bc_ functions), axis
 * normalisation, movement of graph nodes, and NULL-safe builders of
 * elementwise graphs (ew_). docs/frontend.md explains how the ops use them.
 *
 * NULL safety: every builder here returns NULL when an argument is NULL (a
 * builder below ran out of memory) and never dereferences it, so an op builds
 * its whole graph and checks for NULL once at the end. All UOps returned are
 * autoreleased into the context's current pool (the op's FRONT_BEGIN).
 */
#ifndef TVK_FRONTEND_OPS_COMMON_H
#define TVK_FRONTEND_OPS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frontend/frontend.h"

/* ---- inputs and messages ---- */

/* NULL (*bad = false) when every input is a tensor in the OK state and all
 * share one context (symbolic shapes allowed). Otherwise *bad = true and the result is the error
 * tensor to return (tensor_check_inputs: the first NULL or error input, or tensors of two
 * contexts); it is NULL when every input is NULL (no context to attach an error to) or memory ran
 * out. */
tvk_tensor *bc_check_sym(const char *op, int n, tvk_tensor *const *ts, bool *bad);
/* bc_check_sym that also refuses a tensor with a symbolic dim (a size
 * variable, tvk.h), naming op: what every op that does not take symbolic
 * sizes yet calls. */
tvk_tensor *bc_check(const char *op, int n, tvk_tensor *const *ts, bool *bad);

/* A shape written as a Python tuple into buf: "()", "(4,)", "(2, 3)". Returns buf. */
const char *bc_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);
#define BC_SHAPE_STR_MAX (TVK_MAX_DIMS * 22 + 4)

/* The product of a shape, or -1 when it does not fit in int64. A symbolic
 * dim counts as its largest value (the count to check against limits). */
int64_t bc_numel(int ndim, const int64_t *shape);

/* A new tensor for node u with the given dtype and shape, or the error tensor
 * "<op>: out of memory" when u is NULL (a builder ran out of memory). */
tvk_tensor *bc_result(tvk_ctx *ctx, const char *op, UOp *u, ScalarType s, int ndim,
                      const int64_t *shape);
/* A new tensor sharing a's node, dtype and shape (ops that change nothing). */
tvk_tensor *bc_same(const tvk_tensor *a);

/* ---- broadcasting and promotion ---- */

/* The numpy broadcast shape of n shapes (aligned at the end; size 1 stretches).
 * false when two dims differ and neither is 1. */
bool bc_broadcast_shape(int n, tvk_tensor *const *ts, int *ndim, int64_t *shape);
/* The promoted dtype of n tensors (dt_promote, left to right). */
ScalarType bc_promote(int n, tvk_tensor *const *ts);
/* x, of shape (xnd, xs), seen with shape (nd, shape): leading 1s added by a
 * reshape, size-1 dims stretched by an expand. The shapes must broadcast. */
UOp *bc_to_shape(UOp *x, int xnd, const int64_t *xs, int nd, const int64_t *shape);

/* Normalises axis (negative counts from the end) for ndim dims: the axis in
 * 0..ndim-1, or -1 when out of range. */
int bc_axis(int axis, int ndim);
/* One axis of a, as the single-axis ops (softmax, cumsum, ...) take it: checks
 * a (bc_check) and the axis; *ax in 0..max(ndim, 1)-1 (a 0-d tensor is one
 * element along axis 0 or -1). NULL with *bad false on success, else *bad and
 * the error tensor to return. */
tvk_tensor *bc_check_axis(const char *op, tvk_tensor *a, int axis, int *ax, bool *bad);
/* bc_check_axis that lets symbolic shapes through (bc_check_sym). */
tvk_tensor *bc_check_axis_sym(const char *op, tvk_tensor *a, int axis, int *ax, bool *bad);

/* The axes of one reduction, checked and normalised. */
typedef struct {
  int n;                      /* number of reduced axes */
  int64_t axes[TVK_MAX_DIMS]; /* ascending */
  int64_t keep[TVK_MAX_DIMS]; /* the input shape with 1 at the axes */
  int out_nd;                 /* the result's dims (keepdim or not) */
  int64_t out[TVK_MAX_DIMS];
  sint count; /* elements reduced into each output (symbolic over a symbolic axis) */
} BcAxes;

/* Parses the axes of a reduction (naxes == 0 or axes NULL: all; negative from
 * the end; a dim named twice is an error); NULL or an error tensor. */
tvk_tensor *bc_reduce_axes(const char *op, const tvk_tensor *a, int naxes, const int *axes,
                           bool keepdim, BcAxes *r);

/* NULL when a reduce of a over ax can run: a symbolic axis reduced is one
 * loop, so its largest trip count is bounded (ops_reduce.c); else the error
 * tensor naming op. */
tvk_tensor *front_check_sym_reduce(const char *op, const tvk_tensor *a, const BcAxes *ax);

/* REDUCE_AXIS of x over axes[0..naxes) (ascending, keepdim shape) with op
 * (ADD, MUL, MAX), split as every reduce of tvk's is (ops_reduce.c), so that
 * no kernel reduces too long a run per output. */
UOp *front_reduce(tvk_ctx *ctx, UOp *x, Op op, int naxes, const int64_t *axes);

/* ---- movement of graph nodes (graph_view over a tracker of x's shape) ---- */

UOp *bc_reshape(UOp *x, int nd, const int64_t *shape, int new_nd, const int64_t *new_shape);
UOp *bc_permute(UOp *x, int nd, const int64_t *shape, const int *order);
UOp *bc_expand(UOp *x, int nd, const int64_t *shape, const int64_t *new_shape); /* same nd */
UOp *bc_pad(UOp *x, int nd, const int64_t *shape, const int64_t (*pads)[2]);
UOp *bc_shrink(UOp *x, int nd, const int64_t *shape, const int64_t (*ranges)[2]);
UOp *bc_flip(UOp *x, int nd, const int64_t *shape, const bool *flip);

/* ---- elementwise builders ----
 * An Ew is the frame of one elementwise computation: every node it builds has
 * its shape. */
typedef struct {
  tvk_ctx *ctx;
  int ndim;
  int64_t shape[TVK_MAX_DIMS];
} Ew;

Ew ew_frame(tvk_ctx *ctx, int ndim, const int64_t *shape);
/* A constant of scalar type s broadcast to the frame's shape: v converted as
 * tvk_cast does, or the exact value c (integers past 2^53). */
UOp *ew_const(const Ew *e, ScalarType s, double v);
UOp *ew_const_val(const Ew *e, ScalarType s, CVal c);
/* A constant of x's dtype. */
UOp *ew_like(const Ew *e, UOp *x, double v);

UOp *ew_alu1(Op op, UOp *a);
UOp *ew_alu2(Op op, UOp *a, UOp *b);
UOp *ew_alu3(Op op, UOp *a, UOp *b, UOp *c);
UOp *ew_cast(UOp *x, ScalarType s); /* x itself when already s */

/* Shorthands, all NULL-safe. */
static inline UOp *ew_add(UOp *a, UOp *b) { return ew_alu2(OP_ADD, a, b); }
static inline UOp *ew_mul(UOp *a, UOp *b) { return ew_alu2(OP_MUL, a, b); }
static inline UOp *ew_lt(UOp *a, UOp *b) { return ew_alu2(OP_CMPLT, a, b); }
static inline UOp *ew_ne(UOp *a, UOp *b) { return ew_alu2(OP_CMPNE, a, b); }
static inline UOp *ew_where(UOp *c, UOp *a, UOp *b) { return ew_alu3(OP_WHERE, c, a, b); }
/* x * c, x + c with c a constant of x's dtype. */
UOp *ew_mulc(const Ew *e, UOp *x, double c);
UOp *ew_addc(const Ew *e, UOp *x, double c);
/* Logical not of a bool: x != true. */
UOp *ew_not(const Ew *e, UOp *x);
/* x != 0 as bool (x itself when already bool). */
UOp *ew_truth(const Ew *e, UOp *x);
/* x != x: true exactly at NaNs (bool). */
UOp *ew_isnan(UOp *x);

/* ---- operand layouts for the CPU's register tiles (ops_matmul.c) ---- */

/* Rows per panel of a packed operand. */
#define MM_PANEL 16
/* a (..., M, K), M % MM_PANEL == 0, copied into (..., M / MM_PANEL, K,
 * MM_PANEL) contiguous and read back through a view as (..., M, K): a
 * register tile's rows at one k are then neighbours. */
tvk_tensor *mm_row_panels(tvk_tensor *a);

#endif
