/* Views and ShapeTrackers: how a tensor's logical index maps to memory.
 *
 * A View is (shape, strides, offset, mask): element idx of the view lives at
 * offset + sum(idx[d] * strides[d]) when lo[d] <= idx[d] < hi[d] for every masked
 * dim, and reads as the pad value (is invalid) otherwise. A ShapeTracker is a
 * stack of views, applied outermost (last) first: the last view maps the logical
 * index to an index of the view below it, down to views[0], which maps to memory.
 * Movement ops change only the top view when the layout allows, else push one.
 *
 * Dimensions, strides, offsets and masks are `sint` (sint.h): an integer, or a
 * handle to an expression over shape variables. Code here computes with the
 * sint helpers, and where a symbolic value leaves a rule undecided it takes the
 * safe way (a new view instead of a merge).
 */
#ifndef TVK_IR_VIEW_H
#define TVK_IR_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "sint.h"

#define TVK_MAX_DIMS 16

typedef struct {
  int ndim;
  bool contiguous; /* strides are the row-major strides of shape, offset 0, no mask */
  bool has_mask;
  sint offset;
  sint shape[TVK_MAX_DIMS];
  sint strides[TVK_MAX_DIMS];
  sint mask[TVK_MAX_DIMS][2]; /* [lo, hi) per dim, when has_mask */
} View;

typedef struct ShapeTracker ShapeTracker; /* also declared by uop.h (a VIEW's arg) */
struct ShapeTracker {
  int nviews;
  View views[]; /* nviews views; views[nviews-1] is the one the user sees */
};

/* All functions returning ShapeTracker* return a new malloc'd tracker (free with
 * st_free) or NULL when the arguments are invalid or memory ran out; they never
 * abort on bad arguments. The frontend checks arguments first and reports them. */

/* Row-major strides for shape, with 0 for dims of size 1 (the seed's strides_for_shape). */
void strides_for_shape(int ndim, const sint *shape, sint *strides);
/* Canonical view: drops strides of size-1 dims, normalises the mask, sets contiguous.
 * strides NULL: row-major; mask NULL: no mask. Arguments are not validated (dims
 * >= 0, ndim <= TVK_MAX_DIMS); st_from_view validates a view built from user input. */
View view_make(int ndim, const sint *shape, const sint *strides, sint offset,
               const sint (*mask)[2]);

ShapeTracker *st_from_shape(int ndim, const sint *shape);
ShapeTracker *st_from_view(const View *v); /* canonicalised; NULL if it reaches below 0 */
ShapeTracker *st_clone(const ShapeTracker *st);
void st_free(ShapeTracker *st); /* NULL ok */
uint64_t st_hash(const ShapeTracker *st);
bool st_eq(const ShapeTracker *a, const ShapeTracker *b);

static inline const View *st_top(const ShapeTracker *st) { return &st->views[st->nviews - 1]; }
static inline int st_ndim(const ShapeTracker *st) { return st_top(st)->ndim; }
static inline const sint *st_shape(const ShapeTracker *st) { return st_top(st)->shape; }
sint st_numel(const ShapeTracker *st);      /* product of the visible shape */
bool st_contiguous(const ShapeTracker *st); /* one view, contiguous */
/* Number of elements of the underlying buffer the tracker can address
 * (max reachable offset + 1 of views[0]; 0 when no element is valid). Exact for
 * one view; for a stack of views an upper bound (never above what views[0] alone
 * can reach). */
sint st_real_size(const ShapeTracker *st);

/* Movement ops (the seed's View/ShapeTracker methods). */
ShapeTracker *st_reshape(const ShapeTracker *st, int ndim, const sint *shape);
ShapeTracker *st_permute(const ShapeTracker *st, const int *order);
ShapeTracker *st_expand(const ShapeTracker *st, const sint *shape);       /* same ndim; 1 -> n */
ShapeTracker *st_pad(const ShapeTracker *st, const sint (*pads)[2]);      /* (before, after) >= 0 */
ShapeTracker *st_shrink(const ShapeTracker *st, const sint (*ranges)[2]); /* 0 <= lo <= hi <= dim */
ShapeTracker *st_flip(const ShapeTracker *st, const bool *flip);
/* Composition: a tracker `b` applied on top of the result of `a` (seed's a + b).
 * b's bottom view addresses a's elements in row-major order: NULL when b can
 * reach an address outside [0, st_numel(a)). */
ShapeTracker *st_compose(const ShapeTracker *a, const ShapeTracker *b);
/* Merge views where possible (seed's simplify). */
ShapeTracker *st_simplify(const ShapeTracker *st);

/* Concrete evaluation: for a logical index, the memory offset and whether it is
 * valid (false: reads as padding). Used by tests and by the frontend. An index
 * outside the visible shape is reported invalid, and so is every index of a
 * symbolic tracker (st_substitute it first). */
bool st_index_int(const ShapeTracker *st, const sint *idx, sint *offset);

/* Adds the variables st's views depend on to out[0..n), each once (as
 * sint_vars); the new count, or -1 past max. */
int st_vars(const ShapeTracker *st, sint *out, int n, int max);
/* Whether any view holds a symbolic sint (a handle, sint.h). */
bool st_is_symbolic(const ShapeTracker *st);
/* The tracker with vars[i] = vals[i] (variables not given take their lo):
 * every sint evaluated, each view made canonical again. NULL when a value
 * cannot be evaluated (SINT_NONE) or a dim comes out negative, or out of memory. */
ShapeTracker *st_substitute(const ShapeTracker *st, int nvars, const sint *vars,
                            const int64_t *vals);

/* The view reshaped to its merged dims (the seed's minify): fewer dims means
 * fewer div/mod terms when an index is unflattened into it. */
View view_minify(const View *v);

#endif
