/* The codegen pipeline for one kernel (kernel.h): verify, lower, simplify,
 * legalize, linearize, render. Every UOp made on the way lives in an
 * autorelease pool drained before returning. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/kernel.h"
#include "codegen/opt.h"
#include "codegen/render.h"
#include "ir/sint.h"
#include "ir/symbolic.h"

static bool is_identifier(const char *s) {
  if (!s || !*s || strlen(s) > 64 || (*s >= '0' && *s <= '9')) return false;
  for (; *s; s++) {
    char c = *s;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return true;
}

static char *dup(const char *s) {
  size_t n = strlen(s) + 1;
  char *r = malloc(n);
  if (r) memcpy(r, s, n);
  return r;
}

/* Copies what the caller gets to keep into *out. */
static tvk_status describe(const KernelDesc *kd, const char *name, KernelSource *out, Error *err) {
  out->name = dup(name);
  out->nbufs = kd->nbufs;
  out->bufs = calloc(kd->nbufs ? (size_t)kd->nbufs : 1, sizeof *out->bufs);
  out->nvars = kd->nvars;
  out->vars = calloc(kd->nvars ? (size_t)kd->nvars : 1, sizeof *out->vars);
  if (!out->name || !out->bufs || !out->vars)
    return err_first(err, TVK_ERR_OUT_OF_MEMORY, "codegen: out of memory");
  memcpy(out->bufs, kd->bufs, (size_t)kd->nbufs * sizeof *out->bufs);
  for (int i = 0; i < kd->nvars; i++) {
    const Arg *a = &kd->vars[i]->arg;
    out->vars[i] = (KernelVar){dup(a->var.name), a->var.lo, a->var.hi};
    if (!out->vars[i].name) return err_first(err, TVK_ERR_OUT_OF_MEMORY, "codegen: out of memory");
  }
  out->ndim = kd->ndim;
  memcpy(out->full_shape, kd->full, sizeof kd->full);
  memcpy(out->out_shape, kd->out, sizeof kd->out);
  return TVK_OK;
}

/* KernelSource.rows and the buffers' bands, for a kernel split by rows
 * alone in blocks that divide it, of a size that is no symbolic one. A view
 * over a variable (an offset, a stride) gives its buffer no band
 * (bands.c), so the kernel's variables need no rule here. */
static void describe_rows(UOp *norm, const KernelDesc *kd, const CgLaunch *launch,
                          KernelSource *out) {
  int a = launch->row_axis;
  if (a < 0 || kd->sym_axes || launch->groups || launch->global[0] <= 0 ||
      kd->full[a] % launch->global[0] != 0)
    return;
  int64_t band[CG_MAX_BUFS];
  kernel_bands(norm, kd, a, band);
  out->rows = kd->full[a];
  for (int b = 0; b < kd->nbufs; b++) out->bufs[b].band = band[b];
}

/* The plan of the kernel (CodegenOpts.plan / noopt / the heuristic), checked. */
static tvk_status choose_plan(UOp *norm, const KernelDesc *kd, const CodegenOpts *opts,
                              OptPlan *plan, Error *err) {
  OptTarget t;
  opt_target(opts, &t);
  plan->n = 0;
  if (opts && opts->plan)
    *plan = *opts->plan;
  else if (opts && !opts->noopt)
    opt_heuristic(norm, kd, &t, plan);
  return opt_check(norm, kd, plan, &t, err);
}

/* Whether a reduce of products accumulates through fma (legalize.c): where
 * the device has a fast one, except in the lanes of an unrolled reduce on
 * the CPU that no register tile stores: gcc 12 vectorises sixteen lanes of
 * acc + a * b summed at the end, but not sixteen fma chains (SLP finds no
 * reduction in them), and the scalar chains ran 5-6x slower (sum(exp(x) * x)
 * over 2^24 floats, Zen 5, 2 threads: 112 ms with fma, 4.2 with mul and add). */
static bool fuse_mulacc(const CodegenOpts *opts, const OptPlan *plan) {
  if (!opts || !opts->fma) return false;
  if (opts->mode == CG_MODE_GRID) return true;
  int64_t lanes;
  if (opt_unroll(plan, &lanes) < 0) return true;
  for (int k = 0; k < plan->n; k++)
    if (plan->step[k].kind == OPT_UPCAST) return true;
  return false;
}

/* The passes from a verified AST to the linear program; *launch is the grid. */
static tvk_status passes(UOp *norm, const KernelDesc *kd, const CodegenOpts *opts,
                         const OptPlan *plan, const Lang *lang, LinearProgram *lp, CgLaunch *launch,
                         Error *err) {
  UOp *low, *legal, *vec;
  *launch = (CgLaunch){{1, 1, 1}, {1, 1, 1}, 0, -1};
  if (opts && opts->mode == CG_MODE_GRID) {
    int local = opts->local_size > 0 ? opts->local_size : 64;
    if (lower_kernel_grid(norm, kd, plan, local, opts->subgroup, &low, launch, err) != TVK_OK)
      return err->status;
  } else if (lower_kernel(norm, kd, plan, &low, launch, err) != TVK_OK) {
    return err->status;
  }
  UOp *simple = uop_simplify(low);
  if (!simple)
    return err_first(err, TVK_ERR_OUT_OF_MEMORY, "codegen: out of memory in uop_simplify");
  /* not on an emulated device: lavapipe's matmul 2048 ran 1.5-2x slower
   * unrolled (its registers are the CPU's; the GPU's are per invocation) */
  UOp *unrolled = simple;
  if (!(opts && opts->emulated) && unroll_for_quads(simple, lang, kd, &unrolled, err) != TVK_OK)
    return err->status;
  if (legalize_dtypes(unrolled, lang, fuse_mulacc(opts, plan), &legal, err) != TVK_OK)
    return err->status;
  if (vectorize_memory(legal, lang, kd, &vec, err) != TVK_OK) return err->status;
  return linearize(vec, lp, err);
}

tvk_status codegen_kernel_opts(UOp *ast, const char *name, const CodegenOpts *opts,
                               KernelSource *out) {
  memset(out, 0, sizeof *out);
  Error err = {0};
  const Lang *lang = opts && opts->lang ? opts->lang : &lang_c;
  if (!ast) return err_set(&out->err, TVK_ERR_INVALID_ARG, "codegen: the kernel AST is NULL");
  if (name && !is_identifier(name))
    return err_set(&out->err, TVK_ERR_INVALID_ARG,
                   "codegen: kernel name '%.64s' is not an identifier of up to 64 characters",
                   name);
  KernelDesc *kd = calloc(1, sizeof *kd); /* large: not on the stack */
  if (!kd) return err_set(&out->err, TVK_ERR_OUT_OF_MEMORY, "codegen: out of memory");
  UCtx *ctx = ast->ctx;
  size_t mark = uop_pool_mark(ctx);
  LinearProgram lp = {0};
  CgLaunch launch;
  UOp *norm;
  OptPlan plan = {0};
  char auto_name[4 + 42 * TVK_MAX_DIMS]; /* "r" and "_<int64>u<int64>" per dim: never cut short */
  if (kernel_verify(ast, &norm, kd, &err) == TVK_OK &&
      choose_plan(norm, kd, opts, &plan, &err) == TVK_OK &&
      passes(norm, kd, opts, &plan, lang, &lp, &launch, &err) == TVK_OK) {
    if (!name) opt_kernel_name(kd, &plan, auto_name, sizeof auto_name), name = auto_name;
    out->plan = plan;
    RenderInfo info = {name, kd->nbufs, kd->bufs, kd->nvars, kd->vars,
                       {0},  false,     false,    false,     false};
    info.open_loops = kd->sym_axes != 0;
    info.fma = opts && opts->fma;
    for (int k = 0; k < plan.n && kd->reduce_axes; k++)
      if (plan.step[k].kind == OPT_UPCAST) info.register_tile = true;
    int64_t ulanes;
    info.unrolled = opt_unroll(&plan, &ulanes) >= 0;
    memcpy(info.local, launch.local, sizeof info.local);
    memcpy(out->global, launch.global, sizeof out->global);
    out->groups = launch.groups;
    memcpy(out->local, launch.local, sizeof out->local);
    if (!kernel_estimate(norm, kd, &out->flops, &out->bytes))
      err_first(&err, TVK_ERR_OUT_OF_MEMORY, "codegen: out of memory");
    if (err.status == TVK_OK && describe(kd, name, out, &err) == TVK_OK)
      describe_rows(norm, kd, &launch, out);
    if (err.status == TVK_OK && render_program(&lp, lang, &info, &out->src, &err) == TVK_OK &&
        opts && opts->want_uops && !(out->uops = linear_dump(&lp)))
      err_first(&err, TVK_ERR_OUT_OF_MEMORY, "codegen: out of memory");
  }
  linear_free(&lp);
  uop_pool_drain(ctx, mark);
  free(kd);
  if (err.status != TVK_OK) {
    kernel_source_free(out);
    out->err = err;
  }
  return err.status;
}

tvk_status codegen_kernel(UOp *ast, const char *name, KernelSource *out) {
  return codegen_kernel_opts(ast, name, NULL, out);
}

void kernel_source_free(KernelSource *ks) {
  if (!ks) return;
  free(ks->name);
  free(ks->src);
  free(ks->uops);
  for (int i = 0; ks->vars && i < ks->nvars; i++) free(ks->vars[i].name);
  free(ks->vars);
  free(ks->bufs);
  memset(ks, 0, sizeof *ks);
}

int64_t kernel_groups(const KernelSource *ks, const int32_t *vals) {
  if (!ks->groups) return ks->global[0];
  const char *names[CG_MAX_VARS];
  int64_t v[CG_MAX_VARS];
  int n = ks->nvars < CG_MAX_VARS ? ks->nvars : CG_MAX_VARS;
  for (int i = 0; i < n; i++) names[i] = ks->vars[i].name, v[i] = vals[i];
  sint g = sint_eval_named(ks->groups, n, names, v);
  return g == SINT_NONE || g < 0 ? 0 : g > ks->global[0] ? ks->global[0] : g;
}
