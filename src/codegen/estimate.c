/* What one launch of a kernel costs, from its AST: arithmetic operations and
 * bytes of global memory, for the profile's GFLOP/s and GB/s and the trace.
 *
 * An estimate in tinygrad's sense: each ALU op counts once per element of the
 * shape it is computed over (its operands' broadcast shape, the full shape
 * inside a reduce), a REDUCE_AXIS one op per element it folds; a buffer counts
 * the elements its views can reach, once for its loads and once for its
 * stores (as if caches held everything a kernel touches twice). What the
 * optimiser's plan changes (upcasts that share loads) does not change the
 * count: it is the work of the computation, not of one schedule of it.
 * Symbolic sizes count at their largest value. */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/dtype.h"
#include "ir/ptrmap.h"

typedef struct {
  int64_t shape[TVK_MAX_DIMS];
} NodeShape;

static double numel(int ndim, const int64_t *shape) {
  double n = 1;
  for (int d = 0; d < ndim; d++) n *= (double)shape[d];
  return n;
}

/* Elements of the buffer below a view that the view can reach: at most its
 * own element count (a broadcast reaches fewer). */
static double reach(const ShapeTracker *st) {
  double visible = (double)sint_vmax(st_numel(st)), real = (double)sint_vmax(st_real_size(st));
  return real < visible ? real : visible;
}

bool kernel_estimate(UOp *norm, const KernelDesc *kd, double *flops, double *bytes) {
  *flops = 0, *bytes = 0;
  size_t n = 0;
  UOp **order = uop_toposort(norm, &n);
  NodeShape *shp = order ? malloc((n ? n : 1) * sizeof *shp) : NULL;
  double *read = calloc((size_t)(kd->nbufs ? kd->nbufs : 1), sizeof *read);
  double *written = calloc((size_t)(kd->nbufs ? kd->nbufs : 1), sizeof *written);
  PtrMap at = {0};
  bool ok = order && shp && read && written && ptrmap_init(&at, n);
  int nd = kd->ndim;
  for (size_t i = 0; ok && i < n; i++) {
    UOp *u = order[i];
    ok = ptrmap_put(&at, u, (int64_t)i);
    int64_t *s = shp[i].shape;
    for (int d = 0; d < nd; d++) s[d] = 1;
    if (u->op == OP_VIEW) {
      for (int d = 0; d < nd; d++) s[d] = sint_vmax(st_shape(u->arg.st)[d]);
      continue;
    }
    if (u->op == OP_LOAD || u->op == OP_STORE) {
      const ShapeTracker *st = u->src[1]->arg.st;
      int64_t buf = u->src[0]->arg.i;
      double elems = reach(st);
      if (buf >= 0 && buf < kd->nbufs) {
        double *acc = u->op == OP_LOAD ? &read[buf] : &written[buf];
        if (elems > *acc) *acc = elems;
      }
      for (int d = 0; d < nd; d++) s[d] = sint_vmax(st_shape(st)[d]);
      continue;
    }
    /* a value: the broadcast shape of its value operands */
    for (uint32_t k = 0; k < u->nsrc; k++) {
      int64_t j = ptrmap_get(&at, u->src[k]);
      if (j < 0 || u->src[k]->op == OP_DEFINE_GLOBAL) continue;
      for (int d = 0; d < nd; d++)
        if (shp[j].shape[d] > s[d]) s[d] = shp[j].shape[d];
    }
    if (u->op == OP_REDUCE_AXIS) {
      *flops += numel(nd, s); /* one fold per element of its input */
      for (int a = 0; a < u->arg.red.n; a++)
        if (u->arg.red.axes[a] >= 0 && u->arg.red.axes[a] < nd) s[u->arg.red.axes[a]] = 1;
    } else if (op_in((Op)u->op, G_ALU)) {
      *flops += (u->op == OP_MULACC ? 2.0 : 1.0) * numel(nd, s);
    }
  }
  for (int b = 0; ok && b < kd->nbufs; b++) {
    double size = (double)dt_scalar_size((ScalarType)kd->bufs[b].dtype);
    *bytes += (read[b] + written[b]) * size;
  }
  if (!ok) *flops = 0, *bytes = 0;
  ptrmap_free(&at);
  free(order);
  free(shp);
  free(read);
  free(written);
  return ok;
}
