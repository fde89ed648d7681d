/* Kernel times by program, for tvk_profile_summary / tvk_profile_entries and
 * the trace: the device reports each launch's time (Device.on_time) and this
 * adds it to the context's row of that program, whose FLOPs and bytes per
 * launch the program cache knows (runtime/run.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/strbuf.h"
#include "ir/vec.h"
#include "runtime/run.h"
#include "runtime/trace.h"

struct ProfRow {
  const DevProgram *prog;
  tvk_profile_entry e; /* e.kernel: the row's own copy of the name */
};

static double rate(double amount, double ms) { return ms > 0 ? amount / (ms * 1e6) : 0; }

/* One launch's span: its cost, and the rates it reached. */
static void trace_launch(tvk_ctx *ctx, int device, const LaunchTime *t, const ProgCost *c) {
  if (!t->start_ns && !t->end_ns) return;
  char plan[200], args[400];
  snprintf(args, sizeof args,
           "\"ms\": %.6f, \"flops\": %.0f, \"bytes\": %.0f, \"GFLOP/s\": %.3f, \"GB/s\": %.3f, "
           "\"plan\": \"%s\"",
           t->ms, c->flops, c->bytes, rate(c->flops, t->ms), rate(c->bytes, t->ms),
           trace_json_str(c->plan, plan, sizeof plan));
  trace_device_span(ctx->trace, device, "kernel", t->kernel, t->start_ns, t->end_ns, args);
}

void profile_on_time(void *user, const LaunchTime *t) {
  tvk_ctx *ctx = user;
  ProgCost cost;
  /* a program the cache does not hold is a BEAM candidate being timed: not
   * the application's work */
  int device = -1; /* whose program it is: the device's track in the trace */
  for (int i = 0; i < ctx->ndevs && device < 0; i++)
    if (progcache_cost(ctx->programs[i], t->prog, &cost)) device = i;
  if (device < 0) return;
  if (ctx->trace) trace_launch(ctx, device, t, &cost);
  /* a linear search: a program has tens of distinct kernels, and this runs
   * only when timing */
  struct ProfRow *row = NULL;
  for (size_t i = 0; i < ctx->nprof && !row; i++)
    if (ctx->prof[i].prog == t->prog) row = &ctx->prof[i];
  if (!row) {
    char *name = strdup(t->kernel);
    if (!name || !VEC_RESERVE(ctx->prof, ctx->capprof, ctx->nprof + 1)) {
      free(name); /* out of memory: this launch goes uncounted */
      return;
    }
    row = &ctx->prof[ctx->nprof++];
    *row = (struct ProfRow){t->prog, {.kernel = name, .flops = cost.flops, .bytes = cost.bytes}};
  }
  row->e.calls++;
  row->e.total_ms += t->ms;
}

static int by_total(const void *a, const void *b) {
  const struct ProfRow *x = a, *y = b;
  return (x->e.total_ms < y->e.total_ms) - (x->e.total_ms > y->e.total_ms);
}

/* Completes the pending launches' times, sorts the rows and fills their
 * derived fields and ctx->prof_entries. */
static void collect(tvk_ctx *ctx) {
  (void)ctx_sync_devices(ctx, NULL); /* completes the batches whose timestamps are pending */
  if (ctx->nprof) qsort(ctx->prof, ctx->nprof, sizeof *ctx->prof, by_total);
  double total = 0;
  for (size_t i = 0; i < ctx->nprof; i++) total += ctx->prof[i].e.total_ms;
  free(ctx->prof_entries);
  ctx->prof_entries = malloc((ctx->nprof ? ctx->nprof : 1) * sizeof *ctx->prof_entries);
  for (size_t i = 0; i < ctx->nprof; i++) {
    tvk_profile_entry *e = &ctx->prof[i].e;
    e->mean_ms = e->calls ? e->total_ms / (double)e->calls : 0;
    e->gflops = rate(e->flops * (double)e->calls, e->total_ms);
    e->gbytes = rate(e->bytes * (double)e->calls, e->total_ms);
    e->share = total > 0 ? e->total_ms / total : 0;
    if (ctx->prof_entries) ctx->prof_entries[i] = *e;
  }
}

int tvk_profile_entries(tvk_ctx *ctx, const tvk_profile_entry **out) {
  if (out) *out = NULL;
  if (!ctx || !out) return 0;
  collect(ctx);
  *out = ctx->prof_entries;
  return ctx->prof_entries ? (int)ctx->nprof : 0;
}

const char *tvk_profile_summary(tvk_ctx *ctx) {
  if (!ctx) return "";
  collect(ctx);
  free(ctx->prof_text);
  ctx->prof_text = NULL;
  if (ctx->nprof == 0) return "";
  double total = 0;
  uint64_t calls = 0;
  for (size_t i = 0; i < ctx->nprof; i++)
    total += ctx->prof[i].e.total_ms, calls += ctx->prof[i].e.calls;
  Str t = {0};
  str_printf(&t, "tvk profile: %zu kernel%s, %llu launch%s, %.3f ms on the device\n", ctx->nprof,
             ctx->nprof == 1 ? "" : "s", (unsigned long long)calls, calls == 1 ? "" : "es", total);
  str_printf(&t, "  %-30s %7s %11s %11s %9s %8s %7s\n", "kernel", "calls", "total ms", "mean ms",
             "GFLOP/s", "GB/s", "share");
  for (size_t i = 0; i < ctx->nprof; i++) {
    const tvk_profile_entry *e = &ctx->prof[i].e;
    str_printf(&t, "  %-30s %7llu %11.3f %11.3f %9.2f %8.2f %6.1f%%\n", e->kernel,
               (unsigned long long)e->calls, e->total_ms, e->mean_ms, e->gflops, e->gbytes,
               100.0 * e->share);
  }
  ctx->prof_text = str_take(&t);
  return ctx->prof_text ? ctx->prof_text : "";
}

void tvk_profile_reset(tvk_ctx *ctx) {
  if (!ctx) return;
  for (size_t i = 0; i < ctx->nprof; i++) free((char *)ctx->prof[i].e.kernel);
  ctx->nprof = 0;
  free(ctx->prof_entries); /* they point at the names */
  ctx->prof_entries = NULL;
}

void profile_free(tvk_ctx *ctx) {
  tvk_profile_reset(ctx);
  free(ctx->prof);
  free(ctx->prof_text);
  ctx->prof = NULL;
  ctx->prof_text = NULL;
  ctx->capprof = 0;
}
