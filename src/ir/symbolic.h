/* Symbolic integer reasoning over UOps: value bounds (vmin/vmax), the algebraic
 * simplifier used on index arithmetic and constants, evaluation with variable
 * values, and a readable infix rendering. See docs/symbolic.md.
 *
 * All integer math here follows the IR's ALU semantics (alu.h): IDIV truncates
 * toward zero, MOD takes the sign of the dividend, IDIV by zero is 0, and results
 * wrap to the dtype. The simplifier only rewrites an expression to one with the
 * same value for every value of its variables, wrap-around included.
 */
#ifndef TVK_IR_SYMBOLIC_H
#define TVK_IR_SYMBOLIC_H

#include <stdbool.h>
#include <stdint.h>

#include "pattern.h"
#include "uop.h"

/* Bounds of the value of u: vmin <= value <= vmax for every value of the
 * variables (DEFINE_VAR, RANGE, SPECIAL) u depends on. Exact enough for index
 * math (seed's _min_max); when nothing is known, the dtype's range (dt_min_i /
 * dt_max_i). Meaningful for bool and integer dtypes; other dtypes report
 * [INT64_MIN, INT64_MAX]. Cached on the UOp: mm_state 0 not computed yet,
 * 1 computed and exact, 2 computed but not a fact (see uop_bounds_exact). */
int64_t uop_vmin(UOp *u);
int64_t uop_vmax(UOp *u);
/* True when [vmin, vmax] is a proven fact about u's value. False for floats,
 * pointers, and uint64 values that may exceed INT64_MAX (whose reported range
 * is clamped to INT64_MAX). Rules use bounds only when this holds. */
bool uop_bounds_exact(UOp *u);

/* The symbolic rule tables (built once, immutable, never freed):
 * sym_simple_matcher: constant folding and identities, no bounds;
 * sym_matcher: sym_simple plus like-term collection, bound-based folding of
 * comparisons, div/mod folding, min/max and cast folding. */
const PatternMatcher *sym_simple_matcher(void);
const PatternMatcher *sym_matcher(void);

/* graph_rewrite(u, sym_matcher()): autoreleased; NULL on out of memory. */
UOp *uop_simplify(UOp *u);

/* Value of the integer (or bool) expression u with vars[i] = vals[i]
 * (DEFINE_VAR, RANGE or SPECIAL nodes). Unbound variables evaluate to their
 * vmin. Returns 0 for expressions it cannot evaluate (floats, loads). */
int64_t sym_infer(UOp *u, int nvars, UOp *const *vars, const int64_t *vals);

/* Readable infix text of u after simplifying, malloc'd (caller frees); NULL on
 * out of memory. Format (Python-like, as the seed's renderer; docs/symbolic.md):
 * variables by name, RANGE as ridx<axis id>, a+b, a-b, -a, a*b, a//b, a%b
 * (truncating, as the IR), max(a, b), a<b, a!=b, a&b, a|b, a^b, not a,
 * (x if c else y), int32(a) for casts; parentheses only where needed. */
char *uop_render(UOp *u);
/* The same without simplifying first (for printing the input of a rewrite). */
char *uop_render_raw(UOp *u);

#endif
