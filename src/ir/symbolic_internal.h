/* Helpers shared by the symbolic files (not part of the public API).
 *
 * A Sum is an integer expression read as a linear combination
 * sum(f[i] * v[i]) + k: ADD chains are flattened, MUL by a constant gives a
 * coefficient, equal v are merged. This holds in the ring of the dtype
 * (wrap-around arithmetic). To use it as an identity between exact integers,
 * sum_range must succeed: then the exact value of the combination lies in the
 * dtype's range, so the IR's wrapping value equals it. */
#ifndef TVK_IR_SYMBOLIC_INTERNAL_H
#define TVK_IR_SYMBOLIC_INTERNAL_H

#include "symbolic.h"

#define SYM_MAX_TERMS 32

typedef struct {
  UOp *v;
  int64_t f;
} SymTerm;

typedef struct {
  int n;
  SymTerm t[SYM_MAX_TERMS];
  int64_t k;
} SymSum;

/* Scalar integer UOp (not bool, not a vector or pointer). */
static inline bool sym_is_int(const UOp *u) {
  return u->dtype.count == 1 && !dt_is_ptr(u->dtype) && dt_is_int(u->dtype);
}
/* The integer value of a CONST, false for non-CONSTs and uint64 constants of
 * 2^63 and above (their bits read negative). */
bool sym_const(const UOp *u, int64_t *v);
/* v is representable in d (uint64: up to INT64_MAX). */
static inline bool sym_fits(DType d, int64_t v) { return v >= dt_min_i(d) && v <= dt_max_i(d); }

/* Reads x as a Sum; false when it has more than SYM_MAX_TERMS terms or a
 * coefficient overflows int64. */
bool sym_split(UOp *x, SymSum *s);
/* Exact range of the Sum's value from its terms' bounds; false when a term's
 * bounds are not exact, int64 overflows, or the range leaves dtype d. */
bool sym_range(DType d, const SymSum *s, int64_t *lo, int64_t *hi);
/* Builds sum(f*v) + k with x's dtype: terms in order, zero terms dropped, f == 1
 * as v, the constant last and only when nonzero. */
UOp *sym_build(UOp *like, const SymSum *s);

/* Folding of x // c and x % c for a constant c > 0 (symbolic_divmod.c). */
UOp *sym_fold_div(UOp *x, int64_t c);
UOp *sym_fold_mod(UOp *x, int64_t c);
/* Folding of x < c and c < x for a constant c (symbolic_divmod.c). */
UOp *sym_fold_lt(UOp *x, int64_t c);
UOp *sym_fold_gt(int64_t c, UOp *x);

#endif
