/* Optimisation plans (src/codegen/opt.h): random valid plans applied to random
 * kernels must give the unoptimised kernel's result bit for bit (an upcast
 * changes where work runs, never the order of a reduce's additions), and
 * both must match a reference evaluated here in double precision from the
 * views' own definition (st_index_int). Runs on the CPU and, when there is
 * one, on a Vulkan device (with the validation layer under ctest: any message
 * fails the suite). Also: what opt_check refuses, and the heuristic's plans
 * for the shapes it is meant for. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef TVK_HAVE_VULKAN /* else a CPU-only build (TVK_VULKAN=OFF): the CPU parts only */
#include "../backend_vk/vk_core.h"
#include "../backend_vk/vk_glsl.h"
#endif
#include "codegen/codegen.h"
#include "codegen/kernel.h"
#include "codegen/opt.h"
#include "codegen/render.h"
#include "ir/symbolic.h"
#include "ir/view.h"
#include "runtime/device.h"
#include "test_util.h"
#include "tvk.h"

typedef struct {
  Device *dev[2]; /* CPU, Vulkan (NULL: none) */
  UCtx *c;
} Suite;

static uint64_t rng = 0x6a09e667f3bcc909ull;
static int64_t pick(int64_t n) { return (int64_t)(xorshift64(&rng) % (uint64_t)n); }

/* ---------------------------------------------------------------- random kernels */

enum { ND = 3 };

/* One input: a buffer of `numel` elements seen through `st` (full shape). */
typedef struct {
  ShapeTracker *st;
  int64_t numel;
  double *host;
} Input;

typedef struct {
  int kind; /* 0 elementwise, 1 reduce, 2 matmul */
  ScalarType t;
  int64_t full[ND];
  uint32_t red; /* reduced axes */
  Op rop;
  Input in[2];
  UOp *sink;
} Case;

/* A view of the full shape over a smaller buffer: some dims broadcast, one
 * maybe padded, one maybe flipped. */
static Input random_input(const int64_t *full) {
  int64_t base[ND];
  sint pads[ND][2] = {{0, 0}};
  bool flip[ND] = {false};
  for (int d = 0; d < ND; d++) base[d] = full[d] > 1 && pick(4) == 0 ? 1 : full[d];
  int pd = (int)pick(ND);
  if (base[pd] > 2 && pick(2)) { /* pad: the buffer is shorter along pd */
    int64_t p = 1 + pick(2);
    pads[pd][0] = pick(p + 1), pads[pd][1] = p - pads[pd][0];
    base[pd] -= p;
  }
  if (pick(2)) flip[pick(ND)] = true;
  ShapeTracker *a = st_from_shape(ND, base), *b = st_pad(a, pads), *c = st_flip(b, flip);
  ShapeTracker *e = st_expand(c, full);
  assert_non_null(e);
  st_free(a), st_free(b), st_free(c);
  Input in = {e, base[0] * base[1] * base[2], NULL};
  in.host = malloc((size_t)in.numel * sizeof *in.host);
  return in;
}

static const int64_t sizes[] = {1, 2, 3, 4, 5, 6, 8, 12, 16, 7, 24, 32};

static void random_case(UCtx *c, Case *k) {
  memset(k, 0, sizeof *k);
  k->kind = (int)pick(3);
  k->t = pick(3) == 0 ? DT_INT32 : DT_FLOAT32;
  for (int d = 0; d < ND; d++) k->full[d] = sizes[pick(sizeof sizes / sizeof *sizes)];
  if (k->kind == 1)
    while (!k->red) k->red = (uint32_t)pick(1 << ND);
  k->rop = k->kind == 1 && pick(3) == 0 ? OP_MAX : OP_ADD;
  if (k->kind == 2) { /* (M, N, K): a (M, K) times a (K, N) read transposed */
    k->red = 1u << 2;
    k->full[2] = 1 + pick(40);
    ShapeTracker *a0 = shp(3, k->full[0], (int64_t)1, k->full[2]);
    ShapeTracker *b0 = shp(3, k->full[2], k->full[1], (int64_t)1);
    ShapeTracker *b1 = st_permute(b0, (const int[]){2, 1, 0});
    k->in[0] = (Input){st_expand(a0, k->full), k->full[0] * k->full[2], NULL};
    k->in[1] = (Input){st_expand(b1, k->full), k->full[1] * k->full[2], NULL};
    st_free(a0), st_free(b0), st_free(b1);
    for (int i = 0; i < 2; i++) k->in[i].host = malloc((size_t)k->in[i].numel * sizeof(double));
  } else {
    k->in[0] = random_input(k->full), k->in[1] = random_input(k->full);
  }
  for (int i = 0; i < 2; i++)
    for (int64_t e = 0; e < k->in[i].numel; e++)
      k->in[i].host[e] =
          k->t == DT_INT32 ? (double)(pick(11) - 5) : (double)(pick(2001) - 1000) / 512;
  UOp *x = ld(c, 1, k->t, st_clone(k->in[0].st)), *y = ld(c, 2, k->t, st_clone(k->in[1].st));
  UOp *v = uop_mul(x, y);
  int64_t out[ND];
  for (int d = 0; d < ND; d++) out[d] = k->red >> d & 1 ? 1 : k->full[d];
  if (k->red) {
    int64_t axes[ND];
    int n = 0;
    for (int d = 0; d < ND; d++)
      if (k->red >> d & 1) axes[n++] = d;
    v = reduce(v, k->rop, n, axes);
  } else {
    v = uop_add(v, x);
  }
  k->sink = sink1(store(c, 0, k->t, st_from_shape(ND, out), v));
}

static void case_free(Case *k) {
  for (int i = 0; i < 2; i++) st_free(k->in[i].st), free(k->in[i].host);
}

static double input_at(const Input *in, const int64_t *idx) {
  sint off;
  return st_index_int(in->st, idx, &off) ? in->host[off] : 0;
}

/* The reference of output element o (row-major over the output shape). */
static double reference(const Case *k, const int64_t *oidx) {
  int64_t idx[ND], n[ND];
  for (int d = 0; d < ND; d++) n[d] = k->red >> d & 1 ? k->full[d] : 1;
  double acc = k->rop == OP_MAX ? -INFINITY : 0;
  for (int64_t r = 0; r < n[0] * n[1] * n[2]; r++) {
    int64_t rest = r;
    for (int d = ND - 1; d >= 0; d--) {
      idx[d] = k->red >> d & 1 ? rest % n[d] : oidx[d];
      rest /= n[d];
    }
    double x = input_at(&k->in[0], idx), v = x * input_at(&k->in[1], idx);
    if (!k->red) return v + x;
    acc = k->rop == OP_MAX ? fmax(acc, v) : acc + v;
  }
  return acc;
}

/* The bound on the error of the float32 result: the sum of |terms| times
 * 2^-24 per rounding, of which a product and a blocked sum of up to a few
 * hundred terms make under 64. */
static double tolerance(const Case *k, const int64_t *oidx) {
  if (k->t == DT_INT32 || k->rop == OP_MAX) return 0;
  Case a = *k;
  Input abs_in[2];
  for (int i = 0; i < 2; i++) {
    abs_in[i] = k->in[i];
    abs_in[i].host = malloc((size_t)k->in[i].numel * sizeof(double));
    for (int64_t e = 0; e < k->in[i].numel; e++) abs_in[i].host[e] = fabs(k->in[i].host[e]);
    a.in[i] = abs_in[i];
  }
  double mag = reference(&a, oidx);
  for (int i = 0; i < 2; i++) free(abs_in[i].host);
  return 64 * 0x1p-24 * mag;
}

/* ---------------------------------------------------------------- running */

static OptTarget target_of(const Device *d) {
  bool grid = d->codegen_mode == CG_MODE_GRID;
  int64_t most = d->limits.max_local_threads;
  return (OptTarget){.mode = grid ? CG_MODE_GRID : CG_MODE_CORES,
                     .vector_floats = 16,
                     .max_local = grid ? (int)(most < 1024 ? most : 1024) : 1,
                     .shared_bytes = d->limits.shared_mem_bytes};
}

static int vector_kernels; /* kernels run with 4-wide memory access */
static int local_kernels;  /* LOCAL steps of the plans run */
static int staged_kernels; /* STAGE steps of the plans run */
static int cached_kernels; /* CACHE steps of the plans run */
static int grouped_local;  /* plans with a GROUP and a LOCAL (outputs side by side) */
static int grouped_up;     /* plans with a GROUP and an UPCAST or SPREAD (outputs per lane) */
static int grouped_unroll; /* plans with a GROUP and an UNROLL */

/* Codegen under `plan` (NULL: no optimisation) for device d, compile, run;
 * the output (float or int32 as the case's dtype) into out. */
static void run_plan_opts(Device *d, const Case *k, const CodegenOpts *o, void *out,
                          size_t out_bytes) {
  const OptPlan *plan = o->plan;
  KernelSource ks;
  if (codegen_kernel_opts(k->sink, NULL, o, &ks) != TVK_OK) fail_msg("codegen: %s", ks.err.msg);
  if (getenv("TVK_OPT_PRINT")) fprintf(stderr, "%s\n", ks.src);
  if (strstr(ks.src, "tvk_vbuf")) vector_kernels++; /* 4-wide loads or stores (vectorize.c) */
  for (int i = 0; plan && i < plan->n; i++) local_kernels += plan->step[i].kind == OPT_LOCAL;
  for (int i = 0; plan && i < plan->n; i++) staged_kernels += plan->step[i].kind == OPT_STAGE;
  for (int i = 0; plan && i < plan->n; i++) cached_kernels += plan->step[i].kind == OPT_CACHE;
  int64_t lanes;
  if (plan && opt_group(plan, &lanes) >= 0)
    for (int i = 0; i < plan->n; i++) {
      grouped_local += plan->step[i].kind == OPT_LOCAL;
      grouped_up += plan->step[i].kind == OPT_UPCAST || plan->step[i].kind == OPT_SPREAD;
      grouped_unroll += plan->step[i].kind == OPT_UNROLL;
    }
  DevProgram *p = NULL;
  bool hit;
  if (d->ops->compile(d, ks.name, ks.src, &p, &hit, NULL) != TVK_OK)
    fail_msg("compile: %s\n%s", d->err.msg, ks.src);
  DevBuffer *bufs[3];
  assert_int_equal(d->ops->alloc(d, out_bytes, &bufs[0]), TVK_OK);
  memset(out, 0xAB, out_bytes); /* what the kernel fails to write shows */
  assert_int_equal(d->ops->copy_in(d, bufs[0], 0, out, out_bytes), TVK_OK);
  for (int i = 0; i < 2; i++) {
    size_t n = (size_t)k->in[i].numel;
    void *h = malloc(n * 4);
    for (size_t e = 0; e < n; e++) {
      if (k->t == DT_INT32)
        ((int32_t *)h)[e] = (int32_t)k->in[i].host[e];
      else
        ((float *)h)[e] = (float)k->in[i].host[e];
    }
    assert_int_equal(d->ops->alloc(d, n * 4, &bufs[i + 1]), TVK_OK);
    assert_int_equal(d->ops->copy_in(d, bufs[i + 1], 0, h, n * 4), TVK_OK);
    free(h);
  }
  LaunchDims dims;
  memcpy(dims.global, ks.global, sizeof dims.global);
  memcpy(dims.local, ks.local, sizeof dims.local);
  if (d->ops->launch(d, p, bufs, 3, NULL, 0, &dims) != TVK_OK) fail_msg("launch: %s", d->err.msg);
  assert_int_equal(d->ops->sync(d), TVK_OK);
  assert_int_equal(d->ops->copy_out(d, bufs[0], 0, out, out_bytes), TVK_OK);
  for (int i = 0; i < 3; i++) d->ops->free(d, bufs[i]);
  d->ops->program_free(d, p);
  kernel_source_free(&ks);
}

/* The same with a GROUP's combine allowed through subgroups of `subgroup`
 * (0: none). */
static void run_plan_sub(Device *d, const Case *k, const OptPlan *plan, int subgroup, void *out,
                         size_t out_bytes) {
  OptTarget t = target_of(d);
  CodegenOpts o = {.lang = d->lang,
                   .mode = t.mode,
                   .local_size = 32,
                   .plan = plan,
                   .noopt = plan == NULL,
                   .max_local = t.max_local,
                   .shared_bytes = t.shared_bytes,
                   .subgroup = subgroup};
  run_plan_opts(d, k, &o, out, out_bytes);
}

static void run_plan(Device *d, const Case *k, const OptPlan *plan, void *out, size_t out_bytes) {
  run_plan_sub(d, k, plan, 0, out, out_bytes);
}

/* A random valid plan: each output axis upcast or spread by a random divisor
 * of its size (a spread one maybe in runs of 2 or 4), or not, within OPT_MAX_COPIES, after (a third
 * of the time) an UNROLL of a reduced axis by a divisor; on a device with work groups, half the
 * time instead a GROUP of a reduced axis by a power of two. */
static OptPlan random_plan(const Case *k, const Device *d) {
  OptPlan p = {0};
  int64_t copies = 1;
  int64_t most =
      d->limits.max_local_threads < OPT_MAX_GROUP ? d->limits.max_local_threads : OPT_MAX_GROUP;
  uint32_t red = 0; /* reduced axes of size > 1 (kernel_verify drops the others) */
  for (int e = 0; e < ND; e++)
    if (k->red >> e & 1 && k->full[e] > 1) red |= 1u << e;
  if (d->codegen_mode == CG_MODE_GRID && red && most >= 2 && pick(2)) {
    int axis;
    do axis = (int)pick(ND);
    while (!(red >> axis & 1));
    int64_t lanes = 2;
    for (int64_t r = pick(8); r > 0 && lanes * 2 <= most; r--) lanes *= 2;
    p.step[p.n++] = (OptStep){OPT_GROUP, (uint8_t)axis, (int32_t)lanes};
    /* a third of the time an UNROLL too, of a reduced axis (the grouped one:
     * each lane takes runs of neighbours) by a divisor up to 8 */
    if (pick(3) == 0) {
      int ux;
      do ux = (int)pick(ND);
      while (!(red >> ux & 1));
      int64_t divs[8], nd = 0;
      for (int64_t a = 2; a <= 8; a++)
        if (k->full[ux] % a == 0) divs[nd++] = a;
      if (nd) p.step[p.n++] = (OptStep){OPT_UNROLL, (uint8_t)ux, (int32_t)divs[pick(nd)]};
    }
    /* half the time several outputs per invocation: an UPCAST or a SPREAD of
     * an output axis by a divisor up to 8 (each copy's partials in arrays of
     * their own: within the work-group memory) */
    int64_t up[ND] = {1, 1, 1}, room = (int64_t)d->limits.shared_mem_bytes / (lanes * 16);
    int ua = (int)pick(ND);
    if (!(k->red >> ua & 1) && k->full[ua] > 1 && pick(2)) {
      int64_t divs[8], nd = 0;
      for (int64_t a = 2; a <= 8 && a <= room; a++)
        if (k->full[ua] % a == 0) divs[nd++] = a;
      if (nd) {
        up[ua] = divs[pick(nd)];
        p.step[p.n++] = (OptStep){pick(3) ? OPT_UPCAST : OPT_SPREAD, (uint8_t)ua, (int32_t)up[ua]};
      }
    }
    /* half the time several outputs per work group: a LOCAL of an output
     * axis by a divisor of its blocks, within the work group and its memory */
    int out = (int)pick(ND);
    if (!(k->red >> out & 1) && k->full[out] > 1 && pick(2)) {
      int64_t divs[32], nd = 0, blocks = k->full[out] / up[out];
      for (int64_t a = 2; a <= blocks && nd < 32; a++)
        if (blocks % a == 0 && a * lanes <= most && a * up[ua] <= room) divs[nd++] = a;
      if (nd) p.step[p.n++] = (OptStep){OPT_LOCAL, (uint8_t)out, (int32_t)divs[pick(nd)]};
    }
    return p;
  }
  if (red && pick(3) == 0) {
    int axis;
    do axis = (int)pick(ND);
    while (!(red >> axis & 1));
    int64_t divs[32], nd = 0;
    for (int64_t a = 2; a <= k->full[axis] && a <= OPT_MAX_UNROLL; a++)
      if (k->full[axis] % a == 0) divs[nd++] = a;
    if (nd) {
      copies = divs[pick(nd)];
      p.step[p.n++] = (OptStep){OPT_UNROLL, (uint8_t)axis, (int32_t)copies};
    }
  }
  int order[ND] = {0, 1, 2};
  for (int i = ND - 1; i > 0; i--) { /* steps in a random order */
    int j = (int)pick(i + 1), t = order[i];
    order[i] = order[j], order[j] = t;
  }
  for (int i = 0; i < ND; i++) {
    int d = order[i];
    if (k->red >> d & 1 || k->full[d] == 1 || pick(3) == 0) continue;
    int64_t divs[32], nd = 0;
    for (int64_t a = 2; a <= k->full[d]; a++)
      if (k->full[d] % a == 0 && copies * a <= OPT_MAX_COPIES) divs[nd++] = a;
    if (!nd) continue;
    int64_t a = divs[pick(nd)];
    copies *= a;
    OptKind kind = pick(3) ? OPT_UPCAST : OPT_SPREAD;
    p.step[p.n++] = (OptStep){(uint8_t)kind, (uint8_t)d, (int32_t)a};
    int64_t r = 2 + 2 * pick(2); /* spread runs of 2 or 4 neighbours */
    if (kind == OPT_SPREAD && pick(2) && (k->full[d] / a) % r == 0 && copies * r <= OPT_MAX_COPIES)
      copies *= r, p.step[p.n++] = (OptStep){OPT_UPCAST, (uint8_t)d, (int32_t)r};
  }
  /* on a device with work groups, a third of the time LOCAL tiles of the
   * blocks the upcasts leave (2, 4 or 8 of an axis, 64 invocations at most) */
  int64_t up[ND] = {1, 1, 1}, invocations = 1;
  for (int i = 0; i < p.n; i++)
    if (p.step[i].kind == OPT_UPCAST || p.step[i].kind == OPT_SPREAD)
      up[p.step[i].axis] *= p.step[i].amount;
  for (int e = 0; e < ND && d->codegen_mode == CG_MODE_GRID; e++) {
    int64_t blocks = k->full[e] / up[e], l = (int64_t)2 << pick(3);
    if (k->red >> e & 1 || pick(3) || blocks % l || invocations * l > 64 || p.n >= OPT_MAX_STEPS)
      continue;
    invocations *= l;
    p.step[p.n++] = (OptStep){OPT_LOCAL, (uint8_t)e, (int32_t)l};
  }
  /* on the CPU, half the time runs of an output axis's blocks (CACHE) by a
   * divisor from 2, the blocks split across cores as runs */
  int cax = (int)pick(ND);
  if (d->codegen_mode != CG_MODE_GRID && !(k->red >> cax & 1) && pick(2) && p.n < OPT_MAX_STEPS) {
    int64_t blocks = k->full[cax] / up[cax], divs[32], nd = 0;
    for (int64_t a = 2; a <= blocks && nd < 32; a++)
      if (blocks % a == 0) divs[nd++] = a;
    if (nd) p.step[p.n++] = (OptStep){OPT_CACHE, (uint8_t)cax, (int32_t)divs[pick(nd)]};
  }
  /* and with LOCAL, half the time the one reduced axis staged through
   * work-group memory, where nothing unrolls or spreads */
  bool plain = invocations > 1 && p.n < OPT_MAX_STEPS;
  for (int i = 0; i < p.n; i++)
    plain &= p.step[i].kind == OPT_UPCAST || p.step[i].kind == OPT_LOCAL;
  int one = k->red == 1u || k->red == 2u || k->red == 4u ? __builtin_ctz(k->red) : -1;
  if (plain && one >= 0 && k->full[one] > 1 && pick(2)) {
    int64_t b = cg_reduce_inner(k->full[one], k->t == DT_FLOAT32 && k->rop == OP_ADD);
    if (b > 0) p.step[p.n++] = (OptStep){OPT_STAGE, (uint8_t)one, (int32_t)b};
  }
  return p;
}

static void describe(const Case *k, const OptPlan *p, char *buf, size_t n) {
  char ps[128];
  opt_plan_str(p, ps, sizeof ps);
  snprintf(buf, n, "kind %d %s full (%lld,%lld,%lld) red %u plan [%s]", k->kind,
           k->t == DT_INT32 ? "int32" : "float32", (long long)k->full[0], (long long)k->full[1],
           (long long)k->full[2], k->red, ps);
}

static void check_case(Device *d, const Case *k) {
  int64_t out[ND], n = 1;
  for (int e = 0; e < ND; e++) n *= out[e] = k->red >> e & 1 ? 1 : k->full[e];
  size_t bytes = (size_t)n * 4;
  void *base = malloc(bytes), *opt = malloc(bytes);
  run_plan(d, k, NULL, base, bytes);
  for (int trial = 0; trial < 3; trial++) {
    OptPlan p = random_plan(k, d);
    if (trial == 2) { /* and the heuristic's */
      KernelDesc *kd = calloc(1, sizeof *kd);
      UOp *norm;
      Error err = {0};
      assert_int_equal(kernel_verify(k->sink, &norm, kd, &err), TVK_OK);
      OptTarget t = target_of(d);
      opt_heuristic(norm, kd, &t, &p);
      free(kd);
    }
    run_plan(d, k, &p, opt, bytes);
    char what[200];
    describe(k, &p, what, sizeof what);
    int64_t lanes;
    bool reorders = (opt_group(&p, &lanes) >= 0 || opt_unroll(&p, &lanes) >= 0) &&
                    k->t != DT_INT32 && k->rop == OP_ADD;
    if (!reorders && memcmp(base, opt, bytes) != 0) {
      for (int64_t o = 0; o < n; o++)
        if (((int32_t *)base)[o] != ((int32_t *)opt)[o])
          fprintf(stderr, "  [%lld] plain %08x, planned %08x\n", (long long)o,
                  (unsigned)((int32_t *)base)[o], (unsigned)((int32_t *)opt)[o]);
      fail_msg("%s on %s: the plan changes the result", what, d->ops->name(d));
    }
    for (int64_t o = 0; reorders && o < n; o++) { /* a grouped float sum adds in another order */
      int64_t idx[ND], rest = o;
      for (int e = ND - 1; e >= 0; e--) idx[e] = rest % out[e], rest /= out[e];
      double a = ((float *)base)[o], b = ((float *)opt)[o];
      if (!(fabs(a - b) <= 2 * tolerance(k, idx)))
        fail_msg("%s: element %lld is %.9g grouped, %.9g plain", what, (long long)o, b, a);
    }
  }
  for (int64_t o = 0; o < n; o++) {
    int64_t idx[ND], rest = o;
    for (int e = ND - 1; e >= 0; e--) idx[e] = rest % out[e], rest /= out[e];
    double want = reference(k, idx), tol = tolerance(k, idx);
    double got = k->t == DT_INT32 ? ((int32_t *)base)[o] : ((float *)base)[o];
    if (!(fabs(got - want) <= tol)) {
      char what[200];
      describe(k, &(OptPlan){0}, what, sizeof what);
      fail_msg("%s: element %lld is %.9g, the reference %.9g", what, (long long)o, got, want);
    }
  }
  free(base), free(opt);
}

static void test_random_plans(void **state) {
  Suite *s = *state;
  /* and a CPU device of 5 threads: splits across cores that do not divide
   * (the outer axes' blocks, flattened or not, in runs of ceil(n / 5)) */
  DeviceOptions o5 = {.cache_dir = test_cache_dir(), .threads = 5};
  Device *cpu5 = NULL;
  Error err;
  if (cpu_device_create(&o5, &cpu5, &err) != TVK_OK) fail_msg("cpu device: %s", err.msg);
  for (int i = 0; i < 40; i++) {
    Case k;
    random_case(s->c, &k);
    for (int d = 0; d < 2; d++)
      if (s->dev[d]) check_case(s->dev[d], &k);
    check_case(cpu5, &k);
    case_free(&k);
    uop_pool_drain(s->c, 0);
  }
  cpu5->ops->destroy(cpu5);
  if (s->dev[1]) /* the cases reach vectorize.c's quads, work-group tiles, grouped tiles */
    assert_true(vector_kernels >= 5 && local_kernels >= 5 && grouped_local >= 2 && grouped_up >= 2);
  if (s->dev[0]) assert_true(cached_kernels >= 5); /* and the CPU's runs */
  fprintf(stderr,
          "random plans: %d kernels with 4-wide memory access, %d LOCAL (%d with a GROUP), %d "
          "STAGE, %d CACHE steps; %d grouped kernels upcast, %d unrolled\n",
          vector_kernels, local_kernels, grouped_local, staged_kernels, cached_kernels, grouped_up,
          grouped_unroll);
}

/* ---------------------------------------------------------------- checks and heuristic */

static void desc_of(UOp *sink, KernelDesc *kd, UOp **norm) {
  Error err = {0};
  assert_int_equal(kernel_verify(sink, norm, kd, &err), TVK_OK);
}

static void test_check_refuses(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  const int64_t ax[] = {1};
  UOp *r = reduce(ld(c, 1, DT_FLOAT32, shp(2, (int64_t)12, (int64_t)5)), OP_ADD, 1, ax);
  UOp *sink = sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)12, (int64_t)1), r));
  KernelDesc *kd = calloc(1, sizeof *kd);
  UOp *norm;
  desc_of(sink, kd, &norm);
  const struct {
    OptPlan p;
    const char *msg;
  } bad[] = {
      {{1, {{OPT_UPCAST, 0, 5}}}, "must divide"},
      {{1, {{OPT_UPCAST, 0, 0}}}, "must divide"},
      {{1, {{OPT_UPCAST, 1, 5}}}, "reduced"},
      {{1, {{OPT_UPCAST, 2, 2}}}, "2-dim kernel"},
      {{2, {{OPT_UPCAST, 0, 2}, {OPT_UPCAST, 0, 3}}}, "split twice"},
      {{1, {{OPT_KINDS, 0, 2}}}, "kind"},
      {{OPT_MAX_STEPS + 1, {{0}}}, "steps"},
      {{1, {{OPT_GROUP, 1, 4}}}, "no work groups"}, /* on the CPU */
      {{1, {{OPT_GROUP, 0, 4}}}, "not reduced"},
      {{1, {{OPT_GROUP, 1, 3}}}, "power of two"},
      {{1, {{OPT_GROUP, 1, 512}}}, "power of two"},
      {{1, {{OPT_GROUP, 1, 128}}}, "more invocations"},
      {{2, {{OPT_SPREAD, 0, 2}, {OPT_SPREAD, 0, 3}}}, "split twice"},
      {{3, {{OPT_SPREAD, 0, 2}, {OPT_UPCAST, 0, 2}, {OPT_UPCAST, 0, 3}}}, "split twice"},
      {{2, {{OPT_SPREAD, 0, 4}, {OPT_UPCAST, 0, 2}}}, "must divide"}, /* 8 of 12 */
      {{1, {{OPT_LOCAL, 1, 2}}}, "reduced"},
      {{2, {{OPT_UPCAST, 0, 4}, {OPT_LOCAL, 0, 2}}}, "divide the axis's blocks"}, /* 3 blocks */
      {{2, {{OPT_LOCAL, 0, 2}, {OPT_LOCAL, 0, 2}}}, "split twice"},
      {{1, {{OPT_LOCAL, 0, 128}}}, "divide"},
      {{2, {{OPT_GROUP, 1, 64}, {OPT_LOCAL, 0, 2}}}, "more invocations"}, /* 2 x 64 */
      {{1, {{OPT_CACHE, 0, 2}}}, "no loops over outputs"},                /* on a GPU */
  };
  /* CACHE, on the CPU */
  const struct {
    OptPlan p;
    const char *msg;
  } bad_cache[] = {
      {{1, {{OPT_CACHE, 1, 5}}}, "reduced"},
      {{1, {{OPT_CACHE, 0, 5}}}, "divide the axis's blocks"},
      {{1, {{OPT_CACHE, 0, 1}}}, "from 2"},
      {{2, {{OPT_UPCAST, 0, 4}, {OPT_CACHE, 0, 2}}}, "divide the axis's blocks"}, /* 3 blocks */
      {{2, {{OPT_CACHE, 0, 2}, {OPT_CACHE, 0, 3}}}, "has another CACHE"},
  };
  OptTarget cpu = {.mode = CG_MODE_CORES},
            grid = {.mode = CG_MODE_GRID, .max_local = 64, .shared_bytes = 16384};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    Error err = {0};
    const OptTarget *t = i == 7 ? &cpu : &grid;
    assert_int_equal(opt_check(norm, kd, &bad[i].p, t, &err), TVK_ERR_INVALID_ARG);
    if (!strstr(err.msg, bad[i].msg)) fail_msg("plan %zu: '%s' lacks '%s'", i, err.msg, bad[i].msg);
    /* and codegen reports it instead of lowering */
    CodegenOpts o = {.plan = &bad[i].p,
                     .mode = t->mode,
                     .max_local = t->max_local,
                     .shared_bytes = t->shared_bytes};
    KernelSource ks;
    tvk_status cs = codegen_kernel_opts(sink, NULL, &o, &ks);
    if (cs != TVK_ERR_INVALID_ARG) fail_msg("plan %zu: codegen gives %d: %s", i, cs, ks.err.msg);
  }
  for (size_t i = 0; i < sizeof bad_cache / sizeof *bad_cache; i++) {
    Error err = {0};
    assert_int_equal(opt_check(norm, kd, &bad_cache[i].p, &cpu, &err), TVK_ERR_INVALID_ARG);
    if (!strstr(err.msg, bad_cache[i].msg))
      fail_msg("cache plan %zu: '%s' lacks '%s'", i, err.msg, bad_cache[i].msg);
  }
  Error err = {0};
  OptPlan cp = {2, {{OPT_UPCAST, 0, 2}, {OPT_CACHE, 0, 3}}}; /* 6 blocks: 2 runs of 3 */
  assert_int_equal(opt_check(norm, kd, &cp, &cpu, &err), TVK_OK);
  char cname[64];
  opt_kernel_name(kd, &cp, cname, sizeof cname);
  assert_string_equal(cname, "r_2c3u2_5");
  OptPlan ok = {1, {{OPT_UPCAST, 0, 12}}};
  assert_int_equal(opt_check(norm, kd, &ok, &cpu, &err), TVK_OK);
  OptPlan g = {1, {{OPT_GROUP, 1, 4}}};
  assert_int_equal(opt_check(norm, kd, &g, &grid, &err), TVK_OK);
  char gname[64];
  opt_kernel_name(kd, &g, gname, sizeof gname);
  assert_string_equal(gname, "r_12_2g4");
  OptPlan gl = {2, {{OPT_GROUP, 1, 4}, {OPT_LOCAL, 0, 3}}}; /* 3 rows per work group */
  assert_int_equal(opt_check(norm, kd, &gl, &grid, &err), TVK_OK);
  /* 2 rows per invocation, 3 invocations' worth per work group; each copy's
   * partials take arrays of their own, which must fit */
  OptPlan gul = {3, {{OPT_GROUP, 1, 4}, {OPT_UPCAST, 0, 2}, {OPT_LOCAL, 0, 3}}};
  assert_int_equal(opt_check(norm, kd, &gul, &grid, &err), TVK_OK);
  opt_kernel_name(kd, &gul, gname, sizeof gname);
  assert_string_equal(gname, "r_2l3u2_2g4");
  OptPlan gu = {2, {{OPT_UNROLL, 1, 5}, {OPT_GROUP, 1, 2}}}; /* runs of 5 per lane */
  assert_int_equal(opt_check(norm, kd, &gu, &grid, &err), TVK_OK);
  opt_kernel_name(kd, &gu, gname, sizeof gname);
  assert_string_equal(gname, "r_12_1g2r5");
  OptTarget tiny = grid;
  tiny.shared_bytes = 1024;
  OptPlan g32 = {1, {{OPT_GROUP, 1, 32}}}, gu32 = {2, {{OPT_GROUP, 1, 32}, {OPT_UPCAST, 0, 6}}};
  assert_int_equal(opt_check(norm, kd, &g32, &tiny, &err), TVK_OK); /* 2 x 32 x 4 bytes */
  assert_int_equal(opt_check(norm, kd, &gu32, &tiny, &err), TVK_ERR_INVALID_ARG); /* 6 times */
  if (!strstr(err.msg, "6 copies do not fit the work-group memory (1536 of 1024 bytes)"))
    fail_msg("'%s'", err.msg);
  { /* a grouped reduce takes its outputs side by side along one axis */
    UOp *norm3;
    KernelDesc *kd3 = calloc(1, sizeof *kd3);
    const int64_t ax2[] = {2};
    UOp *r3 =
        reduce(ld(c, 1, DT_FLOAT32, shp(3, (int64_t)4, (int64_t)6, (int64_t)8)), OP_ADD, 1, ax2);
    desc_of(sink1(store(c, 0, DT_FLOAT32, shp(3, (int64_t)4, (int64_t)6, (int64_t)1), r3)), kd3,
            &norm3);
    OptPlan two = {3, {{OPT_GROUP, 2, 4}, {OPT_LOCAL, 0, 2}, {OPT_LOCAL, 1, 2}}};
    assert_int_equal(opt_check(norm3, kd3, &two, &grid, &err), TVK_ERR_INVALID_ARG);
    if (!strstr(err.msg, "one LOCAL axis")) fail_msg("'%s'", err.msg);
    free(kd3);
  }
  OptPlan sr = {2, {{OPT_UPCAST, 0, 2}, {OPT_SPREAD, 0, 3}}}; /* 3 runs of 2 */
  assert_int_equal(opt_check(norm, kd, &sr, &grid, &err), TVK_OK);
  opt_kernel_name(kd, &sr, gname, sizeof gname);
  assert_string_equal(gname, "r_2s3u2_5");
  OptPlan lp = {2, {{OPT_UPCAST, 0, 2}, {OPT_LOCAL, 0, 3}}}; /* 6 blocks: 2 tiles of 3 */
  assert_int_equal(opt_check(norm, kd, &lp, &grid, &err), TVK_OK);
  opt_kernel_name(kd, &lp, gname, sizeof gname);
  assert_string_equal(gname, "r_2l3u2_5");
  assert_int_equal(opt_check(norm, kd, &lp, &cpu, &err), TVK_ERR_INVALID_ARG);
  if (!strstr(err.msg, "no work groups")) fail_msg("'%s'", err.msg);
  OptPlan many = {1, {{OPT_LOCAL, 0, 12}}};
  OptTarget small = grid;
  small.max_local = 8;
  assert_int_equal(opt_check(norm, kd, &many, &small, &err), TVK_ERR_INVALID_ARG);
  if (!strstr(err.msg, "more invocations")) fail_msg("'%s'", err.msg);
  /* reduces of a reduce are not grouped */
  UOp *in = reduce(ld(c, 1, DT_FLOAT32, shp(2, (int64_t)12, (int64_t)5)), OP_MAX, 1, ax);
  UOp *nest = reduce(in, OP_ADD, 1, (const int64_t[]){0});
  UOp *s2 = sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)1), nest));
  desc_of(s2, kd, &norm);
  OptPlan g0 = {1, {{OPT_GROUP, 0, 4}}};
  assert_int_equal(opt_check(norm, kd, &g0, &grid, &err), TVK_ERR_INVALID_ARG);
  if (!strstr(err.msg, "different axes")) fail_msg("'%s'", err.msg);
  char name[64];
  opt_kernel_name(kd, &ok, name, sizeof name);
  assert_string_equal(name, "r_1u12_5");
  free(kd);
  uop_pool_drain(c, 0);
}

/* The kernel of C = A @ B over the full shape (M, N, K): A (M, K) and B
 * stored (N, K), both expanded over the axis they lack, summed over K. */
static UOp *matmul_epi_sink(UCtx *c, int64_t M, int64_t N, int64_t K, Op epilogue) {
  const int64_t ax[] = {2}, full[] = {M, N, K};
  ShapeTracker *a0 = shp(3, M, (int64_t)1, K), *b0 = shp(3, (int64_t)1, N, K);
  UOp *mm = reduce(
      uop_mul(ld(c, 1, DT_FLOAT32, st_expand(a0, full)), ld(c, 2, DT_FLOAT32, st_expand(b0, full))),
      OP_ADD, 1, ax);
  if (epilogue != OP_NONE) mm = uop_alu1(epilogue, mm);
  st_free(a0), st_free(b0);
  return sink1(store(c, 0, DT_FLOAT32, shp(3, M, N, (int64_t)1), mm));
}

static UOp *matmul_bt_sink(UCtx *c, int64_t M, int64_t N, int64_t K) {
  return matmul_epi_sink(c, M, N, K, OP_NONE);
}

/* A matmul gets a register tile on the CPU (the contiguous output axis by the
 * SIMD lanes, the other by 4), and the kernel's name says so. */
static void test_heuristic_matmul(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  UOp *sink = matmul_bt_sink(c, 64, 48, 32);
  KernelDesc *kd = calloc(1, sizeof *kd);
  UOp *norm;
  desc_of(sink, kd, &norm);
  OptTarget t = {.mode = CG_MODE_CORES, .vector_floats = 16};
  OptPlan p;
  opt_heuristic(norm, kd, &t, &p);
  char str[64], name[64];
  opt_plan_str(&p, str, sizeof str);
  assert_string_equal(str, "UPCAST(1,16) UPCAST(0,4)");
  opt_kernel_name(kd, &p, name, sizeof name);
  assert_string_equal(name, "r_16u4_3u16_32");
  /* no upcast without an axis it divides (47 is prime) */
  UOp *s2 = matmul_bt_sink(c, 64, 47, 32);
  desc_of(s2, kd, &norm);
  opt_heuristic(norm, kd, &t, &p);
  opt_plan_str(&p, str, sizeof str);
  assert_string_equal(str, "UPCAST(0,4)");
  /* 8 rows when their accumulators fit the registers: 8 rows x 1 vector x
   * 2 levels (K = 32) + 4 = 20 of AVX-512's 32, not of AVX2's 16; a row
   * count that does not divide M falls back to 4 (M = 36) */
  desc_of(sink, kd, &norm);
  t.vector_regs = 32;
  opt_heuristic(norm, kd, &t, &p);
  opt_plan_str(&p, str, sizeof str);
  assert_string_equal(str, "UPCAST(1,16) UPCAST(0,8)");
  t.vector_regs = 16;
  opt_heuristic(norm, kd, &t, &p);
  opt_plan_str(&p, str, sizeof str);
  assert_string_equal(str, "UPCAST(1,16) UPCAST(0,4)");
  t.vector_regs = 32;
  desc_of(matmul_bt_sink(c, 36, 48, 32), kd, &norm);
  opt_heuristic(norm, kd, &t, &p);
  opt_plan_str(&p, str, sizeof str);
  assert_string_equal(str, "UPCAST(1,16) UPCAST(0,4)");
  /* runs of row tiles (CACHE) where B, read whole per row tile, outgrows
   * L2: 2048^2 floats (16 MiB) against 1 MiB; A's 8-row blocks take 64 KiB,
   * so 8 of them fill half of L2 (256 blocks: 32 runs) */
  t.cache_bytes = (size_t)1 << 20;
  desc_of(matmul_bt_sink(c, 2048, 2048, 2048), kd, &norm);
  opt_heuristic(norm, kd, &t, &p);
  opt_plan_str(&p, str, sizeof str);
  assert_string_equal(str, "UPCAST(1,16) UPCAST(0,8) CACHE(0,8)");
  opt_kernel_name(kd, &p, name, sizeof name);
  assert_string_equal(name, "r_32c8u8_128u16_2048");
  /* a B that fits L2 (256 x 256 floats: 256 KiB) is read from there */
  desc_of(matmul_bt_sink(c, 2048, 256, 256), kd, &norm);
  opt_heuristic(norm, kd, &t, &p);
  opt_plan_str(&p, str, sizeof str);
  assert_string_equal(str, "UPCAST(1,16) UPCAST(0,8)");
  /* few row blocks keep runs for the cores: 16 blocks, runs of 1 (none) */
  desc_of(matmul_bt_sink(c, 128, 4096, 1024), kd, &norm);
  opt_heuristic(norm, kd, &t, &p);
  opt_plan_str(&p, str, sizeof str);
  assert_string_equal(str, "UPCAST(1,16) UPCAST(0,8)");
  /* an emulated device (lavapipe) grows the tile to 16 x 16 (its loads cost
   * per lane), halving it for the threads' work (1024 invocations at
   * least) and for the compile (copies x body weight within the budget:
   * an exp2 after the sum makes 16 x 16 too heavy, 16 x 8 fits) */
  OptTarget emu = {.mode = CG_MODE_GRID, .max_local = 64, .shared_bytes = 16384, .emulated = true};
  const struct {
    int64_t m, n;
    Op epi;
    const char *plan;
  } emulated[] = {
      {1024, 1024, OP_NONE, "UPCAST(1,16) UPCAST(0,16)"},
      {1024, 1024, OP_EXP2, "UPCAST(1,16) UPCAST(0,8)"},
      {256, 256, OP_NONE, "UPCAST(1,8) UPCAST(0,8)"}, /* 65536 outputs */
      {64, 64, OP_NONE, "UPCAST(1,4) UPCAST(0,4)"},   /* 4096: the smallest tile */
      {4096, 12, OP_NONE, "UPCAST(1,4) UPCAST(0,8)"}, /* 12 columns: 4 of them */
  };
  for (size_t i = 0; i < sizeof emulated / sizeof emulated[0]; i++) {
    desc_of(matmul_epi_sink(c, emulated[i].m, emulated[i].n, 64, emulated[i].epi), kd, &norm);
    opt_heuristic(norm, kd, &emu, &p);
    opt_plan_str(&p, str, sizeof str);
    if (strcmp(str, emulated[i].plan) != 0)
      fail_msg("emulated %lld x %lld: %s, expected %s", (long long)emulated[i].m,
               (long long)emulated[i].n, str, emulated[i].plan);
  }
  free(kd);
  uop_pool_drain(c, 0);
}

/* ---------------------------------------------------------------- golden source */

/* Occurrences of needle in hay. */
static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* The plan of an elementwise kernel on a GPU target, and (if src, with
 * Vulkan) the kernel's GLSL under that plan; *src NULL without Vulkan. */
static void grid_plan(UOp *sink, char *str, size_t n, char **src) {
  KernelDesc *kd = calloc(1, sizeof *kd);
  UOp *norm;
  desc_of(sink, kd, &norm);
  OptTarget t = {.mode = CG_MODE_GRID, .max_local = 64, .shared_bytes = 16384};
  OptPlan p;
  opt_heuristic(norm, kd, &t, &p);
  opt_plan_str(&p, str, n);
  if (src) *src = NULL;
#ifdef TVK_HAVE_VULKAN
  if (src) {
    Lang *L = vk_glsl_lang_new(0);
    assert_non_null(L);
    CodegenOpts o = {
        .lang = L, .plan = &p, .mode = CG_MODE_GRID, .max_local = 64, .shared_bytes = 16384};
    KernelSource ks;
    if (codegen_kernel_opts(sink, NULL, &o, &ks) != TVK_OK) fail_msg("codegen: %s", ks.err.msg);
    *src = strdup(ks.src);
    kernel_source_free(&ks);
    vk_glsl_lang_free(L);
  }
#endif
  free(kd);
}

/* On a GPU an elementwise kernel is upcast by 8 only while its body is light:
 * each copy repeats every math helper, and a chain of sin and mul upcast by
 * 8 took minutes to compile on lavapipe. The 20-op chain of sin and mul
 * gets no upcast, so its source holds each sin once (10 calls); one sin, a
 * middling body, is upcast by 2; exp and a*b+c keep 8. */
static void test_heuristic_heavy_body(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  const int64_t n = 4096;
  char str[64];
  UOp *y = ld(c, 1, DT_FLOAT32, shp(1, n));
  for (int i = 0; i < 20; i++)
    y = i % 2 ? uop_mul(y, uop_const_float(c, DT(FLOAT32), 1.5)) : uop_alu1(OP_SIN, y);
  char *src = NULL;
  grid_plan(sink1(store(c, 0, DT_FLOAT32, shp(1, n), y)), str, sizeof str, &src);
  assert_string_equal(str, "");
  const char *body = src ? strstr(src, "void main(") : NULL;
  if (src && (!body || count_of(body, "tvk_sin_f32(") != 10))
    fail_msg("10 calls of tvk_sin_f32 expected in main:\n%s", src);
  free(src);
  UOp *sn = uop_alu1(OP_SIN, ld(c, 1, DT_FLOAT32, shp(1, n)));
  grid_plan(sink1(store(c, 0, DT_FLOAT32, shp(1, n), sn)), str, sizeof str, NULL);
  assert_string_equal(str, "SPREAD(0,2)");
  UOp *e = uop_alu1(OP_EXP2,
                    uop_mul(ld(c, 1, DT_FLOAT32, shp(1, n)), uop_const_float(c, DT(FLOAT32), 1.4)));
  grid_plan(sink1(store(c, 0, DT_FLOAT32, shp(1, n), e)), str, sizeof str, NULL);
  assert_string_equal(str, "UPCAST(0,4) SPREAD(0,2)"); /* runs of 4: aligned quads */
  UOp *mad =
      uop_alu2(OP_ADD, uop_mul(ld(c, 1, DT_FLOAT32, shp(1, n)), ld(c, 2, DT_FLOAT32, shp(1, n))),
               ld(c, 3, DT_FLOAT32, shp(1, n)));
  grid_plan(sink1(store(c, 0, DT_FLOAT32, shp(1, n), mad)), str, sizeof str, NULL);
  assert_string_equal(str, "UPCAST(0,4) SPREAD(0,2)");
  /* where some access has no aligned quads along the axis, spread single
   * elements: a transposed input, 8-bit elements, a view shifted by one */
  ShapeTracker *t0 = shp(2, (int64_t)64, (int64_t)64), *tt = st_permute(t0, (const int[]){1, 0});
  st_free(t0);
  UOp *tr =
      uop_add(ld(c, 1, DT_FLOAT32, tt), ld(c, 2, DT_FLOAT32, shp(2, (int64_t)64, (int64_t)64)));
  grid_plan(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)64, (int64_t)64), tr)), str, sizeof str,
            NULL);
  assert_string_equal(str, "SPREAD(1,8)");
  UOp *b8 = uop_add(ld(c, 1, DT_INT8, shp(1, n)), ld(c, 2, DT_INT8, shp(1, n)));
  grid_plan(sink1(store(c, 0, DT_INT8, shp(1, n), b8)), str, sizeof str, NULL);
  assert_string_equal(str, "SPREAD(0,8)");
  ShapeTracker *w0 = shp(1, n + 1), *w1 = st_shrink(w0, (const sint[][2]){{1, n + 1}});
  st_free(w0);
  UOp *sh = uop_add(ld(c, 1, DT_FLOAT32, w1), ld(c, 2, DT_FLOAT32, shp(1, n)));
  grid_plan(sink1(store(c, 0, DT_FLOAT32, shp(1, n), sh)), str, sizeof str, NULL);
  assert_string_equal(str, "SPREAD(0,8)");
  /* a row broadcast along the axis (stride 0) is one element per run */
  ShapeTracker *r0 = shp(2, (int64_t)64, (int64_t)1), *rb = st_expand(r0, (const sint[]){64, 64});
  st_free(r0);
  UOp *bc =
      uop_mul(ld(c, 1, DT_FLOAT32, rb), ld(c, 2, DT_FLOAT32, shp(2, (int64_t)64, (int64_t)64)));
  grid_plan(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)64, (int64_t)64), bc)), str, sizeof str,
            NULL);
  assert_string_equal(str, "UPCAST(1,4) SPREAD(1,2)");
  /* an emulated device takes runs of 8 neighbours (its 32-byte accesses),
   * fewer as the body grows */
  OptTarget emu = {.mode = CG_MODE_GRID, .max_local = 64, .shared_bytes = 16384, .emulated = true};
  const struct {
    UOp *sink;
    const char *plan;
  } emulated[] = {
      {sink1(store(c, 0, DT_FLOAT32, shp(1, n), mad)), "UPCAST(0,8)"},
      {sink1(store(c, 0, DT_FLOAT32, shp(1, n), sn)), "UPCAST(0,2)"},
      {sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)64, (int64_t)64), tr)), "UPCAST(1,8)"},
  };
  KernelDesc *kd = calloc(1, sizeof *kd);
  for (size_t i = 0; i < sizeof emulated / sizeof emulated[0]; i++) {
    UOp *norm;
    OptPlan p;
    desc_of(emulated[i].sink, kd, &norm);
    opt_heuristic(norm, kd, &emu, &p);
    opt_plan_str(&p, str, sizeof str);
    assert_string_equal(str, emulated[i].plan);
  }
  free(kd);
  uop_pool_drain(c, 0);
}

/* The C of a 4x8 (K = 4) matmul under UPCAST(1,4) UPCAST(0,2): eight
 * accumulators in one k loop, each row of A loaded once per k for the four
 * columns, each element of B once for the two rows, each product added as a
 * fused multiply-add (a device with fma). Regenerate on purpose
 * with TVK_GOLDEN_PRINT=1 ./test_opt and review. */
static const char golden_mm[] = C_PRELUDE
    "#if defined(__GNUC__) && !defined(__clang__)\n"
    "#pragma GCC optimize(\"no-tree-loop-vectorize\", \"ira-region=one\")\n"
    "#endif\n"
    "#define TVK_SEL_MASK 1\n"
    "#define TVK_FMA 1\n"
    "#if (defined(__GNUC__) || defined(__clang__)) && !defined(__TINYC__)\n"
    "#define tvk_fmaf(a, b, c) __builtin_fmaf(a, b, c)\n"
    "#define tvk_fma(a, b, c) __builtin_fma(a, b, c)\n"
    "#else\n"
    "float fmaf(float, float, float); double fma(double, double, double);\n"
    "#define tvk_fmaf(a, b, c) fmaf(a, b, c)\n"
    "#define tvk_fma(a, b, c) fma(a, b, c)\n"
    "#endif\n"
    "void r_2u2_2u4_4(void *const *bufs, const int32_t *vals, int32_t core_id, int32_t n_cores) {\n"
    "  float *data0 = (float *)bufs[0];\n"
    "  const float *data1 = (const float *)bufs[1];\n"
    "  const float *data2 = (const float *)bufs[2];\n"
    "  (void)vals;\n"
    "  int32_t alu0 = ((3/n_cores)+1);\n"
    "  int64_t alu1 = (((int64_t)core_id)*((int64_t)alu0));\n"
    "  int32_t cast0 = ((int32_t)((alu1<4LL)?alu1:4LL));\n"
    "  int32_t alu2 = (4-cast0);\n"
    "  int32_t alu3 = ((alu2<alu0)?alu2:alu0);\n"
    "  for (int32_t ridx0 = 0; ridx0 < alu3; ridx0++) {\n"
    "    int32_t alu4 = (cast0+ridx0);\n"
    "    int32_t alu5 = (alu4/2);\n"
    "    int32_t alu6 = (alu4%2);\n"
    "    int32_t alu7 = ((alu5*16)+(alu6*4));\n"
    "    float acc0 = 0.0f;\n"
    "    int32_t alu8 = (alu5*8);\n"
    "    int32_t alu9 = (alu6*16);\n"
    "    float acc1 = 0.0f;\n"
    "    float acc2 = 0.0f;\n"
    "    float acc3 = 0.0f;\n"
    "    float acc4 = 0.0f;\n"
    "    float acc5 = 0.0f;\n"
    "    float acc6 = 0.0f;\n"
    "    float acc7 = 0.0f;\n"
    "    for (int32_t ridx2 = 0; ridx2 < 4; ridx2++) {\n"
    "      int32_t alu10 = (alu8+ridx2);\n"
    "      float val0 = data1[alu10];\n"
    "      int32_t alu11 = (alu9+ridx2);\n"
    "      float val1 = data2[alu11];\n"
    "      acc0 = tvk_fmaf(val0, val1, acc0);\n"
    "      float val2 = data2[(alu11+4)];\n"
    "      acc1 = tvk_fmaf(val0, val2, acc1);\n"
    "      float val3 = data2[(alu11+8)];\n"
    "      acc2 = tvk_fmaf(val0, val3, acc2);\n"
    "      float val4 = data2[(alu11+12)];\n"
    "      acc3 = tvk_fmaf(val0, val4, acc3);\n"
    "      float val5 = data1[(alu10+4)];\n"
    "      acc4 = tvk_fmaf(val5, val1, acc4);\n"
    "      acc5 = tvk_fmaf(val5, val2, acc5);\n"
    "      acc6 = tvk_fmaf(val5, val3, acc6);\n"
    "      acc7 = tvk_fmaf(val5, val4, acc7);\n"
    "    }\n"
    "    data0[alu7] = acc0;\n"
    "    data0[(alu7+1)] = acc1;\n"
    "    data0[(alu7+2)] = acc2;\n"
    "    data0[(alu7+3)] = acc3;\n"
    "    data0[(alu7+8)] = acc4;\n"
    "    data0[(alu7+9)] = acc5;\n"
    "    data0[(alu7+10)] = acc6;\n"
    "    data0[(alu7+11)] = acc7;\n"
    "  }\n"
    "}\n";

static void test_golden_matmul(void **state) {
  Suite *s = *state;
  UOp *sink = matmul_bt_sink(s->c, 4, 8, 4);
  OptPlan p = {2, {{OPT_UPCAST, 1, 4}, {OPT_UPCAST, 0, 2}}};
  CodegenOpts o = {.plan = &p, .fma = true};
  KernelSource ks;
  assert_int_equal(codegen_kernel_opts(sink, NULL, &o, &ks), TVK_OK);
  if (getenv("TVK_GOLDEN_PRINT")) fprintf(stderr, "---- golden ----\n%s----\n", ks.src);
  if (strcmp(ks.src, golden_mm) != 0) fail_msg("generated source changed:\n%s", ks.src);
  /* cores mode's launch: the split (M = 4 in blocks of 2, fewer than
   * CG_SPLIT_MERGE, flattened with N = 8 in blocks of 4) has 4 indices, each
   * of 128 / 4 loop iterations of the 4 x 8 x 4 kernel */
  assert_int_equal(ks.global[0], 4);
  assert_int_equal(ks.global[1], 32);
  kernel_source_free(&ks);
  uop_pool_drain(s->c, 0);
}

#ifdef TVK_HAVE_VULKAN
/* The GLSL of a sum over axis 1 of a (2, 8) float32 matrix under GROUP(1, 4):
 * a work group of 4 per row, each lane adding 2 elements, the partials in
 * work-group memory, a barrier, every lane combining the 4, lane 0 storing.
 * Regenerate on purpose with TVK_GOLDEN_PRINT=1 ./test_opt and review. */
static const char golden_group[] =
    "#version 450\n"
    "#extension GL_EXT_shader_8bit_storage : require\n"
    "#extension GL_EXT_shader_16bit_storage : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n"
    "layout(set = 0, binding = 0, std430) buffer tvk_buf0 { precise float data0[]; };\n"
    "layout(set = 0, binding = 1, std430) readonly buffer tvk_buf1 { precise float data1[]; };\n"
    "layout(push_constant, std430) uniform tvk_push {\n"
    "  uint grid_x, grid_y, grid_z;\n"
    "} pc;\n"
    "shared float temp0[4];\n"
    "layout(local_size_x = 4, local_size_y = 1, local_size_z = 1) in;\n"
    "void main() {  // r_2_2g4\n"
    "  uint tvk_lin = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y +\n"
    "                 gl_NumWorkGroups.y * gl_WorkGroupID.z);\n"
    "  if (tvk_lin >= pc.grid_x * pc.grid_y * pc.grid_z) return;\n"
    "  const float tvk_zero = uintBitsToFloat(pc.grid_x >> 31);\n"
    "  precise float acc1 = float(tvk_zero);\n"
    "  precise float acc0 = float(tvk_zero);\n"
    "  precise int alu0 = (int(tvk_lin)*8);\n"
    "  for (int ridx1 = 0; ridx1 < 2; ridx1++) {\n"
    "    precise float val0 = data1[((alu0+(ridx1*4))+int(gl_LocalInvocationID.x))];\n"
    "    acc0 = (acc0+val0);\n"
    "  }\n"
    "  temp0[int(gl_LocalInvocationID.x)] = acc0;\n"
    "  memoryBarrierShared(); barrier();\n"
    "  for (int ridx6 = 0; ridx6 < 4; ridx6++) {\n"
    "    precise float val1 = temp0[ridx6];\n"
    "    acc1 = (acc1+val1);\n"
    "  }\n"
    "  if ((int(gl_LocalInvocationID.x)<1)) data0[int(tvk_lin)] = acc1;\n"
    "}\n";

/* GROUP of a float sum by 64 lanes on Vulkan adds in the documented order
 * (opt.h, lower.c): lane l sums elements l, l+64, l+128, l+192; blocks of 16
 * lanes' partials are summed in lane order, then the 4 block sums in order.
 * The reference does exactly those float additions on the host: the same
 * bits. Rows (6, 256) summed along axis 1, and the same values laid out as
 * columns (256, 6) summed along axis 0. */
static void test_group_order(void **state) {
  Suite *s = *state;
  Device *vk = s->dev[1];
  if (!vk) skip();
  UCtx *c = s->c;
  enum { R = 6, N = 256, L = 64 };
  int S = vk->limits.subgroup_size;
  bool sg = vk->limits.subgroup_reduce && S > 1 && L % S == 0 && L > S;
  double *vals = malloc(R * N * sizeof *vals); /* vals[row * N + i] */
  assert_non_null(vals);
  for (int i = 0; i < R * N; i++) /* values whose sums round: the order shows */
    vals[i] = (double)(float)((pick(2000001) - 1000000) / 7777.0);
  for (int cols = 0; cols < 2; cols++) {
    int ra = cols ? 0 : 1, oa = 1 - ra; /* the reduced axis, the rows' axis */
    int64_t dims[2] = {cols ? N : R, cols ? R : N}, odims[2] = {dims[0], dims[1]};
    odims[ra] = 1;
    const int64_t ax[] = {ra};
    UOp *r = reduce(ld(c, 1, DT_FLOAT32, shp(2, dims[0], dims[1])), OP_ADD, 1, ax);
    Case k = {
        .kind = 1, .t = DT_FLOAT32, .full = {dims[0], dims[1], 1}, .red = 1u << ra, .rop = OP_ADD};
    k.sink = sink1(store(c, 0, DT_FLOAT32, shp(2, odims[0], odims[1]), r));
    for (int b = 0; b < 2; b++)
      k.in[b] = (Input){shp(2, dims[0], dims[1]), R * N, malloc(R * N * sizeof(double))};
    for (int row = 0; row < R; row++)
      for (int i = 0; i < N; i++)
        k.in[0].host[cols ? i * R + row : row * N + i] = vals[row * N + i];
    memcpy(k.in[1].host, k.in[0].host, R * N * sizeof(double));
    /* one row per work group, 3 rows side by side on 3 x 64 invocations
     * (GROUP with LOCAL; for the columns the slots are the fastest index of
     * the work group, and subgroups, which would hold 3 outputs, are not
     * used), and 2 rows per invocation, 3 pairs side by side (with an
     * UPCAST): each row's additions are the same */
    const OptPlan plans[] = {
        {1, {{OPT_GROUP, (uint8_t)ra, L}}},
        {2, {{OPT_GROUP, (uint8_t)ra, L}, {OPT_LOCAL, (uint8_t)oa, 3}}},
        {3,
         {{OPT_GROUP, (uint8_t)ra, L}, {OPT_UPCAST, (uint8_t)oa, 2}, {OPT_LOCAL, (uint8_t)oa, 3}}}};
    for (int pi = 0; pi < 3 + cols; pi++) {
      float out[R];
      if (pi < 3) {
        run_plan(vk, &k, &plans[pi], out, sizeof out);
      } else if (sg) {
        run_plan_sub(vk, &k, &plans[1], S, out, sizeof out);
      } else {
        continue;
      }
      for (int row = 0; row < R; row++) {
        float part[L], blocks[L / 16], total = 0;
        for (int l = 0; l < L; l++) {
          part[l] = 0;
          for (int j = 0; j < N / L; j++) part[l] += (float)vals[row * N + j * L + l];
        }
        for (int b = 0; b < L / 16; b++) {
          blocks[b] = 0;
          for (int l = 0; l < 16; l++) blocks[b] += part[b * 16 + l];
        }
        for (int b = 0; b < L / 16; b++) total += blocks[b];
        if (memcmp(&total, &out[row], sizeof total))
          fail_msg("%s, plan %d, row %d: %.9g on Vulkan, %.9g in the documented order",
                   cols ? "columns" : "rows", pi, row, out[row], total);
      }
    }
    /* GROUP and UNROLL of the reduced axis: lane g (of 16) takes runs of 4
     * neighbours 64 apart, element (j * 16 + g) * 4 + k; each k sums its
     * j's, the lane adds its 4 sums in order, then the 16 lanes' in order */
    const OptPlan gu = {2, {{OPT_GROUP, (uint8_t)ra, 16}, {OPT_UNROLL, (uint8_t)ra, 4}}};
    float guo[R];
    run_plan(vk, &k, &gu, guo, sizeof guo);
    for (int row = 0; row < R; row++) {
      float total = 0;
      for (int g = 0; g < 16; g++) {
        float part[4], lane;
        for (int q = 0; q < 4; q++) {
          part[q] = 0;
          for (int j = 0; j < N / 64; j++) part[q] += (float)vals[row * N + (j * 16 + g) * 4 + q];
        }
        lane = part[0];
        for (int q = 1; q < 4; q++) lane += part[q];
        total += lane;
      }
      if (memcmp(&total, &guo[row], sizeof total))
        fail_msg("%s, GROUP with UNROLL, row %d: %.9g on Vulkan, %.9g in the documented order",
                 cols ? "columns" : "rows", row, guo[row], total);
    }
    /* rows through subgroups where the device reduces across them: side by
     * side they give each row's bits of one row per work group */
    if (sg && !cols) {
      float one[R], side[R];
      for (int pi = 0; pi < 2; pi++)
        run_plan_sub(vk, &k, &plans[pi], S, pi ? side : one, sizeof one);
      for (int row = 0; row < R; row++)
        if (memcmp(&one[row], &side[row], sizeof one[row]))
          fail_msg("subgroups, row %d: %.9g side by side, %.9g alone", row, side[row], one[row]);
    }
    case_free(&k);
  }
  free(vals);
  uop_pool_drain(c, 0);
}

/* STAGE (opt.h): matmuls whose reduce is staged through work-group memory
 * on LOCAL tiles give the unoptimised kernel's bits (the additions do not
 * change) on Vulkan with synchronization validation when the suite runs
 * under it: a K of several blocks (a barrier opens each), one block, an
 * int32 one (exact: one loop), a tile whose invocations each fill several
 * elements, and a view of B transposed. */
static void test_staged_matmul(void **state) {
  Suite *s = *state;
  Device *vk = s->dev[1];
  if (!vk) skip();
  const struct {
    int64_t m, n, k;
    ScalarType t;
    OptPlan p;
  } cases[] = {
      {16,
       32,
       48,
       DT_FLOAT32,
       {4, {{OPT_UPCAST, 1, 2}, {OPT_UPCAST, 0, 2}, {OPT_LOCAL, 1, 8}, {OPT_LOCAL, 0, 4}}}},
      {8, 8, 12, DT_FLOAT32, {2, {{OPT_LOCAL, 1, 4}, {OPT_LOCAL, 0, 4}}}},
      {12, 16, 20, DT_INT32, {3, {{OPT_UPCAST, 1, 4}, {OPT_LOCAL, 1, 4}, {OPT_LOCAL, 0, 3}}}},
      {32,
       64,
       64,
       DT_FLOAT32,
       {4, {{OPT_UPCAST, 1, 4}, {OPT_UPCAST, 0, 4}, {OPT_LOCAL, 1, 16}, {OPT_LOCAL, 0, 8}}}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    Case k = {.kind = 2,
              .t = cases[i].t,
              .full = {cases[i].m, cases[i].n, cases[i].k},
              .red = 4,
              .rop = OP_ADD};
    ShapeTracker *a0 = shp(3, k.full[0], (int64_t)1, k.full[2]);
    ShapeTracker *b0 = shp(3, k.full[2], k.full[1], (int64_t)1);
    ShapeTracker *b1 = st_permute(b0, (const int[]){2, 1, 0});
    k.in[0] = (Input){st_expand(a0, k.full), k.full[0] * k.full[2], NULL};
    k.in[1] = (Input){st_expand(b1, k.full), k.full[1] * k.full[2], NULL};
    st_free(a0), st_free(b0), st_free(b1);
    for (int j = 0; j < 2; j++) {
      k.in[j].host = malloc((size_t)k.in[j].numel * sizeof(double));
      for (int64_t e = 0; e < k.in[j].numel; e++)
        k.in[j].host[e] =
            k.t == DT_INT32 ? (double)(pick(11) - 5) : (double)(pick(2001) - 1000) / 512;
    }
    UCtx *c = s->c;
    UOp *mm =
        reduce(uop_mul(ld(c, 1, k.t, st_clone(k.in[0].st)), ld(c, 2, k.t, st_clone(k.in[1].st))),
               OP_ADD, 1, (const int64_t[]){2});
    k.sink = sink1(store(c, 0, k.t, shp(3, k.full[0], k.full[1], (int64_t)1), mm));
    OptPlan p = cases[i].p;
    p.step[p.n++] = (OptStep){OPT_STAGE, 2, (int32_t)cg_reduce_inner(k.full[2], k.t == DT_FLOAT32)};
    size_t bytes = (size_t)(k.full[0] * k.full[1]) * 4;
    void *plain = malloc(bytes), *staged = malloc(bytes);
    run_plan(vk, &k, NULL, plain, bytes);
    run_plan(vk, &k, &p, staged, bytes);
    char what[200];
    describe(&k, &p, what, sizeof what);
    if (memcmp(plain, staged, bytes)) fail_msg("%s: the staged kernel's result differs", what);
    free(plain), free(staged);
    case_free(&k);
    uop_pool_drain(c, 0);
  }
}

/* The GLSL of sink under a GROUP plan for a device with every storage
 * feature, work groups of up to 64 and the given subgroups (0: none); *o is
 * left with those options (its language freed). */
static void group_glsl(UOp *sink, const OptPlan *p, int subgroup, CodegenOpts *o,
                       KernelSource *ks) {
  Lang *L = vk_glsl_lang_new(VKFEAT_STORAGE8 | VKFEAT_STORAGE16 | VKFEAT_INT64 | VKFEAT_FLOAT64);
  assert_non_null(L);
  *o = (CodegenOpts){.lang = L,
                     .mode = CG_MODE_GRID,
                     .local_size = 64,
                     .plan = p,
                     .max_local = 64,
                     .shared_bytes = 16384,
                     .subgroup = subgroup};
  tvk_status st = codegen_kernel_opts(sink, NULL, o, ks);
  vk_glsl_lang_free(L);
  o->lang = NULL;
  if (st != TVK_OK) fail_msg("codegen: %s", ks->err.msg);
}

/* GROUP(1, 32) of a float sum (of a product, the random cases' kernel) on
 * a device with 8-wide subgroups: each
 * subgroup adds its partials with subgroupAdd, its first invocation stores
 * the total, and every lane adds the 4 totals in order. The source is
 * compiled on the Vulkan device, and its result checked within the sum's
 * rounding bound (the subgroup adds in an order of its own). */
static const char golden_subgroup[] =
    "shared float temp0[4];\n"
    "layout(local_size_x = 32, local_size_y = 1, local_size_z = 1) in;\n"
    "void main() {  // r_2_2g32\n"
    "  uint tvk_lin = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y +\n"
    "                 gl_NumWorkGroups.y * gl_WorkGroupID.z);\n"
    "  if (tvk_lin >= pc.grid_x * pc.grid_y * pc.grid_z) return;\n"
    "  const float tvk_zero = uintBitsToFloat(pc.grid_x >> 31);\n"
    "  precise float acc1 = float(tvk_zero);\n"
    "  precise float acc0 = float(tvk_zero);\n"
    "  precise int alu0 = (int(tvk_lin)*64);\n"
    "  precise int alu1 = (int(gl_SubgroupID)*8);\n"
    "  for (int ridx1 = 0; ridx1 < 2; ridx1++) {\n"
    "    precise int alu2 = (((alu0+(ridx1*32))+alu1)+int(gl_SubgroupInvocationID));\n"
    "    precise float val0 = data1[alu2];\n"
    "    precise float val1 = data2[alu2];\n"
    "    acc0 = (acc0+(val0*val1));\n"
    "  }\n"
    "  precise float alu3 = subgroupAdd(acc0);\n"
    "  if ((int(gl_SubgroupInvocationID)<1)) temp0[int(gl_SubgroupID)] = alu3;\n"
    "  memoryBarrierShared(); barrier();\n"
    "  for (int ridx6 = 0; ridx6 < 4; ridx6++) {\n"
    "    precise float val2 = temp0[ridx6];\n"
    "    acc1 = (acc1+val2);\n"
    "  }\n"
    "  if (((alu1+int(gl_SubgroupInvocationID))<1)) data0[int(tvk_lin)] = acc1;\n"
    "}\n";

/* The 2 row sums of (2, 64) products `sink` under the codegen options o
 * (a plan through subgroups of 8) on Vulkan, each within the sum's bound of
 * the double reference; where the device has 8-wide subgroup arithmetic. */
static void check_subgroup_rows(Device *vk, UOp *sink, CodegenOpts *o, const char *what) {
  if (!vk || !vk->limits.subgroup_reduce || vk->limits.subgroup_size != 8) return;
  Case k = {.kind = 1, .t = DT_FLOAT32, .full = {2, 64, 1}, .red = 2, .rop = OP_ADD};
  k.sink = sink;
  for (int i = 0; i < 2; i++) {
    k.in[i] = (Input){shp(2, (int64_t)2, (int64_t)64), 128, malloc(128 * sizeof(double))};
    for (int e = 0; e < 128; e++) k.in[i].host[e] = (double)(pick(2001) - 1000) / 512;
  }
  float out[2];
  o->lang = vk->lang;
  run_plan_opts(vk, &k, o, out, sizeof out);
  for (int row = 0; row < 2; row++) {
    int64_t idx[3] = {row, 0, 0};
    double want = reference(&k, idx);
    if (!(fabs(out[row] - want) <= tolerance(&k, idx)))
      fail_msg("%s, row %d: %.9g, the reference %.9g", what, row, out[row], want);
  }
  case_free(&k);
}

static void test_golden_subgroup(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  const int64_t ax[] = {1};
  UOp *x = uop_mul(ld(c, 1, DT_FLOAT32, shp(2, (int64_t)2, (int64_t)64)),
                   ld(c, 2, DT_FLOAT32, shp(2, (int64_t)2, (int64_t)64)));
  UOp *r = reduce(x, OP_ADD, 1, ax);
  UOp *sink = sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)2, (int64_t)1), r));
  OptPlan p = {1, {{OPT_GROUP, 1, 32}}};
  CodegenOpts o;
  KernelSource ks;
  group_glsl(sink, &p, 8, &o, &ks);
  const char *body = strstr(ks.src, "shared float temp0[4];");
  if (getenv("TVK_GOLDEN_PRINT")) fprintf(stderr, "---- golden ----\n%s----\n", ks.src);
  if (!strstr(ks.src, "#extension GL_KHR_shader_subgroup_arithmetic : require\n") || !body ||
      strcmp(body, golden_subgroup) != 0)
    fail_msg("generated source changed:\n%s", ks.src);
  kernel_source_free(&ks);
  check_subgroup_rows(s->dev[1], sink, &o, "GROUP(1,32)");
  /* a subgroup per row (GROUP's lanes = the subgroup, two rows side by side):
   * the subgroup's total is the row's, with no work-group memory and no
   * barrier */
  OptPlan warp = {2, {{OPT_GROUP, 1, 8}, {OPT_LOCAL, 0, 2}}};
  group_glsl(sink, &warp, 8, &o, &ks);
  if (!strstr(ks.src, "subgroupAdd(") || strstr(ks.src, "shared ") || strstr(ks.src, "barrier("))
    fail_msg("a subgroup per row:\n%s", ks.src);
  kernel_source_free(&ks);
  check_subgroup_rows(s->dev[1], sink, &o, "a subgroup per row");
  uop_pool_drain(c, 0);
}

static void test_golden_group(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  const int64_t ax[] = {1};
  UOp *r = reduce(ld(c, 1, DT_FLOAT32, shp(2, (int64_t)2, (int64_t)8)), OP_ADD, 1, ax);
  UOp *sink = sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)2, (int64_t)1), r));
  OptPlan p = {1, {{OPT_GROUP, 1, 4}}};
  CodegenOpts o;
  KernelSource ks;
  group_glsl(sink, &p, 0, &o, &ks);
  assert_int_equal(ks.global[0], 2);
  assert_int_equal(ks.local[0], 4);
  if (getenv("TVK_GOLDEN_PRINT")) fprintf(stderr, "---- golden ----\n%s----\n", ks.src);
  if (strcmp(ks.src, golden_group) != 0) fail_msg("generated source changed:\n%s", ks.src);
  kernel_source_free(&ks);
  uop_pool_drain(c, 0);
}
#endif

/* ---------------------------------------------------------------- the search */

/* C = A @ B (12 x 16 times 16 x 24) and s = sum of a 5000-element vector
 * through tvk.h in a context with TVK_BEAM 2 on `dev` and the kernel cache
 * (and choices) in dir; checked against double references. Returns the
 * context's counters. */
static tvk_stats beam_run(const char *dev, const char *dir) {
  enum { M = 12, K = 16, N = 24, L = 5000 };
  static float a[M * K], b[K * N], v[L];
  for (int i = 0; i < M * K; i++) a[i] = (float)((i * 7) % 11 - 5);
  for (int i = 0; i < K * N; i++) b[i] = (float)((i * 5) % 13 - 6);
  for (int i = 0; i < L; i++) v[i] = (float)(i % 17) / 8;
  tvk_ctx_options o = {.device = dev, .cache_dir = dir, .beam = 2};
  tvk_ctx *ctx;
  assert_int_equal(tvk_ctx_create_opts(&o, &ctx), TVK_OK);
  tvk_tensor *A = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){M, K}, a);
  tvk_tensor *B = tvk_from_data(ctx, TVK_FLOAT32, 2, (int64_t[]){K, N}, b);
  tvk_tensor *V = tvk_from_data(ctx, TVK_FLOAT32, 1, (int64_t[]){L}, v);
  float c[M * N], sum;
  assert_int_equal(tvk_to_host(tvk_matmul(A, B), c, sizeof c), TVK_OK);
  assert_int_equal(tvk_to_host(tvk_sum(V, 0, NULL, false), &sum, sizeof sum), TVK_OK);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double want = 0;
      for (int k = 0; k < K; k++) want += (double)a[i * K + k] * b[k * N + j];
      if (c[i * N + j] != want)
        fail_msg("%s: C[%d][%d] = %g, want %g", dev, i, j, c[i * N + j], want);
    }
  double want = 0;
  for (int i = 0; i < L; i++) want += v[i];
  if (fabs(sum - want) > 1e-6 * want) fail_msg("%s: sum %.9g, want %.9g", dev, sum, want);
  tvk_stats st, more;
  tvk_stats_get(ctx, &st);
  /* the same kernels again in this context: no search, no lookup of choices */
  float c2[M * N];
  assert_int_equal(tvk_to_host(tvk_matmul(A, B), c2, sizeof c2), TVK_OK);
  assert_memory_equal(c, c2, sizeof c);
  tvk_stats_get(ctx, &more);
  if (more.plans_searched != st.plans_searched || more.plans_found != st.plans_found ||
      more.kernels_generated != st.kernels_generated)
    fail_msg("%s: the matmul again searched %llu, found %llu, generated %llu", dev,
             (unsigned long long)(more.plans_searched - st.plans_searched),
             (unsigned long long)(more.plans_found - st.plans_found),
             (unsigned long long)(more.kernels_generated - st.kernels_generated));
  tvk_ctx_destroy(ctx);
  return st;
}

/* Overwrites every choices file (dir/choices/<device>/<kernel>.plan) with
 * bytes that are no plan; returns how many. */
static int spoil_choices(const char *dir) {
  char top[512], sub[800], file[1100];
  snprintf(top, sizeof top, "%s/choices", dir);
  DIR *d = opendir(top);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    snprintf(sub, sizeof sub, "%s/%s", top, e->d_name);
    DIR *d2 = opendir(sub);
    for (struct dirent *f; d2 && (f = readdir(d2));) {
      if (!strstr(f->d_name, ".plan")) continue;
      snprintf(file, sizeof file, "%s/%s", sub, f->d_name);
      FILE *w = fopen(file, "wb");
      if (w) fputs("junk", w), fclose(w), n++;
    }
    if (d2) closedir(d2);
  }
  if (d) closedir(d);
  return n;
}

/* TVK_BEAM: the first run times plans; a second run reads its kernels from
 * the kernel store (kernel_store.h) and neither searches nor looks for
 * choices; without the store's records it finds the choices and times
 * nothing; damaged choices are searched again without an error. */
static void test_search(void **state) {
  Suite *s = *state;
  for (int k = 0; k < 2; k++) {
    if (!s->dev[k]) continue;
    const char *dev = k ? "VK" : "CPU";
    char dir[256];
    assert_true(temp_dir(dir, sizeof dir, "beam"));
    tvk_stats first = beam_run(dev, dir);
    if (first.plans_searched < 2 || first.plans_found != 0)
      fail_msg("%s: first run searched %llu, found %llu", dev,
               (unsigned long long)first.plans_searched, (unsigned long long)first.plans_found);
    char kernels[300];
    snprintf(kernels, sizeof kernels, "%s/kernels", dir);
    tvk_stats stored = beam_run(dev, dir);
    if (stored.plans_searched != 0 || stored.plans_found != 0 || stored.kernels_generated != 0 ||
        stored.kernels_stored != first.kernels_generated)
      fail_msg("%s: second run searched %llu, found %llu, generated %llu, read %llu", dev,
               (unsigned long long)stored.plans_searched, (unsigned long long)stored.plans_found,
               (unsigned long long)stored.kernels_generated,
               (unsigned long long)stored.kernels_stored);
    rm_rf(kernels);
    tvk_stats again = beam_run(dev, dir);
    if (again.plans_searched != 0 || again.plans_found != first.plans_searched)
      fail_msg("%s: third run searched %llu, found %llu", dev,
               (unsigned long long)again.plans_searched, (unsigned long long)again.plans_found);
    rm_rf(kernels);
    assert_int_equal(spoil_choices(dir), (int)first.plans_searched);
    tvk_stats spoiled = beam_run(dev, dir);
    if (spoiled.plans_searched != first.plans_searched || spoiled.plans_found != 0)
      fail_msg("%s: after damage searched %llu, found %llu", dev,
               (unsigned long long)spoiled.plans_searched, (unsigned long long)spoiled.plans_found);
    rm_rf(dir);
  }
}

/* ---------------------------------------------------------------- fixtures */

static int suite_setup(void **state) {
  Suite *s = calloc(1, sizeof *s);
  if (!s) return -1;
  Error err;
  const char *validate = getenv("TVK_VALIDATE");
  DeviceOptions o = {.cache_dir = test_cache_dir(), .validate = validate && atoi(validate) > 0};
  if (cpu_device_create(&o, &s->dev[0], &err) != TVK_OK) {
    fprintf(stderr, "cpu device: %s\n", err.msg);
    return -1;
  }
  if (vk_device_create(&o, -1, &s->dev[1], &err) != TVK_OK) {
    if (vk_required()) {
      fprintf(stderr, "TVK_REQUIRE_VK is set and there is no Vulkan device: %s\n", err.msg);
      return -1;
    }
    fprintf(stderr, "no Vulkan device (%s): the CPU only\n", err.msg);
    s->dev[1] = NULL;
  }
  if (uctx_setup(&s->c) != 0) return -1;
  *state = s;
  return 0;
}

static int suite_teardown(void **state) {
  Suite *s = *state;
  int bad = uctx_teardown(&s->c);
  if (s->dev[1]) {
#ifdef TVK_HAVE_VULKAN
    uint64_t m = vk_validation_messages(s->dev[1]);
    if (m) fprintf(stderr, "%llu validation messages\n", (unsigned long long)m), bad = -1;
#endif
    s->dev[1]->ops->destroy(s->dev[1]);
  }
  s->dev[0]->ops->destroy(s->dev[0]);
  free(s);
  return bad;
}

/* ---------------------------------------------------------------- coalescing */

/* A discrete GPU as the heuristic sees one: the target is data, so this runs
 * on any machine, lavapipe's included. */
static const OptTarget gpu = {.mode = CG_MODE_GRID, .max_local = 1024, .shared_bytes = 49152};

/* The final graph of sink for the GPU: the heuristic's plan (into *plan; or
 * *plan itself when given),
 * lowering with 64 invocations per work group, simplify, legalize, and 4-wide
 * access in a language that has float32 and int32 quads. */
static UOp *gpu_graph(UOp *sink, OptPlan *plan, bool given) {
  KernelDesc *kd = calloc(1, sizeof *kd);
  assert_non_null(kd);
  UOp *norm, *low, *legal, *vec;
  Error err = {0};
  assert_int_equal(kernel_verify(sink, &norm, kd, &err), TVK_OK);
  if (!given) opt_heuristic(norm, kd, &gpu, plan);
  assert_int_equal(opt_check(norm, kd, plan, &gpu, &err), TVK_OK);
  CgLaunch launch;
  if (lower_kernel_grid(norm, kd, plan, 64, 32, &low, &launch, &err) != TVK_OK)
    fail_msg("%s", err.msg);
  Lang quads = lang_c;
  quads.max_vector = 4;
  quads.vec_type[DT_FLOAT32] = "float4", quads.vec_type[DT_INT32] = "int4";
  UOp *simple = uop_simplify(low);
  assert_non_null(simple);
  assert_int_equal(legalize_dtypes(simple, &quads, true, &legal, &err), TVK_OK);
  assert_int_equal(vectorize_memory(legal, &quads, kd, &vec, &err), TVK_OK);
  free(kd);
  return vec;
}

enum { WARP = 32, SEGMENT = 128 };

/* Every global load and store of graph g, evaluated for the 32 invocations
 * of a warp (local ids 0..31 of a work group, each loop at its first and at
 * its second iteration), touches at most the fewest 128-byte segments that
 * its distinct addresses can fill, plus one for a run that starts inside a
 * segment. Lanes whose gate is false touch nothing. Returns the accesses
 * checked. */
static int coalescing(UOp *g, const char *what, int *bad) {
  size_t n = 0;
  UOp **t = uop_toposort(g, &n);
  assert_non_null(t);
  UOp *vars[64];
  int nv = 0, gid = -1, lid = -1, sid = -1, sl = -1, checked = 0;
  for (size_t i = 0; i < n && nv < 64; i++) {
    UOp *u = t[i];
    if (u->op == OP_SPECIAL && !strcmp(u->arg.var.name, "group_id")) gid = nv, vars[nv++] = u;
    if (u->op == OP_SPECIAL && !strcmp(u->arg.var.name, "local_id")) lid = nv, vars[nv++] = u;
    /* a grouped kernel combining through subgroups (of the warp's 32) numbers
     * its invocations by them: the warp is subgroup 0, its lanes in order */
    if (u->op == OP_SPECIAL && !strcmp(u->arg.var.name, "subgroup_id")) sid = nv, vars[nv++] = u;
    if (u->op == OP_SPECIAL && !strcmp(u->arg.var.name, "subgroup_lane")) sl = nv, vars[nv++] = u;
    if (u->op == OP_RANGE) vars[nv++] = u;
  }
  assert_true(lid >= 0 || sl >= 0);
  int inv = lid >= 0 ? lid : sl; /* what numbers a warp's lanes */
  for (size_t i = 0; i < n; i++) {
    UOp *u = t[i];
    if ((u->op != OP_LOAD && u->op != OP_STORE) || u->src[0]->op != OP_INDEX ||
        u->src[0]->src[0]->op != OP_DEFINE_GLOBAL)
      continue;
    UOp *idx = u->src[0]->src[1];
    UOp *gate = u->op == OP_LOAD ? (u->nsrc == 3 ? u->src[2] : NULL)
                                 : (u->nsrc > 2 && u->src[2]->op != OP_RANGE ? u->src[2] : NULL);
    int64_t bytes = (int64_t)dt_itemsize(dt_base(u->src[0]->dtype));
    for (int it = 0; it < 2; it++)
      for (int64_t grp = 0; grp < 2; grp++) {
        int64_t vals[64], addr[WARP], segs[WARP];
        int na = 0, ns = 0;
        for (int lane = 0; lane < WARP; lane++) {
          for (int k = 0; k < nv; k++) {
            int64_t hi = uop_vmax(vars[k]);
            vals[k] = k == inv ? lane : k == gid ? grp : k == sid ? 0 : (it < hi ? it : hi);
          }
          if (vals[inv] > uop_vmax(vars[inv])) continue; /* a work group smaller than a warp */
          if (gate && !sym_infer(gate, nv, vars, vals)) continue;
          int64_t a = sym_infer(idx, nv, vars, vals) * bytes, sg = a / SEGMENT;
          bool seen = false;
          for (int k = 0; k < na && !seen; k++) seen = addr[k] == a;
          if (!seen) addr[na++] = a;
          seen = false;
          for (int k = 0; k < ns && !seen; k++) seen = segs[k] == sg;
          if (!seen) segs[ns++] = sg;
        }
        int64_t fewest = (na * bytes + SEGMENT - 1) / SEGMENT;
        if (ns > fewest + 1 && bad) {
          ++*bad;
        } else if (ns > fewest + 1) {
          char *text = uop_render(idx);
          fail_msg("%s: a %s of %lld-byte elements at %s touches %d segments for %d addresses "
                   "(at most %lld)",
                   what, u->op == OP_LOAD ? "load" : "store", (long long)bytes, text ? text : "?",
                   ns, na, (long long)fewest + 1);
        }
      }
    checked++;
  }
  free(t);
  return checked;
}

static int check_coalesced(UOp *g, const char *what) { return coalescing(g, what, NULL); }

/* How many global accesses of g are not coalesced (the check above). */
static int uncoalesced(UOp *g) {
  int bad = 0;
  coalescing(g, "", &bad);
  return bad;
}

/* What the heuristic makes for a GPU of an elementwise kernel, row and
 * column reduces, a softmax step and a matmul: every global access of a warp
 * is coalesced (the numerical check; docs/optimiser.md). */
static void test_coalesced_on_gpu(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  char str[96];
  OptPlan plan;
  const int64_t M = 256, N = 512;
  /* a * b + c */
  UOp *mad =
      uop_add(uop_mul(ld(c, 1, DT_FLOAT32, shp(2, M, N)), ld(c, 2, DT_FLOAT32, shp(2, M, N))),
              ld(c, 3, DT_FLOAT32, shp(2, M, N)));
  UOp *g = gpu_graph(sink1(store(c, 0, DT_FLOAT32, shp(2, M, N), mad)), &plan, false);
  opt_plan_str(&plan, str, sizeof str);
  assert_string_equal(str, "UPCAST(1,4) SPREAD(1,2)");
  assert_int_equal(check_coalesced(g, "a*b+c"), 8); /* 2 runs of 4 per buffer */
  /* row sums: the reduce across a work group (a warp reads one run) */
  const int64_t ax1[] = {1}, ax0[] = {0};
  UOp *rs = reduce(ld(c, 1, DT_FLOAT32, shp(2, M, N * 8)), OP_ADD, 1, ax1);
  g = gpu_graph(sink1(store(c, 0, DT_FLOAT32, shp(2, M, (int64_t)1), rs)), &plan, false);
  opt_plan_str(&plan, str, sizeof str);
  /* (each lane's runs of 4 neighbours one quad: one load and the store) */
  assert_string_equal(str, "GROUP(1,64) UNROLL(1,4)");
  assert_int_equal(check_coalesced(g, "row sums"), 2);
  /* short rows: 16 lanes each, 4 rows to a work group of 64 */
  UOp *sr = reduce(ld(c, 1, DT_FLOAT32, shp(2, M, (int64_t)64)), OP_ADD, 1, ax1);
  g = gpu_graph(sink1(store(c, 0, DT_FLOAT32, shp(2, M, (int64_t)1), sr)), &plan, false);
  opt_plan_str(&plan, str, sizeof str);
  assert_string_equal(str, "GROUP(1,16) LOCAL(0,4)");
  assert_true(check_coalesced(g, "short rows") >= 2);
  /* column sums, 256 outputs: 32 neighbouring columns (the work group's
   * fastest index) on 8 lanes each, a warp reading 32 neighbours of a row */
  UOp *cs = reduce(ld(c, 1, DT_FLOAT32, shp(2, N * 8, M)), OP_ADD, 1, ax0);
  g = gpu_graph(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)1, M), cs)), &plan, false);
  opt_plan_str(&plan, str, sizeof str);
  assert_string_equal(str, "GROUP(0,8) LOCAL(1,32)");
  assert_true(check_coalesced(g, "column sums") >= 2);
  /* the same columns seen transposed, (M, N * 8) with M contiguous, reduced
   * along axis 1: the outputs' axis comes first, so grouped lanes would be
   * the fastest index and a warp would read 32 rows; the heuristic keeps an
   * invocation per output (coalesced), and the check catches the plan it
   * does not take */
  ShapeTracker *ct0 = shp(2, N * 8, M), *ct = st_permute(ct0, (const int[]){1, 0});
  st_free(ct0);
  UOp *cst = reduce(ld(c, 1, DT_FLOAT32, ct), OP_ADD, 1, ax1);
  UOp *cst_sink = sink1(store(c, 0, DT_FLOAT32, shp(2, M, (int64_t)1), cst));
  g = gpu_graph(cst_sink, &plan, false);
  opt_plan_str(&plan, str, sizeof str);
  assert_null(strstr(str, "GROUP"));
  assert_true(check_coalesced(g, "transposed column sums") >= 2);
  OptPlan lanes_first = {2, {{OPT_GROUP, 1, 8}, {OPT_LOCAL, 0, 32}}};
  assert_true(uncoalesced(gpu_graph(cst_sink, &lanes_first, true)) >= 1);
  /* exp2(x - rowmax): the row's value broadcast along the rows */
  ShapeTracker *m0 = shp(2, M, (int64_t)1), *mb = st_expand(m0, (const sint[]){M, N});
  st_free(m0);
  UOp *sm =
      uop_alu1(OP_EXP2, uop_sub(ld(c, 1, DT_FLOAT32, shp(2, M, N)), ld(c, 2, DT_FLOAT32, mb)));
  g = gpu_graph(sink1(store(c, 0, DT_FLOAT32, shp(2, M, N), sm)), &plan, false);
  assert_true(check_coalesced(g, "exp2(x - max)") >= 3);
  /* matmul (M, K) x (K, N), both row-major: B's rows in quads along the
   * lanes, A's element the same for a warp, C's stores in quads */
  const int64_t K = 64, full[3] = {M, N, K};
  g = gpu_graph(matmul_sink(c, DT_FLOAT32, M, N, K), &plan, false);
  opt_plan_str(&plan, str, sizeof str);
  /* a 64 x 64 tile of outputs per work group (16 x 16 invocations of 4 x 4),
   * K staged through work-group memory in blocks of 16: the global loads are
   * the fills (4 elements of A's and of B's 64 x 16 blocks per invocation,
   * neighbouring invocations on neighbouring elements), then C's quads */
  assert_string_equal(str, "UPCAST(1,4) UPCAST(0,4) LOCAL(1,16) LOCAL(0,16) STAGE(2,16)");
  assert_true(check_coalesced(g, "matmul") >= 4 + 4 + 4);
  /* the check catches what is not coalesced: upcast by 8 (lanes 32 bytes
   * apart), row sums with an invocation per row (rows apart), B packed in
   * panels of 16 columns (a jump every 4 lanes) */
  OptPlan up8 = {1, {{OPT_UPCAST, 1, 8}}};
  assert_true(uncoalesced(gpu_graph(sink1(store(c, 0, DT_FLOAT32, shp(2, M, N), mad)), &up8,
                                    true)) >= 8); /* each access, as 2 quads or 8 floats */
  OptPlan unroll = {1, {{OPT_UNROLL, 1, 8}}};
  assert_true(uncoalesced(gpu_graph(sink1(store(c, 0, DT_FLOAT32, shp(2, M, (int64_t)1), rs)),
                                    &unroll, true)) >= 1);
  ShapeTracker *p0 = shp(3, N / 16, K, (int64_t)16); /* (N/16, K, 16) read as (K, N) */
  ShapeTracker *p1 = st_permute(p0, (const int[]){1, 0, 2}),
               *p2 = st_reshape(p1, 2, (const sint[]){K, N});
  ShapeTracker *p3 = p2 ? st_reshape(p2, 3, (const sint[]){K, N, 1}) : NULL;
  ShapeTracker *p4 = p3 ? st_permute(p3, (const int[]){2, 1, 0}) : NULL;
  assert_non_null(p4);
  ShapeTracker *a1 = shp(3, M, (int64_t)1, K);
  UOp *mp = reduce(
      uop_mul(ld(c, 1, DT_FLOAT32, st_expand(a1, full)), ld(c, 2, DT_FLOAT32, st_expand(p4, full))),
      OP_ADD, 1, (const int64_t[]){2});
  st_free(p0), st_free(p1), st_free(p2), st_free(p3), st_free(p4), st_free(a1);
  OptPlan tile = {2, {{OPT_UPCAST, 1, 4}, {OPT_UPCAST, 0, 4}}};
  assert_true(uncoalesced(gpu_graph(sink1(store(c, 0, DT_FLOAT32, shp(3, M, N, (int64_t)1), mp)),
                                    &tile, true)) >= 1);
  /* on an emulated device (lavapipe) the row sums are not grouped */
  OptTarget emu = gpu;
  emu.emulated = true;
  KernelDesc *kd = calloc(1, sizeof *kd);
  UOp *norm;
  desc_of(sink1(store(c, 0, DT_FLOAT32, shp(2, M, (int64_t)1), rs)), kd, &norm);
  opt_heuristic(norm, kd, &emu, &plan);
  opt_plan_str(&plan, str, sizeof str);
  assert_null(strstr(str, "GROUP"));
  free(kd);
  uop_pool_drain(c, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_check_refuses),        cmocka_unit_test(test_heuristic_matmul),
      cmocka_unit_test(test_heuristic_heavy_body), cmocka_unit_test(test_golden_matmul),
#ifdef TVK_HAVE_VULKAN
      cmocka_unit_test(test_golden_group),         cmocka_unit_test(test_group_order),
      cmocka_unit_test(test_golden_subgroup),      cmocka_unit_test(test_staged_matmul),
#endif
      cmocka_unit_test(test_random_plans),         cmocka_unit_test(test_search),
      cmocka_unit_test(test_coalesced_on_gpu),
  };
  return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
