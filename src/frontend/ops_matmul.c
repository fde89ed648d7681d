/* Matrix products (tvk.h "neural-network ops"): tvk_matmul with numpy's rules
 * and tvk_linear. Built from public ops only, so the scheduler sees one
 * broadcast multiply and one reduce:
 *
 *   a (..., M, K)  -> reshape (..., M, 1, K) -> expand (B..., M, N, K)
 *   b (..., K, N)  -> transpose, reshape (..., 1, N, K) -> expand (B..., M, N, K)
 *   sum(a * b, last axis, keepdim = false)          -> (B..., M, N)
 *
 * Both operands are expanded while they are still leaves (buffers or views of
 * them), so the multiply reads them straight from memory and the whole product
 * is one reduce kernel; elementwise consumers of the result (bias, relu) fuse
 * into it. docs/ops_linalg.md has the details. */
#include <stdio.h>
#include <string.h>

#include "codegen/kernel.h" /* CG_MODE_GRID */
#include "frontend/ops_common.h"

/* Operands are multiplied and summed in dt_acc (for float16/bfloat16 each
 * product is then exact and the sum keeps the low bits); the result is
 * rounded once. */

/* The product of two checked operands (ndim >= 1 each, inner dims equal,
 * batch dims broadcasting); the result has dtype `res`. Temporaries are left
 * to the caller's scope. */
/* A large 2-D right operand is first copied into panels of MM_PANEL columns,
 * (N / MM_PANEL, K, MM_PANEL) contiguous, and read back through a view as
 * (K, N): a register tile then walks one contiguous panel down k instead of
 * MM_PANEL columns a row apart, which cache sets alias when rows are a power
 * of two apart. One pass over B against M passes of it. Not on a GPU: its
 * neighbouring invocations take neighbouring columns, and B's rows as they
 * are give each warp one run of memory per load, where panels would break it
 * every 16 columns. A Vulkan device that runs on the CPU (lavapipe) has the
 * CPU's caches: unpacked, its matmul 2048 ran 1.7x slower.
 * A transposed operand (tvk_linear's weight, (out, in) read as (in, out))
 * is packed at any size: its columns are a weight row apart, so a tile's 16
 * lanes were 16 scalar loads and inserts per k where a panel gives one
 * vector load. */

/* Whether t's device is a Vulkan device that runs on the CPU (lavapipe)
 * under its own rules (not TVK_GPU_RULES). */
static bool emulated_rules(const tvk_tensor *t) {
  const Device *dev = front_device(t);
  return dev->codegen_mode == CG_MODE_GRID && dev->limits.emulated && !t->ctx->opt.gpu_rules;
}

static tvk_tensor *packed(tvk_tensor *b, bool transposed) {
  int64_t K = b->shape[0], N = b->shape[1];
  if (front_on_devices(b)) return b;
  if (front_device(b)->codegen_mode == CG_MODE_GRID && !emulated_rules(b)) return b;
  if (sint_any_sym(K, N)) return b; /* panels of a symbolic size: not yet */
  if (N % MM_PANEL || K < (transposed ? MM_PANEL : 64) || (!transposed && N * K < (int64_t)1 << 18))
    return b;
  tvk_tensor *t = tvk_reshape(b, 3, (int64_t[]){K, N / MM_PANEL, MM_PANEL});
  tvk_tensor *p = tvk_contiguous(tvk_permute(t, (const int[]){1, 0, 2}));
  return tvk_reshape(tvk_permute(p, (const int[]){1, 0, 2}), 2, (int64_t[]){K, N});
}

tvk_tensor *mm_row_panels(tvk_tensor *a) {
  int nd = a->ndim;
  int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], split[TVK_MAX_DIMS];
  int perm[TVK_MAX_DIMS];
  for (int d = 0; d < nd + 1; d++) perm[d] = d;
  perm[nd - 1] = nd, perm[nd] = nd - 1; /* the last two swapped */
  memcpy(split, a->shape, (size_t)(nd - 2) * sizeof *split);
  split[nd - 2] = M / MM_PANEL, split[nd - 1] = MM_PANEL, split[nd] = K;
  tvk_tensor *t = tvk_reshape(a, nd + 1, split);
  tvk_tensor *p = tvk_contiguous(tvk_permute(t, perm));
  return tvk_reshape(tvk_permute(p, perm), nd, a->shape);
}

/* The left operand (..., M, K) is packed too, in panels of MM_PANEL rows
 * (mm_row_panels), so that the register tile's rows of A at one k are
 * neighbours:
 * - on an emulated device (lavapipe), 2-D and large: two 32-byte accesses
 *   (vectorize.c) where they were 16 scalar ones, and each access there is a
 *   loop over the SIMD lanes;
 * - on a CPU whose kernels use 64-byte vectors (AVX-512), float32 whose
 *   rows lie at most 2 KiB apart (K <= 512), batched too: gcc otherwise
 *   reads each row's value of the tile with a full-width vector load (most
 *   of them split across two cache lines) and a register broadcast, where
 *   rows further apart, or packed ones, get an FMA with a broadcast from
 *   memory (read in the compiled kernels). Packed, matmul 512^3 ran in
 *   1.28-1.33 ms against 1.99-2.07, 1024x512x1024 5.2 against 7.7-7.9,
 *   2048x128x1024 2.5-2.6 against 4.1-8.2; with rows 3 KiB or more apart
 *   packing was 5-16% slower (768: 2.12 against 1.83; 1024 and 2048 too)
 *   (Zen 5, 2 threads, alternating runs). The same kernels built for AVX2
 *   on that machine gained 7-13% at K = 512 and 256 and lost 13% at K =
 *   128, so 32-byte vectors keep A as it is. The copy reads and writes
 *   M * K elements once against M * N * K multiply-adds: N >= 256. */
static tvk_tensor *packed_rows(tvk_tensor *a, const tvk_tensor *b) {
  int nd = a->ndim;
  if (nd < 2 || b->ndim < 2 || nd >= TVK_MAX_DIMS || front_on_devices(a)) return a;
  for (int d = 0; d < nd; d++) /* panels of a symbolic size: not yet */
    if (sint_is_sym(a->shape[d])) return a;
  int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], N = b->shape[b->ndim - 1];
  if (M % MM_PANEL || K < 64) return a;
  const Device *dev = front_device(a);
  if (emulated_rules(a) && nd == 2 && b->ndim == 2 && M * K >= (int64_t)1 << 18)
    return mm_row_panels(a);
  if (dev->codegen_mode == CG_MODE_GRID || dev->limits.vector_bytes < 64 || sint_is_sym(N))
    return a;
  if (a->dtype != TVK_FLOAT32 || K * 4 > 2048 || N < 256 || M * K < (int64_t)1 << 16) return a;
  return mm_row_panels(a);
}

static tvk_tensor *matmul_body(tvk_tensor *a, tvk_tensor *b, ScalarType res, bool transposed) {
  if (b->ndim == 2 && a->ndim >= 2 && sint_vmax(a->shape[a->ndim - 2]) >= 64)
    b = packed(b, transposed);
  a = packed_rows(a, b);
  int and_ = a->ndim, bnd = b->ndim;
  int64_t as[TVK_MAX_DIMS + 1] = {0}, bs[TVK_MAX_DIMS + 1] = {0};
  /* a vector becomes a matrix: (K) -> (1, K) for a, (K) -> (K, 1) for b */
  if (and_ == 1) {
    as[0] = 1, as[1] = a->shape[0], and_ = 2;
  } else {
    for (int d = 0; d < and_; d++) as[d] = a->shape[d];
  }
  if (bnd == 1) {
    bs[0] = b->shape[0], bs[1] = 1, bnd = 2;
  } else {
    for (int d = 0; d < bnd; d++) bs[d] = b->shape[d];
  }
  int64_t M = as[and_ - 2], K = as[and_ - 1], N = bs[bnd - 1];
  /* batch dims broadcast (checked by the caller) */
  int nb = (and_ > bnd ? and_ : bnd) - 2;
  int64_t full[TVK_MAX_DIMS + 1];
  for (int i = 0; i < nb; i++) {
    int ia = i - (nb - (and_ - 2)), ib = i - (nb - (bnd - 2));
    int64_t da = ia >= 0 ? as[ia] : 1, db = ib >= 0 ? bs[ib] : 1;
    full[i] = da == 1 ? db : da;
  }
  full[nb] = M, full[nb + 1] = N, full[nb + 2] = K;

  /* a: (..., M, K) -> (..., M, 1, K) */
  int64_t av[TVK_MAX_DIMS + 1];
  for (int d = 0; d < and_ - 1; d++) av[d] = as[d];
  av[and_ - 1] = 1, av[and_] = K;
  tvk_tensor *ax = tvk_expand(tvk_reshape(a, and_ + 1, av), nb + 3, full);
  /* b: (..., K, N) -> (..., N, K) -> (..., 1, N, K) */
  int64_t bv[TVK_MAX_DIMS + 1];
  for (int d = 0; d < bnd - 2; d++) bv[d] = bs[d];
  bv[bnd - 2] = 1, bv[bnd - 1] = N, bv[bnd] = K;
  tvk_tensor *b2 = b->ndim == 1 ? tvk_reshape(b, 2, (int64_t[]){1, K}) : tvk_transpose(b, -1, -2);
  tvk_tensor *bx = tvk_expand(tvk_reshape(b2, bnd + 1, bv), nb + 3, full);

  ScalarType cdt = dt_acc(res);
  tvk_dtype ct = dt_to_tvk(cdt);
  if (tvk_dtype_of(ax) != ct) ax = tvk_cast(ax, ct);
  if (tvk_dtype_of(bx) != ct) bx = tvk_cast(bx, ct);
  int last = -1;
  tvk_tensor *r = tvk_sum(tvk_mul(ax, bx), 1, &last, false);              /* (B..., M, N) */
  if (tvk_dtype_of(r) != dt_to_tvk(res)) r = tvk_cast(r, dt_to_tvk(res)); /* narrow ints, halves */

  /* drop the dims the vectors added */
  if (a->ndim == 1 || b->ndim == 1) {
    int64_t out[TVK_MAX_DIMS + 1];
    int on = 0;
    for (int i = 0; i < nb; i++) out[on++] = full[i];
    if (a->ndim != 1) out[on++] = M;
    if (b->ndim != 1) out[on++] = N;
    r = tvk_reshape(r, on, out);
  }
  return r;
}

/* NULL when a @ b is well formed, else the error tensor. */
static tvk_tensor *check_matmul(const char *op, tvk_tensor *a, tvk_tensor *b) {
  char sa[BC_SHAPE_STR_MAX], sb[BC_SHAPE_STR_MAX];
  bc_shape_str(a->ndim, a->shape, sa, sizeof sa);
  bc_shape_str(b->ndim, b->shape, sb, sizeof sb);
  if (a->ndim == 0 || b->ndim == 0)
    return tensor_error(a->ctx, TVK_ERR_SHAPE,
                        "%s: shapes %s and %s: both operands need at least 1 dim", op, sa, sb);
  int64_t ka = a->shape[a->ndim - 1], kb = b->shape[b->ndim == 1 ? 0 : b->ndim - 2];
  if (ka != kb)
    return tensor_error(a->ctx, TVK_ERR_SHAPE, "%s: shapes %s and %s: inner dims differ", op, sa,
                        sb);
  int na = a->ndim > 2 ? a->ndim - 2 : 0, nbt = b->ndim > 2 ? b->ndim - 2 : 0;
  int nb = na > nbt ? na : nbt;
  if (nb + 3 > TVK_MAX_DIMS)
    return tensor_error(a->ctx, TVK_ERR_SHAPE, "%s: shapes %s and %s: more than %d batch dims", op,
                        sa, sb, TVK_MAX_DIMS - 3);
  for (int i = 0; i < nb; i++) {
    int ia = i - (nb - na), ib = i - (nb - nbt);
    int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return tensor_error(a->ctx, TVK_ERR_SHAPE,
                          "%s: shapes %s and %s: batch dims do not broadcast", op, sa, sb);
  }
  return NULL;
}

tvk_tensor *tvk_matmul(tvk_tensor *a, tvk_tensor *b) {
  bool bad;
  tvk_tensor *err = bc_check_sym("matmul", 2, (tvk_tensor *[]){a, b}, &bad);
  if (bad) return err;
  if ((err = check_matmul("matmul", a, b))) return err;
  ScalarType res = bc_promote(2, (tvk_tensor *[]){a, b});
  tvk_ctx *ctx = a->ctx;
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *r = matmul_body(a, b, res, false);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}

tvk_tensor *tvk_linear(tvk_tensor *x, tvk_tensor *w, tvk_tensor *bias) {
  bool bad;
  tvk_tensor *err = bc_check_sym("linear", 2, (tvk_tensor *[]){x, w}, &bad);
  if (bad) return err;
  if (bias && (err = bc_check_sym("linear", 3, (tvk_tensor *[]){x, w, bias}, &bad))) return err;
  char sx[BC_SHAPE_STR_MAX], sw[BC_SHAPE_STR_MAX], sbias[BC_SHAPE_STR_MAX];
  bc_shape_str(x->ndim, x->shape, sx, sizeof sx);
  bc_shape_str(w->ndim, w->shape, sw, sizeof sw);
  if (w->ndim != 2)
    return tensor_error(x->ctx, TVK_ERR_SHAPE, "linear: w has shape %s: expected 2 dims (out, in)",
                        sw);
  if (x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1])
    return tensor_error(x->ctx, TVK_ERR_SHAPE,
                        "linear: x has shape %s and w %s: x's last dim must be w's in", sx, sw);
  if (bias && !(bias->ndim == 1 && bias->shape[0] == w->shape[0])) {
    char want[BC_SHAPE_STR_MAX];
    bc_shape_str(bias->ndim, bias->shape, sbias, sizeof sbias);
    bc_shape_str(1, w->shape, want, sizeof want);
    return tensor_error(x->ctx, TVK_ERR_SHAPE, "linear: bias has shape %s: expected %s", sbias,
                        want);
  }
  tvk_ctx *ctx = x->ctx;
  size_t sc = tvk_scope_begin(ctx);
  tvk_tensor *wt = tvk_transpose(w, 0, 1);
  tvk_tensor *r = matmul_body(x, wt, bc_promote(2, (tvk_tensor *[]){x, w}), true);
  if (bias) r = tvk_add(r, bias);
  tvk_scope_end(ctx, sc, 1, &r);
  return r;
}
