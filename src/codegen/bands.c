/* Row bands (codegen.h): which part of each buffer one index of the axis a
 * CPU kernel splits across cores touches. The runtime runs a chain of
 * kernels part by part (DeviceOps.launch_parts) only where every buffer one
 * kernel writes and another touches is read and written in the same bands:
 * then part p of a later kernel sees exactly what part p of the earlier ones
 * made, and no part touches another's rows.
 *
 * A view is banded with pitch R along axis a when it is one view of whole
 * numbers whose stride along a is R > 0 and whose other axes, with its
 * offset, stay in [0, R): index r of axis a then reaches only elements
 * [r R, r R + R). Masked positions touch no memory; the bounds are taken
 * over the mask where there is one. */
#include <stdlib.h>

#include "codegen/codegen.h"

/* R for view v along axis a, or 0 when v is not banded. */
static int64_t view_band(const ShapeTracker *st, int a) {
  if (st->nviews != 1) return 0;
  const View *v = &st->views[0];
  if (a >= v->ndim || !sint_is_int(v->offset) || !sint_is_int(v->strides[a])) return 0;
  int64_t pitch = v->strides[a];
  if (pitch <= 0 || !sint_is_int(v->shape[a]) || v->shape[a] <= 1) return 0;
  int64_t lo = v->offset, hi = v->offset;
  for (int d = 0; d < v->ndim; d++) {
    if (d == a) continue;
    if (!sint_is_int(v->shape[d]) || !sint_is_int(v->strides[d])) return 0;
    int64_t first = 0, last = v->shape[d] - 1;
    if (v->has_mask) {
      if (!sint_is_int(v->mask[d][0]) || !sint_is_int(v->mask[d][1])) return 0;
      first = v->mask[d][0], last = v->mask[d][1] - 1;
    }
    if (last < first) return 0; /* nothing valid: not worth a rule of its own */
    int64_t s = v->strides[d];
    if (s > 0 && last > (INT64_MAX / 4) / s) return 0; /* far past any buffer */
    if (s < 0 && last > (INT64_MAX / 4) / -s) return 0;
    lo += s < 0 ? last * s : first * s;
    hi += s < 0 ? first * s : last * s;
  }
  return lo >= 0 && hi < pitch ? pitch : 0;
}

void kernel_bands(UOp *norm, const KernelDesc *kd, int axis, int64_t *band) {
  for (int b = 0; b < kd->nbufs; b++) band[b] = -1; /* -1: not accessed yet */
  size_t n = 0;
  UOp **order = axis >= 0 ? uop_toposort(norm, &n) : NULL;
  for (size_t i = 0; i < n; i++) {
    UOp *u = order[i];
    if (u->op != OP_LOAD && u->op != OP_STORE) continue;
    int64_t b = u->src[0]->arg.i;
    if (b < 0 || b >= kd->nbufs) continue;
    int64_t r = view_band(u->src[1]->arg.st, axis);
    band[b] = band[b] < 0 || band[b] == r ? r : 0;
  }
  for (int b = 0; b < kd->nbufs; b++)
    if (!order || band[b] < 0) band[b] = 0;
  free(order);
}
