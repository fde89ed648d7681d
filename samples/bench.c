/* bench: times a few cases on one device and prints a table.
 *
 *   build/samples/bench [DEVICE] [--quick] [--case TEXT]
 *
 * --quick runs the smaller cases with 3 runs each; --case TEXT runs only the
 * cases whose name contains TEXT. Each case builds its expression from
 * realized inputs, realizes it and waits for the device (tvk_sync); the first
 * run (which compiles) is a warm-up, after which the bench waits for the
 * optimised builds (tvk_ctx_wait_compiles), followed by up to 10 untimed runs within
 * 0.3 s, then the median of several runs is reported. Every case is checked
 * once against a reference computed here in double precision, so a fast wrong
 * answer shows.
 *
 * Columns: "ms (med)", "GFLOP/s", "GB/s" are tvk's. Then a reference timed in
 * the same run, right after the tvk runs of the case, with its name, its time
 * and its rates over the same FLOP and byte counts ("n/a" when it is missing):
 *  - matmul (and the batched matmul): OpenBLAS cblas_sgemm, loaded at run time
 *    from libopenblas.so.0 (Debian's libopenblas0-pthread, which
 *    scripts/install-deps.sh installs; its threads: all cores unless
 *    $OPENBLAS_NUM_THREADS says otherwise), one call per matrix; warm-up once,
 *    then the median of as many runs as tvk had. Its result is compared with
 *    tvk's, element by element, and checked like tvk's. relu(matmul) and
 *    gelu(matmul) (a layer's epilogue, fused into tvk's kernel): OpenBLAS's
 *    product, then the epilogue over it in one plain single-threaded pass.
 *  - conv, softmax, layernorm: plain single-threaded C loops in this program
 *    ("C 1-thr"; softmax and layernorm in three row passes), compiled with
 *    the bench; once for cases over a second, else the median of 3 runs.
 *  - a*b+c, sum and sum axis 0 (column sums of 4096 x 4096): a
 *    memory-bandwidth probe in plain C on all cores (one thread per online
 *    CPU, each on its own slice, over its own arrays as large as the case's):
 *    a triad a[i] = b[i] * s + c[i] ("triad") for a*b+c, a read-only sum
 *    ("read") for the sums; median of as many runs as tvk
 *    had, the result checked. Its GB/s counts what it reads and writes (12 and
 *    4 bytes per element).
 * Before the table: the host (the CPU's model, its vector ISA, its L2 cache, the CPUs
 * online, the load average) and the device. After the table, tvk_profile_summary: where the
 * device's time went, per kernel name, over every run of the cases (warm-up and settle runs too).
 * "tvk/ref" is tvk's rate over the reference's: GFLOP/s for OpenBLAS and C
 * (= ref time / tvk time), GB/s for the probes. Above 1: tvk is faster.
 * FLOP counts: matmul 2*M*N*K (per matrix of a batch); conv2d 2 per
 * multiply-add of the direct definition; softmax 5 per element (max, sub, exp,
 * sum, div); layernorm 6 (the mean's add; the variance's sub, mul and add;
 * the output's sub and mul); a*b+c 2 per element; sum 1 per element. Bytes: what the operation
 * must read and write at least (inputs once, output once).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, pthread_barrier, dlopen */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tvk.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static float frand(void) { /* uniform in [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1);
}

static float *rand_floats(size_t n) {
  float *p = malloc(n * sizeof *p);
  if (!p) exit(1);
  for (size_t i = 0; i < n; i++) p[i] = frand();
  return p;
}

/* What a matmul case applies to the product, fused into its kernel: the
 * epilogue of a network's layer. */
typedef enum { EPI_NONE, EPI_RELU, EPI_GELU } Epilogue;

/* A case builds its output from the inputs; check compares it with a reference. */
typedef struct {
  tvk_ctx *ctx;
  int64_t batch, m, n, k; /* batch: matrices in a batched matmul, else 1 */
  Epilogue epi;
  tvk_tensor *in[3];
  float *host[3];
} Case;

typedef tvk_tensor *(*BuildFn)(Case *c);
typedef double (*CheckFn)(Case *c, const float *out); /* returns max error */

static tvk_tensor *build_matmul(Case *c) {
  tvk_tensor *p = tvk_matmul(c->in[0], c->in[1]);
  if (c->epi == EPI_NONE) return p;
  tvk_tensor *r = c->epi == EPI_RELU ? tvk_relu(p) : tvk_gelu(p);
  tvk_release(p);
  return r;
}

/* The epilogue in double precision (GELU: the tanh form tvk_gelu computes). */
static double epilogue(Epilogue e, double x) {
  if (e == EPI_RELU) return x > 0 ? x : 0;
  if (e == EPI_GELU) return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  return x;
}

/* The batched matmul's inputs are stored 2-D, (batch*m, k) and (batch*k, n),
 * and viewed 3-D (free). */
static tvk_tensor *build_bmm(Case *c) {
  tvk_tensor *a = tvk_reshape(c->in[0], 3, (const int64_t[]){c->batch, c->m, c->k});
  tvk_tensor *b = tvk_reshape(c->in[1], 3, (const int64_t[]){c->batch, c->k, c->n});
  tvk_tensor *r = tvk_matmul(a, b);
  tvk_release(a), tvk_release(b);
  return r;
}

static double check_matmul(Case *c, const float *out) {
  double worst = 0;
  for (int s = 0; s < 64; s++) { /* 64 sampled entries: the full product costs too much here */
    int64_t b = s % c->batch, i = (s * 7919) % c->m, j = (s * 104729) % c->n;
    const float *a0 = c->host[0] + b * c->m * c->k, *b0 = c->host[1] + b * c->k * c->n;
    double ref = 0;
    for (int64_t k = 0; k < c->k; k++) ref += (double)a0[i * c->k + k] * b0[k * c->n + j];
    ref = epilogue(c->epi, ref);
    double e = fabs(ref - out[(b * c->m + i) * c->n + j]) / (1 + fabs(ref));
    if (e > worst) worst = e;
  }
  return worst;
}

static tvk_tensor *build_softmax(Case *c) { return tvk_softmax(c->in[0], 1); }

static double check_softmax(Case *c, const float *out) {
  double worst = 0;
  for (int64_t i = 0; i < c->m; i += c->m / 16 + 1) {
    const float *x = c->host[0] + i * c->n;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < c->n; j++) mx = x[j] > mx ? x[j] : mx;
    for (int64_t j = 0; j < c->n; j++) sum += exp(x[j] - mx);
    for (int64_t j = 0; j < c->n; j++) {
      double e = fabs(exp(x[j] - mx) / sum - out[i * c->n + j]) * (double)c->n;
      if (e > worst) worst = e;
    }
  }
  return worst;
}

static tvk_tensor *build_layernorm(Case *c) { return tvk_layernorm(c->in[0], 1, NULL, NULL, 1e-5); }

static double check_layernorm(Case *c, const float *out) {
  double worst = 0;
  for (int64_t i = 0; i < c->m; i += c->m / 16 + 1) {
    const float *x = c->host[0] + i * c->n;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < c->n; j++) mean += x[j];
    mean /= (double)c->n;
    for (int64_t j = 0; j < c->n; j++) var += (x[j] - mean) * (x[j] - mean);
    var /= (double)c->n;
    for (int64_t j = 0; j < c->n; j++) {
      double e = fabs((x[j] - mean) / sqrt(var + 1e-5) - out[i * c->n + j]);
      if (e > worst) worst = e;
    }
  }
  return worst;
}

static tvk_tensor *build_fma(Case *c) {
  tvk_tensor *p = tvk_mul(c->in[0], c->in[1]);
  tvk_tensor *r = tvk_add(p, c->in[2]);
  tvk_release(p);
  return r;
}

static double check_fma(Case *c, const float *out) {
  double worst = 0;
  for (int64_t i = 0; i < c->n; i++) {
    double ref = (double)c->host[0][i] * c->host[1][i] + c->host[2][i];
    double e = fabs(ref - out[i]);
    if (e > worst) worst = e;
  }
  return worst;
}

/* conv2d: x (CN, CC, CH, CW), w (CK, CC, 3, 3), padding 1, stride 1: the
 * inputs are stored 2-D and viewed 4-D (free). */
enum { CN = 8, CC = 32, CH = 32, CW = 32, CK = 64 };

static tvk_tensor *build_conv(Case *c) {
  tvk_tensor *x = tvk_reshape(c->in[0], 4, (const int64_t[]){CN, CC, CH, CW});
  tvk_tensor *w = tvk_reshape(c->in[1], 4, (const int64_t[]){CK, CC, 3, 3});
  tvk_tensor *r = tvk_conv2d(x, w, NULL, NULL, (const int64_t[]){1, 1, 1, 1}, NULL, 1);
  tvk_release(x), tvk_release(w);
  return r;
}

static double conv_at(const Case *c, int64_t n, int64_t k, int64_t y, int64_t x) {
  double t = 0;
  for (int64_t ci = 0; ci < CC; ci++)
    for (int64_t dy = 0; dy < 3; dy++)
      for (int64_t dx = 0; dx < 3; dx++) {
        int64_t iy = y + dy - 1, ix = x + dx - 1;
        if (iy < 0 || iy >= CH || ix < 0 || ix >= CW) continue;
        t += (double)c->host[0][((n * CC + ci) * CH + iy) * CW + ix] *
             c->host[1][(k * CC + ci) * 9 + dy * 3 + dx];
      }
  return t;
}

static double check_conv(Case *c, const float *out) {
  double worst = 0;
  for (int s = 0; s < 64; s++) { /* 64 sampled outputs, edges included */
    int64_t n = s % CN, k = (s * 7) % CK, y = (s * 13) % CH, x = s % 2 ? CW - 1 : (s * 5) % CW;
    double ref = conv_at(c, n, k, y, x);
    double e = fabs(ref - out[((n * CK + k) * CH + y) * CW + x]) / (1 + fabs(ref));
    if (e > worst) worst = e;
  }
  return worst;
}

static tvk_tensor *build_sum(Case *c) { return tvk_sum(c->in[0], 0, NULL, false); }

/* Column sums of a CS x CS matrix (a bias's gradient, a batch norm's
 * statistics): a reduce along the strided axis, the outputs along the
 * contiguous one. */
enum { CS = 4096 };
static tvk_tensor *build_colsum(Case *c) { return tvk_sum(c->in[0], 1, (int[]){0}, false); }

static double check_colsum(Case *c, const float *out) {
  double worst = 0;
  for (int64_t j = 0; j < CS; j++) {
    double ref = 0;
    for (int64_t i = 0; i < CS; i++) ref += c->host[0][i * CS + j];
    double e = fabs(ref - out[j]) / sqrt((double)CS); /* as check_sum */
    if (e > worst) worst = e;
  }
  return worst;
}

static double check_sum(Case *c, const float *out) {
  double ref = 0;
  for (int64_t i = 0; i < c->n; i++) ref += c->host[0][i];
  return fabs(ref - out[0]) / sqrt((double)c->n); /* error of a float32 sum grows ~ sqrt(n) */
}

/* ---- references, timed in the same run as tvk ---- */

/* The result of a reference and how it went: ms and rates are NAN when it is
 * missing or failed. */
typedef struct {
  const char *name;
  double s;    /* median seconds */
  double gbps; /* for the probes: GB/s over the bytes the probe moves, else NAN */
  int ok;      /* 0: the reference ran and gave a wrong result */
} RefResult;

/* -- OpenBLAS, loaded at run time: the bench builds and runs without it -- */

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111 };
typedef void (*SgemmFn)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb, float beta, float *c,
                        int ldc);
static SgemmFn blas_sgemm;

static void *sym(void *lib, const char *name) { return lib ? dlsym(lib, name) : NULL; }

/* Loads libopenblas.so.0 and prints which one, or why there is none.
 * OpenBLAS starts its threads when loaded, and after each call they keep
 * polling (sched_yield) for 2^28 cycles by default: on a 2-core machine that
 * took a core from whatever ran next, tvk's runs of the following case (its
 * matmul 512 timed 5.9 instead of 3.0 ms). OPENBLAS_THREAD_TIMEOUT=4, unless
 * set already, makes them sleep as soon as a call is done; a call then wakes
 * them, microseconds against its milliseconds. */
static void load_openblas(void) {
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
  void *lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL); /* never closed */
  void *f = sym(lib, "cblas_sgemm");
  if (!f) {
    const char *why = dlerror();
    printf("matmul reference: none (%s): n/a\n", why ? why : "no cblas_sgemm");
    return;
  }
  memcpy(&blas_sgemm, &f, sizeof f); /* object pointer to function pointer, as POSIX allows */
  char *(*config)(void) = NULL;
  int (*threads)(void) = NULL;
  void *g = sym(lib, "openblas_get_config"), *t = sym(lib, "openblas_get_num_threads");
  if (g) memcpy(&config, &g, sizeof g);
  if (t) memcpy(&threads, &t, sizeof t);
  printf("matmul reference: libopenblas.so.0 cblas_sgemm (%s, %d threads)\n",
         config ? config() : "OpenBLAS", threads ? threads() : -1);
}

/* Runs cblas_sgemm on the case once per matrix of the batch, into out,
 * then the epilogue, one plain pass (what an app that calls BLAS adds). */
static void blas_run(const Case *c, float *out) {
  for (int64_t b = 0; b < c->batch; b++)
    blas_sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, (int)c->m, (int)c->n, (int)c->k,
               1.0f, c->host[0] + b * c->m * c->k, (int)c->k, c->host[1] + b * c->k * c->n,
               (int)c->n, 0.0f, out + b * c->m * c->n, (int)c->n);
  if (c->epi == EPI_NONE) return;
  for (int64_t i = 0; i < c->batch * c->m * c->n; i++) out[i] = (float)epilogue(c->epi, out[i]);
}

/* Warm-up once, then the median of reps runs; the result is compared with
 * tvk's (every element) and checked against the double-precision reference
 * the same way as tvk's. */
static RefResult ref_openblas(const char *name, Case *c, const float *tvk_out, CheckFn check,
                              double tol, int reps) {
  RefResult r = {"OpenBLAS", NAN, NAN, 1};
  if (!blas_sgemm) return r;
  size_t numel = (size_t)(c->batch * c->m * c->n);
  float *out = malloc(numel * sizeof *out);
  if (!out) return r;
  double times[32];
  for (int i = 0; i <= reps; i++) {
    double t0 = now_s();
    blas_run(c, out);
    if (i) times[i - 1] = now_s() - t0;
  }
  double diff = 0; /* relative to the magnitude, as check_matmul */
  for (size_t i = 0; i < numel; i++) {
    double e = fabs((double)out[i] - tvk_out[i]) / (1 + fabs((double)out[i]));
    if (e > diff) diff = e;
  }
  double err = check(c, out);
  if (err > tol || diff > 2 * tol) {
    fprintf(stderr, "%s: OpenBLAS's result: error %.3g (tolerance %.3g), up to %.3g from tvk's\n",
            name, err, tol, diff);
    r.ok = 0;
  } else {
    qsort(times, (size_t)reps, sizeof *times, cmp_double);
    r.s = times[reps / 2];
  }
  free(out);
  return r;
}

/* -- plain single-threaded C loops -- */

static float *ref_out; /* sink for the reference results, so nothing is optimised away */

static void ref_conv(Case *c) { /* direct loops, float accumulation */
  for (int64_t n = 0; n < CN; n++)
    for (int64_t k = 0; k < CK; k++)
      for (int64_t y = 0; y < CH; y++)
        for (int64_t x = 0; x < CW; x++) {
          float t = 0;
          for (int64_t ci = 0; ci < CC; ci++)
            for (int64_t dy = 0; dy < 3; dy++) {
              int64_t iy = y + dy - 1;
              if (iy < 0 || iy >= CH) continue;
              const float *row = c->host[0] + ((n * CC + ci) * CH + iy) * CW;
              const float *wr = c->host[1] + (k * CC + ci) * 9 + dy * 3;
              for (int64_t dx = 0; dx < 3; dx++) {
                int64_t ix = x + dx - 1;
                if (ix >= 0 && ix < CW) t += row[ix] * wr[dx];
              }
            }
          ref_out[((n * CK + k) * CH + y) * CW + x] = t;
        }
}

static void ref_softmax(Case *c) {
  for (int64_t i = 0; i < c->m; i++) {
    const float *x = c->host[0] + i * c->n;
    float *y = ref_out + i * c->n, mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < c->n; j++) mx = x[j] > mx ? x[j] : mx;
    for (int64_t j = 0; j < c->n; j++) sum += (y[j] = expf(x[j] - mx));
    for (int64_t j = 0; j < c->n; j++) y[j] /= sum;
  }
}

static void ref_layernorm(Case *c) {
  for (int64_t i = 0; i < c->m; i++) {
    const float *x = c->host[0] + i * c->n;
    float *y = ref_out + i * c->n, mean = 0, var = 0;
    for (int64_t j = 0; j < c->n; j++) mean += x[j];
    mean /= (float)c->n;
    for (int64_t j = 0; j < c->n; j++) var += (x[j] - mean) * (x[j] - mean);
    float r = 1 / sqrtf(var / (float)c->n + 1e-5f);
    for (int64_t j = 0; j < c->n; j++) y[j] = (x[j] - mean) * r;
  }
}

/* -- the memory-bandwidth probe: plain C, one thread per online CPU -- */

enum { PROBE_READ, PROBE_TRIAD };
enum { PROBE_MAX_THREADS = 1024 };

typedef struct Probe Probe;
typedef struct {
  Probe *p;
  size_t lo, hi; /* its slice */
  double sum;    /* PROBE_READ: the slice's sum, used by the check */
  pthread_t tid;
} ProbeThread;

struct Probe {
  int kind, stop;
  float *a, *b, *c, s; /* PROBE_READ sums b; PROBE_TRIAD: a = b * s + c */
  pthread_barrier_t go, done;
  /* The gate holds the threads until all are started (gate_open 1), or
   * sends them home (stop) when one could not be. */
  pthread_mutex_t gate;
  pthread_cond_t gate_cv;
  int gate_open;
};

/* Inputs as a function of the index, so that the check can recompute them. */
static float probe_value(size_t i, unsigned salt) {
  return (float)((i * 2654435761u + salt) % 2048u) / 1024.0f - 1.0f;
}

/* Blocks of 16 written as four loops of 4 so that gcc and clang at -O2 (the
 * bench's flags) keep four vector accumulators in registers. */
static float probe_sum(const float *restrict x, size_t n) {
  float acc[16] = {0};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const float *p = x + i;
    for (int j = 0; j < 4; j++) acc[j] += p[j];
    for (int j = 4; j < 8; j++) acc[j] += p[j];
    for (int j = 8; j < 12; j++) acc[j] += p[j];
    for (int j = 12; j < 16; j++) acc[j] += p[j];
  }
  float s = 0;
  for (; i < n; i++) s += x[i];
  for (int j = 0; j < 16; j++) s += acc[j];
  return s;
}

static void probe_triad(float *restrict a, const float *restrict b, const float *restrict c,
                        float s, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 4; j++) a[i + j] = b[i + j] * s + c[i + j];
    for (int j = 4; j < 8; j++) a[i + j] = b[i + j] * s + c[i + j];
    for (int j = 8; j < 12; j++) a[i + j] = b[i + j] * s + c[i + j];
    for (int j = 12; j < 16; j++) a[i + j] = b[i + j] * s + c[i + j];
  }
  for (; i < n; i++) a[i] = b[i] * s + c[i];
}

static void *probe_main(void *arg) {
  ProbeThread *t = arg;
  Probe *p = t->p;
  pthread_mutex_lock(&p->gate);
  while (!p->gate_open && !p->stop) pthread_cond_wait(&p->gate_cv, &p->gate);
  int stop = p->stop;
  pthread_mutex_unlock(&p->gate);
  if (stop) return NULL;
  for (size_t i = t->lo; i < t->hi; i++) { /* first touch: each slice's pages near its thread */
    p->b[i] = probe_value(i, 1);
    if (p->kind == PROBE_TRIAD) p->c[i] = probe_value(i, 2), p->a[i] = 0;
  }
  pthread_barrier_wait(&p->done);
  for (;;) {
    pthread_barrier_wait(&p->go);
    if (p->stop) break;
    size_t n = t->hi - t->lo;
    if (p->kind == PROBE_READ)
      t->sum = probe_sum(p->b + t->lo, n);
    else
      probe_triad(p->a + t->lo, p->b + t->lo, p->c + t->lo, p->s, n);
    pthread_barrier_wait(&p->done);
  }
  return NULL;
}

/* Warm-up once, then the median of reps runs over n floats per array; the
 * result of the last run is checked. */
static RefResult ref_probe(int kind, size_t n, int reps) {
  RefResult r = {kind == PROBE_READ ? "read" : "triad", NAN, NAN, 1};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = ncpu < 1 ? 1 : ncpu > PROBE_MAX_THREADS ? PROBE_MAX_THREADS : (int)ncpu;
  Probe p = {.kind = kind, .s = 1.5f};
  ProbeThread *th = calloc((size_t)nt, sizeof *th);
  p.b = malloc(n * sizeof *p.b);
  if (kind == PROBE_TRIAD) p.a = malloc(n * sizeof *p.a), p.c = malloc(n * sizeof *p.c);
  if (!th || !p.b || (kind == PROBE_TRIAD && (!p.a || !p.c))) {
    free(th), free(p.a), free(p.b), free(p.c);
    return r;
  }
  pthread_mutex_init(&p.gate, NULL);
  pthread_cond_init(&p.gate_cv, NULL);
  pthread_barrier_init(&p.go, NULL, (unsigned)nt + 1);
  pthread_barrier_init(&p.done, NULL, (unsigned)nt + 1);
  size_t per = (n / (size_t)nt + 15) / 16 * 16; /* slices start on 64-byte boundaries */
  int started = 0;
  for (int i = 0; i < nt; i++) {
    size_t lo = (size_t)i * per;
    size_t hi = i < nt - 1 && lo + per < n ? lo + per : n;
    th[i] = (ProbeThread){.p = &p, .lo = lo < n ? lo : n, .hi = hi};
    if (pthread_create(&th[i].tid, NULL, probe_main, &th[i])) break;
    started++;
  }
  pthread_mutex_lock(&p.gate);
  if (started < nt)
    p.stop = 1;
  else
    p.gate_open = 1;
  pthread_cond_broadcast(&p.gate_cv);
  pthread_mutex_unlock(&p.gate);
  if (started < nt) { /* cannot run on all cores: no reference */
    fprintf(stderr, "bench: probe: cannot start %d threads\n", nt);
    for (int i = 0; i < started; i++) pthread_join(th[i].tid, NULL);
  } else {
    pthread_barrier_wait(&p.done); /* the arrays are filled */
    double times[32];
    for (int i = 0; i <= reps; i++) {
      double t0 = now_s();
      pthread_barrier_wait(&p.go);
      pthread_barrier_wait(&p.done);
      if (i) times[i - 1] = now_s() - t0;
    }
    p.stop = 1;
    pthread_barrier_wait(&p.go);
    for (int i = 0; i < nt; i++) pthread_join(th[i].tid, NULL);
    double err = 0, got = 0, ref = 0;
    if (kind == PROBE_READ) { /* the sum is used: compared with a double one */
      for (int i = 0; i < nt; i++) got += th[i].sum;
      for (size_t i = 0; i < n; i++) ref += p.b[i];
      err = fabs(got - ref) / sqrt((double)n);
    } else {
      for (size_t i = 0; i < n; i++) {
        double e = fabs(p.a[i] - ((double)p.b[i] * p.s + p.c[i]));
        if (e > err) err = e;
      }
    }
    if (err > 1e-3) {
      fprintf(stderr, "bench: probe %s: wrong result (error %.3g)\n", r.name, err);
      r.ok = 0;
    } else {
      qsort(times, (size_t)reps, sizeof *times, cmp_double);
      r.s = times[reps / 2];
      r.gbps = (kind == PROBE_READ ? 4.0 : 12.0) * (double)n / r.s * 1e-9;
    }
  }
  pthread_barrier_destroy(&p.go), pthread_barrier_destroy(&p.done);
  pthread_mutex_destroy(&p.gate), pthread_cond_destroy(&p.gate_cv);
  free(th), free(p.a), free(p.b), free(p.c);
  return r;
}

typedef void (*RefFn)(Case *c);

/* Median seconds of the reference (1 run when one takes over a second). */
static RefResult time_ref(RefFn ref, Case *c, size_t out_numel) {
  RefResult r = {"C 1-thr", NAN, NAN, 1};
  ref_out = malloc(out_numel * sizeof *ref_out);
  if (!ref_out) return r;
  double t[3];
  int n = 0;
  for (; n < 3; n++) {
    double t0 = now_s();
    ref(c);
    t[n] = now_s() - t0;
    if (t[n] > 1.0) {
      n++;
      break;
    }
  }
  free(ref_out);
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  r.s = t[n / 2];
  return r;
}

enum { REF_OPENBLAS, REF_C, REF_READ, REF_TRIAD };

typedef struct {
  const char *name;
  BuildFn build;
  CheckFn check;
  int refkind;
  RefFn ref;  /* REF_C */
  double tol; /* max error accepted by the check */
  int quick;  /* in the --quick set */
  int64_t batch, m, n, k;
  Epilogue epi; /* matmul cases */
  int ninputs;
  int64_t shapes[3][2];
  double flops, bytes;
} Spec;

static void print_na(double x, const char *fmt) {
  if (isnan(x))
    printf(" %8s", "n/a");
  else
    printf(fmt, x);
}

static int run_case(tvk_ctx *ctx, const Spec *sp, int reps) {
  Case c = {ctx, sp->batch ? sp->batch : 1, sp->m, sp->n, sp->k, sp->epi, {0}, {0}};
  for (int i = 0; i < sp->ninputs; i++) {
    int nd = sp->shapes[i][1] ? 2 : 1;
    size_t numel = (size_t)sp->shapes[i][0] * (size_t)(sp->shapes[i][1] ? sp->shapes[i][1] : 1);
    c.host[i] = rand_floats(numel);
    c.in[i] = tvk_from_data(ctx, TVK_FLOAT32, nd, sp->shapes[i], c.host[i]);
  }
  double times[32];
  float *host = NULL; /* tvk's result, kept for the comparison with OpenBLAS */
  int ok = 1;
  double settle_end = 0;
  int settle = 0;
  for (int r = 0; r <= reps && ok; r++) { /* run 0 is the warm-up */
    double t0 = now_s();
    tvk_tensor *out = sp->build(&c);
    tvk_status st = tvk_realize(1, &out);
    if (st == TVK_OK) st = tvk_sync(ctx);
    double t1 = now_s();
    /* After a run 0 that compiled its kernels, the next few runs were up to
     * 2x slower (matmul 512: nine runs of 4-5.6 ms, then 2.6, whether or not
     * the process slept in between; not after a run 0 that found its
     * kernels on disk). So up to 10 more untimed runs, while they take less
     * than 0.3 s in all. */
    if (r == 1 && st == TVK_OK && ++settle <= 10 && t1 < settle_end) {
      tvk_release(out);
      r = 0;
      continue;
    }
    if (st != TVK_OK) {
      fprintf(stderr, "%s: %s: %s\n", sp->name, tvk_status_name(st), tvk_ctx_error(ctx));
      ok = 0;
    } else if (r == 0) {
      /* the CPU's first launches may run TinyCC's code (the compile tiers):
       * time the optimised build, which is what runs from then on */
      st = tvk_ctx_wait_compiles(ctx);
      if (st != TVK_OK) {
        fprintf(stderr, "%s: %s: %s\n", sp->name, tvk_status_name(st), tvk_ctx_error(ctx));
        ok = 0;
        tvk_release(out);
        break;
      }
      settle_end = now_s() + 0.3;
      size_t numel = (size_t)tvk_numel(out);
      host = malloc(numel * sizeof *host);
      if (!host || tvk_to_host(out, host, numel * sizeof *host) != TVK_OK) ok = 0;
      double err = ok ? sp->check(&c, host) : INFINITY;
      if (err > sp->tol) {
        fprintf(stderr, "%s: wrong result (error %.3g > %.3g)\n", sp->name, err, sp->tol);
        ok = 0;
      }
    } else {
      times[r - 1] = t1 - t0;
    }
    tvk_release(out);
  }
  if (ok) {
    qsort(times, (size_t)reps, sizeof *times, cmp_double);
    double med = times[reps / 2];
    RefResult ref;
    switch (sp->refkind) {
    case REF_OPENBLAS: ref = ref_openblas(sp->name, &c, host, sp->check, sp->tol, reps); break;
    case REF_READ: ref = ref_probe(PROBE_READ, (size_t)sp->n, reps); break;
    case REF_TRIAD: ref = ref_probe(PROBE_TRIAD, (size_t)sp->n, reps); break;
    default: ref = time_ref(sp->ref, &c, (size_t)(sp->m ? c.batch * sp->m * sp->n : sp->n)); break;
    }
    ok = ref.ok;
    double gflops = sp->flops / med * 1e-9, gbps = sp->bytes / med * 1e-9;
    double ref_gflops = sp->flops / ref.s * 1e-9;
    double ref_gbps = isnan(ref.gbps) ? sp->bytes / ref.s * 1e-9 : ref.gbps;
    double ratio = isnan(ref.gbps) ? ref.s / med : gbps / ref.gbps;
    printf("%-26s %9.3f %9.2f %8.2f | %-8s", sp->name, med * 1e3, gflops, gbps, ref.name);
    print_na(ref.s * 1e3, " %8.3f");
    if (isnan(ref.gbps))
      print_na(ref_gflops, " %8.2f");
    else
      printf(" %8s", "-"); /* a probe does no FLOPs to speak of */
    print_na(ref_gbps, " %8.2f");
    print_na(ratio, " %8.3g");
    printf("\n");
    fflush(stdout);
  }
  free(host);
  for (int i = 0; i < sp->ninputs; i++) tvk_release(c.in[i]), free(c.host[i]);
  return ok;
}

static Spec matmul_spec(const char *name, int64_t sz, int quick, Epilogue epi) {
  return (Spec){.name = name,
                .build = build_matmul,
                .check = check_matmul,
                .refkind = REF_OPENBLAS,
                .tol = 1e-4,
                .quick = quick,
                .batch = 1,
                .m = sz,
                .n = sz,
                .k = sz,
                .epi = epi,
                .ninputs = 2,
                .shapes = {{sz, sz}, {sz, sz}},
                .flops = 2.0 * (double)(sz * sz * sz),
                .bytes = 3.0 * (double)(sz * sz) * 4};
}

/* The machine the figures come from: the CPU's model, the vector ISA its
 * kernels and OpenBLAS can use, the CPUs online and the load when the bench
 * starts (only ratios within one run compare across machines). */
static void print_host(void) {
  char line[4096], model[256] = "unknown", isa[128] = "";
  FILE *f = fopen("/proc/cpuinfo", "r");
  bool have_flags = false;
  while (f && fgets(line, sizeof line, f)) {
    char *v = strchr(line, ':');
    if (!v) continue;
    v += 1 + (v[1] == ' ');
    v[strcspn(v, "\n")] = '\0';
    if (!strncmp(line, "model name", 10) && !strcmp(model, "unknown"))
      snprintf(model, sizeof model, "%s", v);
    if (!have_flags && (!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8))) {
      /* the widest vector extensions named, with FMA and AMX */
      static const char *const names[] = {"avx512f", "avx512_bf16", "amx_tile", "avx2",
                                          "fma",     "asimd",       "sve",      "sve2"};
      size_t at = 0;
      for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char pat[32];
        snprintf(pat, sizeof pat, " %s ", names[i]);
        char padded[4096];
        snprintf(padded, sizeof padded, " %s ", v);
        if (strstr(padded, pat) && at < sizeof isa)
          at += (size_t)snprintf(isa + at, sizeof isa - at, "%s%s", at ? " " : "", names[i]);
      }
      have_flags = true;
    }
  }
  if (f) fclose(f);
  double load = -1;
  f = fopen("/proc/loadavg", "r");
  if (f && fscanf(f, "%lf", &load) != 1) load = -1;
  if (f) fclose(f);
  /* the first core's L2 (the matmul's runs are sized from it) */
  char l2[32] = "?";
  for (int i = 0; i < 8; i++) {
    char path[96], lv[16] = "";
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    if (!(f = fopen(path, "r"))) break;
    bool two = fgets(lv, sizeof lv, f) && lv[0] == '2';
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (two && (f = fopen(path, "r"))) {
      if (fgets(l2, sizeof l2, f)) l2[strcspn(l2, "\n")] = '\0';
      fclose(f);
      break;
    }
  }
  printf("host: %s; %s; L2 %s; %ld CPUs online; load %.2f\n", model,
         *isa ? isa : "no vector ISA listed", l2, sysconf(_SC_NPROCESSORS_ONLN), load);
}

int main(int argc, char **argv) {
  const char *dev = NULL, *only = NULL;
  int quick = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else if (!strcmp(argv[i], "--case") && i + 1 < argc)
      only = argv[++i];
    else
      dev = argv[i];
  }
  tvk_ctx *ctx;
  /* say how long compiles go; time kernels for the summary at the end */
  tvk_ctx_options opt = {.device = dev, .progress = 1, .profile = 1};
  if (tvk_ctx_create_opts(&opt, &ctx) != TVK_OK) {
    fprintf(stderr, "bench: no device: %s\n", tvk_last_create_error());
    return 1;
  }
  print_host();
  printf("device: %s\n", tvk_ctx_device(ctx));
  load_openblas();
  printf("%-26s %9s %9s %8s | %-8s %8s %8s %8s %8s\n", "case", "ms (med)", "GFLOP/s", "GB/s", "ref",
         "ms", "GFLOP/s", "GB/s", "tvk/ref");
  const int64_t big = 16 << 20, bb = 16, bs = 256; /* batched: bb matrices of bs x bs */
  Spec specs[] = {
      matmul_spec("matmul 512 f32", 512, 1, EPI_NONE),
      matmul_spec("matmul 1024 f32", 1024, 0, EPI_NONE),
      matmul_spec("matmul 2048 f32", 2048, 0, EPI_NONE),
      /* a layer's epilogue fused into the product's kernel */
      matmul_spec("relu(matmul) 1024 f32", 1024, 1, EPI_RELU),
      matmul_spec("gelu(matmul) 1024 f32", 1024, 0, EPI_GELU),
      {"matmul 16x256x256 f32",
       build_bmm,
       check_matmul,
       REF_OPENBLAS,
       NULL,
       1e-4,
       1,
       bb,
       bs,
       bs,
       bs,
       EPI_NONE,
       2,
       {{bb * bs, bs}, {bb * bs, bs}},
       2.0 * bb * bs * bs * bs,
       3.0 * bb * bs * bs * 4},
      /* an odd batch: its matrices do not divide among the cores evenly */
      {"matmul 3x512x512 f32",
       build_bmm,
       check_matmul,
       REF_OPENBLAS,
       NULL,
       1e-4,
       0,
       3,
       512,
       512,
       512,
       EPI_NONE,
       2,
       {{3 * 512, 512}, {3 * 512, 512}},
       2.0 * 3 * 512 * 512 * 512,
       3.0 * 3 * 512 * 512 * 4},
      {"conv 3x3 8x32x32, 64 out",
       build_conv,
       check_conv,
       REF_C,
       ref_conv,
       1e-4,
       1,
       1,
       CN * CK,
       CH * CW,
       0,
       EPI_NONE,
       2,
       {{CN * CC, CH * CW}, {CK, CC * 9}},
       2.0 * CN * CK * CH * CW * CC * 9,
       4.0 * (CN * CC * CH * CW + CK * CC * 9 + CN * CK * CH * CW)},
      {"softmax 4096x4096 f32",
       build_softmax,
       check_softmax,
       REF_C,
       ref_softmax,
       1e-3,
       0,
       1,
       4096,
       4096,
       0,
       EPI_NONE,
       1,
       {{4096, 4096}},
       5.0 * 4096 * 4096,
       2.0 * 4096 * 4096 * 4},
      {"layernorm 4096x4096 f32",
       build_layernorm,
       check_layernorm,
       REF_C,
       ref_layernorm,
       1e-4,
       0,
       1,
       4096,
       4096,
       0,
       EPI_NONE,
       1,
       {{4096, 4096}},
       6.0 * 4096 * 4096,
       2.0 * 4096 * 4096 * 4},
      {"a*b+c 16M f32",
       build_fma,
       check_fma,
       REF_TRIAD,
       NULL,
       1e-6,
       1,
       1,
       0,
       big,
       0,
       EPI_NONE,
       3,
       {{big, 0}, {big, 0}, {big, 0}},
       2.0 * (double)big,
       4.0 * (double)big * 4},
      {"sum 16M f32",
       build_sum,
       check_sum,
       REF_READ,
       NULL,
       1e-3,
       1,
       1,
       0,
       big,
       0,
       EPI_NONE,
       1,
       {{big, 0}},
       (double)big,
       (double)big * 4},
      /* the read probe over the matrix's CS * CS elements */
      {"sum axis 0 4096x4096 f32",
       build_colsum,
       check_colsum,
       REF_READ,
       NULL,
       1e-3,
       1,
       1,
       0,
       (int64_t)CS * CS,
       0,
       EPI_NONE,
       1,
       {{CS, CS}},
       (double)CS * CS,
       ((double)CS * CS + CS) * 4},
  };
  int nspecs = (int)(sizeof specs / sizeof specs[0]), bad = 0;
  for (int i = 0; i < nspecs; i++) {
    if ((quick && !specs[i].quick) || (only && !strstr(specs[i].name, only))) continue;
    bad += !run_case(ctx, &specs[i], quick ? 3 : (specs[i].m >= 2048 ? 3 : 7));
  }
  printf("\n%s", tvk_profile_summary(ctx));
  tvk_ctx_destroy(ctx);
  return bad ? 1 : 0;
}
