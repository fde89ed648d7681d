/* Views and ShapeTrackers: see view.h and docs/shapetracker.md.
 *
 * The file has four parts: canonical views (view_make), the movement ops on one
 * view, merging two stacked views into one (view_merge, the seed's View.__add__),
 * and the ShapeTracker API (validation, stacking, evaluation). */
#include "view.h"

#include <stdlib.h>
#include <string.h>

/* Merging recurses through reshape/shrink/pad retries; real cases need a few
 * levels (each frame holds a few KiB), so the cap only guards against a bug
 * turning into a hang or a deep stack. */
#define MERGE_MAX_DEPTH 16

/* ---------------------------------------------------------------- integers */

/* The sint helpers (sint.h) compute with Python semantics (floor division,
 * non-negative modulo for b > 0), which the merge rules were designed with;
 * C's truncation differs for negative operands. The rules that need digits
 * of an address (merging two general views, masks through a reshape) run on
 * plain integers only: with a symbolic value they give up, and the caller
 * keeps two views, which is always right. */

static bool all_int(int n, const sint *v) {
  for (int i = 0; i < n; i++)
    if (!sint_is_int(v[i])) return false;
  return true;
}

static bool view_is_int(const View *v) {
  return sint_is_int(v->offset) && all_int(v->ndim, v->shape) && all_int(v->ndim, v->strides) &&
         (!v->has_mask || all_int(2 * v->ndim, &v->mask[0][0]));
}

bool st_is_symbolic(const ShapeTracker *st) {
  for (int i = 0; i < st->nviews; i++)
    if (!view_is_int(&st->views[i])) return true;
  return false;
}

int st_vars(const ShapeTracker *st, sint *out, int n, int max) {
  for (int i = 0; i < st->nviews && n >= 0; i++) {
    const View *w = &st->views[i];
    if (view_is_int(w)) continue;
    n = sint_vars(w->offset, out, n, max);
    for (int d = 0; d < w->ndim && n >= 0; d++) {
      n = sint_vars(w->shape[d], out, n, max);
      if (n >= 0) n = sint_vars(w->strides[d], out, n, max);
      if (n >= 0 && w->has_mask) n = sint_vars(w->mask[d][0], out, n, max);
      if (n >= 0 && w->has_mask) n = sint_vars(w->mask[d][1], out, n, max);
    }
  }
  return n;
}

/* Product of a shape; false when it overflows (shapes are checked >= 0 first;
 * a symbolic one for its largest value). */
static bool shape_numel(int ndim, const sint *shape, sint *out) {
  sint n = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 0) {
      *out = 0;
      return true;
    }
  }
  for (int d = 0; d < ndim; d++) {
    int64_t a = sint_vmax(n), b = sint_vmax(shape[d]);
    if (b > 0 && a > INT64_MAX / b) return false;
    n = sint_mul(n, shape[d]);
  }
  *out = n;
  return n != SINT_NONE;
}

static bool shape_ok(int ndim, const sint *shape) {
  if (ndim < 0 || ndim > TVK_MAX_DIMS || (ndim > 0 && !shape)) return false;
  for (int d = 0; d < ndim; d++)
    if (sint_vmin(shape[d]) < 0) return false;
  sint n;
  return shape_numel(ndim, shape, &n);
}

static sint view_numel(const View *v) {
  sint n = 1;
  for (int d = 0; d < v->ndim; d++) n = sint_mul(n, v->shape[d]);
  return n;
}

static bool same_shape(int n, const sint *a, int m, const sint *b) {
  return n == m && (n == 0 || memcmp(a, b, (size_t)n * sizeof *a) == 0);
}

/* ---------------------------------------------------------------- canonical views */

void strides_for_shape(int ndim, const sint *shape, sint *strides) {
  sint acc = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = shape[d] == 1 ? 0 : acc;
    acc = sint_mul(acc, shape[d]);
  }
}

/* A view over nothing: every index is invalid. Strides and offset are zeroed so
 * that all such views of one shape compare equal. */
static void view_set_invalid(View *v) {
  v->has_mask = true;
  v->offset = 0;
  for (int d = 0; d < v->ndim; d++) {
    v->strides[d] = 0;
    v->mask[d][0] = v->mask[d][1] = 0;
  }
}

/* Dim d of a masked view is masked down to one index. */
static bool one_index(const View *v, int d) {
  return sint_proven_eq(sint_sub(v->mask[d][1], v->mask[d][0]), 1);
}

/* Canonical form (the seed's View.create):
 * - strides of size-1 dims are 0;
 * - a shape with a 0 is the contiguous empty view (zero strides, no mask);
 * - a mask covering every dim fully is dropped; a mask empty in any dim makes
 *   the whole view invalid (all (0,0), zero strides and offset);
 * - a dim masked down to one index gets stride 0, its address moved to offset;
 * - contiguous is set when the view is plain row-major memory. */
View view_make(int ndim, const sint *shape, const sint *strides, sint offset,
               const sint (*mask)[2]) {
  View v;
  memset(&v, 0, sizeof v);
  v.ndim = ndim;
  v.offset = offset;
  for (int d = 0; d < ndim; d++) v.shape[d] = shape[d];
  strides_for_shape(ndim, shape, v.strides);
  if (strides)
    for (int d = 0; d < ndim; d++) v.strides[d] = shape[d] == 1 ? 0 : strides[d];
  bool empty_shape = false;
  for (int d = 0; d < ndim; d++) empty_shape = empty_shape || shape[d] == 0;
  if (empty_shape) {
    memset(v.strides, 0, sizeof v.strides);
    v.offset = 0;
    v.contiguous = true;
    return v;
  }
  if (mask) {
    bool full = true, empty = false;
    for (int d = 0; d < ndim; d++) {
      v.mask[d][0] = sint_max(mask[d][0], 0);
      v.mask[d][1] = sint_min(mask[d][1], shape[d]);
      full = full && v.mask[d][0] == 0 && sint_proven_eq(v.mask[d][1], shape[d]);
      empty = empty || sint_proven_le(v.mask[d][1], v.mask[d][0]);
    }
    v.has_mask = !full;
    if (full) memset(v.mask, 0, sizeof v.mask);
    if (empty) {
      view_set_invalid(&v);
      return v;
    }
    for (int d = 0; v.has_mask && d < ndim; d++) {
      if (one_index(&v, d)) {
        v.offset = sint_add(v.offset, sint_mul(v.strides[d], v.mask[d][0]));
        v.strides[d] = 0;
      }
    }
  }
  sint rm[TVK_MAX_DIMS] = {0}; /* gcc -O3 cannot see strides_for_shape fill ndim of them */
  strides_for_shape(ndim, shape, rm);
  v.contiguous =
      v.offset == 0 && !v.has_mask && memcmp(rm, v.strides, sizeof(sint) * (size_t)ndim) == 0;
  return v;
}

/* Views are compared field by field over their used dims only, so unused tail
 * entries never matter. */
static bool view_eq(const View *a, const View *b) {
  if (a->ndim != b->ndim || a->offset != b->offset || a->has_mask != b->has_mask ||
      a->contiguous != b->contiguous)
    return false;
  size_t n = (size_t)a->ndim * sizeof(sint);
  if (memcmp(a->shape, b->shape, n) || memcmp(a->strides, b->strides, n)) return false;
  return !a->has_mask || !memcmp(a->mask, b->mask, 2 * n);
}

static bool view_all_invalid(const View *v) {
  if (!v->has_mask) return false;
  for (int d = 0; d < v->ndim; d++)
    if (sint_proven_le(v->mask[d][1], v->mask[d][0])) return true;
  return false;
}

static sint mask_lo(const View *v, int d) { return v->has_mask ? v->mask[d][0] : 0; }
static sint mask_hi(const View *v, int d) { return v->has_mask ? v->mask[d][1] : v->shape[d]; }

/* ---------------------------------------------------------------- movement ops on a view */

/* Arguments are validated by the st_* callers. */

static View view_permute(const View *v, const int *order) {
  sint shape[TVK_MAX_DIMS], strides[TVK_MAX_DIMS], mask[TVK_MAX_DIMS][2];
  for (int d = 0; d < v->ndim; d++) {
    shape[d] = v->shape[order[d]];
    strides[d] = v->strides[order[d]];
    mask[d][0] = mask_lo(v, order[d]);
    mask[d][1] = mask_hi(v, order[d]);
  }
  return view_make(v->ndim, shape, strides, v->offset, v->has_mask ? (const sint(*)[2])mask : NULL);
}

/* Size-1 dims become n. Their stride is already 0; a dim whose single index is
 * masked off stays masked off over all n. */
static View view_expand(const View *v, const sint *shape) {
  if (view_numel(v) == 0) return view_make(v->ndim, shape, NULL, 0, NULL);
  sint mask[TVK_MAX_DIMS][2];
  for (int d = 0; d < v->ndim; d++) {
    mask[d][0] = mask_lo(v, d);
    mask[d][1] = mask_hi(v, d);
    if (sint_may_differ(shape[d], v->shape[d])) {
      bool live = mask[d][0] == 0 && mask[d][1] == 1;
      mask[d][0] = 0;
      mask[d][1] = live ? shape[d] : 0;
    }
  }
  return view_make(v->ndim, shape, v->strides, v->offset,
                   v->has_mask ? (const sint(*)[2])mask : NULL);
}

/* Window [arg.lo, arg.hi) of each dim (lo may be negative for pads); the old mask
 * is moved into the window and intersected with `mask` when given. */
static View view_resize(const View *v, const sint (*arg)[2], const sint (*mask)[2]) {
  sint shape[TVK_MAX_DIMS], nm[TVK_MAX_DIMS][2], offset = v->offset;
  for (int d = 0; d < v->ndim; d++) {
    sint a0 = arg[d][0], a1 = arg[d][1];
    shape[d] = sint_sub(a1, a0);
    offset = sint_add(offset, sint_mul(v->strides[d], a0));
    nm[d][0] = sint_max(0, sint_min(sint_sub(mask_lo(v, d), a0), shape[d]));
    nm[d][1] = sint_max(0, sint_min(sint_sub(mask_hi(v, d), a0), shape[d]));
    if (mask) {
      nm[d][0] = sint_max(nm[d][0], mask[d][0]);
      nm[d][1] = sint_min(nm[d][1], mask[d][1]);
    }
  }
  bool has = mask || v->has_mask;
  return view_make(v->ndim, shape, v->strides, offset, has ? (const sint(*)[2])nm : NULL);
}

static View view_pad(const View *v, const sint (*pads)[2]) {
  sint arg[TVK_MAX_DIMS][2], mask[TVK_MAX_DIMS][2];
  bool any = false;
  for (int d = 0; d < v->ndim; d++) {
    arg[d][0] = sint_neg(pads[d][0]);
    arg[d][1] = sint_add(v->shape[d], pads[d][1]);
    mask[d][0] = pads[d][0];
    mask[d][1] = sint_add(pads[d][0], v->shape[d]);
    any = any || pads[d][0] || pads[d][1];
  }
  return any ? view_resize(v, (const sint(*)[2])arg, (const sint(*)[2])mask) : *v;
}

static View view_shrink(const View *v, const sint (*ranges)[2]) {
  return view_resize(v, ranges, NULL);
}

/* Index i of a flipped dim reads old index s-1-i: negate the stride, move the
 * offset to the old last element, mirror the mask. */
static View view_flip(const View *v, const bool *flip) {
  sint strides[TVK_MAX_DIMS], mask[TVK_MAX_DIMS][2], offset = v->offset;
  for (int d = 0; d < v->ndim; d++) {
    sint s = v->shape[d], lo = mask_lo(v, d), hi = mask_hi(v, d);
    strides[d] = flip[d] ? sint_neg(v->strides[d]) : v->strides[d];
    if (flip[d]) offset = sint_add(offset, sint_mul(sint_sub(s, 1), v->strides[d]));
    mask[d][0] = flip[d] ? sint_sub(s, hi) : lo;
    mask[d][1] = flip[d] ? sint_sub(s, lo) : hi;
  }
  return view_make(v->ndim, v->shape, strides, offset, v->has_mask ? (const sint(*)[2])mask : NULL);
}

/* ---------------------------------------------------------------- reshape of a view */

/* Groups of adjacent dims that address memory as one dim (the seed's merge_dims):
 * size, stride of the innermost dim, and the "real" size: the part of the group
 * with a nonzero stride that is not masked down to one index. Size-1 dims join
 * the group before them; a dim masked to one index merges with the next. */
typedef struct {
  sint size, stride, real;
} DimGroup;

static int merge_dims(const View *v, DimGroup *g) {
  if (v->ndim == 0) return 0;
  int n = 0;
  g[n++] = (DimGroup){v->shape[0], v->strides[0], v->strides[0] != 0 ? v->shape[0] : 0};
  bool merging = v->has_mask ? one_index(v, 0) : v->shape[0] == 1;
  for (int d = 1; d < v->ndim; d++) {
    sint s = v->shape[d], st = v->strides[d];
    if (s == 1) continue;
    DimGroup *last = &g[n - 1];
    if (merging || sint_proven_eq(last->stride, sint_mul(s, st))) {
      sint real = st == 0 ? 0 : merging ? s : sint_mul(last->real, s);
      *last = (DimGroup){sint_mul(last->size, s), st, real};
    } else {
      g[n++] = (DimGroup){s, st, st != 0 ? s : 0};
    }
    merging = v->has_mask ? one_index(v, d) : s == 1;
  }
  return n;
}

/* The mask of v seen through the new shape (the seed's _reshape_mask): walks
 * both shapes from the innermost dim, splitting an old dim into several new ones
 * (possible when the mask does not cut across the split) or merging several old
 * dims into one (possible when the mask of the outer dims is one index, or the
 * inner mask is full). False when the mask is not a box in the new shape.
 * Preconditions: equal element counts, no zero dims, a mask with lo < hi. */
static bool reshape_mask(const View *v, int nd, const sint *ns, sint (*out)[2]) {
  if (!view_is_int(v) || !all_int(nd, ns)) return false;
  int io = v->ndim, in = nd, k = 0;
  sint cs = 1, od = 1, l = 0, r = 1, ndim_ = 1;
  if (io > 0) io--, od = v->shape[io], l = mask_lo(v, io), r = mask_hi(v, io);
  if (in > 0) ndim_ = ns[--in];
  while (k < nd) {
    sint nxt = ndim_ * cs;
    if (od == nxt) { /* an old dim ends exactly here: copy what is left of its mask */
      out[nd - 1 - k][0] = sint_fdiv(l, cs);
      out[nd - 1 - k][1] = sint_fdiv(r - 1, cs) + 1;
      k++;
      cs = 1, od = 1, l = 0, r = 1, ndim_ = 1;
      if (io > 0) io--, od = v->shape[io], l = mask_lo(v, io), r = mask_hi(v, io);
      if (in > 0) ndim_ = ns[--in];
    } else if (od > nxt) { /* split: the new dim is an inner part of the old one */
      if (od % nxt != 0) return false;
      if ((l % nxt != 0 || r % nxt != 0) && sint_fdiv(l, nxt) != sint_fdiv(r - 1, nxt))
        return false;
      out[nd - 1 - k][0] = sint_fmod(l, nxt) / cs;
      out[nd - 1 - k][1] = sint_fmod(r - 1, nxt) / cs + 1;
      k++;
      cs = nxt;
      ndim_ = in > 0 ? ns[--in] : 1;
    } else { /* merge: fold the next old dim (outward) into this one */
      if (io == 0) return false;
      io--;
      sint nl = mask_lo(v, io), nh = mask_hi(v, io);
      if ((l != 0 || r != od) && l != r && nh - nl != 1) return false;
      l = nl * od + l;
      r = (nh - 1) * od + r;
      od *= v->shape[io];
    }
  }
  return true;
}

/* Reshape as one view when the layout allows (the seed's View.reshape); false
 * when the result needs a new view. Precondition: equal element counts. */
static bool view_reshape(const View *v, int nd, const sint *ns, View *out) {
  if (same_shape(v->ndim, v->shape, nd, ns)) {
    *out = *v;
    return true;
  }
  if (view_numel(v) == 0 || v->contiguous) {
    *out = view_make(nd, ns, NULL, 0, NULL);
    return true;
  }
  if (view_all_invalid(v)) {
    if (nd == 0) return false; /* a scalar has no dim to carry the empty mask */
    sint m[TVK_MAX_DIMS][2] = {{0}};
    *out = view_make(nd, ns, NULL, 0, (const sint(*)[2])m);
    return true;
  }
  DimGroup g[TVK_MAX_DIMS];
  int ng = merge_dims(v, g), k = nd, nrev = 0;
  sint rev[TVK_MAX_DIMS];
  for (int gi = ng - 1; gi >= 0; gi--) {
    sint acc = 1, st = g[gi].stride;
    while (!sint_proven_le(g[gi].size, acc) && k > 0) {
      sint d = ns[--k];
      rev[nrev++] = st;
      if (d != 1) {
        acc = sint_mul(acc, d);
        if (sint_proven_lt(acc, g[gi].real))
          st = sint_mul(st, d);
        else if (sint_proven_le(g[gi].real, acc))
          st = 0;
        else
          return false; /* symbolic sizes the rule cannot order */
      }
    }
    if (!sint_proven_eq(acc, g[gi].size)) return false;
  }
  sint strides[TVK_MAX_DIMS], mask[TVK_MAX_DIMS][2];
  for (int d = 0; d < nd; d++) strides[d] = d < nd - nrev ? 0 : rev[nd - 1 - d];
  if (!v->has_mask) {
    *out = view_make(nd, ns, strides, v->offset, NULL);
    return true;
  }
  if (!reshape_mask(v, nd, ns, mask)) return false;
  /* Keep the address of the first valid element where it was. */
  sint offset = v->offset;
  for (int d = 0; d < v->ndim; d++)
    offset = sint_add(offset, sint_mul(v->mask[d][0], v->strides[d]));
  for (int d = 0; d < nd; d++) offset = sint_sub(offset, sint_mul(mask[d][0], strides[d]));
  *out = view_make(nd, ns, strides, offset, (const sint(*)[2])mask);
  return true;
}

View view_minify(const View *v) {
  DimGroup g[TVK_MAX_DIMS];
  sint shape[TVK_MAX_DIMS];
  int n = merge_dims(v, g);
  for (int i = 0; i < n; i++) shape[i] = g[i].size;
  View r;
  return view_reshape(v, n, shape, &r) ? r : *v;
}

/* ---------------------------------------------------------------- merging two views */

/* An integer linear form over the index variables of a view:
 * k + sum c[d] * idx[d], with 0 <= idx[d] < shape[d]. */
typedef struct {
  sint c[TVK_MAX_DIMS];
  sint k;
} Lin;

static sint lin_min(const Lin *f, const View *v) {
  sint m = f->k;
  for (int d = 0; d < v->ndim; d++) m += sint_min(0, f->c[d] * (v->shape[d] - 1));
  return m;
}
static sint lin_max(const Lin *f, const View *v) {
  sint m = f->k;
  for (int d = 0; d < v->ndim; d++) m += sint_max(0, f->c[d] * (v->shape[d] - 1));
  return m;
}
static bool lin_is_zero(const Lin *f, const View *v) {
  for (int d = 0; d < v->ndim; d++)
    if (f->c[d] != 0 && v->shape[d] != 1) return false;
  return f->k == 0;
}

/* Mixed-radix digits of a flat index in shape (row-major; the outermost digit
 * wraps, as the seed's unravel). */
static void unravel(int ndim, const sint *shape, sint flat, sint *out) {
  sint acc = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    out[d] = sint_fmod(sint_fdiv(flat, acc), shape[d]);
    acc *= shape[d];
  }
}

static bool view_merge(const View *vm2, const View *vm1, View *out, int depth);

/* vm1 masked: merge its unmasked core, then pad the mask back on. */
static bool merge_masked(const View *vm2, const View *vm1, View *out, int depth) {
  sint pads[TVK_MAX_DIMS][2];
  View core = view_shrink(vm1, (const sint(*)[2])vm1->mask), merged;
  if (view_eq(&core, vm1)) return false;
  if (!view_merge(vm2, &core, &merged, depth + 1)) return false;
  for (int d = 0; d < vm1->ndim; d++) {
    pads[d][0] = vm1->mask[d][0];
    pads[d][1] = sint_sub(vm1->shape[d], vm1->mask[d][1]);
  }
  *out = view_pad(&merged, (const sint(*)[2])pads);
  return true;
}

/* Project vm2's mask onto vm1's dims (vm1 unmasked). Each vm2 dim is addressed
 * by a linear term t of vm1's indices; if t can leave the mask, the dim must be
 * driven by a single vm1 index, whose range is then narrowed. Returns 0 when
 * nothing is masked off, 1 when the narrowed mask is in lo/hi (retry with it),
 * -1 when the mask cannot be expressed. */
static int project_mask(const View *vm2, const View *vm1, const sint *origin, const Lin *terms,
                        const Lin *ext, sint *lo, sint *hi) {
  bool bad = false, narrowed = false;
  for (int d = 0; d < vm1->ndim; d++) lo[d] = 0, hi[d] = vm1->shape[d];
  for (int d2 = 0; d2 < vm2->ndim; d2++) {
    sint b = vm2->mask[d2][0], e = vm2->mask[d2][1], o = origin[d2];
    if (b <= lin_min(&ext[d2], vm1) && lin_max(&ext[d2], vm1) < e) continue;
    int nterm = 0, d1 = -1;
    for (int d = 0; d < vm1->ndim; d++)
      if (terms[d2].c[d] != 0) nterm++, d1 = d;
    if (nterm != 1) {
      bad = bad || nterm > 1 || vm1->ndim == 0;
      if (nterm == 0 && vm1->ndim > 0) hi[0] = 0; /* a constant outside the mask */
      continue;
    }
    sint s1 = terms[d2].c[d1];
    lo[d1] = sint_max(lo[d1], sint_cdiv(s1 > 0 ? b - o : e - o - 1, s1));
    hi[d1] = sint_min(hi[d1], sint_fdiv(s1 < 0 ? b - o : e - o - 1, s1) + 1);
  }
  for (int d = 0; d < vm1->ndim; d++) narrowed = narrowed || lo[d] != 0 || hi[d] != vm1->shape[d];
  return narrowed ? 1 : bad ? -1 : 0;
}

/* Steps of vm1's dims seen in vm2's dims: origin holds the digits of vm1's
 * offset in vm2's shape; terms[d2].c[d1] is how far one step of vm1's dim d1
 * moves vm2's digit d2 (assuming no carries); strides are the merged strides. */
static void project_strides(const View *vm2, const View *vm1, sint *origin, Lin *terms,
                            sint *strides) {
  sint dig[TVK_MAX_DIMS];
  memset(terms, 0, sizeof(Lin) * TVK_MAX_DIMS);
  unravel(vm2->ndim, vm2->shape, vm1->offset, origin);
  for (int d1 = 0; d1 < vm1->ndim; d1++) {
    strides[d1] = 0;
    if (vm1->strides[d1] == 0) continue;
    unravel(vm2->ndim, vm2->shape, vm1->offset + vm1->strides[d1], dig);
    for (int d2 = 0; d2 < vm2->ndim; d2++) {
      sint s1 = dig[d2] - origin[d2];
      terms[d2].c[d1] = s1;
      strides[d1] += s1 * vm2->strides[d2];
    }
  }
}

/* Group vm2's dims, from the inside, until the group's term provably stays
 * within the group's size: then no carry crosses groups. Fills the groups
 * outermost first (ext: their terms, size: their sizes); -1 when the outermost
 * dims are left with a term that is not provably 0. */
static int group_dims(const View *vm2, const View *vm1, const sint *origin, const Lin *terms,
                      Lin *ext, sint *size) {
  Lin acc;
  sint msize = 1;
  int n = 0;
  memset(&acc, 0, sizeof acc);
  for (int d2 = vm2->ndim - 1; d2 >= 0; d2--) {
    for (int d = 0; d < vm1->ndim; d++) acc.c[d] += terms[d2].c[d] * msize;
    acc.k += origin[d2] * msize;
    msize *= vm2->shape[d2];
    if (lin_max(&acc, vm1) < msize && lin_min(&acc, vm1) >= 0) {
      ext[n] = acc, size[n++] = msize;
      memset(&acc, 0, sizeof acc), msize = 1;
    }
  }
  if (!lin_is_zero(&acc, vm1)) return -1;
  for (int i = 0; i < n / 2; i++) {
    Lin t = ext[i];
    sint s = size[i];
    ext[i] = ext[n - 1 - i], ext[n - 1 - i] = t;
    size[i] = size[n - 1 - i], size[n - 1 - i] = s;
  }
  return n;
}

/* One view equal to vm1 applied on top of vm2, if one exists (the seed's
 * View.__add__). vm1's strides are projected onto vm2's dims through the digits
 * of vm1's offset; this is exact when no digit carries into another, which the
 * bounds of each dim's linear term prove. */
static bool view_merge(const View *vm2, const View *vm1, View *out, int depth) {
  if (depth > MERGE_MAX_DEPTH) return false;
  if (vm2->contiguous || view_numel(vm1) == 0) return *out = *vm1, true;
  if (vm1->contiguous && same_shape(vm1->ndim, vm1->shape, vm2->ndim, vm2->shape))
    return *out = *vm2, true;
  if (vm1->contiguous && sint_proven_eq(view_numel(vm1), view_numel(vm2)) &&
      view_reshape(vm2, vm1->ndim, vm1->shape, out))
    return true;
  if (vm1->has_mask) return merge_masked(vm2, vm1, out, depth);
  if (!view_is_int(vm1) || !view_is_int(vm2)) return false; /* digits need integers */

  sint origin[TVK_MAX_DIMS], strides[TVK_MAX_DIMS], size[TVK_MAX_DIMS];
  Lin terms[TVK_MAX_DIMS], ext[TVK_MAX_DIMS];
  project_strides(vm2, vm1, origin, terms, strides);
  int n = group_dims(vm2, vm1, origin, terms, ext, size);
  if (n < 0) return false;
  if (!same_shape(n, size, vm2->ndim, vm2->shape)) { /* merge vm2's dims as needed, retry */
    View reshaped;
    if (!view_reshape(vm2, n, size, &reshaped)) return false;
    return view_merge(&reshaped, vm1, out, depth + 1);
  }
  if (vm2->has_mask) {
    sint lo[TVK_MAX_DIMS], hi[TVK_MAX_DIMS], m[TVK_MAX_DIMS][2];
    int r = project_mask(vm2, vm1, origin, terms, ext, lo, hi);
    if (r < 0) return false;
    if (r > 0) { /* part of vm1 reads vm2's padding: mask it in vm1 and retry */
      for (int d = 0; d < vm1->ndim; d++) m[d][0] = lo[d], m[d][1] = hi[d];
      View masked =
          view_make(vm1->ndim, vm1->shape, vm1->strides, vm1->offset, (const sint(*)[2])m);
      return view_merge(vm2, &masked, out, depth + 1);
    }
  }
  sint offset = vm2->offset;
  for (int d2 = 0; d2 < vm2->ndim; d2++) offset += origin[d2] * vm2->strides[d2];
  *out = view_make(vm1->ndim, vm1->shape, strides, offset, NULL);
  return true;
}

/* ---------------------------------------------------------------- trackers */

static size_t st_bytes(int nviews) { return sizeof(ShapeTracker) + (size_t)nviews * sizeof(View); }

static ShapeTracker *st_alloc(int nviews) {
  ShapeTracker *r = malloc(st_bytes(nviews));
  if (r) r->nviews = nviews;
  return r;
}

ShapeTracker *st_clone(const ShapeTracker *st) {
  ShapeTracker *r = malloc(st_bytes(st->nviews));
  if (r) memcpy(r, st, st_bytes(st->nviews));
  return r;
}

void st_free(ShapeTracker *st) { free(st); }

/* st with its top view replaced by v (push: v added on top). */
static ShapeTracker *st_with_top(const ShapeTracker *st, const View *v, bool push) {
  int n = st->nviews + (push ? 1 : 0);
  ShapeTracker *r = st_alloc(n);
  if (!r) return NULL;
  memcpy(r->views, st->views, (size_t)st->nviews * sizeof(View));
  r->views[n - 1] = *v;
  return r;
}

bool st_eq(const ShapeTracker *a, const ShapeTracker *b) {
  if (a->nviews != b->nviews) return false;
  for (int i = 0; i < a->nviews; i++)
    if (!view_eq(&a->views[i], &b->views[i])) return false;
  return true;
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

uint64_t st_hash(const ShapeTracker *st) {
  uint64_t h = (uint64_t)st->nviews;
  for (int i = 0; i < st->nviews; i++) {
    const View *v = &st->views[i];
    h = mix(h, (uint64_t)v->ndim);
    h = mix(h, (uint64_t)v->offset);
    h = mix(h, (uint64_t)v->has_mask);
    for (int d = 0; d < v->ndim; d++) {
      h = mix(h, (uint64_t)v->shape[d]);
      h = mix(h, (uint64_t)v->strides[d]);
      if (v->has_mask) h = mix(mix(h, (uint64_t)v->mask[d][0]), (uint64_t)v->mask[d][1]);
    }
  }
  return h;
}

ShapeTracker *st_from_shape(int ndim, const sint *shape) {
  if (!shape_ok(ndim, shape)) return NULL;
  View v = view_make(ndim, shape, NULL, 0, NULL);
  return st_with_top(&(ShapeTracker){0}, &v, true);
}

sint st_numel(const ShapeTracker *st) { return view_numel(st_top(st)); }

bool st_contiguous(const ShapeTracker *st) { return st->nviews == 1 && st->views[0].contiguous; }

/* Range of addresses v reaches for indices in the box [blo, bhi) intersected with
 * its mask; false when no valid index is in the box. */
static bool view_addr_range(const View *v, const sint *blo, const sint *bhi, sint *amin,
                            sint *amax) {
  sint lo_sum = v->offset, hi_sum = v->offset;
  for (int d = 0; d < v->ndim; d++) {
    sint lo = sint_max(blo[d], mask_lo(v, d)), hi = sint_min(bhi[d], mask_hi(v, d));
    if (sint_proven_le(hi, lo)) return false;
    sint a = sint_mul(v->strides[d], lo), b = sint_mul(v->strides[d], sint_sub(hi, 1));
    lo_sum = sint_add(lo_sum, sint_min(a, b)), hi_sum = sint_add(hi_sum, sint_max(a, b));
  }
  *amin = lo_sum, *amax = hi_sum;
  return true;
}

/* Bounds on the memory addresses the tracker reaches (exact for one view; with
 * more, each view's reachable flat range is widened to the box of indices that
 * contains it; with more and symbolic values, the range of views[0] over all
 * its indices). False when no index is valid. */
static bool st_addr_range(const ShapeTracker *st, sint *amin, sint *amax) {
  const View *top = st_top(st);
  sint blo[TVK_MAX_DIMS], bhi[TVK_MAX_DIMS], a, b;
  if (view_numel(top) == 0) return false;
  if (st->nviews > 1 && st_is_symbolic(st)) {
    for (int d = 0; d < st->views[0].ndim; d++) blo[d] = 0, bhi[d] = st->views[0].shape[d];
    return view_addr_range(&st->views[0], blo, bhi, amin, amax);
  }
  for (int d = 0; d < top->ndim; d++) blo[d] = 0, bhi[d] = top->shape[d];
  if (!view_addr_range(top, blo, bhi, &a, &b)) return false;
  for (int i = st->nviews - 2; i >= 0; i--) {
    const View *v = &st->views[i];
    sint da[TVK_MAX_DIMS], db[TVK_MAX_DIMS];
    a = sint_max(a, 0), b = sint_min(b, view_numel(v) - 1);
    if (a > b) return false;
    unravel(v->ndim, v->shape, a, da);
    unravel(v->ndim, v->shape, b, db);
    bool fixed = true; /* leading digits shared by a and b are fixed */
    for (int d = 0; d < v->ndim; d++) {
      blo[d] = fixed ? da[d] : 0;
      bhi[d] = fixed ? db[d] + 1 : v->shape[d];
      fixed = fixed && da[d] == db[d];
    }
    if (!view_addr_range(v, blo, bhi, &a, &b)) return false;
  }
  *amin = a, *amax = b;
  return true;
}

sint st_real_size(const ShapeTracker *st) {
  sint a, b;
  return st_addr_range(st, &a, &b) ? sint_add(b, 1) : 0;
}

/* A user-given view must be in canonical-compatible ranges and must not reach
 * below address 0. */
ShapeTracker *st_from_view(const View *v) {
  if (!v || !shape_ok(v->ndim, v->shape)) return NULL;
  View c = view_make(v->ndim, v->shape, v->strides, v->offset,
                     v->has_mask ? (const sint(*)[2])v->mask : NULL);
  ShapeTracker *r = st_with_top(&(ShapeTracker){0}, &c, true);
  sint a, b;
  if (r && st_addr_range(r, &a, &b) && !sint_proven_le(0, a)) {
    st_free(r);
    return NULL;
  }
  return r;
}

/* ---------------------------------------------------------------- movement ops */

ShapeTracker *st_reshape(const ShapeTracker *st, int ndim, const sint *shape) {
  sint n;
  if (!st || !shape_ok(ndim, shape) || !shape_numel(ndim, shape, &n) ||
      !sint_proven_eq(n, st_numel(st)))
    return NULL;
  View v;
  if (view_reshape(st_top(st), ndim, shape, &v)) return st_with_top(st, &v, false);
  v = view_make(ndim, shape, NULL, 0, NULL);
  return st_with_top(st, &v, true);
}

ShapeTracker *st_permute(const ShapeTracker *st, const int *order) {
  if (!st || (st_ndim(st) > 0 && !order)) return NULL;
  bool seen[TVK_MAX_DIMS] = {false};
  for (int d = 0; d < st_ndim(st); d++) {
    if (order[d] < 0 || order[d] >= st_ndim(st) || seen[order[d]]) return NULL;
    seen[order[d]] = true;
  }
  View v = view_permute(st_top(st), order);
  return st_with_top(st, &v, false);
}

ShapeTracker *st_expand(const ShapeTracker *st, const sint *shape) {
  if (!st || !shape_ok(st_ndim(st), shape)) return NULL;
  for (int d = 0; d < st_ndim(st); d++)
    if (sint_may_differ(shape[d], st_shape(st)[d]) && st_shape(st)[d] != 1) return NULL;
  View v = view_expand(st_top(st), shape);
  return st_with_top(st, &v, false);
}

ShapeTracker *st_pad(const ShapeTracker *st, const sint (*pads)[2]) {
  if (!st || (st_ndim(st) > 0 && !pads)) return NULL;
  sint shape[TVK_MAX_DIMS];
  for (int d = 0; d < st_ndim(st); d++) {
    if (sint_vmin(pads[d][0]) < 0 || sint_vmin(pads[d][1]) < 0 ||
        sint_vmax(pads[d][0]) > INT64_MAX / 4 || sint_vmax(pads[d][1]) > INT64_MAX / 4 ||
        sint_vmax(st_shape(st)[d]) > INT64_MAX / 2)
      return NULL; /* so that the sum below cannot overflow */
    shape[d] = sint_add(sint_add(st_shape(st)[d], pads[d][0]), pads[d][1]);
  }
  if (!shape_ok(st_ndim(st), shape)) return NULL;
  View v = view_pad(st_top(st), pads);
  return st_with_top(st, &v, false);
}

ShapeTracker *st_shrink(const ShapeTracker *st, const sint (*ranges)[2]) {
  if (!st || (st_ndim(st) > 0 && !ranges)) return NULL;
  for (int d = 0; d < st_ndim(st); d++)
    if (!sint_proven_le(0, ranges[d][0]) || !sint_proven_le(ranges[d][0], ranges[d][1]) ||
        !sint_proven_le(ranges[d][1], st_shape(st)[d]))
      return NULL;
  View v = view_shrink(st_top(st), ranges);
  return st_with_top(st, &v, false);
}

ShapeTracker *st_flip(const ShapeTracker *st, const bool *flip) {
  if (!st || (st_ndim(st) > 0 && !flip)) return NULL;
  View v = view_flip(st_top(st), flip);
  return st_with_top(st, &v, false);
}

/* Merge the top two views while they merge (the seed's ShapeTracker.simplify). */
static void st_simplify_inplace(ShapeTracker *st) {
  View v;
  while (st->nviews >= 2 && view_merge(&st->views[st->nviews - 2], st_top(st), &v, 0)) {
    st->nviews--;
    st->views[st->nviews - 1] = v;
  }
}

ShapeTracker *st_simplify(const ShapeTracker *st) {
  if (!st) return NULL;
  ShapeTracker *r = st_clone(st);
  if (r) st_simplify_inplace(r);
  return r;
}

/* b's bottom view addresses the flattened shape of a, so b may only reach
 * addresses below a's element count. Views go on one at a time, simplifying
 * after each (the seed's ShapeTracker.__add__). */
ShapeTracker *st_compose(const ShapeTracker *a, const ShapeTracker *b) {
  if (!a || !b) return NULL;
  sint lo, hi;
  if (st_addr_range(b, &lo, &hi) && (!sint_proven_le(0, lo) || !sint_proven_lt(hi, st_numel(a))))
    return NULL;
  ShapeTracker *r = st_alloc(a->nviews + b->nviews);
  if (!r) return NULL;
  memcpy(r->views, a->views, (size_t)a->nviews * sizeof(View));
  r->nviews = a->nviews;
  for (int i = 0; i < b->nviews; i++) {
    r->views[r->nviews++] = b->views[i];
    st_simplify_inplace(r);
  }
  return r;
}

/* ---------------------------------------------------------------- evaluation */

bool st_index_int(const ShapeTracker *st, const sint *idx, sint *offset) {
  sint cur[TVK_MAX_DIMS], flat = 0;
  *offset = 0;
  if (st_is_symbolic(st)) return false;
  const View *top = st_top(st);
  for (int d = 0; d < top->ndim; d++) {
    if (idx[d] < 0 || idx[d] >= top->shape[d]) return false;
    cur[d] = idx[d];
  }
  for (int i = st->nviews - 1; i >= 0; i--) {
    const View *v = &st->views[i];
    if (i != st->nviews - 1) {
      if (flat < 0 || flat >= view_numel(v)) return false;
      unravel(v->ndim, v->shape, flat, cur);
    }
    flat = v->offset;
    for (int d = 0; d < v->ndim; d++) {
      if (cur[d] < mask_lo(v, d) || cur[d] >= mask_hi(v, d)) return false;
      flat += cur[d] * v->strides[d];
    }
  }
  *offset = flat;
  return true;
}

/* Each view rebuilt from its values (view_make canonicalises again: a dim that
 * became 1 loses its stride, a mask that became full goes). */
ShapeTracker *st_substitute(const ShapeTracker *st, int nvars, const sint *vars,
                            const int64_t *vals) {
  ShapeTracker *r = st ? st_alloc(st->nviews) : NULL;
  for (int i = 0; r && i < st->nviews; i++) {
    const View *v = &st->views[i];
    sint shape[TVK_MAX_DIMS], strides[TVK_MAX_DIMS], mask[TVK_MAX_DIMS][2];
    sint offset = sint_eval(v->offset, nvars, vars, vals);
    bool ok = offset != SINT_NONE;
    for (int d = 0; d < v->ndim; d++) {
      shape[d] = sint_eval(v->shape[d], nvars, vars, vals);
      strides[d] = sint_eval(v->strides[d], nvars, vars, vals);
      mask[d][0] = v->has_mask ? sint_eval(v->mask[d][0], nvars, vars, vals) : 0;
      mask[d][1] = v->has_mask ? sint_eval(v->mask[d][1], nvars, vars, vals) : shape[d];
      ok = ok && shape[d] != SINT_NONE && shape[d] >= 0 && strides[d] != SINT_NONE &&
           mask[d][0] != SINT_NONE && mask[d][1] != SINT_NONE;
    }
    if (!ok) {
      st_free(r);
      return NULL;
    }
    r->views[i] =
        view_make(v->ndim, shape, strides, offset, v->has_mask ? (const sint(*)[2])mask : NULL);
  }
  return r;
}
