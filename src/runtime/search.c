/* The timed plan search and its choices on disk (search.h). */
#define _POSIX_C_SOURCE 200809L /* mkdir */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codegen/codegen.h"
#include "codegen/opt.h"
#include "ir/strbuf.h"
#include "runtime/cache.h"
#include "runtime/search.h"
#include "runtime/trace.h"

#define SEARCH_MAX_CANDIDATES 64 /* per round */
#define SEARCH_RUNS 3            /* timed launches per candidate; the fastest counts */
#define PLAN_MAGIC "tvk-plan 1\n"

/* ---------------------------------------------------------------- the choices file */

/* <dir>/choices/<device hash>/<kernel hash>.plan; the directories are made
 * when `make` is set. NULL when out of memory. */
static char *choice_path(const char *dir, const Device *d, const char *src, bool make) {
  CacheHash h;
  char dev[33], ker[33];
  cache_hash_init(&h);
  cache_hash_field(&h, d->ops->name((Device *)d));
  cache_hash_hex(&h, dev);
  cache_hash_init(&h);
  cache_hash_field(&h, src);
  cache_hash_hex(&h, ker);
  Str p = {0};
  str_printf(&p, "%s/choices", dir);
  if (make && !p.oom) mkdir(p.p, 0700);
  str_printf(&p, "/%s", dev);
  if (make && !p.oom) mkdir(p.p, 0700);
  str_printf(&p, "/%s.plan", ker);
  return str_take(&p);
}

static char *plan_text(const OptPlan *p) {
  Str t = {0};
  str_add(&t, PLAN_MAGIC);
  str_printf(&t, "%d\n", p->n);
  for (int i = 0; i < p->n; i++)
    str_printf(&t, "%d %d %" PRId32 "\n", p->step[i].kind, p->step[i].axis, p->step[i].amount);
  return str_take(&t);
}

/* Parses what plan_text wrote; false for anything else. */
static bool plan_parse(const char *s, size_t n, OptPlan *p) {
  size_t m = strlen(PLAN_MAGIC);
  if (n < m || memcmp(s, PLAN_MAGIC, m) != 0 || memchr(s, 0, n)) return false;
  const char *at = s + m;
  int count, used;
  if (sscanf(at, "%d\n%n", &count, &used) != 1 || count < 0 || count > OPT_MAX_STEPS) return false;
  at += used;
  p->n = count;
  for (int i = 0; i < count; i++) {
    int kind, axis;
    int32_t amount;
    if (sscanf(at, "%d %d %" SCNd32 "\n%n", &kind, &axis, &amount, &used) != 3) return false;
    if (kind < 0 || kind >= OPT_KINDS || axis < 0 || axis >= TVK_MAX_DIMS) return false;
    p->step[i] = (OptStep){(uint8_t)kind, (uint8_t)axis, amount};
    at += used;
  }
  return at == s + n;
}

/* ---------------------------------------------------------------- timing */

typedef struct {
  const SearchCtx *r;
  const ScheduleItem *it;
  const CodegenOpts *base;
  DevBuffer **scratch;
} Bench;

/* Milliseconds of the fastest of SEARCH_RUNS launches under plan p (after one
 * warm-up); -1 when the plan cannot be made, compiled or run. */
static double time_plan(const Bench *b, const OptPlan *p) {
  Device *d = b->r->dev;
  CodegenOpts o = *b->base;
  o.plan = p, o.noopt = false;
  KernelSource ks;
  if (codegen_kernel_opts(b->it->ast, NULL, &o, &ks) != TVK_OK) return -1;
  DevProgram *prog = NULL;
  bool hit;
  double best = -1;
  /* scalar values (the schedule's VALUEs) time as zeros: they change no loop */
  static const int32_t zeros[64];
  int nv = ks.nvars;
  if (nv <= 64 && d->ops->compile(d, ks.name, ks.src, &prog, &hit, NULL) == TVK_OK) {
    LaunchDims dims;
    memcpy(dims.global, ks.global, sizeof dims.global);
    memcpy(dims.local, ks.local, sizeof dims.local);
    bool ok =
        d->ops->launch(d, prog, b->scratch, b->it->nbufs, nv ? zeros : NULL, nv, &dims) == TVK_OK &&
        d->ops->sync(d) == TVK_OK;
    for (int k = 0; ok && k < SEARCH_RUNS; k++) {
      int64_t t0 = trace_now_ns();
      ok = d->ops->launch(d, prog, b->scratch, b->it->nbufs, nv ? zeros : NULL, nv, &dims) ==
               TVK_OK &&
           d->ops->sync(d) == TVK_OK;
      double t = 1e-6 * (double)(trace_now_ns() - t0);
      if (ok && (best < 0 || t < best)) best = t;
    }
    if (!ok) best = -1;
    d->ops->program_free(d, prog);
  }
  err_clear(&d->err); /* a candidate's failure is not the caller's */
  kernel_source_free(&ks);
  return best;
}

/* ---------------------------------------------------------------- candidates */

typedef struct {
  OptPlan plan;
  double ms;
} Cand;

/* Whether plan p has a step of `kind` (-1: any) on `axis` (-1: any). */
static bool has_step(const OptPlan *p, int kind, int axis) {
  for (int i = 0; i < p->n; i++)
    if ((kind < 0 || p->step[i].kind == kind) && (axis < 0 || p->step[i].axis == axis)) return true;
  return false;
}

/* The single steps that may extend `from`: of each kind the device takes
 * (opt_kind_info: where the search offers it, its amounts), on each axis of
 * the kind's class that the plan leaves free, by each power of two in the
 * kind's range that divides what the axis has left (GROUP excepted: its
 * lanes may run past the end), within a work group's invocations for GROUP
 * and LOCAL; and STAGE, whose amount is an axis's innermost loop. What does
 * not pass opt_check is skipped when timed. */
static int extensions(const KernelDesc *kd, const CodegenOpts *base, const OptPlan *from,
                      OptPlan *out, int cap) {
  int n = 0;
  bool grid = base->mode == CG_MODE_GRID;
  int mode = grid ? CG_MODE_GRID : CG_MODE_CORES;
  int most = base->max_local > 0 ? base->max_local : 64;
  int64_t up[TVK_MAX_DIMS], loc[TVK_MAX_DIMS];
  opt_upcasts(kd, from, up);
  opt_locals(from, loc);
  for (int k = 0; k < OPT_KINDS && from->n < OPT_MAX_STEPS; k++) {
    const OptKindInfo *ki = opt_kind_info(k);
    if (!(ki->search_modes >> mode & 1) || ki->search_lo < 2 || (ki->once && has_step(from, k, -1)))
      continue;
    for (int d = 0; d < kd->ndim; d++) {
      bool red = kd->reduce_axes >> d & 1;
      if (red != ki->reduced || has_step(from, ki->shares_axis ? k : -1, d)) continue;
      /* what the axis has left: an output axis's blocks after its upcasts (and
       * LOCAL's tiles, for CACHE), a reduced axis whole */
      int64_t room = red ? kd->full[d] : kd->full[d] / up[d] / (k == OPT_CACHE ? loc[d] : 1);
      bool threads = k == OPT_GROUP || k == OPT_LOCAL;
      for (int32_t a = ki->search_lo; a <= ki->search_hi && n < cap; a *= 2) {
        if ((threads && a > most) || (k != OPT_GROUP && room % a) || (k == OPT_CACHE && room == a))
          continue;
        out[n] = *from;
        out[n].step[out[n].n++] = (OptStep){(uint8_t)k, (uint8_t)d, a};
        n++;
      }
    }
  }
  /* with LOCAL, the kernel's one reduced axis staged through work-group
   * memory by its innermost loop (a float sum's first digit, else the axis);
   * opt_check refuses the one that does not apply */
  int64_t sblock;
  bool local = false;
  for (int d = 0; d < kd->ndim; d++) local |= loc[d] > 1;
  uint32_t red = kd->reduce_axes;
  if (grid && local && opt_stage(from, &sblock) < 0 && red && !(red & (red - 1)) &&
      from->n < OPT_MAX_STEPS) {
    int d = __builtin_ctz(red);
    int64_t b[2] = {cg_reduce_inner(kd->full[d], true), cg_reduce_inner(kd->full[d], false)};
    for (int i = 0; i < (b[0] == b[1] ? 1 : 2) && n < cap; i++) {
      if (b[i] < 2 || b[i] > INT32_MAX) continue;
      out[n] = *from;
      out[n].step[out[n].n++] = (OptStep){OPT_STAGE, (uint8_t)d, (int32_t)b[i]};
      n++;
    }
  }
  return n;
}

static int by_time(const void *pa, const void *pb) {
  const Cand *a = pa, *b = pb;
  if ((a->ms < 0) != (b->ms < 0)) return a->ms < 0 ? 1 : -1;
  return a->ms < b->ms ? -1 : a->ms > b->ms;
}

static void time_all(const Bench *b, Cand *c, int n) {
  for (int i = 0; i < n; i++) c[i].ms = time_plan(b, &c[i].plan);
  qsort(c, (size_t)n, sizeof *c, by_time);
}

/* The search proper: two rounds, beam width r->beam. */
static OptPlan run_search(const Bench *b, const KernelDesc *kd, const OptPlan *heuristic) {
  Cand *c = malloc((size_t)SEARCH_MAX_CANDIDATES * sizeof *c);
  OptPlan *ext = malloc((size_t)SEARCH_MAX_CANDIDATES * sizeof *ext);
  OptPlan best = *heuristic;
  if (!c || !ext) goto done;
  int n = 0;
  c[n++].plan = (OptPlan){0};
  if (heuristic->n) c[n++].plan = *heuristic;
  int ne = extensions(kd, b->base, &(OptPlan){0}, ext, SEARCH_MAX_CANDIDATES - n);
  for (int i = 0; i < ne; i++) c[n++].plan = ext[i];
  time_all(b, c, n);
  if (c[0].ms < 0) goto done; /* nothing ran: keep the heuristic's */
  Cand winner = c[0];
  int keep = b->r->beam < n ? b->r->beam : n;
  OptPlan kept[16];
  if (keep > 16) keep = 16;
  int nk = 0;
  for (int i = 0; i < keep; i++)
    if (c[i].ms >= 0 && c[i].plan.n > 0) kept[nk++] = c[i].plan;
  n = 0;
  for (int k = 0; k < nk && n < SEARCH_MAX_CANDIDATES; k++) {
    ne = extensions(kd, b->base, &kept[k], ext, SEARCH_MAX_CANDIDATES - n);
    for (int i = 0; i < ne; i++) c[n++].plan = ext[i];
  }
  time_all(b, c, n);
  if (n > 0 && c[0].ms >= 0 && c[0].ms < winner.ms) winner = c[0];
  best = winner.plan;
done:
  free(c);
  free(ext);
  return best;
}

/* ---------------------------------------------------------------- search_plan */

tvk_status search_plan(const SearchCtx *r, const Schedule *s, int i, const CodegenOpts *base,
                       OptPlan *plan) {
  const ScheduleItem *it = &s->items[i];
  Device *d = r->dev;
  UCtx *u = it->ast->ctx;
  size_t mark = uop_pool_mark(u);
  plan->n = 0;
  /* the key: the unoptimised source */
  CodegenOpts plain = *base;
  plain.plan = NULL, plain.noopt = true;
  KernelSource ks;
  tvk_status st = codegen_kernel_opts(it->ast, NULL, &plain, &ks);
  if (st != TVK_OK) return err_set(r->err, st, "search: %s", ks.err.msg);
  KernelDesc *kd = calloc(1, sizeof *kd);
  char *dir = NULL, *path = NULL;
  bool ro = false;
  Error cerr = {0};
  UOp *norm;
  if (!kd || kernel_verify(it->ast, &norm, kd, &cerr) != TVK_OK) {
    st = kd ? err_set(r->err, cerr.status, "search: %s", cerr.msg)
            : err_set(r->err, TVK_ERR_OUT_OF_MEMORY, "search: out of memory");
    goto out;
  }
  /* A kernel over symbolic sizes is not timed (its buffers' sizes and its
   * launch values depend on values the search does not have): the
   * heuristic plans it. */
  if (kd->sym_axes || ks.nvars > it->nvals) {
    plan->n = -1;
    goto out;
  }
  if (!r->no_disk && cache_dir_open(r->cache_dir, false, &dir, &ro, &cerr) == TVK_OK)
    path = choice_path(dir, d, ks.src, !ro);
  void *data = NULL;
  size_t n = 0;
  int rc = path ? cache_file_read_sealed(path, &data, &n) : ENOENT;
  OptTarget target;
  opt_target(base, &target);
  if (rc == 0) {
    OptPlan found;
    Error chk = {0};
    if (plan_parse(data, n, &found) && opt_check(norm, kd, &found, &target, &chk) == TVK_OK) {
      *plan = found;
      r->stats->plans_found++;
      free(data);
      goto out;
    }
    if (r->debug >= 1)
      log_msg(r->log, TVK_LOG_WARN,
              "tvk search: ignoring the unreadable plan choice %s; searching again", path);
  } else if (rc != ENOENT && r->debug >= 1) {
    log_msg(r->log, TVK_LOG_WARN,
            "tvk search: ignoring the damaged plan choice %s; searching again", path);
  }
  free(data);
  /* scratch buffers of the kernel's sizes, zeroed */
  DevBuffer **scratch = calloc((size_t)it->nbufs, sizeof *scratch);
  bool ok = scratch != NULL;
  for (int k = 0; ok && k < it->nbufs; k++) {
    const SchedBuf *sb = &s->bufs[it->bufs[k]];
    size_t bytes = (size_t)(sb->numel > 0 ? sb->numel : 1) * dt_scalar_size(sb->dtype);
    void *zero = calloc(1, bytes);
    ok = zero && d->ops->alloc(d, bytes, &scratch[k]) == TVK_OK &&
         d->ops->copy_in(d, scratch[k], 0, zero, bytes) == TVK_OK;
    free(zero);
  }
  OptPlan heuristic = {0};
  if (ok) {
    CodegenOpts h = *base;
    h.plan = NULL, h.noopt = false;
    KernelSource hk;
    if (codegen_kernel_opts(it->ast, NULL, &h, &hk) == TVK_OK) heuristic = hk.plan;
    kernel_source_free(&hk);
    Bench b = {r, it, base, scratch};
    *plan = run_search(&b, kd, &heuristic);
    r->stats->plans_searched++;
    if (r->debug >= 2) {
      char str[160];
      opt_plan_str(plan, str, sizeof str);
      log_msg(r->log, TVK_LOG_INFO, "tvk search: %s: %s", ks.name, *str ? str : "(none)");
    }
    char *text = plan_text(plan);
    if (text && path && !ro) cache_file_write_sealed(path, text, strlen(text), 0600);
    free(text);
  } else {
    *plan = heuristic; /* could not time anything: no plan rather than a failure */
  }
  err_clear(&d->err);
  for (int k = 0; scratch && k < it->nbufs; k++)
    if (scratch[k]) d->ops->free(d, scratch[k]);
  free(scratch);
out:
  free(path);
  free(dir);
  free(kd);
  kernel_source_free(&ks);
  uop_pool_drain(u, mark);
  return st;
}
