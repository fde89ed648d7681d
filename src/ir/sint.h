/* sint: a dimension, stride, offset or mask bound of a view.
 *
 * A sint is an int64_t. Almost all of them are plain integers; values in a
 * reserved range far below anything a shape computation reaches are handles
 * to integer expressions over shape variables (a variable is a name and a
 * range [lo, hi], the seed's `Variable`). Expressions are simplified and
 * interned, so the same expression always has the same handle: two sints
 * compare with ==, and views holding them hash and compare as bytes.
 *
 * Arithmetic and comparisons on sints that may be handles go through the
 * helpers below, which compute plain integers exactly as C does (one branch,
 * inlined) and build expressions otherwise. Raw C arithmetic on a handle is a
 * bug (UBSan reports most: handles sit next to INT64_MIN).
 *
 * Comparisons are proofs: sint_proven_lt(a, b) is true when a < b for every
 * value of the variables, false when that is not proven. Code that branches on
 * a comparison takes the safe branch when nothing is proven.
 *
 * The expressions are UOps, built in sint_expr.c; this header includes no
 * other tvk header, so view.h can use it below uop.h.
 *
 * Expressions live in one process-wide table, behind a mutex, for the life of
 * the process: there are few of them (a model's shape formulas), and a handle
 * stays valid however long a view keeps it. */
#ifndef TVK_IR_SINT_H
#define TVK_IR_SINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int64_t sint;

/* The result of an operation that failed (out of memory, a bad variable, an
 * expression the helpers cannot build). It is neither an integer nor a
 * handle, and operations on it give it again. */
#define SINT_NONE INT64_MIN
#define SINT_HANDLE_FIRST (INT64_MIN + 1)
#define SINT_HANDLE_COUNT ((int64_t)1 << 32)

static inline bool sint_is_sym(sint s) {
  return s >= SINT_HANDLE_FIRST && s < SINT_HANDLE_FIRST + SINT_HANDLE_COUNT;
}
/* A plain integer (not a handle, not SINT_NONE). */
static inline bool sint_is_int(sint s) { return s != SINT_NONE && !sint_is_sym(s); }

/* A variable named name with lo <= value <= hi, 0 <= lo <= hi <= INT32_MAX
 * (a dimension's range; values reach kernels as int32). The same name and
 * range give the same handle. SINT_NONE for a NULL or empty name, a name of 32
 * bytes or more, a bad range, or out of memory. */
sint sint_var(const char *name, int64_t lo, int64_t hi);
/* The variable's name (valid for the life of the process) and range; false
 * when v is not a variable. */
bool sint_var_info(sint v, const char **name, int64_t *lo, int64_t *hi);

/* Out-of-line parts of the helpers (expressions). */
sint sint_add_sym(sint a, sint b);
sint sint_mul_sym(sint a, sint b);
sint sint_max_sym(sint a, sint b);
sint sint_min_sym(sint a, sint b);
sint sint_fdiv_sym(sint a, sint b);
sint sint_fmod_sym(sint a, sint b);
int64_t sint_vmin_sym(sint s);
int64_t sint_vmax_sym(sint s);
bool sint_proven_eq_sym(sint a, sint b);

static inline bool sint_any_sym(sint a, sint b) {
  return sint_is_sym(a) || sint_is_sym(b) || a == SINT_NONE || b == SINT_NONE;
}
static inline sint sint_add(sint a, sint b) {
  return sint_any_sym(a, b) ? sint_add_sym(a, b) : a + b;
}
static inline sint sint_mul(sint a, sint b) {
  return sint_any_sym(a, b) ? sint_mul_sym(a, b) : a * b;
}
static inline sint sint_neg(sint a) { return sint_mul(a, -1); }
static inline sint sint_sub(sint a, sint b) {
  return sint_any_sym(a, b) ? sint_add_sym(a, sint_neg(b)) : a - b;
}
static inline sint sint_max(sint a, sint b) {
  return sint_any_sym(a, b) ? sint_max_sym(a, b) : a > b ? a : b;
}
static inline sint sint_min(sint a, sint b) {
  return sint_any_sym(a, b) ? sint_min_sym(a, b) : a < b ? a : b;
}
/* Floor division and the modulo that goes with it (Python's // and %), as
 * view.c's rules want. b must be nonzero. An expression only where a >= 0 and
 * b > 0 are proven (then floor and truncation agree); SINT_NONE otherwise. */
static inline sint sint_fdiv(sint a, sint b) {
  if (sint_any_sym(a, b)) return sint_fdiv_sym(a, b);
  sint q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline sint sint_fmod(sint a, sint b) {
  return sint_any_sym(a, b) ? sint_fmod_sym(a, b) : a - sint_fdiv(a, b) * b;
}
/* Ceiling division (integers only; SINT_NONE for handles). */
static inline sint sint_cdiv(sint a, sint b) {
  return sint_any_sym(a, b) ? SINT_NONE : -sint_fdiv(-a, b);
}

/* Bounds over every value of the variables; the integer itself for one.
 * SINT_NONE has the widest bounds. */
static inline int64_t sint_vmin(sint s) { return sint_is_int(s) ? s : sint_vmin_sym(s); }
static inline int64_t sint_vmax(sint s) { return sint_is_int(s) ? s : sint_vmax_sym(s); }

/* Proven relations (false where not proven, and for SINT_NONE). */
static inline bool sint_proven_eq(sint a, sint b) {
  if (a == SINT_NONE || b == SINT_NONE) return false;
  return a == b || (sint_any_sym(a, b) && sint_proven_eq_sym(a, b));
}
static inline bool sint_proven_lt(sint a, sint b) {
  if (!sint_any_sym(a, b)) return a < b;
  sint d = sint_sub(a, b);
  return d != SINT_NONE && sint_vmax(d) < 0;
}
static inline bool sint_proven_le(sint a, sint b) {
  if (!sint_any_sym(a, b)) return a <= b;
  sint d = sint_sub(a, b);
  return d != SINT_NONE && sint_vmax(d) <= 0;
}
/* Not proven equal: they differ for some value of the variables, or may. */
static inline bool sint_may_differ(sint a, sint b) { return !sint_proven_eq(a, b); }

/* The value with vars[i] = vals[i] (variables as sint_var handles); a
 * variable not given takes its lo. SINT_NONE stays SINT_NONE. */
sint sint_eval(sint s, int nvars, const sint *vars, const int64_t *vals);

/* The value with each variable of s bound by its name: names[i] has value
 * vals[i]. SINT_NONE when a variable of s is not named (or s is SINT_NONE). */
sint sint_eval_named(sint s, int nvars, const char *const *names, const int64_t *vals);

/* Adds the variables s depends on (their handles) to out[0..n), each once,
 * and returns the new count; -1 when more than max, or for SINT_NONE. */
int sint_vars(sint s, sint *out, int n, int max);

/* Readable text of s ("n*4+1", "12"), snprintf-style: returns the length
 * the whole text needs. */
int sint_str(sint s, char *buf, size_t n);

#endif
