/* The CPU device's programs and its compile tiers (docs/cpu_backend.md).
 *
 * A kernel is looked up in the disk cache first. On a miss, in the default
 * fast-then-optimised mode, TinyCC compiles it in memory and it runs at once,
 * while a builder thread runs the system compiler; when that build is loaded
 * its function replaces TinyCC's in the program, between launches (the
 * pointer is swapped atomically; a launch reads it once). TinyCC's code stays
 * mapped until the program is freed, so a launch that read the old pointer
 * finishes in it. */
#define _GNU_SOURCE /* syscall(SYS_gettid) */
#include "cpu_internal.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* A background build of one program's optimised code. */
typedef struct CpuJob {
  struct CpuJob *next;
  DevProgram *p; /* NULL once the program was freed: the result is dropped */
  bool queued;   /* in the queue (else a builder is running it) */
  char *name, *src;
} CpuJob;

struct DevProgram {
  DevProgram *prev, *next; /* the device's list of live programs */
  Device *owner;
  _Atomic(CpuKernelFn) fn; /* what a launch calls */
  void *handle;            /* dlopen handle of the system compiler's build; NULL: none yet */
  void *tcc;               /* TinyCC's code (cpu_tcc.c); NULL: none */
  CpuJob *job;             /* its pending background build; under CpuPrograms.mu */
  char *name;              /* the kernel's, for timings */
};

/* How much lower a builder thread's priority is than the app's. */
enum { CPU_BUILDER_NICE = 10 };

/* Builder threads: at most this many, and no more than the device's cores. */
enum { CPU_MAX_BUILDERS = 8 };

struct CpuPrograms {
  CpuToolchain *tc;
  int tiers; /* a tvk_cpu_tiers, never DEFAULT */
  LogSink log;
  pthread_mutex_t mu; /* everything below, and each program's job */
  pthread_cond_t wake, idle;
  DevProgram *list;
  CpuJob *head, *tail;
  int running; /* jobs a builder is running */
  bool stop;
  bool tcc_warned; /* one warning per device when TinyCC rejects a kernel */
  int max_builders, nbuilders;
  pthread_t builders[CPU_MAX_BUILDERS];
};

tvk_status cpu_programs_create(CpuToolchain *tc, int tiers, int cores, LogSink log,
                               CpuPrograms **out, Error *err) {
  CpuPrograms *ps = calloc(1, sizeof *ps);
  if (!ps) return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory creating the CPU device");
  ps->tc = tc;
  ps->tiers = tiers;
  ps->log = log;
  ps->max_builders = cores < 1 ? 1 : cores > CPU_MAX_BUILDERS ? CPU_MAX_BUILDERS : cores;
  pthread_mutex_init(&ps->mu, NULL);
  pthread_cond_init(&ps->wake, NULL);
  pthread_cond_init(&ps->idle, NULL);
  *out = ps;
  return TVK_OK;
}

static void job_free(CpuJob *j) {
  free(j->name);
  free(j->src);
  free(j);
}

/* Runs queued jobs until the device stops. A finished build is put into its
 * program, or closed when the program is gone. */
static void *builder_main(void *arg) {
  CpuPrograms *ps = arg;
#ifdef __linux__
  /* Background builds yield the cores to the app and to the fast tier's
   * compiles (a cold start through libtvk.so, whose TinyCC is a process,
   * took 60% longer against gcc at the same priority): on Linux a thread's
   * nice value is its own, and the compilers it starts inherit it. */
  (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), CPU_BUILDER_NICE);
#endif
  pthread_mutex_lock(&ps->mu);
  while (!ps->stop) {
    CpuJob *j = ps->head;
    if (!j) {
      pthread_cond_wait(&ps->wake, &ps->mu);
      continue;
    }
    ps->head = j->next;
    if (!ps->head) ps->tail = NULL;
    j->queued = false;
    ps->running++;
    pthread_mutex_unlock(&ps->mu);

    Error err;
    err_clear(&err);
    void *handle = NULL;
    CpuKernelFn fn = NULL;
    tvk_status st = cpu_cc_build(&err, ps->tc, j->name, j->src, &handle, &fn);

    pthread_mutex_lock(&ps->mu);
    ps->running--;
    if (j->p) {
      j->p->job = NULL;
      if (st == TVK_OK) {
        j->p->handle = handle;
        atomic_store_explicit(&j->p->fn, fn, memory_order_release);
      } else {
        log_msg(&ps->log, TVK_LOG_WARN,
                "tvk: the optimised build of kernel %s failed, it keeps TinyCC's code: %s", j->name,
                err.msg);
      }
    } else if (handle) {
      dlclose(handle);
    }
    job_free(j);
    if (!ps->head && !ps->running) pthread_cond_broadcast(&ps->idle);
  }
  pthread_mutex_unlock(&ps->mu);
  return NULL;
}

/* Queues the optimised build of p, starting a builder when fewer run than
 * could; with none (no thread could be made) the program keeps TinyCC's code. */
static void queue_build(CpuPrograms *ps, DevProgram *p, const char *name, const char *src) {
  CpuJob *j = calloc(1, sizeof *j);
  if (j) j->name = strdup(name), j->src = strdup(src);
  if (!j || !j->name || !j->src) {
    if (j) job_free(j);
    return;
  }
  j->p = p;
  j->queued = true;
  pthread_mutex_lock(&ps->mu);
  int waiting = 0;
  for (CpuJob *q = ps->head; q; q = q->next) waiting++;
  if (ps->nbuilders < ps->max_builders && waiting + ps->running >= ps->nbuilders &&
      pthread_create(&ps->builders[ps->nbuilders], NULL, builder_main, ps) == 0)
    ps->nbuilders++;
  if (ps->nbuilders == 0) {
    pthread_mutex_unlock(&ps->mu);
    job_free(j);
    return;
  }
  if (ps->tail)
    ps->tail->next = j;
  else
    ps->head = j;
  ps->tail = j;
  p->job = j;
  pthread_cond_signal(&ps->wake);
  pthread_mutex_unlock(&ps->mu);
}

/* TinyCC's build of src into p, for the fast tiers: TVK_OK and *built, or
 * not built (no libtcc, or it rejected the source: then one warning, and the
 * system compiler builds the kernel). FAST alone has no fallback: TinyCC's
 * error is the kernel's. */
static tvk_status fast_build(CpuPrograms *ps, DevProgram *p, const char *name, const char *src,
                             bool *built, Error *out) {
  *built = false;
  if (ps->tiers == TVK_CPU_TIERS_OPTIMISED) return TVK_OK;
  if (!cpu_tcc_available())
    return ps->tiers == TVK_CPU_TIERS_FAST ? cpu_tcc_compile(name, src, &p->tcc, NULL, out)
                                           : TVK_OK;
  Error err;
  err_clear(&err);
  CpuKernelFn fn;
  tvk_status st = cpu_tcc_compile(name, src, &p->tcc, &fn, &err);
  if (st == TVK_OK) {
    atomic_init(&p->fn, fn);
    *built = true;
    return TVK_OK;
  }
  if (ps->tiers == TVK_CPU_TIERS_FAST) return err_set(out, st, "%s", err.msg);
  pthread_mutex_lock(&ps->mu);
  bool first = !ps->tcc_warned;
  ps->tcc_warned = true;
  pthread_mutex_unlock(&ps->mu);
  if (first)
    log_msg(&ps->log, TVK_LOG_WARN,
            "tvk: %s; the system compiler builds it (and any other "
            "kernel TinyCC rejects, without this message)",
            err.msg);
  return TVK_OK;
}

tvk_status cpu_program_build(CpuPrograms *ps, Device *owner, const char *name, const char *src,
                             DevProgram **out, bool *cache_hit, Error *err) {
  *out = NULL;
  if (cache_hit) *cache_hit = false;
  DevProgram *p = calloc(1, sizeof *p);
  if (!p) return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory compiling kernel '%s'", name);
  p->owner = owner;
  /* a NULL name is the lookup's error (cpu_cache_load checks it) */
  if (name && !(p->name = strdup(name))) {
    free(p);
    return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory compiling kernel '%s'", name);
  }
  CpuKernelFn fn = NULL;
  bool found = false;
  tvk_status st = cpu_cache_load(err, ps->tc, name, src, &p->handle, &fn, &found);
  if (st == TVK_OK && found) {
    atomic_init(&p->fn, fn);
    if (cache_hit) *cache_hit = true;
  } else if (st == TVK_OK) {
    bool built;
    st = fast_build(ps, p, name, src, &built, err);
    /* ps->tc->cc is known after the lookup: without a compiler TinyCC's code stays */
    if (st == TVK_OK && built && ps->tiers == TVK_CPU_TIERS_FAST_THEN_OPTIMISED && ps->tc->cc)
      queue_build(ps, p, name, src);
    if (st == TVK_OK && !built) {
      st = cpu_cc_build(err, ps->tc, name, src, &p->handle, &fn);
      if (st == TVK_OK) atomic_init(&p->fn, fn);
    }
  }
  if (st != TVK_OK) {
    cpu_tcc_free(p->tcc);
    free(p->name);
    free(p);
    return st;
  }
  pthread_mutex_lock(&ps->mu);
  p->next = ps->list;
  if (ps->list) ps->list->prev = p;
  ps->list = p;
  pthread_mutex_unlock(&ps->mu);
  *out = p;
  return TVK_OK;
}

CpuKernelFn cpu_program_fn(DevProgram *p) {
  return atomic_load_explicit(&p->fn, memory_order_acquire);
}

Device *cpu_program_owner(const DevProgram *p) { return p->owner; }

const char *cpu_program_name(const DevProgram *p) { return p->name; }

/* Takes p off the list and from its job, under ps->mu. */
static void detach(CpuPrograms *ps, DevProgram *p) {
  if (p->prev)
    p->prev->next = p->next;
  else
    ps->list = p->next;
  if (p->next) p->next->prev = p->prev;
  CpuJob *j = p->job;
  p->job = NULL;
  if (!j) return;
  if (!j->queued) { /* running: the builder drops what it makes */
    j->p = NULL;
    return;
  }
  CpuJob **at = &ps->head, *prev = NULL;
  while (*at != j) prev = *at, at = &(*at)->next;
  *at = j->next;
  if (ps->tail == j) ps->tail = prev;
  job_free(j);
  if (!ps->head && !ps->running) pthread_cond_broadcast(&ps->idle);
}

static void close_program(DevProgram *p) {
  if (p->handle) dlclose(p->handle);
  cpu_tcc_free(p->tcc);
  free(p->name);
  free(p);
}

void cpu_program_free(CpuPrograms *ps, DevProgram *p) {
  if (!p) return;
  pthread_mutex_lock(&ps->mu);
  detach(ps, p);
  pthread_mutex_unlock(&ps->mu);
  close_program(p);
}

void cpu_programs_wait(CpuPrograms *ps) {
  pthread_mutex_lock(&ps->mu);
  while (ps->head || ps->running) pthread_cond_wait(&ps->idle, &ps->mu);
  pthread_mutex_unlock(&ps->mu);
}

void cpu_programs_destroy(CpuPrograms *ps) {
  if (!ps) return;
  pthread_mutex_lock(&ps->mu);
  ps->stop = true;
  while (ps->list) { /* queued jobs go with their programs; running ones are orphaned */
    DevProgram *p = ps->list;
    detach(ps, p);
    close_program(p);
  }
  pthread_cond_broadcast(&ps->wake);
  pthread_mutex_unlock(&ps->mu);
  for (int i = 0; i < ps->nbuilders; i++) pthread_join(ps->builders[i], NULL);
  pthread_cond_destroy(&ps->wake);
  pthread_cond_destroy(&ps->idle);
  pthread_mutex_destroy(&ps->mu);
  free(ps);
}
