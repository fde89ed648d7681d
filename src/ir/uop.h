/* The UOp: the one IR of tvk, from the tensor graph to the linear kernel.
 *
 * A UOp is (op, dtype, src[], arg). UOps are immutable and hash-consed per
 * UCtx: building the same (op, dtype, src, arg) twice gives the same pointer, so
 * pointer equality is structural equality.
 *
 * Ownership: every UOp is reference counted and holds a reference on each of its
 * sources. Constructors return an *autoreleased* pointer: the reference belongs
 * to the context's current pool and is dropped when the pool is drained. Keep a
 * UOp beyond that with uop_retain (and later uop_release). This lets builders
 * nest, e.g. uop_add(uop_mul(x, c), y), without leaking the inner node.
 * When the last reference of a UOp goes, it is freed, removed from the intern
 * table, and releases its sources.
 */
#ifndef TVK_IR_UOP_H
#define TVK_IR_UOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dtype.h"
#include "ops.h"

typedef struct UOp UOp;
typedef struct UCtx UCtx;
typedef struct ShapeTracker ShapeTracker; /* view.h */

/* ---- args: small tagged values, hashed and compared by value ---- */

typedef enum {
  ARG_NONE = 0,
  ARG_INT,    /* i: CONST of bool/int dtypes (uint64 as bits), RANGE axis id, GEP index ... */
  ARG_FLOAT,  /* f: CONST of float dtypes; compared by bit pattern */
  ARG_INTS,   /* ints: a tuple of int64 (PERMUTE order, axes, ...) */
  ARG_VAR,    /* var: DEFINE_VAR (name, lo, hi); SPECIAL (name, 0, size-1) */
  ARG_REDUCE, /* red: REDUCE_AXIS (op, axes) */
  ARG_ST,     /* st: a ShapeTracker (VIEW) */
} ArgKind;

typedef struct {
  uint8_t kind; /* ArgKind */
  union {
    int64_t i;
    double f;
    struct {
      int n;
      const int64_t *v;
    } ints;
    struct {
      const char *name;
      int64_t lo, hi;
    } var;
    struct {
      uint8_t op; /* Op: ADD, MUL, MAX */
      int n;
      const int64_t *axes;
    } red;
    const ShapeTracker *st;
  };
} Arg;

/* Arg constructors. Pointed-to data is copied when a UOp is interned, so
 * callers may pass stack memory. */
static inline Arg arg_none(void) { return (Arg){.kind = ARG_NONE}; }
static inline Arg arg_int(int64_t i) { return (Arg){.kind = ARG_INT, .i = i}; }
static inline Arg arg_float(double f) { return (Arg){.kind = ARG_FLOAT, .f = f}; }
static inline Arg arg_ints(int n, const int64_t *v) {
  return (Arg){.kind = ARG_INTS, .ints = {n, v}};
}
static inline Arg arg_var(const char *name, int64_t lo, int64_t hi) {
  return (Arg){.kind = ARG_VAR, .var = {name, lo, hi}};
}
static inline Arg arg_reduce(Op op, int n, const int64_t *axes) {
  return (Arg){.kind = ARG_REDUCE, .red = {(uint8_t)op, n, axes}};
}
static inline Arg arg_st(const ShapeTracker *st) { return (Arg){.kind = ARG_ST, .st = st}; }
bool arg_eq(const Arg *a, const Arg *b);
uint64_t arg_hash(const Arg *a);
/* Append a readable form of the arg to buf (snprintf-style: returns chars needed). */
int arg_str_render(const Arg *a, char *buf, size_t n);

/* ---- the node ---- */

struct UOp {
  uint8_t op; /* Op */
  DType dtype;
  uint32_t nsrc;
  Arg arg;
  UOp **src; /* nsrc sources, stored after the struct */
  UCtx *ctx;
  uint64_t hash;
  int64_t refs;
  UOp *chain; /* intern table bucket chain */
  /* cached derived facts; not part of identity (see symbolic.h) */
  uint8_t mm_state; /* 0 unknown, 1 vmin/vmax valid */
  int64_t vmin, vmax;
  /* The device whose memory a tensor-graph node's value lives in (an index
   * of the frontend's context), set by uop_new from the node: BUFFER's and
   * COPY's own, else the one its sources agree on; UOP_DEVICE_NONE for a
   * node of no memory (constants, kernel ASTs), UOP_DEVICE_MULTI for a
   * MULTI and what is computed from it (with constants or other MULTIs),
   * UOP_DEVICE_MIXED where two sources disagree (an op the frontend
   * refuses). Kept here, not found by
   * a walk, so that every op can check its inputs' devices at no cost. */
  int16_t device;
};
enum { UOP_DEVICE_NONE = -1, UOP_DEVICE_MIXED = -2, UOP_DEVICE_MULTI = -3 };

/* ---- context ---- */

UCtx *uctx_new(void);              /* NULL on out of memory */
void uctx_free(UCtx *ctx);         /* drains every pool and frees every UOp left; NULL ok */
size_t uctx_live(const UCtx *ctx); /* number of UOps alive (for leak tests) */
/* Called with each BUFFER UOp as it is freed (not at uctx_free), so whoever
 * owns the storage a BUFFER names can free it with the last reference. */
void uctx_set_buffer_hook(UCtx *ctx, void (*fn)(void *user, UOp *buffer), void *user);

/* Autorelease pools: mark, build, drain. Draining drops the pool's references
 * taken since the mark. Pools nest (a drain only goes back to its mark). */
size_t uop_pool_mark(UCtx *ctx);
void uop_pool_drain(UCtx *ctx, size_t mark);
/* Drain to mark but keep `keep` alive in the (now outer) pool; returns keep. */
UOp *uop_pool_drain_keep(UCtx *ctx, size_t mark, UOp *keep);
/* Hand a reference you own to the current pool. */
UOp *uop_autorelease(UOp *u);

UOp *uop_retain(UOp *u);  /* +1; returns u. NULL ok */
void uop_release(UOp *u); /* -1; frees at 0. NULL ok */

/* ---- construction (all results autoreleased; NULL only on out of memory) ----
 * A NULL source (a builder that ran out of memory) gives NULL, so a chain of
 * builders needs one check at its end, and a failure is never mistaken for
 * an absent operand. */

UOp *uop_new(UCtx *ctx, Op op, DType dtype, int nsrc, UOp *const *src, Arg arg);
/* How many nodes uop_new failed to allocate in ctx so far: a pass whose
 * rules return NULL for "no change" compares it before and after, so a
 * rule that ran out of memory is not taken for one that did not match. */
uint64_t uctx_alloc_failures(const UCtx *ctx);
/* Same node with other sources / another arg / another dtype. */
UOp *uop_replace_src(UOp *u, int nsrc, UOp *const *src);
UOp *uop_replace_arg(UOp *u, Arg arg);
UOp *uop_replace_dtype(UOp *u, DType dt);

/* Constants are truncated to the dtype (dt_truncate_*); vector dtypes are not
 * allowed here. */
UOp *uop_const(UCtx *ctx, DType dt, CVal v);
UOp *uop_const_int(UCtx *ctx, DType dt, int64_t v);  /* converts for float dtypes */
UOp *uop_const_float(UCtx *ctx, DType dt, double v); /* converts for int dtypes */
UOp *uop_const_like(UOp *u, int64_t v);              /* const of u's scalar dtype */
static inline bool uop_is_const(const UOp *u) { return u->op == OP_CONST; }
CVal uop_const_val(const UOp *u);      /* of a CONST */
double uop_const_double(const UOp *u); /* of a CONST, as double */

/* Variables: an int32 DEFINE_VAR with bounds lo <= v <= hi. */
UOp *uop_var(UCtx *ctx, const char *name, int64_t lo, int64_t hi);
/* RANGE over [0, end) with an axis id (int32). */
UOp *uop_range(UCtx *ctx, UOp *end, int64_t axis_id);
UOp *uop_range_n(UCtx *ctx, int64_t end, int64_t axis_id);

/* ALU ops. The result dtype is the seed's: bool for CMPLT/CMPNE, else that of
 * the last source (the second and third for WHERE). Sources must agree in dtype
 * (except WHERE's condition); callers cast first. */
UOp *uop_alu(Op op, int nsrc, UOp *const *src);
UOp *uop_alu1(Op op, UOp *a);
UOp *uop_alu2(Op op, UOp *a, UOp *b);
UOp *uop_alu3(Op op, UOp *a, UOp *b, UOp *c);
static inline UOp *uop_add(UOp *a, UOp *b) { return uop_alu2(OP_ADD, a, b); }
static inline UOp *uop_mul(UOp *a, UOp *b) { return uop_alu2(OP_MUL, a, b); }
static inline UOp *uop_idiv(UOp *a, UOp *b) { return uop_alu2(OP_IDIV, a, b); }
static inline UOp *uop_mod(UOp *a, UOp *b) { return uop_alu2(OP_MOD, a, b); }
static inline UOp *uop_max(UOp *a, UOp *b) { return uop_alu2(OP_MAX, a, b); }
static inline UOp *uop_lt(UOp *a, UOp *b) { return uop_alu2(OP_CMPLT, a, b); }
static inline UOp *uop_ne(UOp *a, UOp *b) { return uop_alu2(OP_CMPNE, a, b); }
static inline UOp *uop_and(UOp *a, UOp *b) { return uop_alu2(OP_AND, a, b); }
static inline UOp *uop_neg(UOp *a) { return uop_alu1(OP_NEG, a); }
static inline UOp *uop_where(UOp *c, UOp *a, UOp *b) { return uop_alu3(OP_WHERE, c, a, b); }
/* With a constant of a's dtype as the second operand. */
UOp *uop_add_c(UOp *a, int64_t c);
UOp *uop_mul_c(UOp *a, int64_t c);
UOp *uop_idiv_c(UOp *a, int64_t c);
UOp *uop_mod_c(UOp *a, int64_t c);
UOp *uop_lt_c(UOp *a, int64_t c);
UOp *uop_sub(UOp *a, UOp *b);    /* a + (-1)*b for ints (as the seed), SUB kept for floats */
UOp *uop_cast(UOp *a, DType dt); /* returns a when already dt */
UOp *uop_sink(UCtx *ctx, int nsrc, UOp *const *src);

/* ---- traversal and printing ---- */

/* Every UOp reachable from root, sources before users, root last. Returns a
 * malloc'd array (caller frees) and sets *n. NULL on out of memory. */
UOp **uop_toposort(UOp *root, size_t *n);
/* Readable multi-line dump in the style of the seed's pretty_print: a node
 * used more than once is named (x3:=...) at first use and referred to after.
 * Returns malloc'd text (caller frees). */
char *uop_pretty(UOp *root);
void uop_print(FILE *f, UOp *root);

#endif
