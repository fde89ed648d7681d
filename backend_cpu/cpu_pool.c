/* The CPU backend's thread pool: n-1 persistent workers plus the launching
 * thread, which runs core 0. A launch publishes one task under the mutex and
 * bumps a generation counter; each worker runs its core of every generation
 * exactly once and the last one to finish wakes the launcher. Nothing spins:
 * idle workers sleep on a condition variable. */
#include "cpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  CpuPool *pool;
  int core;
} CpuWorker;

struct CpuPool {
  int n;                  /* cores per launch, workers + the launcher */
  pthread_mutex_t launch; /* one launch at a time */
  pthread_mutex_t mu;     /* guards everything below */
  pthread_cond_t work;    /* a new generation, or quit */
  pthread_cond_t done;    /* pending reached 0 */
  uint64_t generation;
  int pending; /* workers still running the current generation */
  bool quit;
  CpuKernelFn fn; /* the current task */
  void *const *bufs;
  const int32_t *vals;
  pthread_t *threads; /* n-1 */
  CpuWorker *workers; /* n-1 */
  int started;        /* threads successfully created */
};

static void *pool_worker(void *arg) {
  CpuWorker *w = arg;
  CpuPool *p = w->pool;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->quit && p->generation == seen) pthread_cond_wait(&p->work, &p->mu);
    if (p->quit) break;
    seen = p->generation;
    CpuKernelFn fn = p->fn;
    void *const *bufs = p->bufs;
    const int32_t *vals = p->vals;
    pthread_mutex_unlock(&p->mu);
    fn(bufs, vals, w->core, p->n);
    pthread_mutex_lock(&p->mu);
    if (--p->pending == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* Stops and joins the workers that were started, then frees the pool. */
static void pool_free(CpuPool *p) {
  pthread_mutex_lock(&p->mu);
  p->quit = true;
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

void cpu_pool_run(CpuPool *p, CpuKernelFn fn, void *const *bufs, const int32_t *vals) {
  if (p->n == 1) {
    fn(bufs, vals, 0, 1);
    return;
  }
  pthread_mutex_lock(&p->launch);
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->bufs = bufs;
  p->vals = vals;
  p->pending = p->n - 1;
  p->generation++;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);

  fn(bufs, vals, 0, p->n);

  pthread_mutex_lock(&p->mu);
  while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->launch);
}

void cpu_pool_destroy(CpuPool *p) {
  if (p) pool_free(p);
}
