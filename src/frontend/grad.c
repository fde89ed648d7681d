/* Reverse-mode gradients over the tensor graph (tvk_grad, docs/autograd.md).
 *
 * The graph's nodes are the primitives of ir/graph.h, so one rule per
 * primitive gives every op built from them a gradient: the NN ops need no
 * code of their own. The walk goes from the output down in reverse
 * topological order, each node passing its gradient (a graph of the node's
 * shape) to the sources that lead to a parameter; gradients reaching a node
 * twice are added. What comes out is lazy graph like any other: it fuses,
 * and realizing it runs the kernels.
 *
 * A VIEW's gradient is the transpose of its ShapeTracker: scatter the
 * gradient back to the elements each view position read, adding where a
 * view reads one element many times (broadcast). view_back builds it from
 * movement ops for every view the movement ops make (reshape, permute,
 * expand, pad, shrink, flip and their compositions, view by view); a view
 * whose positions read overlapping elements any other way is refused with a
 * clear error rather than computed slowly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "frontend/ops_common.h"
#include "ir/ptrmap.h"
#include "ir/vec.h"

/* C11 has no LN2 / M_PI without POSIX */
static const double LN2 = 0.69314718055994530942, HALF_PI = 1.57079632679489661923;

typedef struct {
  tvk_ctx *ctx;
  PtrMap at; /* node -> index in g */
  UOp **g;   /* accumulated gradients (autoreleased) */
  size_t n, cap;
  PtrMap need;      /* nodes on a path to a parameter: 1 */
  const char *fail; /* why a gradient cannot be built (static text), NULL: none */
  int64_t unrolled; /* views windows were unrolled into (unroll_dim) */
} Grad;

/* A node's shape as views see it: a BUFFER's is its flat element count. */
static int node_shape(UOp *u, int64_t *shape) {
  if (u->op != OP_BUFFER) return graph_shape(u, shape);
  shape[0] = graph_buffer_numel(u);
  return 1;
}

static UOp *zeros(tvk_ctx *ctx, ScalarType s, int nd, const int64_t *shape) {
  return graph_const(ctx, s, 0, nd, shape);
}

/* Adds gradient v to node u's. */
static bool accumulate(Grad *gr, UOp *u, UOp *v) {
  if (!v) return false;
  bool added = false;
  int64_t *slot = ptrmap_insert(&gr->at, u, (int64_t)gr->n, &added);
  if (!slot) return false;
  if (!added) {
    UOp *sum = ew_add(gr->g[*slot], v);
    if (!sum) return false;
    gr->g[*slot] = sum;
    return true;
  }
  if (!VEC_RESERVE(gr->g, gr->cap, gr->n + 1)) return false;
  gr->g[gr->n++] = v;
  return true;
}

/* ---------------------------------------------------------------- views */

static UOp *view_back1(Grad *gr, UOp *g, const View *v, int nb, const int64_t *b);

/* Most views one view's windows unroll into (a 3x3 convolution: 9). */
enum { GRAD_MAX_UNROLL = 256 };

/* Windows: dims whose strides overlap (a convolution's output and kernel
 * positions step through the same rows). The view is the sum of its slices
 * along dim j (the smaller of the pair), each one view fewer deep: their
 * gradients add. g has shape `shape` (nd dims, the first m of strides T,
 * the rest size 1), the view offset `off`. */
static UOp *unroll_dim(Grad *gr, UOp *g, int nd, const int64_t *shape, int j, const int64_t *T,
                       int m, int64_t off, int nb, const int64_t *b) {
  if ((gr->unrolled += shape[j]) > GRAD_MAX_UNROLL) {
    gr->fail = "a view's overlapping windows unroll into too many views";
    return NULL;
  }
  View c = {.ndim = nd, .offset = off};
  for (int d = 0; d < nd; d++) c.shape[d] = shape[d], c.strides[d] = d < m ? T[d] : 0;
  UOp *sum = NULL;
  for (int64_t t = 0; t < shape[j]; t++) {
    int64_t r[TVK_MAX_DIMS][2];
    for (int d = 0; d < nd; d++) r[d][0] = 0, r[d][1] = shape[d];
    r[j][0] = t, r[j][1] = t + 1;
    View ct = c;
    ct.shape[j] = 1, ct.offset = off + t * T[j];
    UOp *part = view_back1(gr, bc_shrink(g, nd, shape, (const int64_t(*)[2])r), &ct, nb, b);
    if (!part) return NULL;
    sum = sum ? ew_add(sum, part) : part;
  }
  return sum;
}

/* The gradient of view v over a row-major base of shape b (nb dims), from g of
 * v's shape; NULL with gr->fail set when v reads elements in a pattern no
 * composition of movement ops makes (or on out of memory). */
static UOp *view_back1(Grad *gr, UOp *g, const View *v, int nb, const int64_t *b) {
  tvk_ctx *ctx = gr->ctx;
  ScalarType s = (ScalarType)g->dtype.scalar;
  int nd = v->ndim;
  int64_t S[TVK_MAX_DIMS], T[TVK_MAX_DIMS], off = v->offset, N = 1;
  memcpy(S, v->shape, (size_t)nd * sizeof *S);
  memcpy(T, v->strides, (size_t)nd * sizeof *T);
  for (int d = 0; d < nb; d++) N *= b[d];
  /* 1. a mask: only the valid box read anything */
  if (v->has_mask) {
    int64_t r[TVK_MAX_DIMS][2];
    for (int d = 0; d < nd; d++) {
      r[d][0] = v->mask[d][0], r[d][1] = v->mask[d][1];
      if (r[d][1] <= r[d][0]) return zeros(ctx, s, nb, b); /* nothing valid */
    }
    g = bc_shrink(g, nd, S, (const int64_t(*)[2])r);
    for (int d = 0; d < nd; d++) off += r[d][0] * T[d], S[d] = r[d][1] - r[d][0];
  }
  /* 2. broadcast dims (stride 0) read one element many times: sum them */
  int64_t axes[TVK_MAX_DIMS];
  int na = 0;
  for (int d = 0; d < nd; d++)
    if (S[d] > 1 && T[d] == 0) axes[na++] = d;
  if (na && g) {
    g = front_reduce(ctx, g, OP_ADD, na, axes);
    for (int a = 0; a < na; a++) S[axes[a]] = 1;
  }
  /* 3. negative strides are flips */
  bool flip[TVK_MAX_DIMS] = {false}, any = false;
  for (int d = 0; d < nd; d++)
    if (S[d] > 1 && T[d] < 0) flip[d] = any = true, off += (S[d] - 1) * T[d], T[d] = -T[d];
  if (any) g = bc_flip(g, nd, S, flip);
  /* 4. the dims left, by stride from the largest: a permute, size-1 dims last */
  int order[TVK_MAX_DIMS], m = 0;
  for (int d = 0; d < nd; d++)
    if (S[d] > 1) order[m++] = d;
  for (int i = 1; i < m; i++) /* insertion sort: a handful of dims */
    for (int j = i; j > 0 && T[order[j - 1]] < T[order[j]]; j--) {
      int t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  for (int d = 0, k = m; d < nd; d++)
    if (S[d] <= 1) order[k++] = d;
  int64_t permuted[TVK_MAX_DIMS];
  for (int d = 0; d < nd; d++) permuted[d] = S[order[d]];
  if (g && nd > 1) g = bc_permute(g, nd, S, order);
  /* 5. the base as mixed-radix dims [R0, T0/T1, ..., T(m-2)/T(m-1), T(m-1)]
   * of the flat index, the view a box of it at the offset's digits: then the
   * gradient is that box padded with zeros. Strides that do not nest, or a
   * box that would carry into the next digit, read overlapping elements. */
  if (m + 1 > TVK_MAX_DIMS) {
    gr->fail = "a view has too many dims to transpose";
    return NULL;
  }
  int64_t PS[TVK_MAX_DIMS], PT[TVK_MAX_DIMS], R[TVK_MAX_DIMS], D[TVK_MAX_DIMS];
  for (int i = 0; i < m; i++) PS[i] = S[order[i]], PT[i] = T[order[i]];
  for (int i = 0; i + 1 < m; i++)
    if (PT[i] % PT[i + 1] != 0 || PT[i] < PS[i + 1] * PT[i + 1])
      return unroll_dim(gr, g, nd, permuted, PS[i] <= PS[i + 1] ? i : i + 1, PT, m, off, nb, b);
  int ndig = m + 1;
  int64_t top = m ? PT[0] : 1, rem = off;
  R[0] = (N + top - 1) / top;
  for (int i = 1; i < m; i++) R[i] = PT[i - 1] / PT[i];
  if (m) R[m] = PT[m - 1];
  for (int i = 0; i < m; i++) D[i] = rem / PT[i], rem %= PT[i];
  D[m] = rem;
  int64_t box[TVK_MAX_DIMS], pads[TVK_MAX_DIMS][2], P = 1;
  for (int i = 0; i < ndig; i++) {
    box[i] = i < m ? PS[i] : 1;
    pads[i][0] = D[i], pads[i][1] = R[i] - D[i] - box[i];
    if (pads[i][0] < 0 || pads[i][1] < 0) {
      gr->fail = "a view reads past its base";
      return NULL;
    }
    P *= R[i];
  }
  g = bc_reshape(g, nd, permuted, ndig, box);
  g = bc_pad(g, ndig, box, (const int64_t(*)[2])pads);
  int64_t flat = P, want = N;
  g = bc_reshape(g, ndig, R, 1, &flat);
  if (g && P != N) g = bc_shrink(g, 1, &flat, (const int64_t[][2]){{0, N}});
  return bc_reshape(g, 1, &want, nb, b);
}

/* The gradient of VIEW(x, st) for x of shape xs, from g: view by view from
 * the top one down (each addresses the row-major elements of the one below,
 * views[0] x's). */
static UOp *view_back(Grad *gr, UOp *g, const ShapeTracker *st, int xnd, const int64_t *xs) {
  gr->unrolled = 0; /* the budget is per view */
  for (int k = st->nviews - 1; k >= 0 && g; k--) {
    const View *below = k > 0 ? &st->views[k - 1] : NULL;
    g = view_back1(gr, g, &st->views[k], below ? below->ndim : xnd, below ? below->shape : xs);
  }
  return g;
}

/* ---------------------------------------------------------------- the rules */

/* A MULTI's gradient g (a graph over the whole tensor) to its parts: g as
 * per-device graphs (shard_split), part k's to part k when g is cut as u is;
 * otherwise each part's rows of g gathered on its device. A replicated
 * tensor's parts are copies of one value: its whole gradient goes to the
 * first part only, so that what they were copied from gets it once. */
static bool multi_back(Grad *gr, UOp *u, UOp *g) {
  UOp *sp = NULL;
  if (shard_split(gr->ctx, g, &sp) != TVK_OK) {
    gr->fail = "the gradient of a sharded tensor could not be cut into parts";
    return false;
  }
  int n = (int)u->nsrc, axis = (int)u->arg.i;
  bool same = sp->op == OP_MULTI && (int)sp->nsrc == n && sp->arg.i == axis;
  for (int k = 0; same && k < n; k++) {
    int64_t a[TVK_MAX_DIMS], b[TVK_MAX_DIMS];
    int na = graph_shape(u->src[k], a), nb = graph_shape(sp->src[k], b);
    same = na == nb && !memcmp(a, b, (size_t)na * sizeof *a) &&
           sp->src[k]->device == u->src[k]->device;
  }
  bool ok = true;
  for (int k = 0; ok && k < n; k++) {
    UOp *x = u->src[k];
    if (ptrmap_get(&gr->need, x) <= 0 || (axis < 0 && k > 0)) continue;
    UOp *part = same ? sp->src[k] : shard_rows_on(sp, axis < 0 ? -1 : axis, u, k);
    ok = accumulate(gr, x, part);
  }
  return ok;
}

/* Passes g, node u's gradient, to the sources of u that need one. */
static bool backward(Grad *gr, UOp *u, UOp *g) {
  tvk_ctx *ctx = gr->ctx;
  int64_t shape[TVK_MAX_DIMS];
  int nd = graph_shape(u, shape);
  Ew e = ew_frame(ctx, nd, shape);
  UOp *a = u->nsrc > 0 ? u->src[0] : NULL, *b = u->nsrc > 1 ? u->src[1] : NULL;
  bool na = a && ptrmap_get(&gr->need, a) > 0, nb = b && ptrmap_get(&gr->need, b) > 0;
  bool nc = u->nsrc > 2 && ptrmap_get(&gr->need, u->src[2]) > 0;
  if (u->op == OP_MULTI) return multi_back(gr, u, g);
  if (!na && !nb && !nc) return true; /* no parameter below: nothing to pass on */
  bool ok = true;
  switch ((Op)u->op) {
  case OP_ADD:
    if (na) ok = accumulate(gr, a, g);
    if (ok && nb) ok = accumulate(gr, b, g);
    return ok;
  case OP_SUB:
    if (na) ok = accumulate(gr, a, g);
    if (ok && nb) ok = accumulate(gr, b, ew_alu1(OP_NEG, g));
    return ok;
  case OP_MUL:
    if (na) ok = accumulate(gr, a, ew_mul(g, b));
    if (ok && nb) ok = accumulate(gr, b, ew_mul(g, a));
    return ok;
  case OP_FDIV: /* d(a/b) = da / b - db * (a/b) / b */
    if (na) ok = accumulate(gr, a, ew_alu2(OP_FDIV, g, b));
    if (ok && nb) ok = accumulate(gr, b, ew_alu1(OP_NEG, ew_alu2(OP_FDIV, ew_mul(g, u), b)));
    return ok;
  case OP_NEG: return accumulate(gr, a, ew_alu1(OP_NEG, g));
  case OP_RECIP: return accumulate(gr, a, ew_alu1(OP_NEG, ew_mul(g, ew_mul(u, u)))); /* -1/x^2 */
  case OP_SQRT: return accumulate(gr, a, ew_alu2(OP_FDIV, g, ew_mulc(&e, u, 2))); /* 1/(2 sqrt x) */
  case OP_EXP2: return accumulate(gr, a, ew_mul(g, ew_mulc(&e, u, LN2)));         /* 2^x ln 2 */
  case OP_LOG2: return accumulate(gr, a, ew_alu2(OP_FDIV, g, ew_mulc(&e, a, LN2))); /* 1/(x ln 2) */
  case OP_SIN: /* cos x = sin(x + pi/2) */
    return accumulate(gr, a, ew_mul(g, ew_alu1(OP_SIN, ew_addc(&e, a, HALF_PI))));
  case OP_POW: { /* d(a^b) = b a^(b-1) da + a^b ln a db */
    if (na) ok = accumulate(gr, a, ew_mul(g, ew_mul(b, ew_alu2(OP_POW, a, ew_addc(&e, b, -1)))));
    if (ok && nb)
      ok = accumulate(gr, b, ew_mul(g, ew_mul(u, ew_mulc(&e, ew_alu1(OP_LOG2, a), LN2))));
    return ok;
  }
  case OP_MAX: { /* to the larger operand; a tie splits it in halves */
    UOp *half = ew_mulc(&e, g, 0.5), *zero = ew_like(&e, g, 0);
    UOp *gt_a = ew_lt(b, a), *gt_b = ew_lt(a, b);
    if (na) ok = accumulate(gr, a, ew_where(gt_a, g, ew_where(gt_b, zero, half)));
    if (ok && nb) ok = accumulate(gr, b, ew_where(gt_b, g, ew_where(gt_a, zero, half)));
    return ok;
  }
  case OP_WHERE: {
    UOp *x = u->src[1], *y = u->src[2], *zero = ew_like(&e, g, 0);
    if (nb) ok = accumulate(gr, x, ew_where(u->src[0], g, zero));
    if (ok && nc) ok = accumulate(gr, y, ew_where(u->src[0], zero, g));
    return ok;
  }
  case OP_MULACC:
    if (na) ok = accumulate(gr, a, ew_mul(g, b));
    if (ok && nb) ok = accumulate(gr, b, ew_mul(g, a));
    if (ok && nc) ok = accumulate(gr, u->src[2], g);
    return ok;
  case OP_CAST: return accumulate(gr, a, ew_cast(g, (ScalarType)a->dtype.scalar));
  case OP_CONTIGUOUS: return accumulate(gr, a, g);
  case OP_COPY: /* back to the source's device; a source of no device is a constant */
    return a->device < 0 || accumulate(gr, a, g ? front_copy(g, a->device) : NULL);
  case OP_VIEW: {
    int64_t xs[TVK_MAX_DIMS];
    int xnd = node_shape(a, xs);
    UOp *v = view_back(gr, g, u->arg.st, xnd, xs);
    return v ? accumulate(gr, a, v) : false;
  }
  case OP_REDUCE_AXIS: {
    int64_t xs[TVK_MAX_DIMS];
    int xnd = graph_shape(a, xs);
    UOp *ge = bc_expand(g, nd, shape, xs);
    if (u->arg.red.op == OP_ADD) return accumulate(gr, a, ge);
    Ew ex = ew_frame(ctx, xnd, xs);
    if (u->arg.red.op == OP_MAX) { /* to the maxima, ties in equal parts */
      UOp *ye = bc_expand(u, nd, shape, xs);
      UOp *hit = ew_where(ew_ne(a, ye), ew_like(&ex, a, 0), ew_like(&ex, a, 1));
      UOp *cnt = front_reduce(ctx, hit, OP_ADD, u->arg.red.n, u->arg.red.axes);
      /* g / count at the reduce's size, then to every maximum: one division
       * per output, not per input element */
      UOp *share = ew_alu2(OP_FDIV, g, cnt);
      return accumulate(gr, a, ew_mul(bc_expand(share, nd, shape, xs), hit));
    }
    /* MUL: d(prod x) / dx_i = prod / x_i (not defined at a zero) */
    return accumulate(gr, a, ew_alu2(OP_FDIV, ew_mul(ge, bc_expand(u, nd, shape, xs)), a));
  }
  case OP_ASSIGN: gr->fail = "the graph holds a pending tvk_assign: realize it first"; return false;
  default: return true; /* comparisons, integer ops: no gradient */
  }
}

/* ---------------------------------------------------------------- tvk_grad */

/* Marks the nodes on a path from root to a target: post-order, so a node is
 * marked when a source is. */
static bool mark_needed(Grad *gr, UOp **topo, size_t n, const PtrMap *targets) {
  for (size_t i = 0; i < n; i++) {
    UOp *u = topo[i];
    bool need = ptrmap_get(targets, u) >= 0;
    for (uint32_t k = 0; !need && k < u->nsrc; k++) need = ptrmap_get(&gr->need, u->src[k]) > 0;
    /* only floats carry gradients; a CAST from an int blocks them, and so
     * does tvk_detach's identity CAST */
    if (need && (!dt_is_float(u->dtype) || graph_is_detach(u))) need = false;
    if (need && !ptrmap_put(&gr->need, u, 1)) return false;
  }
  return true;
}

/* The node a parameter's gradient is taken at: its own, or the base of a
 * view that is all of the base reshaped (a weight is VIEW(BUFFER)); NULL for
 * another view (the base's other views would mix in). */
static UOp *param_node(const tvk_tensor *p) {
  UOp *u = p->uop;
  if (u->op != OP_VIEW) return u;
  UOp *base = u->src[0];
  if (base->op != OP_BUFFER && graph_is_leaf(base)) return NULL; /* a constant: see grad_impl */
  int64_t bs[TVK_MAX_DIMS], numel = 1;
  int nd = node_shape(base, bs);
  for (int d = 0; d < nd; d++) numel *= bs[d];
  return st_contiguous(u->arg.st) && st_numel(u->arg.st) == numel ? base : NULL;
}

/* Realized data: a graph that ends here has nothing to differentiate. */
static bool is_data_node(const UOp *u) {
  return u->op == OP_BUFFER || (u->op == OP_VIEW && u->src[0]->op == OP_BUFFER);
}

static tvk_status grad_impl(const char *op, tvk_tensor *out, tvk_tensor *up, int n,
                            tvk_tensor *const *params, tvk_tensor **grads) {
  if (!out || n < 0 || (n > 0 && (!params || !grads)))
    return front_no_ctx_error(TVK_ERR_INVALID_ARG, "%s: bad arguments (out %p, n %d)", op,
                              (void *)out, n);
  tvk_ctx *ctx = out->ctx;
  for (int i = 0; i < n; i++) grads[i] = NULL;
  if (out->status != TVK_OK)
    return err_set(&ctx->err, out->status, "%s: %s", op, tvk_error_of(out));
  if (!dt_is_float(out->uop->dtype))
    return err_set(&ctx->err, TVK_ERR_DTYPE, "%s: the output is %s, not a float dtype", op,
                   tvk_dtype_name(out->dtype));
  if (!up && tvk_numel(out) != 1)
    return err_set(&ctx->err, TVK_ERR_SHAPE,
                   "%s: the output has %lld elements: a gradient of a non-scalar needs an "
                   "upstream gradient (tvk_grad_with)",
                   op, (long long)tvk_numel(out));
  if (up) {
    if (up->ctx != ctx)
      return err_set(&ctx->err, TVK_ERR_INVALID_ARG, "%s: upstream is of another context", op);
    if (up->status != TVK_OK)
      return err_set(&ctx->err, up->status, "%s: upstream: %s", op, tvk_error_of(up));
    if (up->dtype != out->dtype || up->ndim != out->ndim ||
        memcmp(up->shape, out->shape, (size_t)out->ndim * sizeof *out->shape))
      return err_set(&ctx->err, TVK_ERR_SHAPE,
                     "%s: the upstream gradient must have the output's dtype and shape", op);
  }
  if (is_data_node(out->uop))
    return err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                   "%s: the output is realized data: its graph is gone (take gradients "
                   "before realizing the output)",
                   op);
  UOp *pn[64], **pnode = n <= 64 ? pn : malloc((size_t)n * sizeof *pnode);
  if (!pnode) return err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  tvk_status st = TVK_OK;
  PtrMap targets = {0};
  for (int i = 0; i < n && st == TVK_OK; i++) {
    const tvk_tensor *p = params[i];
    if (!p || p->ctx != ctx)
      st = err_set(&ctx->err, TVK_ERR_INVALID_ARG, "%s: parameter %d is %s", op, i,
                   p ? "of another context" : "NULL");
    else if (p->status != TVK_OK)
      st = err_set(&ctx->err, p->status, "%s: parameter %d: %s", op, i, tvk_error_of(p));
    else if (!dt_is_float(p->uop->dtype))
      st = err_set(&ctx->err, TVK_ERR_DTYPE, "%s: parameter %d is %s, not a float dtype", op, i,
                   tvk_dtype_name(p->dtype));
    else if (!(pnode[i] = param_node(p)))
      st = err_set(&ctx->err, TVK_ERR_INVALID_ARG,
                   p->uop->src[0]->op != OP_BUFFER && graph_is_leaf(p->uop->src[0])
                       ? "%s: parameter %d is a constant (tvk_full, tvk_arange): equal "
                         "constants are one node; give it memory of its own first "
                         "(tvk_contiguous, then realize)"
                       : "%s: parameter %d is a view of part of another tensor: take the "
                         "gradient with respect to that tensor",
                   op, i);
    else if (!ptrmap_put(&targets, pnode[i], i))
      st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  size_t m = FRONT_BEGIN(ctx), nt = 0;
  Grad gr = {.ctx = ctx};
  UOp **topo = st == TVK_OK ? uop_toposort(out->uop, &nt) : NULL;
  if (st == TVK_OK && (!topo || !mark_needed(&gr, topo, nt, &targets)))
    st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  /* The views' backward rules are integer arithmetic (view_back1). */
  for (size_t i = 0; st == TVK_OK && i < nt; i++)
    if (topo[i]->op == OP_VIEW && st_is_symbolic(topo[i]->arg.st))
      st = err_set(&ctx->err, TVK_ERR_SHAPE,
                   "%s: the graph has symbolic sizes (tvk_size_var): gradients through them "
                   "are not built yet",
                   op);
  if (st == TVK_OK && ptrmap_get(&gr.need, out->uop) > 0) {
    UOp *seed = up ? up->uop
                   : graph_const(ctx, (ScalarType)out->uop->dtype.scalar, 1, out->ndim, out->shape);
    if (!accumulate(&gr, out->uop, seed))
      st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    for (size_t i = nt; st == TVK_OK && i-- > 0;) {
      UOp *u = topo[i];
      int64_t at = ptrmap_get(&gr.at, u);
      if (at >= 0 && !backward(&gr, u, gr.g[at]))
        st = gr.fail ? err_set(&ctx->err, TVK_ERR_INVALID_ARG, "%s: %s", op, gr.fail)
                     : err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    }
  }
  /* each parameter's gradient in its own shape; zero where it does not reach */
  for (int i = 0; i < n && st == TVK_OK; i++) {
    const tvk_tensor *p = params[i];
    int64_t at = ptrmap_get(&gr.at, pnode[i]);
    UOp *g = at >= 0 ? gr.g[at] : zeros(ctx, (ScalarType)p->uop->dtype.scalar, p->ndim, p->shape);
    if (g && pnode[i] != p->uop) { /* the base's gradient, reshaped as the parameter */
      int64_t bs[TVK_MAX_DIMS];
      int bnd = node_shape(pnode[i], bs);
      g = bc_reshape(g, bnd, bs, p->ndim, p->shape);
    }
    if (!g || (grads[i] = tensor_new(ctx, g, p->dtype, p->ndim, p->shape))->status != TVK_OK)
      st = err_set(&ctx->err, TVK_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  if (st != TVK_OK)
    for (int i = 0; i < n; i++) tvk_release(grads[i]), grads[i] = NULL;
  free(topo);
  free(gr.g);
  ptrmap_free(&gr.at);
  ptrmap_free(&gr.need);
  ptrmap_free(&targets);
  if (pnode != pn) free(pnode);
  uop_pool_drain(ctx->u, m);
  return st;
}

tvk_status tvk_grad(tvk_tensor *loss, int n, tvk_tensor *const *params, tvk_tensor **grads) {
  return grad_impl("grad", loss, NULL, n, params, grads);
}

tvk_status tvk_grad_with(tvk_tensor *out, tvk_tensor *upstream, int n, tvk_tensor *const *params,
                         tvk_tensor **grads) {
  if (!upstream)
    return out ? err_set(&out->ctx->err, TVK_ERR_INVALID_ARG, "grad_with: upstream is NULL")
               : front_no_ctx_error(TVK_ERR_INVALID_ARG, "grad_with: out is NULL");
  return grad_impl("grad_with", out, upstream, n, params, grads);
}
