/* Kernel times by name, for tvk_profile_summary: the device reports each
 * launch's time (Device.on_time) and this adds it to the context's row of
 * that kernel. */
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/strbuf.h"
#include "ir/vec.h"

struct ProfRow {
  char *name;
  uint64_t calls;
  double total_ms;
};

void profile_on_time(void *user, const char *kernel, double ms) {
  tvk_ctx *ctx = user;
  /* a linear search: a program has tens of distinct kernels, and this runs
   * only when timing */
  for (size_t i = 0; i < ctx->nprof; i++)
    if (!strcmp(ctx->prof[i].name, kernel)) {
      ctx->prof[i].calls++, ctx->prof[i].total_ms += ms;
      return;
    }
  char *name = strdup(kernel);
  if (!name || !VEC_RESERVE(ctx->prof, ctx->capprof, ctx->nprof + 1)) {
    free(name); /* out of memory: this launch goes uncounted */
    return;
  }
  ctx->prof[ctx->nprof++] = (struct ProfRow){name, 1, ms};
}

static int by_total(const void *a, const void *b) {
  const struct ProfRow *x = a, *y = b;
  return (x->total_ms < y->total_ms) - (x->total_ms > y->total_ms);
}

const char *tvk_profile_summary(tvk_ctx *ctx) {
  if (!ctx) return "";
  (void)ctx->dev->ops->sync(ctx->dev); /* completes the batches whose timestamps are pending */
  free(ctx->prof_text);
  ctx->prof_text = NULL;
  if (ctx->nprof == 0) return "";
  qsort(ctx->prof, ctx->nprof, sizeof *ctx->prof, by_total);
  double total = 0;
  uint64_t calls = 0;
  for (size_t i = 0; i < ctx->nprof; i++)
    total += ctx->prof[i].total_ms, calls += ctx->prof[i].calls;
  Str t = {0};
  str_printf(&t, "tvk profile: %zu kernel%s, %llu launch%s, %.3f ms on the device\n", ctx->nprof,
             ctx->nprof == 1 ? "" : "s", (unsigned long long)calls, calls == 1 ? "" : "es", total);
  str_printf(&t, "  %-30s %7s %11s %11s %7s\n", "kernel", "calls", "total ms", "mean ms", "share");
  for (size_t i = 0; i < ctx->nprof; i++) {
    const struct ProfRow *r = &ctx->prof[i];
    str_printf(&t, "  %-30s %7llu %11.3f %11.3f %6.1f%%\n", r->name, (unsigned long long)r->calls,
               r->total_ms, r->total_ms / (double)r->calls,
               total > 0 ? 100.0 * r->total_ms / total : 0.0);
  }
  ctx->prof_text = str_take(&t);
  return ctx->prof_text ? ctx->prof_text : "";
}

void tvk_profile_reset(tvk_ctx *ctx) {
  if (!ctx) return;
  for (size_t i = 0; i < ctx->nprof; i++) free(ctx->prof[i].name);
  ctx->nprof = 0;
}

void profile_free(tvk_ctx *ctx) {
  tvk_profile_reset(ctx);
  free(ctx->prof);
  free(ctx->prof_text);
  ctx->prof = NULL;
  ctx->prof_text = NULL;
  ctx->capprof = 0;
}
