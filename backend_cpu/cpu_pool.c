/* The CPU backend's thread pool: n-1 persistent workers plus the launching
 * thread, which runs core 0. A launch publishes one task under the mutex and
 * bumps a generation counter; each worker runs its core of every generation
 * exactly once and the last one to finish wakes the launcher.
 *
 * Waking a sleeping thread costs tens of microseconds, as much as a small
 * kernel, and the kernels of a schedule come one right after another; so a
 * worker that finished spins for a short while (POOL_SPIN_NS) watching the
 * generation before it sleeps on the condition variable, and the launcher
 * spins as long for the last worker before it sleeps. Past that nothing
 * spins: an idle pool costs no CPU. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cpu_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL_SPIN_NS 100000 /* 0.1 ms */

typedef struct {
  CpuPool *pool;
  int core;
} CpuWorker;

struct CpuPool {
  int n;                  /* threads: workers + the launcher */
  pthread_mutex_t launch; /* one launch at a time */
  pthread_mutex_t mu;     /* guards the task, quit, and the waits */
  pthread_cond_t work;    /* a new generation, or quit */
  pthread_cond_t done;    /* pending reached 0 */
  atomic_uint_fast64_t generation;
  atomic_int pending; /* workers still running the current generation */
  atomic_bool quit;
  CpuKernelFn fn; /* the current task, on `cores` cores */
  void *const *bufs;
  const int32_t *vals;
  int cores;
  pthread_t *threads; /* n-1 */
  CpuWorker *workers; /* n-1 */
  int started;        /* threads successfully created */
};

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One turn of a spin that lasts POOL_SPIN_NS: pauses, and on every 64th
 * turn (i counts from 1) reads the clock; false once the time is up. *end
 * starts at 0. */
static bool spin_on(unsigned i, int64_t *end) {
  cpu_relax();
  if (i % 64) return true;
  int64_t t = now_ns();
  if (!*end) *end = t + POOL_SPIN_NS;
  return t < *end;
}

/* Spins until the generation differs from seen (or quit), for POOL_SPIN_NS at most. */
static void spin_for_generation(CpuPool *p, uint64_t seen) {
  int64_t end = 0;
  unsigned i = 0;
  while (atomic_load_explicit(&p->generation, memory_order_acquire) == seen &&
         !atomic_load_explicit(&p->quit, memory_order_relaxed) && spin_on(++i, &end))
    continue;
}

static void *pool_worker(void *arg) {
  CpuWorker *w = arg;
  CpuPool *p = w->pool;
  uint64_t seen = 0;
  for (;;) {
    spin_for_generation(p, seen);
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->quit) && atomic_load(&p->generation) == seen)
      pthread_cond_wait(&p->work, &p->mu);
    if (atomic_load(&p->quit)) {
      pthread_mutex_unlock(&p->mu);
      break;
    }
    seen = atomic_load(&p->generation);
    CpuKernelFn fn = p->fn;
    void *const *bufs = p->bufs;
    const int32_t *vals = p->vals;
    int cores = p->cores;
    pthread_mutex_unlock(&p->mu);
    if (w->core < cores) fn(bufs, vals, w->core, cores);
    if (atomic_fetch_sub(&p->pending, 1) == 1) {
      /* under the mutex, so a launcher that saw pending > 0 is waiting */
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->mu);
    }
  }
  return NULL;
}

/* Stops and joins the workers that were started, then frees the pool. */
static void pool_free(CpuPool *p) {
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->quit, true);
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->work);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->launch);
  free(p->workers);
  free(p->threads);
  free(p);
}

tvk_status cpu_pool_create(int n, CpuPool **out, Error *err) {
  *out = NULL;
  CpuPool *p = calloc(1, sizeof *p);
  size_t nw = (size_t)(n - 1);
  if (p) {
    p->threads = calloc(nw ? nw : 1, sizeof *p->threads);
    p->workers = calloc(nw ? nw : 1, sizeof *p->workers);
  }
  if (!p || !p->threads || !p->workers) {
    if (p) free(p->threads), free(p->workers);
    free(p);
    return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory creating a thread pool of %d threads",
                   n);
  }
  p->n = n;
  atomic_init(&p->generation, 0);
  atomic_init(&p->pending, 0);
  atomic_init(&p->quit, false);
  pthread_mutex_init(&p->launch, NULL);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->done, NULL);
  for (size_t i = 0; i < nw; i++) {
    p->workers[i] = (CpuWorker){.pool = p, .core = (int)i + 1};
    int rc = pthread_create(&p->threads[i], NULL, pool_worker, &p->workers[i]);
    if (rc != 0) {
      err_set(err, TVK_ERR_DEVICE, "cannot start CPU worker thread %zu of %d: %s", i + 1, n - 1,
              strerror(rc));
      pool_free(p);
      return TVK_ERR_DEVICE;
    }
    p->started++;
  }
  *out = p;
  return TVK_OK;
}

void cpu_pool_run(CpuPool *p, int cores, CpuKernelFn fn, void *const *bufs, const int32_t *vals) {
  if (cores > p->n) cores = p->n;
  if (cores <= 1) {
    fn(bufs, vals, 0, 1);
    return;
  }
  pthread_mutex_lock(&p->launch);
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->bufs = bufs;
  p->vals = vals;
  p->cores = cores;
  atomic_store(&p->pending, p->n - 1);
  atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);

  fn(bufs, vals, 0, cores);

  int64_t end = 0;
  unsigned i = 0;
  while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0 && spin_on(++i, &end))
    continue;
  pthread_mutex_lock(&p->mu);
  while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->launch);
}

void cpu_pool_destroy(CpuPool *p) {
  if (p) pool_free(p);
}
