/* Running schedules: codegen, an in-memory cache of compiled programs keyed by
 * source text (the device adds its on-disk cache below it), launches, stats,
 * and the TVK_DEBUG output. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codegen/kernel.h"
#include "codegen/opt.h"
#include "ir/hash.h"
#include "ir/ptrmap.h"
#include "ir/uop.h"
#include "ir/vec.h"
#include "runtime/cache.h"
#include "runtime/chain.h"
#include "runtime/kernel_store.h"
#include "runtime/run.h"
#include "runtime/search.h"
#include "runtime/trace.h"

/* ---------------------------------------------------------------- program cache */

typedef struct {
  char *src; /* NULL: empty slot */
  uint64_t hash;
  DevProgram *prog;
} ProgEntry;

/* A kernel AST already prepared: its generated source (with its plan and
 * launch) and program. ASTs are hash-consed, so the same kernel in a later
 * schedule is the same UOp; the entry holds a reference, so the pointer
 * cannot be reused for another AST. This skips codegen (and a plan search)
 * for every kernel seen before, which for a small kernel costs more than
 * running it. */
typedef struct {
  UOp *ast;
  KernelSource ks;
  DevProgram *prog;
} KernEntry;

struct ProgCache {
  /* the kernel store's directory (kernel_store.h), found at the first kernel;
   * NULL: none (no disk cache, or no usable directory) */
  char *store_dir;
  bool store_ro, store_tried;
  ProgEntry *e;
  size_t cap, n;
  KernEntry **kern; /* malloc'd entries, so a Prepared may point into them */
  size_t nkern, capkern;
  PtrMap by_ast;  /* AST -> index into kern */
  ProgCost *cost; /* what each program's launch does, for profiles and traces */
  size_t ncost, capcost;
  PtrMap cost_of; /* DevProgram -> index into cost */
};

static ProgEntry *cache_slot(ProgEntry *e, size_t cap, uint64_t h, const char *src) {
  size_t i = (size_t)h & (cap - 1);
  while (e[i].src && (e[i].hash != h || strcmp(e[i].src, src) != 0)) i = (i + 1) & (cap - 1);
  return &e[i];
}

static bool cache_grow(ProgCache *c) {
  size_t cap = c->cap ? c->cap * 2 : 64;
  ProgEntry *e = calloc(cap, sizeof *e);
  if (!e) return false;
  for (size_t i = 0; i < c->cap; i++)
    if (c->e[i].src) *cache_slot(e, cap, c->e[i].hash, c->e[i].src) = c->e[i];
  free(c->e);
  c->e = e, c->cap = cap;
  return true;
}

static KernEntry *kern_find(const ProgCache *c, const UOp *ast) {
  int64_t i = c ? ptrmap_get(&c->by_ast, ast) : -1;
  return i >= 0 ? c->kern[i] : NULL;
}

/* Moves ks into a new entry for ast and returns it; NULL (ks left to the
 * caller) when out of memory. */
static KernEntry *kern_add(ProgCache *c, UOp *ast, KernelSource *ks, DevProgram *prog) {
  KernEntry *e = malloc(sizeof *e);
  if (!e || !VEC_RESERVE(c->kern, c->capkern, c->nkern + 1) ||
      !ptrmap_put(&c->by_ast, ast, (int64_t)c->nkern)) {
    free(e);
    return NULL;
  }
  *e = (KernEntry){uop_retain(ast), *ks, prog};
  memset(ks, 0, sizeof *ks);
  c->kern[c->nkern++] = e;
  return e;
}

void progcache_forget_kernels(ProgCache *c) {
  if (!c) return;
  for (size_t i = 0; i < c->nkern; i++) {
    uop_release(c->kern[i]->ast);
    kernel_source_free(&c->kern[i]->ks);
    free(c->kern[i]);
  }
  c->nkern = 0;
  ptrmap_clear(&c->by_ast);
}

bool progcache_cost(const ProgCache *c, const DevProgram *prog, ProgCost *out) {
  int64_t i = c ? ptrmap_get(&c->cost_of, prog) : -1;
  if (i < 0) return false;
  *out = c->cost[i];
  return true;
}

void progcache_free(ProgCache *c, Device *dev) {
  if (!c) return;
  progcache_forget_kernels(c);
  free(c->kern);
  ptrmap_free(&c->by_ast);
  free(c->cost);
  ptrmap_free(&c->cost_of);
  for (size_t i = 0; i < c->cap; i++) {
    if (!c->e[i].src) continue;
    dev->ops->program_free(dev, c->e[i].prog);
    free(c->e[i].src);
  }
  free(c->e);
  free(c->store_dir);
  free(c);
}

/* The program of ks if the cache has it (a hit counted), else NULL. */
static DevProgram *cached_program(const Runner *r, const KernelSource *ks) {
  ProgCache *c = *r->programs;
  if (!c || !c->cap) return NULL;
  ProgEntry *e = cache_slot(c->e, c->cap, hash_fnv1a(ks->src, strlen(ks->src)), ks->src);
  if (e->src) r->stats->cache_hits++;
  return e->src ? e->prog : NULL;
}

/* Adds prog as the program of ks's source; on failure (out of memory) frees
 * it and says so in r->err. */
static tvk_status cache_program(const Runner *r, const KernelSource *ks, DevProgram *prog) {
  ProgCache *c = *r->programs;
  char *key = NULL;
  if (c && ((c->n + 1) * 2 <= c->cap || cache_grow(c))) key = strdup(ks->src);
  if (!key) {
    r->dev->ops->program_free(r->dev, prog);
    return err_set(r->err, TVK_ERR_OUT_OF_MEMORY, "kernel %s: out of memory for the program cache",
                   ks->name);
  }
  uint64_t h = hash_fnv1a(ks->src, strlen(ks->src));
  *cache_slot(c->e, c->cap, h, ks->src) = (ProgEntry){key, h, prog};
  c->n++;
  /* out of memory here only leaves the program's cost unknown (0) */
  if (VEC_RESERVE(c->cost, c->capcost, c->ncost + 1) &&
      ptrmap_put(&c->cost_of, prog, (int64_t)c->ncost)) {
    ProgCost *pc = &c->cost[c->ncost++];
    *pc = (ProgCost){.flops = ks->flops, .bytes = ks->bytes};
    opt_plan_str(&ks->plan, pc->plan, sizeof pc->plan);
  }
  return TVK_OK;
}

/* One device compile of a schedule's batch, run on any thread. */
typedef struct {
  const KernelSource *ks;
  int first; /* the first item of the schedule that needs it */
  DevProgram *prog;
  bool hit;
  tvk_status st;
  Error err;
} CompileJob;

typedef struct {
  Device *dev;
  Trace *trace;
  CompileJob *jobs;
  int n;
  atomic_int next, done;
  /* progress: reported by the calling thread only, so that messages come
   * from the thread that called into tvk */
  bool report;        /* progress messages wanted (Runner.progress) */
  const LogSink *log; /* where they go (NULL: stderr) */
  double t0, last;    /* ms: the batch's start, the last message */
} CompileBatch;

/* Batches reported as they go: at least this many kernels, or running this
 * long; then a message at most every PROGRESS_EVERY_MS. */
enum { PROGRESS_MIN_KERNELS = 16, PROGRESS_AFTER_MS = 500, PROGRESS_EVERY_MS = 250 };

static void report_progress(CompileBatch *b, bool final) {
  if (!b->report) return;
  double t = 1e-6 * (double)trace_now_ns();
  bool started = b->last > 0;
  if (!started && b->n < PROGRESS_MIN_KERNELS && t - b->t0 < PROGRESS_AFTER_MS) return;
  if (!final && started && t - b->last < PROGRESS_EVERY_MS) return;
  if (final && !started) return;
  int done = atomic_load(&b->done);
  if (final)
    log_msg(b->log, TVK_LOG_INFO, "tvk: compiled %d kernel%s in %.2f s", b->n, b->n == 1 ? "" : "s",
            (t - b->t0) / 1e3);
  else
    log_msg(b->log, TVK_LOG_INFO, "tvk: compiling %d/%d kernels (%.1f s)", done, b->n,
            (t - b->t0) / 1e3);
  b->last = t;
}

static void run_jobs(CompileBatch *b, bool reporter) {
  for (int i; (i = atomic_fetch_add(&b->next, 1)) < b->n;) {
    CompileJob *j = &b->jobs[i];
    err_clear(&j->err);
    int64_t t0 = b->trace ? trace_now_ns() : 0;
    j->st = b->dev->ops->compile(b->dev, j->ks->name, j->ks->src, &j->prog, &j->hit, &j->err);
    if (b->trace)
      trace_span(b->trace, false, "compile", j->ks->name, t0, trace_now_ns(),
                 j->st != TVK_OK ? "\"failed\": true"
                 : j->hit        ? "\"cache_hit\": true"
                                 : "\"cache_hit\": false");
    atomic_fetch_add(&b->done, 1);
    if (reporter) report_progress(b, false);
  }
}

static void *compile_jobs(void *arg) {
  run_jobs(arg, false);
  return NULL;
}

/* Most threads one batch of compiles uses: compiles are host work (cc
 * processes, shaderc, pipeline creation), so one per host core. */
enum { RUN_MAX_COMPILE_THREADS = 8 };

/* Compiles the jobs, on as many threads as there are host cores and jobs
 * (the calling thread is one of them). A thread that cannot be started only
 * leaves its share to the others. */
static void compile_batch(const Runner *r, CompileJob *jobs, int n) {
  CompileBatch b = {
      .dev = r->dev, .trace = r->trace, .jobs = jobs, .n = n, .report = r->progress, .log = r->log};
  atomic_init(&b.next, 0);
  atomic_init(&b.done, 0);
  b.t0 = 1e-6 * (double)trace_now_ns();
  /* a large batch says so before it starts: the other threads may finish
   * every job before this one looks again, and the final message is only
   * said of a batch reported as it went */
  report_progress(&b, false);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int extra = (int)(cores < n ? cores : n) - 1;
  if (extra > RUN_MAX_COMPILE_THREADS - 1) extra = RUN_MAX_COMPILE_THREADS - 1;
  pthread_t th[RUN_MAX_COMPILE_THREADS];
  int started = 0;
  while (started < extra && pthread_create(&th[started], NULL, compile_jobs, &b) == 0) started++;
  run_jobs(&b, true);
  /* the calling thread is out of jobs: it reports while the others finish */
  while (b.report && atomic_load(&b.done) < n) {
    struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
    report_progress(&b, false);
  }
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  report_progress(&b, true);
}

/* ---------------------------------------------------------------- debug output */

static void shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t at = (size_t)snprintf(buf, n, "(");
  for (int d = 0; d < ndim && at < n; d++)
    at += (size_t)snprintf(buf + at, n - at, "%s%" PRId64, d ? ", " : "", shape[d]);
  if (at < n) snprintf(buf + at, n - at, "%s)", ndim == 1 ? "," : "");
}

/* ---------------------------------------------------------------- running */

/* A kernel ready to launch: ks is the program cache's, or `own` when it
 * could not be added there. */
typedef struct {
  const KernelSource *ks;
  KernelSource own;
  DevProgram *prog;
  KernEntry *entry; /* where the context keeps it by its AST (NULL: out of memory) */
} Prepared;

/* The program cache of r, made at the first kernel; NULL when out of memory. */
static ProgCache *programs_of(const Runner *r) {
  if (!*r->programs) *r->programs = calloc(1, sizeof **r->programs);
  return *r->programs;
}

/* The kernel store's directory: the kernel cache's, resolved once per
 * context; NULL without a disk cache or a usable directory (then every
 * kernel is generated, as without the store). */
static const char *store_dir(const Runner *r, ProgCache *c) {
  if (!c->store_tried && !r->no_disk) {
    Error ignored;
    err_clear(&ignored);
    if (cache_dir_open(r->cache_dir, r->cache_readonly, &c->store_dir, &c->store_ro, &ignored) !=
        TVK_OK)
      c->store_dir = NULL;
  }
  c->store_tried = true;
  return c->store_dir;
}

/* The end of a prepare, with p->own generated or loaded: its checks, and the
 * kernel kept by its AST (its program follows in get_programs), so that the
 * same AST later in the schedule or in a later one is not prepared again. */
static tvk_status finish_prepare(const Runner *r, UOp *ast, Prepared *p) {
  /* out of memory here only costs the shortcut: p keeps its own source */
  p->entry = *r->programs ? kern_add(*r->programs, ast, &p->own, NULL) : NULL;
  if (p->entry) p->ks = &p->entry->ks;
  return TVK_OK;
}

/* The source of item i, in the device's language and lowering: one the
 * context prepared before (with its program), or from the kernel store, or
 * generated. */
static tvk_status prepare(const Runner *r, const Schedule *s, int i, Prepared *p) {
  const Device *d = r->dev;
  UOp *ast = s->items[i].ast;
  p->ks = &p->own;
  KernEntry *known = kern_find(*r->programs, ast);
  if (known) { /* without a program when its compile failed before: get_programs tries again */
    if (known->prog) r->stats->cache_hits++;
    p->ks = &known->ks, p->prog = known->prog, p->entry = known;
    return TVK_OK;
  }
  int64_t most = d->limits.max_local_threads; /* work-group size: 64 unless the device has less */
  CodegenOpts o = {.lang = d->lang,
                   .want_uops = r->debug >= 4,
                   .mode = d->codegen_mode == CG_MODE_GRID ? CG_MODE_GRID : CG_MODE_CORES,
                   .local_size = most > 0 && most < 64 ? (int)most : 64,
                   .noopt = r->noopt,
                   .max_local = most > 0 && most < 1024 ? (int)most : 1024,
                   .shared_bytes = d->limits.shared_mem_bytes,
                   .vector_floats = d->limits.vector_bytes / 4,
                   .vector_regs = d->limits.vector_regs,
                   .cache_bytes = d->limits.cache_bytes,
                   .fma = d->limits.fma,
                   .emulated = d->limits.emulated && !r->gpu_rules,
                   .subgroup = d->limits.subgroup_reduce ? d->limits.subgroup_size : 0};
  /* A kernel generated before, in this or another process, with this tvk
   * build: its record replaces codegen and any plan search. */
  ProgCache *c = programs_of(r);
  char key[KSTORE_KEY_LEN + 1];
  const char *dir = c ? store_dir(r, c) : NULL;
  int64_t t0 = r->trace ? trace_now_ns() : 0;
  bool keyed = dir && !o.want_uops && kstore_key(ast, &o, d->ops->name((Device *)d), r->beam, key);
  if (keyed && kstore_load(dir, key, &p->own)) {
    r->stats->kernels_stored++;
    trace_span(r->trace, false, "codegen", p->own.name, t0, trace_now_ns(), "\"stored\": true");
    return finish_prepare(r, ast, p);
  }
  OptPlan searched;
  if (r->beam > 0 && !r->noopt) {
    SearchCtx sc = {r->dev, r->beam, r->debug, r->cache_dir, r->no_disk, r->stats, r->err, r->log};
    tvk_status ss = search_plan(&sc, s, i, &o, &searched);
    if (ss != TVK_OK) return ss;
    if (searched.n >= 0) o.plan = &searched; /* -1: not searched (symbolic sizes) */
    trace_span(r->trace, false, "search", "BEAM search", t0, trace_now_ns(), NULL);
  }
  int64_t tc = r->trace ? trace_now_ns() : 0;
  tvk_status st = codegen_kernel_opts(ast, NULL, &o, &p->own);
  if (st == TVK_OK) r->stats->kernels_generated++;
  if (st == TVK_OK && r->trace) {
    char plan[160], esc[200], args[240];
    opt_plan_str(&p->own.plan, plan, sizeof plan);
    snprintf(args, sizeof args, "\"stored\": false, \"plan\": \"%s\"",
             trace_json_str(plan, esc, sizeof esc));
    trace_span(r->trace, false, "codegen", p->own.name, tc, trace_now_ns(), args);
  }
  if (st != TVK_OK) {
    char out[160];
    schedule_buf_str(s, s->items[i].bufs[0], out, sizeof out);
    return err_set(r->err, st, "kernel %d of %d (computing %s): %s", i, s->nitems, out,
                   p->own.err.msg);
  }
  if (keyed && !c->store_ro) kstore_save(dir, key, &p->own);
  return finish_prepare(r, ast, p);
}

/* Item i is a kernel of device d. */
static bool on(const Schedule *s, int i, int d) {
  return !s->items[i].copy && s->items[i].device == d;
}

/* The programs of every prepared kernel of `device` (r is its view,
 * on_device): from the program cache, else
 * compiled by the device, the missing ones of the schedule all at once (one
 * compile for kernels of the same source). A failure names the first
 * failing kernel in schedule order; what did compile is kept. Then each new
 * kernel is kept by its AST. */
static tvk_status get_programs(const Runner *r, const Schedule *s, Prepared *p, int device) {
  int n = s->nitems, njobs = 0, missing = 0;
  for (int i = 0; i < n; i++) missing += on(s, i, device) && !p[i].prog;
  if (!missing) return TVK_OK; /* every kernel known to the context: the usual realize */
  if (!programs_of(r)) return err_set(r->err, TVK_ERR_OUT_OF_MEMORY, "run: out of memory");
  CompileJob *jobs = calloc((size_t)n, sizeof *jobs);
  int *job_of = malloc((size_t)n * sizeof *job_of);
  if (!jobs || !job_of) {
    free(jobs), free(job_of);
    return err_set(r->err, TVK_ERR_OUT_OF_MEMORY, "run: out of memory");
  }
  for (int i = 0; i < n; i++) {
    job_of[i] = -1;
    if (!on(s, i, device) || p[i].prog || (p[i].prog = cached_program(r, p[i].ks))) continue;
    for (int j = 0; j < njobs && job_of[i] < 0; j++)
      if (!strcmp(jobs[j].ks->src, p[i].ks->src)) job_of[i] = j;
    if (job_of[i] < 0) jobs[njobs] = (CompileJob){.ks = p[i].ks, .first = i}, job_of[i] = njobs++;
  }
  if (njobs > 0) compile_batch(r, jobs, njobs);
  tvk_status st = TVK_OK;
  for (int j = 0; j < njobs; j++) {
    if (jobs[j].st != TVK_OK) continue;
    if (jobs[j].hit)
      r->stats->cache_hits++;
    else
      r->stats->kernels_compiled++;
    tvk_status cs = cache_program(r, jobs[j].ks, jobs[j].prog);
    if (cs != TVK_OK) jobs[j].prog = NULL, jobs[j].st = cs, jobs[j].err = *r->err;
  }
  for (int i = 0; i < n; i++) {
    const CompileJob *j = job_of[i] >= 0 ? &jobs[job_of[i]] : NULL;
    if (j && j->st != TVK_OK && st == TVK_OK)
      st = err_set(r->err, j->st, "kernel %s: %s", j->ks->name, j->err.msg);
    if (j && !j->prog) continue;
    if (j) p[i].prog = j->prog;
    if (j && j->first != i) r->stats->cache_hits++; /* another item's program, as from the cache */
    if (p[i].entry) p[i].entry->prog = p[i].prog;
  }
  free(jobs);
  free(job_of);
  return st;
}

/* A kernel's launch arguments: its device buffers, values and geometry. */
typedef struct {
  DevBuffer *stack[16], **bufs; /* bufs: stack, or malloc'd for more */
  int32_t vals[CG_MAX_VARS];
  int nvals;
  LaunchDims dims;
} Bound;

static void unbind(Bound *b) {
  if (b->bufs != b->stack) free(b->bufs);
  b->bufs = b->stack;
}

/* Item i's launch arguments into *b (unbind after). */
static tvk_status bind(const Runner *r, const Schedule *s, DevBuffer *const *all, int i,
                       const Prepared *p, Bound *b) {
  const ScheduleItem *it = &s->items[i];
  b->bufs = it->nbufs <= 16 ? b->stack : malloc((size_t)it->nbufs * sizeof *b->bufs);
  if (!b->bufs) {
    b->bufs = b->stack;
    return err_set(r->err, TVK_ERR_OUT_OF_MEMORY, "kernel %s: out of memory", p->ks->name);
  }
  for (int k = 0; k < it->nbufs; k++) {
    if (!(b->bufs[k] = all[it->bufs[k]])) {
      unbind(b);
      return err_set(r->err, TVK_ERR_INTERNAL, "kernel %s: buffer %d has no device memory",
                     p->ks->name, k);
    }
  }
  /* The launch values, in the kernel's vals[] order (its vars sorted by name):
   * var "s<k>" is the item's value k (kernelize.c); any other is a size
   * variable, bound by name (Runner.size_names). */
  int nvals = b->nvals = p->ks->nvars;
  for (int j = 0; j < nvals; j++) {
    const KernelVar *v = &p->ks->vars[j];
    int at = sched_value_index(v->name), sz = -1;
    for (int k = 0; at < 0 && k < r->nsizes && sz < 0; k++)
      if (!strcmp(r->size_names[k], v->name)) sz = k;
    bool have = at >= 0 ? at < it->nvals : sz >= 0;
    if (nvals > CG_MAX_VARS || !have) {
      unbind(b);
      return err_set(r->err, at >= 0 ? TVK_ERR_INTERNAL : TVK_ERR_INVALID_ARG,
                     "kernel %s: its variable '%s' has no value%s", p->ks->name, v->name,
                     at >= 0 ? "" : " (bind one with tvk_bind)");
    }
    if (at >= 0)
      memcpy(&b->vals[j], &it->vals[at], sizeof b->vals[j]);
    else
      b->vals[j] = (int32_t)r->size_vals[sz]; /* in the variable's range: fits */
  }
  /* From codegen: the grid of a GPU kernel (its work groups counted from
   * the values where its sizes are symbolic); all 1 for the CPU, which
   * splits by cores. */
  memcpy(b->dims.global, p->ks->global, sizeof b->dims.global);
  memcpy(b->dims.local, p->ks->local, sizeof b->dims.local);
  if (nvals) b->dims.global[0] = kernel_groups(p->ks, b->vals);
  return TVK_OK;
}

/* What follows a launch of item i that succeeded: the count, the capture,
 * the TVK_DEBUG line. */
static void launched(const Runner *r, const Schedule *s, int i, const Prepared *p, const Bound *b) {
  r->stats->kernels_run++;
  if (r->on_launch) r->on_launch(r->launch_user, s, i, p->ks, p->prog, b->vals, b->nvals, &b->dims);
  if (r->debug >= 1) {
    char shape[200];
    shape_str(p->ks->ndim, p->ks->full_shape, shape, sizeof shape);
    log_msg(r->log, TVK_LOG_INFO, "tvk kernel %3d  %-28s %s", i, p->ks->name, shape);
  }
}

static tvk_status launch(const Runner *r, const Schedule *s, DevBuffer *const *all, int i,
                         const Prepared *p) {
  Bound b;
  tvk_status st = bind(r, s, all, i, p, &b);
  if (st != TVK_OK) return st;
  /* Not waited for, even when timing: the device reports each launch's own
   * time (Device.on_time; Vulkan from timestamps when its batch is done). */
  st = r->dev->ops->launch(r->dev, p->prog, b.bufs, s->items[i].nbufs, b.nvals ? b.vals : NULL,
                           b.nvals, &b.dims);
  if (st == TVK_OK)
    launched(r, s, i, p, &b);
  else
    st = err_set(r->err, st, "kernel %s: %s", p->ks->name, r->dev->err.msg);
  unbind(&b);
  return st;
}

/* Items i..i+n-1, a chain (chain.h), as one launch in `parts` parts. */
static tvk_status launch_chain(const Runner *r, const Schedule *s, DevBuffer *const *all, int i,
                               int n, int parts, const Prepared *p) {
  Bound *b = calloc((size_t)n, sizeof *b);
  DevLaunch *l = calloc((size_t)n, sizeof *l);
  tvk_status st = b && l ? TVK_OK : err_set(r->err, TVK_ERR_OUT_OF_MEMORY, "run: out of memory");
  int bound = 0;
  for (; bound < n && st == TVK_OK; bound++) {
    if ((st = bind(r, s, all, i + bound, &p[i + bound], &b[bound])) != TVK_OK) break;
    l[bound] = (DevLaunch){p[i + bound].prog, b[bound].bufs,  s->items[i + bound].nbufs,
                           b[bound].vals,     b[bound].nvals, &b[bound].dims};
  }
  if (st == TVK_OK && (st = r->dev->ops->launch_parts(r->dev, l, n, parts)) != TVK_OK)
    st = err_set(r->err, st, "kernels %s to %s in %d parts: %s", p[i].ks->name,
                 p[i + n - 1].ks->name, parts, r->dev->err.msg);
  for (int k = 0; k < bound; k++) {
    if (st == TVK_OK) launched(r, s, i + k, &p[i + k], &b[k]);
    unbind(&b[k]);
  }
  if (st == TVK_OK) r->stats->chains_run++;
  if (st == TVK_OK && r->on_chain) r->on_chain(r->launch_user, s, i, n, parts);
  if (st == TVK_OK && r->debug >= 1)
    log_msg(r->log, TVK_LOG_INFO, "tvk: kernels %d to %d ran as one, in %d parts", i, i + n - 1,
            parts);
  free(b);
  free(l);
  return st;
}

static void print_code(const Runner *r, const Prepared *p) {
  if (r->debug >= 3)
    log_msg(r->log, TVK_LOG_DEBUG, "tvk source of %s:\n%s", p->ks->name, p->ks->src);
  if (r->debug >= 4 && p->ks->uops)
    log_msg(r->log, TVK_LOG_DEBUG, "tvk uops of %s:\n%s", p->ks->name, p->ks->uops);
}

/* The schedule (schedule_print's text) and, when p is not NULL (every kernel
 * prepared), each kernel's plan, as one message. */
static void print_schedule(const Runner *r, const Schedule *s, const char *const *names,
                           const Prepared *p) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return;
  schedule_print(f, s, names);
  for (int i = 0; p && i < s->nitems; i++) {
    if (s->items[i].copy) continue;
    char plan[160];
    opt_plan_str(&p[i].ks->plan, plan, sizeof plan);
    fprintf(f, "  plan of [%d] %s: %s\n", i, p[i].ks->name, *plan ? plan : "(none)");
  }
  if (fclose(f) == 0 && text) log_msg(r->log, TVK_LOG_INFO, "%s", text);
  free(text);
}

/* TVK_GRAPH: the schedule as a Graphviz file, at r->graph with "%d" replaced
 * by the schedule's number in the context (else the same file each time, so
 * the last one is there). Failing to write it is a warning, not an error. */
static void write_graph(const Runner *r, const Schedule *s, const char *const *names) {
  char path[4096];
  const char *at = strstr(r->graph, "%d");
  if (at)
    snprintf(path, sizeof path, "%.*s%llu%s", (int)(at - r->graph), r->graph,
             (unsigned long long)r->stats->schedules, at + 2);
  else
    snprintf(path, sizeof path, "%s", r->graph);
  FILE *f = fopen(path, "w");
  if (f) schedule_dot(f, s, names);
  if (!f || fclose(f) != 0)
    log_msg(r->log, TVK_LOG_WARN, "tvk: cannot write the schedule graph '%s' (TVK_GRAPH)", path);
}

static Device *device_of(const Runner *r, int d) { return r->devs ? r->devs[d] : r->dev; }

/* r as the items of device d see it: that device and its program cache. */
static Runner on_device(const Runner *r, int d) {
  Runner rd = *r;
  rd.dev = device_of(r, d);
  rd.programs = &r->programs[d];
  return rd;
}

tvk_status run_copy_bytes(Device *src, DevBuffer *from, Device *dst, DevBuffer *to, size_t nbytes,
                          Error *err) {
  /* Straight out of or into host memory where one side is (the CPU's):
   * one copy, not two through a buffer of its own. */
  void *src_host = src->ops->host_ptr ? src->ops->host_ptr(src, from) : NULL;
  void *dst_host = !src_host && dst->ops->host_ptr ? dst->ops->host_ptr(dst, to) : NULL;
  void *host = src_host ? src_host : dst_host ? dst_host : malloc(nbytes);
  if (!host)
    return err_set(err, TVK_ERR_OUT_OF_MEMORY, "copy: out of memory for %zu bytes", nbytes);
  /* the source for its data; the destination for kernels that may still
   * read the memory the planner gave to the copy's output */
  Device *failed = dst;
  tvk_status st = dst->ops->sync(dst);
  if (st == TVK_OK) failed = src, st = src->ops->sync(src);
  if (st == TVK_OK && !src_host) st = src->ops->copy_out(src, from, 0, host, nbytes);
  if (st == TVK_OK) failed = dst;
  if (st == TVK_OK && !dst_host) st = dst->ops->copy_in(dst, to, 0, host, nbytes);
  if (host != src_host && host != dst_host) free(host);
  if (st != TVK_OK)
    return err_set(err, st, "copy from %s to %s: %s", src->ops->name(src), dst->ops->name(dst),
                   failed->err.msg);
  return TVK_OK;
}

/* Copy item i: what the source's device has computed goes through host
 * memory to the destination (run_copy_bytes). */
static tvk_status run_copy(const Runner *r, const Schedule *s, DevBuffer *const *bufs, int i) {
  const ScheduleItem *it = &s->items[i];
  const SchedBuf *to = &s->bufs[it->bufs[0]], *from = &s->bufs[it->bufs[1]];
  Device *dst = device_of(r, to->device), *src = device_of(r, from->device);
  sint n = sint_eval_named(to->numel, r->nsizes, r->size_names, r->size_vals);
  if (!sint_is_int(n) || n < 0)
    return err_set(r->err, TVK_ERR_INTERNAL, "copy %d: its size is not known", i);
  size_t nbytes = (size_t)n * dt_scalar_size(to->dtype);
  if (nbytes == 0) return TVK_OK;
  if (!bufs[it->bufs[0]] || !bufs[it->bufs[1]])
    return err_set(r->err, TVK_ERR_INTERNAL, "copy %d: a buffer has no device memory", i);
  int64_t t0 = r->trace ? trace_now_ns() : 0;
  tvk_status st = run_copy_bytes(src, bufs[it->bufs[1]], dst, bufs[it->bufs[0]], nbytes, r->err);
  if (st != TVK_OK) return st;
  if (r->trace) {
    char args[48];
    snprintf(args, sizeof args, "\"bytes\": %zu", nbytes);
    trace_span(r->trace, false, "copy", "copy between devices", t0, trace_now_ns(), args);
  }
  r->stats->copies_run++;
  if (r->on_copy) r->on_copy(r->launch_user, s, i);
  if (r->debug >= 1)
    log_msg(r->log, TVK_LOG_INFO, "tvk copy   %3d  %zu bytes from %s to %s", i, nbytes,
            src->ops->name(src), dst->ops->name(dst));
  return TVK_OK;
}

tvk_status run_schedule(const Runner *r, const Schedule *s, DevBuffer *const *bufs) {
  int n = s->nitems, ndevs = r->devs ? r->ndevs : 1;
  Prepared *p = calloc((size_t)(n ? n : 1), sizeof *p);
  const char **names = calloc((size_t)(n ? n : 1), sizeof *names);
  bool *used = calloc((size_t)ndevs, sizeof *used);
  tvk_status st =
      p && names && used ? TVK_OK : err_set(r->err, TVK_ERR_OUT_OF_MEMORY, "run: out of memory");
  for (int i = 0; i < n && st == TVK_OK; i++)
    if (s->items[i].device < 0 || s->items[i].device >= ndevs)
      st = err_set(r->err, TVK_ERR_INTERNAL, "run: item %d is on device %d of %d", i,
                   s->items[i].device, ndevs);
  /* everything compiles before anything runs: a failed compile leaves the buffers untouched */
  for (int i = 0; i < n && st == TVK_OK; i++) {
    const ScheduleItem *it = &s->items[i];
    used[it->device] = true;
    if (it->copy) {
      used[s->bufs[it->bufs[1]].device] = true;
      names[i] = "copy";
      continue;
    }
    Runner rd = on_device(r, it->device);
    st = prepare(&rd, s, i, &p[i]);
    names[i] = p[i].ks->name;
  }
  for (int d = 0; d < ndevs && st == TVK_OK; d++) {
    Runner rd = on_device(r, d);
    if (used[d]) st = get_programs(&rd, s, p, d);
  }
  if (r->debug >= 2 && p && names) print_schedule(r, s, names, st == TVK_OK ? p : NULL);
  if (r->graph && *r->graph && st == TVK_OK && n > 0) write_graph(r, s, names);
  const KernelSource **ks = st == TVK_OK ? calloc((size_t)(n ? n : 1), sizeof *ks) : NULL;
  if (st == TVK_OK && !ks) st = err_set(r->err, TVK_ERR_OUT_OF_MEMORY, "run: out of memory");
  for (int i = 0; i < n && st == TVK_OK; i++) ks[i] = s->items[i].copy ? NULL : p[i].ks;
  for (int i = 0, len; i < n && st == TVK_OK; i += len) {
    len = 1;
    if (s->items[i].copy) {
      st = run_copy(r, s, bufs, i);
      continue;
    }
    Runner rd = on_device(r, s->items[i].device);
    int parts;
    len = r->no_chains ? 1 : chain_length(rd.dev, s, ks, bufs, i, &parts);
    for (int k = i; k < i + len; k++) print_code(&rd, &p[k]);
    st = len > 1 ? launch_chain(&rd, s, bufs, i, len, parts, p) : launch(&rd, s, bufs, i, &p[i]);
    /* the device starts on its work before the host turns to another's */
    int last = i + len - 1;
    bool handover = last + 1 < n &&
                    (s->items[last + 1].copy || s->items[last + 1].device != s->items[i].device);
    if (st == TVK_OK && handover && rd.dev->ops->flush &&
        (st = rd.dev->ops->flush(rd.dev)) != TVK_OK)
      st = err_set(r->err, st, "run: %s", rd.dev->err.msg);
  }
  /* Launches may be queued: buffers the schedule alone holds are freed after this. */
  for (int d = 0; d < ndevs && st == TVK_OK && n > 0; d++) {
    if (!used[d]) continue;
    Device *dev = device_of(r, d);
    int64_t t0 = r->trace ? trace_now_ns() : 0;
    st = dev->ops->sync(dev);
    trace_span(r->trace, false, "wait", "wait for the device", t0, trace_now_ns(), NULL);
    if (st != TVK_OK) st = err_set(r->err, st, "run: %s", dev->err.msg);
  }
  if (st == TVK_OK && n > 0) r->stats->schedules++;
  for (int i = 0; p && i < n; i++) kernel_source_free(&p[i].own);
  free(ks);
  free(p);
  free(names);
  free(used);
  return st;
}
