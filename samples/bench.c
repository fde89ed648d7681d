/* bench: times a few cases on one device and prints a table.
 *
 *   build/samples/bench [DEVICE] [--quick]
 *
 * Each case builds its expression from realized inputs, realizes it and waits
 * for the device (tvk_sync); the first run (which compiles) is a warm-up, then
 * the median of several runs is reported. Every case is checked once against a
 * reference computed here in double precision, so a fast wrong answer shows.
 * The "ref ms" column times the same computation as plain single-threaded C
 * loops in this program (matmul in i-k-j order, softmax in three row passes),
 * compiled with the bench; "x ref" is ref time / tvk time (above 1: tvk is
 * faster). The reference runs once for cases over a second, else 3 times.
 * FLOP counts: matmul 2*M*N*K; conv2d 2 per multiply-add of the direct
 * definition; softmax 5 per element (max, sub, exp, sum, div);
 * a*b+c 2 per element; sum 1 per element. Bytes: what the operation must read
 * and write at least (inputs once, output once).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* A case builds its output from the inputs; check compares it with a reference. */
typedef struct {
  tvk_ctx *ctx;
  int64_t m, n, k;
  tvk_tensor *in[3];
  float *host[3];
} Case;

typedef tvk_tensor *(*BuildFn)(Case *c);
typedef double (*CheckFn)(Case *c, const float *out); /* returns max error */

static tvk_tensor *build_matmul(Case *c) { return tvk_matmul(c->in[0], c->in[1]); }

static double check_matmul(Case *c, const float *out) {
  double worst = 0;
  for (int s = 0; s < 64; s++) { /* 64 sampled entries: the full product costs too much here */
    int64_t i = (s * 7919) % c->m, j = (s * 104729) % c->n;
    double ref = 0;
    for (int64_t k = 0; k < c->k; k++)
      ref += (double)c->host[0][i * c->k + k] * c->host[1][k * c->n + j];
    double e = fabs(ref - out[i * c->n + j]) / (1 + fabs(ref));
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

static double check_sum(Case *c, const float *out) {
  double ref = 0;
  for (int64_t i = 0; i < c->n; i++) ref += c->host[0][i];
  return fabs(ref - out[0]) / sqrt((double)c->n); /* error of a float32 sum grows ~ sqrt(n) */
}

/* ---- plain C references, timed for the "x ref" column ---- */

static float *ref_out; /* sink for the reference results, so nothing is optimised away */

static void ref_matmul(Case *c) {
  const float *restrict a = c->host[0], *restrict b = c->host[1];
  for (int64_t i = 0; i < c->m; i++) {
    float *restrict row = ref_out + i * c->n;
    for (int64_t j = 0; j < c->n; j++) row[j] = 0;
    for (int64_t k = 0; k < c->k; k++) {
      float aik = a[i * c->k + k];
      for (int64_t j = 0; j < c->n; j++) row[j] += aik * b[k * c->n + j];
    }
  }
}

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

static void ref_fma(Case *c) {
  const float *restrict a = c->host[0], *restrict b = c->host[1], *restrict d = c->host[2];
  float *restrict y = ref_out;
  for (int64_t i = 0; i < c->n; i++) y[i] = a[i] * b[i] + d[i];
}

static void ref_sum(Case *c) {
  float s = 0;
  for (int64_t i = 0; i < c->n; i++) s += c->host[0][i];
  ref_out[0] = s;
}

typedef void (*RefFn)(Case *c);

/* Median seconds of the reference (1 run when one takes over a second). */
static double time_ref(RefFn ref, Case *c, size_t out_numel) {
  ref_out = malloc(out_numel * sizeof *ref_out);
  if (!ref_out) return NAN;
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
  return t[n / 2];
}

typedef struct {
  const char *name;
  BuildFn build;
  CheckFn check;
  RefFn ref;
  double tol; /* max error accepted by the check */
  int64_t m, n, k;
  int ninputs;
  int64_t shapes[3][2];
  double flops, bytes;
} Spec;

static int run_case(tvk_ctx *ctx, const Spec *sp, int reps) {
  Case c = {ctx, sp->m, sp->n, sp->k, {0}, {0}};
  for (int i = 0; i < sp->ninputs; i++) {
    int nd = sp->shapes[i][1] ? 2 : 1;
    size_t numel = (size_t)sp->shapes[i][0] * (size_t)(sp->shapes[i][1] ? sp->shapes[i][1] : 1);
    c.host[i] = rand_floats(numel);
    c.in[i] = tvk_from_data(ctx, TVK_FLOAT32, nd, sp->shapes[i], c.host[i]);
  }
  double times[32];
  int ok = 1;
  for (int r = 0; r <= reps && ok; r++) { /* run 0 is the warm-up */
    double t0 = now_s();
    tvk_tensor *out = sp->build(&c);
    tvk_status st = tvk_realize(1, &out);
    if (st == TVK_OK) st = tvk_sync(ctx);
    double t1 = now_s();
    if (st != TVK_OK) {
      fprintf(stderr, "%s: %s: %s\n", sp->name, tvk_status_name(st), tvk_ctx_error(ctx));
      ok = 0;
    } else if (r == 0) {
      size_t numel = (size_t)tvk_numel(out);
      float *host = malloc(numel * sizeof *host);
      if (!host || tvk_to_host(out, host, numel * sizeof *host) != TVK_OK) ok = 0;
      double err = ok ? sp->check(&c, host) : INFINITY;
      if (err > sp->tol) {
        fprintf(stderr, "%s: wrong result (error %.3g > %.3g)\n", sp->name, err, sp->tol);
        ok = 0;
      }
      free(host);
    } else {
      times[r - 1] = t1 - t0;
    }
    tvk_release(out);
  }
  if (ok) {
    qsort(times, (size_t)reps, sizeof *times, cmp_double);
    double med = times[reps / 2];
    size_t out_numel = sp->m ? (size_t)sp->m * (size_t)sp->n : (size_t)sp->n;
    double ref = time_ref(sp->ref, &c, out_numel);
    printf("%-24s %10.3f %10.2f %10.2f %10.3f %8.2f\n", sp->name, med * 1e3, sp->flops / med * 1e-9,
           sp->bytes / med * 1e-9, ref * 1e3, ref / med);
    fflush(stdout);
  }
  for (int i = 0; i < sp->ninputs; i++) tvk_release(c.in[i]), free(c.host[i]);
  return ok;
}

int main(int argc, char **argv) {
  const char *dev = NULL;
  int quick = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else
      dev = argv[i];
  }
  tvk_ctx *ctx;
  if (tvk_ctx_create(dev, &ctx) != TVK_OK) {
    fprintf(stderr, "bench: no device: %s\n", tvk_last_create_error());
    return 1;
  }
  printf("device: %s\n", tvk_ctx_device(ctx));
  printf("%-24s %10s %10s %10s %10s %8s\n", "case", "ms (med)", "GFLOP/s", "GB/s", "ref ms",
         "x ref");
  const int64_t big = 16 << 20;
  Spec specs[] = {
      {"matmul 512 f32",
       build_matmul,
       check_matmul,
       ref_matmul,
       1e-4,
       512,
       512,
       512,
       2,
       {{512, 512}, {512, 512}},
       2.0 * 512 * 512 * 512,
       3.0 * 512 * 512 * 4},
      {"matmul 1024 f32",
       build_matmul,
       check_matmul,
       ref_matmul,
       1e-4,
       1024,
       1024,
       1024,
       2,
       {{1024, 1024}, {1024, 1024}},
       2.0 * 1024 * 1024 * 1024,
       3.0 * 1024 * 1024 * 4},
      {"matmul 2048 f32",
       build_matmul,
       check_matmul,
       ref_matmul,
       1e-4,
       2048,
       2048,
       2048,
       2,
       {{2048, 2048}, {2048, 2048}},
       2.0 * 2048 * 2048 * 2048,
       3.0 * 2048 * 2048 * 4},
      {"conv 3x3 8x32x32, 64 out",
       build_conv,
       check_conv,
       ref_conv,
       1e-4,
       CN * CK,
       CH * CW,
       0,
       2,
       {{CN * CC, CH * CW}, {CK, CC * 9}},
       2.0 * CN * CK * CH * CW * CC * 9,
       4.0 * (CN * CC * CH * CW + CK * CC * 9 + CN * CK * CH * CW)},
      {"softmax 4096x4096 f32",
       build_softmax,
       check_softmax,
       ref_softmax,
       1e-3,
       4096,
       4096,
       0,
       1,
       {{4096, 4096}},
       5.0 * 4096 * 4096,
       2.0 * 4096 * 4096 * 4},
      {"a*b+c 16M f32",
       build_fma,
       check_fma,
       ref_fma,
       1e-6,
       0,
       big,
       0,
       3,
       {{big, 0}, {big, 0}, {big, 0}},
       2.0 * (double)big,
       4.0 * (double)big * 4},
      {"sum 16M f32",
       build_sum,
       check_sum,
       ref_sum,
       1e-3,
       0,
       big,
       0,
       1,
       {{big, 0}},
       (double)big,
       (double)big * 4},
  };
  int nspecs = (int)(sizeof specs / sizeof specs[0]), bad = 0;
  for (int i = 0; i < nspecs; i++) {
    if (quick && specs[i].m >= 1024) continue;
    bad += !run_case(ctx, &specs[i], quick ? 3 : (specs[i].m >= 2048 ? 3 : 7));
  }
  tvk_ctx_destroy(ctx);
  return bad ? 1 : 0;
}
