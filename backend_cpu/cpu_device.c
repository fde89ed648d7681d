/* The CPU device: host buffers, kernels compiled by the system C compiler into
 * cached shared objects, and launches on a persistent thread pool. See
 * docs/cpu_backend.md. */
#include "cpu_internal.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Buffers are 64-byte aligned: a cache line, and enough for any vector load. */
enum { CPU_BUFFER_ALIGN = 64, CPU_MAX_THREADS = 1024, CPU_STACK_BUFS = 32 };

/* Freed buffers kept for reuse: a loop that realizes the same shapes again
 * gets memory the kernels touched before, instead of fresh pages from the
 * system that fault in on first write (a 64 MiB output costs about 16,000 page
 * faults; tinygrad's LRU allocator does the same). Matched by exact size. */
enum { CPU_CACHE_BLOCKS = 16 };
#define CPU_CACHE_BYTES ((size_t)256 << 20)

struct DevBuffer {
  void *data; /* never NULL, even for a zero-size buffer */
  size_t size;
  bool wrapped; /* data is the app's (cpu_wrap): never freed, never cached */
};

typedef struct {
  Device base; /* first, so a Device * is a CpuDevice * */
  CpuToolchain tc;
  CpuPool *pool;
  int threads;
  int debug; /* DeviceOptions.debug: >= 1 logs each launch's time */
  CpuPrograms *programs;
  DevBuffer *cache[CPU_CACHE_BLOCKS]; /* freed buffers, most recent last */
  int ncache;
  size_t cache_bytes;
  char name[192];
} CpuDevice;

static CpuDevice *cpu_of(Device *d) { return (CpuDevice *)d; }

static const char *cpu_name(Device *d) { return cpu_of(d)->name; }

/* ---- buffers ---- */

static tvk_status cpu_alloc(Device *d, size_t nbytes, DevBuffer **out) {
  *out = NULL;
  if (nbytes > d->limits.max_buffer_bytes)
    return err_set(&d->err, TVK_ERR_INVALID_ARG,
                   "alloc: %zu bytes exceeds the largest CPU buffer (%zu bytes)", nbytes,
                   d->limits.max_buffer_bytes);
  CpuDevice *c = cpu_of(d);
  for (int i = c->ncache - 1; i >= 0; i--)
    if (c->cache[i]->size == nbytes) {
      *out = c->cache[i];
      c->cache_bytes -= nbytes;
      memmove(c->cache + i, c->cache + i + 1, (size_t)(--c->ncache - i) * sizeof *c->cache);
      return TVK_OK;
    }
  DevBuffer *b = malloc(sizeof *b);
  void *data = NULL;
  /* At least one byte, so a zero-size buffer still has a distinct pointer. */
  if (!b || posix_memalign(&data, CPU_BUFFER_ALIGN, nbytes ? nbytes : 1) != 0) {
    free(b);
    return err_set(&d->err, TVK_ERR_OUT_OF_MEMORY,
                   "out of host memory allocating a buffer of %zu bytes", nbytes);
  }
  *b = (DevBuffer){.data = data, .size = nbytes};
  *out = b;
  return TVK_OK;
}

static void release_block(DevBuffer *b) {
  free(b->data);
  free(b);
}

static tvk_status cpu_wrap(Device *d, const DevForeign *m, DevBuffer **out) {
  *out = NULL;
  if (m->handle)
    return err_set(&d->err, TVK_ERR_DEVICE,
                   "%s takes no Vulkan buffer: use a context from tvk_ctx_create_vulkan",
                   cpu_name(d));
  if (!m->host) return err_set(&d->err, TVK_ERR_INVALID_ARG, "data is NULL");
  /* Kernels load and store whole elements through typed pointers. */
  if (m->elem_bytes > 1 && (uintptr_t)m->host % m->elem_bytes != 0)
    return err_set(&d->err, TVK_ERR_INVALID_ARG,
                   "data %p is not aligned to %zu bytes, the size of a %s element", m->host,
                   m->elem_bytes, m->dtype_name);
  DevBuffer *b = malloc(sizeof *b);
  if (!b) return err_set(&d->err, TVK_ERR_OUT_OF_MEMORY, "wrap: out of host memory");
  *b = (DevBuffer){.data = m->host, .size = m->nbytes, .wrapped = true};
  *out = b;
  return TVK_OK;
}

/* Kernels run to completion before a launch returns, so a freed buffer is
 * idle and can go straight to the cache (the oldest blocks make room). */
static void cpu_free(Device *d, DevBuffer *b) {
  if (!b) return;
  if (b->wrapped) { /* the app's memory: only our record goes */
    free(b);
    return;
  }
  CpuDevice *c = cpu_of(d);
  if (b->size > CPU_CACHE_BYTES / 4) { /* huge blocks go back to the system */
    release_block(b);
    return;
  }
  while (c->ncache > 0 &&
         (c->ncache == CPU_CACHE_BLOCKS || c->cache_bytes + b->size > CPU_CACHE_BYTES)) {
    c->cache_bytes -= c->cache[0]->size;
    release_block(c->cache[0]);
    memmove(c->cache, c->cache + 1, (size_t)--c->ncache * sizeof *c->cache);
  }
  c->cache[c->ncache++] = b;
  c->cache_bytes += b->size;
}

/* Checks that [offset, offset+n) lies in b without overflowing. */
static tvk_status check_range(Device *d, const char *what, DevBuffer *b, size_t offset,
                              const void *host, size_t n) {
  if (!b) return err_set(&d->err, TVK_ERR_INVALID_ARG, "%s: buffer is NULL", what);
  if (offset > b->size || n > b->size - offset)
    return err_set(&d->err, TVK_ERR_INVALID_ARG,
                   "%s: offset %zu + size %zu is out of bounds of a buffer of %zu bytes", what,
                   offset, n, b->size);
  if (n > 0 && !host)
    return err_set(&d->err, TVK_ERR_INVALID_ARG, "%s: host pointer is NULL", what);
  return TVK_OK;
}

static tvk_status cpu_copy_in(Device *d, DevBuffer *b, size_t offset, const void *src, size_t n) {
  tvk_status st = check_range(d, "copy_in", b, offset, src, n);
  if (st == TVK_OK && n > 0) memcpy((char *)b->data + offset, src, n);
  return st;
}

static tvk_status cpu_copy_out(Device *d, DevBuffer *b, size_t offset, void *dst, size_t n) {
  tvk_status st = check_range(d, "copy_out", b, offset, dst, n);
  if (st == TVK_OK && n > 0) memcpy(dst, (const char *)b->data + offset, n);
  return st;
}

/* ---- programs: cpu_program.c ---- */

static tvk_status cpu_compile_op(Device *d, const char *name, const char *src, DevProgram **out,
                                 bool *cache_hit, Error *err) {
  return cpu_program_build(cpu_of(d)->programs, d, name, src, out, cache_hit, err ? err : &d->err);
}

static void cpu_program_free_op(Device *d, DevProgram *p) {
  cpu_program_free(cpu_of(d)->programs, p);
}

static tvk_status cpu_wait_compiles(Device *d) {
  cpu_programs_wait(cpu_of(d)->programs);
  return TVK_OK;
}

/* ---- launch ---- */

/* A kernel of fewer loop iterations than this runs on the launching thread
 * alone: waking the other cores would cost more than they save. */
#define CPU_SERIAL_WORK 32768

/* How many cores a launch uses: as many as the split axis has indices (the
 * geometry's global[0]), or one for a small kernel; all without a geometry. */
static int launch_cores(int n, const LaunchDims *dims) {
  if (!dims) return n;
  int64_t chunks = dims->global[0] > 0 ? dims->global[0] : 1;
  int64_t per = dims->global[1] > 0 ? dims->global[1] : 1;
  if (chunks <= CPU_SERIAL_WORK / per && chunks * per < CPU_SERIAL_WORK) return 1;
  return chunks < n ? (int)chunks : n;
}

/* The data pointers of bufs[0..nbufs) into ptrs (local, or malloc'd when
 * there are more than CPU_STACK_BUFS; *ptrs says which), after checking
 * the launch's arguments. */
static tvk_status launch_args(Device *d, DevProgram *p, DevBuffer *const *bufs, int nbufs,
                              const int32_t *vals, int nvals, void **local, void ***ptrs) {
  *ptrs = local;
  if (!p || cpu_program_owner(p) != d)
    return err_set(&d->err, TVK_ERR_INVALID_ARG, "launch: program is %s",
                   p ? "of another device" : "NULL");
  if (nbufs < 0 || nvals < 0 || (nbufs > 0 && !bufs) || (nvals > 0 && !vals))
    return err_set(&d->err, TVK_ERR_INVALID_ARG,
                   "launch: bad arguments (nbufs %d, bufs %p, nvals %d, vals %p)", nbufs,
                   (const void *)bufs, nvals, (const void *)vals);
  if (nbufs > CPU_STACK_BUFS && !(*ptrs = malloc((size_t)nbufs * sizeof **ptrs))) {
    *ptrs = local;
    return err_set(&d->err, TVK_ERR_OUT_OF_MEMORY, "launch: out of memory for %d buffer pointers",
                   nbufs);
  }
  for (int i = 0; i < nbufs; i++) {
    if (!bufs[i]) {
      if (*ptrs != local) free(*ptrs);
      *ptrs = local;
      return err_set(&d->err, TVK_ERR_INVALID_ARG, "launch: buffer %d of %d is NULL", i, nbufs);
    }
    (*ptrs)[i] = bufs[i]->data;
  }
  return TVK_OK;
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A launch's time for TVK_DEBUG and Device.on_time: ms of [t0, t1). */
static void report_time(Device *d, DevProgram *p, double ms, int64_t t0, int64_t t1) {
  if (cpu_of(d)->debug >= 1)
    log_msg(&d->log, TVK_LOG_INFO, "tvk: CPU kernel %s: %.3f ms", cpu_program_name(p), ms);
  LaunchTime t = {cpu_program_name(p), p, ms, t0, t1};
  if (d->on_time) d->on_time(d->time_user, &t);
}

/* Every launch is one call per core it uses, and the kernel splits its
 * outermost loop by core_id. */
static tvk_status cpu_launch(Device *d, DevProgram *p, DevBuffer *const *bufs, int nbufs,
                             const int32_t *vals, int nvals, const LaunchDims *dims) {
  static const int32_t no_vals[1] = {0};
  void *local[CPU_STACK_BUFS] = {0}, **ptrs;
  tvk_status st = launch_args(d, p, bufs, nbufs, vals, nvals, local, &ptrs);
  if (st != TVK_OK) return st;
  CpuDevice *c = cpu_of(d);
  bool timed = d->on_time || c->debug >= 1;
  int64_t t0 = timed ? now_ns() : 0;
  cpu_pool_run(c->pool, launch_cores(c->threads, dims), cpu_program_fn(p), ptrs,
               nvals > 0 ? vals : no_vals);
  if (timed) { /* a launch runs to completion: its wall time is the kernel's */
    int64_t t1 = now_ns();
    report_time(d, p, (double)(t1 - t0) / 1e6, t0, t1);
  }
  if (ptrs != local) free(ptrs);
  return TVK_OK;
}

/* ---- launches part by part ---- */

enum { CPU_MAX_CHAIN = 16 };

/* One launch_parts: what every core's call of run_parts shares. */
typedef struct {
  int n, parts;
  CpuKernelFn fn[CPU_MAX_CHAIN];
  void *const *bufs[CPU_MAX_CHAIN];
  const int32_t *vals[CPU_MAX_CHAIN];
  atomic_int next;                /* the next part to take */
  bool timed;                     /* sum each kernel's time into ns */
  atomic_llong ns[CPU_MAX_CHAIN]; /* per kernel, over every part and core */
} CpuParts;

/* A CpuKernelFn for cpu_pool_run: bufs[0] is the CpuParts. Each core takes
 * parts in turn, in order, and runs each kernel's share of its part. */
static void run_parts(void *const *bufs, const int32_t *vals, int32_t core_id, int32_t n_cores) {
  (void)vals, (void)core_id, (void)n_cores;
  CpuParts *c = bufs[0];
  for (int p; (p = atomic_fetch_add(&c->next, 1)) < c->parts;)
    for (int k = 0; k < c->n; k++) {
      int64_t t0 = c->timed ? now_ns() : 0;
      c->fn[k](c->bufs[k], c->vals[k], p, c->parts);
      if (c->timed) atomic_fetch_add(&c->ns[k], (long long)(now_ns() - t0));
    }
}

static tvk_status cpu_launch_parts(Device *d, const DevLaunch *l, int n, int parts) {
  static const int32_t no_vals[1] = {0};
  if (n < 1 || n > CPU_MAX_CHAIN || !l || parts < 1 || parts > DEV_MAX_PARTS)
    return err_set(&d->err, TVK_ERR_INVALID_ARG,
                   "launch_parts: %d launches in %d parts (1 to %d launches, 1 to %d parts)", n,
                   parts, CPU_MAX_CHAIN, DEV_MAX_PARTS);
  CpuDevice *c = cpu_of(d);
  CpuParts *run = calloc(1, sizeof *run);
  void *local[CPU_MAX_CHAIN][CPU_STACK_BUFS], **ptrs[CPU_MAX_CHAIN];
  if (!run) return err_set(&d->err, TVK_ERR_OUT_OF_MEMORY, "launch_parts: out of memory");
  tvk_status st = TVK_OK;
  int made = 0;
  for (; made < n && st == TVK_OK; made++) {
    const DevLaunch *x = &l[made];
    st = launch_args(d, x->prog, x->bufs, x->nbufs, x->vals, x->nvals, local[made], &ptrs[made]);
    if (st != TVK_OK) break;
    run->fn[made] = cpu_program_fn(x->prog);
    run->bufs[made] = ptrs[made];
    run->vals[made] = x->nvals > 0 ? x->vals : no_vals;
  }
  if (st == TVK_OK) {
    run->n = n, run->parts = parts;
    run->timed = d->on_time || c->debug >= 1;
    atomic_init(&run->next, 0);
    for (int k = 0; k < n; k++) atomic_init(&run->ns[k], 0);
    void *arg[1] = {run};
    int cores = parts < c->threads ? parts : c->threads;
    int64_t t0 = run->timed ? now_ns() : 0;
    cpu_pool_run(c->pool, cores, run_parts, arg, no_vals);
    if (run->timed) { /* each kernel's share, one after another in the launch's span */
      int64_t at = t0;
      for (int k = 0; k < n; k++) {
        int64_t share = (int64_t)atomic_load(&run->ns[k]) / cores; /* cores >= 1 */
        report_time(d, l[k].prog, (double)share / 1e6, at, at + share);
        at += share;
      }
    }
  }
  for (int k = 0; k < made; k++)
    if (ptrs[k] != local[k]) free(ptrs[k]);
  free(run);
  return st;
}

/* Launches finish before they return, so there is nothing to wait for. */
static tvk_status cpu_sync(Device *d) {
  (void)d;
  return TVK_OK;
}

static void *cpu_host_ptr(Device *d, DevBuffer *b) {
  (void)d;
  return b ? b->data : NULL;
}

/* ---- lifetime ---- */

static void cpu_destroy(Device *d) {
  CpuDevice *c = cpu_of(d);
  if (!c) return;
  cpu_programs_destroy(c->programs); /* first: its builders use the toolchain */
  while (c->ncache > 0) release_block(c->cache[--c->ncache]);
  cpu_pool_destroy(c->pool);
  cpu_toolchain_free(&c->tc);
  free(c);
}

static const DeviceOps cpu_ops = {
    .name = cpu_name,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .wrap = cpu_wrap,
    .copy_in = cpu_copy_in,
    .copy_out = cpu_copy_out,
    .compile = cpu_compile_op,
    .program_free = cpu_program_free_op,
    .launch = cpu_launch,
    .launch_parts = cpu_launch_parts,
    .sync = cpu_sync,
    .host_ptr = cpu_host_ptr,
    .wait_compiles = cpu_wait_compiles,
    .destroy = cpu_destroy,
};

static int thread_count(const DeviceOptions *opt) {
  long n = opt && opt->threads > 0 ? opt->threads : sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  return n > CPU_MAX_THREADS ? CPU_MAX_THREADS : (int)n;
}

/* The widest SIMD register the kernels are compiled for: -march=native's
 * (cpu_compile.c: only with a known CPU), else the baseline of the ISA. */
static int vector_bytes(bool cpu_known) {
#if defined(__x86_64__) || defined(__i386__)
  if (cpu_known) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 64;
    if (__builtin_cpu_supports("avx")) return 32;
  }
  return 16;
#else
  (void)cpu_known;
  return 16; /* NEON and the like */
#endif
}

/* Whether a fused multiply-add is one instruction for the kernels: the CPU
 * has one and -march=native (a known CPU) lets the compiler use it. Every
 * AArch64 has one in its baseline. */
static bool has_fma(bool cpu_known) {
#if defined(__x86_64__) || defined(__i386__)
  if (!cpu_known) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("fma");
#elif defined(__aarch64__)
  (void)cpu_known;
  return true;
#else
  (void)cpu_known;
  return false;
#endif
}

/* How many SIMD registers of that width there are: AVX-512 (64 bytes) and
 * AArch64 have 32, AVX and SSE on x86-64 16. */
static int vector_regs(int vector_bytes) {
#if defined(__x86_64__)
  return vector_bytes >= 64 ? 32 : 16;
#elif defined(__aarch64__)
  (void)vector_bytes;
  return 32;
#else
  (void)vector_bytes;
  return 8; /* 32-bit x86's SSE, and what we do not know */
#endif
}

/* The compile tiers: opt->cpu_tiers, else $TVK_CPU_TIERS, else fast then
 * optimised. A value that names no tier is an error, not the default, so a
 * typo shows. */
static tvk_status read_tiers(const DeviceOptions *opt, int *tiers, Error *err) {
  static const char *const names[] = {"fast-then-optimised", "optimised", "fast"};
  *tiers = TVK_CPU_TIERS_FAST_THEN_OPTIMISED;
  int given = opt ? opt->cpu_tiers : 0;
  if (given < 0 || given > TVK_CPU_TIERS_FAST)
    return err_set(err, TVK_ERR_INVALID_ARG,
                   "cpu_device_create: cpu_tiers is %d (0 default, 1 fast then optimised, 2 "
                   "optimised, 3 fast)",
                   given);
  if (given) {
    *tiers = given;
    return TVK_OK;
  }
  const char *v = getenv("TVK_CPU_TIERS");
  if (!v || !*v) return TVK_OK;
  for (int i = 0; i < 3; i++)
    if (!strcmp(v, names[i])) {
      *tiers = TVK_CPU_TIERS_FAST_THEN_OPTIMISED + i;
      return TVK_OK;
    }
  return err_set(err, TVK_ERR_INVALID_ARG,
                 "TVK_CPU_TIERS is '%s': expected fast-then-optimised, optimised or fast", v);
}

void cpu_device_describe(tvk_device_info *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "CPU");
  char *id = NULL;
  cpu_read_cpuinfo(out->description, sizeof out->description, &id);
  out->kind = TVK_DEVICE_KIND_CPU;
  out->usable = true;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  out->memory_bytes = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
  out->subgroup_size = vector_bytes(id != NULL) / 4;
  out->cores = thread_count(NULL);
  out->int8 = out->fp64 = true; /* float16 is stored, and computed in float32 */
  free(id);
}

tvk_status cpu_device_create(const DeviceOptions *opt, Device **out, Error *err) {
  err_clear(err);
  if (!out) return err_set(err, TVK_ERR_INVALID_ARG, "cpu_device_create: out is NULL");
  *out = NULL;
  if (opt && opt->threads < 0)
    return err_set(err, TVK_ERR_INVALID_ARG,
                   "cpu_device_create: threads is %d (0 means one per core)", opt->threads);
  CpuDevice *c = calloc(1, sizeof *c);
  if (!c) return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory creating the CPU device");
  c->base.ops = &cpu_ops;
  if (opt) c->base.log = opt->log;
  c->threads = thread_count(opt);
  c->debug = opt ? opt->debug : 0;
  int tiers;
  tvk_status st = cpu_toolchain_init(&c->tc, opt, err);
  if (st == TVK_OK) st = read_tiers(opt, &tiers, err);
  if (st == TVK_OK) st = cpu_pool_create(c->threads, &c->pool, err);
  if (st == TVK_OK)
    st = cpu_programs_create(&c->tc, tiers, c->threads, c->base.log, &c->programs, err);
  if (st != TVK_OK) {
    cpu_destroy(&c->base);
    return st;
  }
  int simd = vector_bytes(c->tc.cpu_id != NULL);
  c->base.limits = (DeviceLimits){
      .max_buffer_bytes = SIZE_MAX / 2,
      .max_global = {INT32_MAX, INT32_MAX, INT32_MAX},
      .max_local_threads = 1,
      .shared_mem_bytes = 0,
      .cores = c->threads,
      .vector_bytes = simd,
      .vector_regs = vector_regs(simd),
      .cache_bytes = cpu_l2_bytes(),
      .fma = has_fma(c->tc.cpu_id != NULL),
  };
  snprintf(c->name, sizeof c->name, "CPU (%s, %d thread%s)", c->tc.cpu_model, c->threads,
           c->threads == 1 ? "" : "s");
  *out = &c->base;
  return TVK_OK;
}
