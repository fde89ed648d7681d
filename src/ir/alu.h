/* Constant evaluation of ALU ops with the seed's semantics (python_alu /
 * exec_alu), and a small evaluator of UOp graphs built from them.
 *
 * Values are CVal (dtype.h): `i` for bool and integer types (uint64 as its bit
 * pattern), `f` for float types. An op is computed on the exact values of its
 * operands, as Python does on ints and doubles, then truncated to the output
 * type (dt_truncate_*): integers wrap like C fixed-width types, floats round to
 * the type's precision.
 *
 * Semantics, where C and Python differ or are silent:
 *   ADD SUB MUL NEG MULACC SHL  integers wrap modulo 2^width (computed in uint64,
 *                  so never C signed overflow). Floats compute in double, then
 *                  round to the output type (MULACC on floats is fma(x, y, z): one
 *                  rounding in double, as codegen makes it only where devices fuse).
 *   IDIV           truncates toward zero; x/0 = 0 (ints and floats). Floats: the
 *                  quotient of |x|/|y| rounded down (Python's //), signed.
 *   MOD            |trunc(x)| % |trunc(y)| with the sign of x (-7%2 = -1, 7%-2 = 1);
 *                  x%0 = 0 (Python would raise). Floats with NaN/inf: not evaluated.
 *   CMPLT CMPNE    exact values (uint64 unsigned), IEEE for floats (NaN < x false,
 *                  NaN != NaN true). Output bool.
 *   MAX            Python's max(a, b): a unless b > a (max(NaN, 1) = NaN,
 *                  max(1, NaN) = 1, max(-0.0, 0.0) = -0.0).
 *   AND OR XOR     bitwise on ints and bools; floats: not evaluated.
 *   SHL SHR        on the exact value: SHR is a floor shift (arithmetic for signed,
 *                  logical for unsigned); an amount >= 64 gives 0 (SHL), 0 or -1 (SHR).
 *                  A negative amount is not evaluated (Python raises).
 *   EXP2           2**x (pow(2, x), overflow -> inf). LOG2: x>0 log2(x), 0 -> -inf,
 *                  else NaN. SQRT: x>=0 sqrt(x) (-0.0 -> -0.0), else NaN.
 *                  RECIP: 1/x, 0 -> copysign(inf, x). SIN: inf -> NaN.
 *                  These and FDIV need float operands and output.
 *   FDIV           IEEE x/y (x/0 = +-inf, 0/0 = NaN), as the generated code does.
 *   POW            floats: C pow (IEEE 754's special cases: (-0)**-1 = -inf,
 *                  0**-2 = +inf, (-1)**inf = 1, 1**NaN = 1);
 *                  negative**non-integer = NaN. Ints: exact power wrapped
 *                  (0**0 = 1); a negative exponent is not evaluated.
 *   WHERE          src[0] (bool) ? src[1] : src[2].
 *   THREEFRY       not evaluated.
 * The output type must be of the same kind as the result: float for float
 * operands, int for int/bool operands, or bool for anything (tested != 0).
 */
#ifndef TVK_IR_ALU_H
#define TVK_IR_ALU_H

#include <stdbool.h>

#include "dtype.h"
#include "ops.h"
#include "uop.h"

/* Evaluate ALU op `op` on scalars. `in` is the dtype of the operands (for
 * WHERE, of src[1] and src[2]; src[0] is bool), `out` of the result, and src
 * holds as many values as the op takes. Returns false, leaving *res unset, for
 * ops or operand kinds it does not evaluate (see above). */
bool alu_exec(Op op, ScalarType out, ScalarType in, const CVal *src, CVal *res);

/* Evaluate the scalar UOp graph `u`: CONST, variables (DEFINE_VAR, RANGE,
 * SPECIAL) bound by pointer to vals[i] through vars[i] (truncated to their
 * dtype), ALU ops (alu_exec) and CAST (cval_cast). Shared nodes are evaluated
 * once. Returns false for an unbound variable, a vector dtype, an op it cannot
 * evaluate, or out of memory. */
bool uop_eval(UOp *u, int nvars, UOp *const *vars, const CVal *vals, CVal *out);

#endif
