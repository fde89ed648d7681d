/* Growable arrays: a pointer, a count and a capacity kept by the caller, grown
 * by doubling through one function. Zero-initialised fields are an empty
 * array; free the pointer when done.
 *
 *   int *v = NULL; size_t n = 0, cap = 0;
 *   if (!VEC_PUSH(v, n, cap, 42)) return oom();
 */
#ifndef TVK_IR_VEC_H
#define TVK_IR_VEC_H

#include <stdbool.h>
#include <stddef.h>

/* Room for at least `need` elements of `elem` bytes in the array whose
 * pointer is at `pptr` (a T **, passed as void *) with capacity *cap: the
 * capacity doubles (from 16) until it fits. false on out of memory or size
 * overflow, with the array unchanged. */
bool vec_reserve_(void *pptr, size_t *cap, size_t need, size_t elem);

/* Room for `need` elements in array p (an lvalue T *) of capacity cap (an
 * lvalue size_t). */
#define VEC_RESERVE(p, cap, need) vec_reserve_(&(p), &(cap), (need), sizeof *(p))
/* Appends x to p[0..n) (n, cap lvalue size_t); false on out of memory. */
#define VEC_PUSH(p, n, cap, x) (VEC_RESERVE(p, cap, (n) + 1) ? ((p)[(n)++] = (x), true) : false)

#endif
