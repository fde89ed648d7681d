/* onnx_run: load an ONNX model, run it on a device, print what came out and
 * how long a run takes.
 *
 *   build/samples/onnx_run MODEL.onnx [DEVICE] [options]
 *     --data DIR     inputs from DIR/input_N.pb (the ONNX test suite's layout);
 *                    with DIR/output_N.pb there, the outputs are compared with
 *                    them and the exit status says whether they match
 *     --dim NAME=N   the size of an open dim (default 1), e.g. --dim batch=8
 *     --runs N       timed runs (default 20)
 *   Without --data the inputs are random: floats uniform in [0, 1), integers
 *   and bools 0.
 *
 * Times: load (parse, weights to the device), the first run (schedule,
 * compile, run), then the median of warm runs (tvk_onnx_run + realize: the
 * graph built and scheduled again, from the schedule cache) and of captured
 * runs (tvk_jit: the launches replayed). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tvk.h"
#include "tvk_onnx.h"

enum { MAX_IO = 32, MAX_DIMS_SET = 16 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n ? v[n / 2] : 0;
}

/* The elements of t as doubles (malloc'ed), or NULL. */
static double *fetch(tvk_tensor *t) {
  tvk_tensor *d = tvk_cast(t, TVK_FLOAT64);
  int64_t n = tvk_numel(d);
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (v && tvk_to_host(d, v, sizeof(double) * (size_t)n) != TVK_OK) {
    free(v);
    v = NULL;
  }
  tvk_release(d);
  return v;
}

static void print_shape(const tvk_tensor *t) {
  printf("(");
  for (int d = 0; d < tvk_ndim(t); d++) printf(d ? ", %lld" : "%lld", (long long)tvk_shape(t)[d]);
  printf(tvk_ndim(t) == 1 ? ",)" : ")");
}

typedef struct {
  tvk_onnx_model *m;
} jit_user;

static tvk_status jit_fn(void *user, tvk_ctx *ctx, int nin, tvk_tensor *const *in, int nout,
                         tvk_tensor **out) {
  (void)ctx;
  return tvk_onnx_run(((jit_user *)user)->m, nin, in, nout, out);
}

int main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: %s MODEL.onnx [DEVICE] [--data DIR] [--dim NAME=N]... [--runs N]\n",
            argv[0]);
    return 2;
  }
  const char *model = argv[1], *device = NULL, *data = NULL;
  const char *dim_name[MAX_DIMS_SET];
  int64_t dim_value[MAX_DIMS_SET];
  int ndims_set = 0, runs = 20;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--data") && i + 1 < argc) {
      data = argv[++i];
    } else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
      runs = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--dim") && i + 1 < argc && ndims_set < MAX_DIMS_SET) {
      char *eq = strchr(argv[++i], '=');
      if (!eq) {
        fprintf(stderr, "onnx_run: --dim takes NAME=N, not '%s'\n", argv[i]);
        return 2;
      }
      *eq = 0;
      dim_name[ndims_set] = argv[i];
      dim_value[ndims_set++] = atoll(eq + 1);
    } else if (argv[i][0] != '-' && !device) {
      device = argv[i];
    } else {
      fprintf(stderr, "onnx_run: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (runs < 1) runs = 1;
  tvk_ctx *ctx;
  tvk_ctx_options opt = {.device = device, .progress = 1};
  if (tvk_ctx_create_opts(&opt, &ctx) != TVK_OK) {
    fprintf(stderr, "onnx_run: no device: %s\n", tvk_last_create_error());
    return 1;
  }
  printf("device: %s\n", tvk_ctx_device(ctx));
  double t0 = now();
  tvk_onnx_model *m;
  if (tvk_onnx_load(ctx, model, &m) != TVK_OK) {
    fprintf(stderr, "onnx_run: %s\n", tvk_onnx_last_error());
    tvk_ctx_destroy(ctx);
    return 1;
  }
  double t_load = now() - t0;
  int nin = tvk_onnx_input_count(m), nout = tvk_onnx_output_count(m);
  if (nin > MAX_IO || nout > MAX_IO) {
    fprintf(stderr, "onnx_run: %d inputs and %d outputs (at most %d)\n", nin, nout, MAX_IO);
    return 1;
  }
  tvk_tensor *in[MAX_IO], *out[MAX_IO];
  int rc = 0;
  for (int i = 0; i < nin; i++) {
    tvk_onnx_value_info vi;
    tvk_onnx_input_info(m, i, &vi);
    if (data) {
      char path[4096];
      snprintf(path, sizeof path, "%s/input_%d.pb", data, i);
      if (tvk_onnx_load_tensor(ctx, path, &in[i]) != TVK_OK) {
        fprintf(stderr, "onnx_run: %s\n", tvk_onnx_last_error());
        return 1;
      }
    } else {
      int64_t shape[TVK_MAX_DIMS];
      for (int d = 0; d < vi.ndim; d++) {
        shape[d] = vi.shape[d] >= 0 ? vi.shape[d] : 1;
        for (int k = 0; vi.shape[d] < 0 && vi.dim_names[d] && k < ndims_set; k++)
          if (!strcmp(dim_name[k], vi.dim_names[d])) shape[d] = dim_value[k];
      }
      bool fl = vi.dtype == TVK_FLOAT32 || vi.dtype == TVK_FLOAT16 || vi.dtype == TVK_FLOAT64 ||
                vi.dtype == TVK_BFLOAT16;
      tvk_tensor *r = fl ? tvk_rand(ctx, vi.dtype, vi.ndim, shape, 1234 + (uint64_t)i)
                         : tvk_full(ctx, vi.dtype, vi.ndim, shape, 0);
      in[i] = tvk_contiguous(r);
      tvk_release(r);
    }
    printf("input  %d '%s': %s ", i, vi.name, tvk_dtype_name(tvk_dtype_of(in[i])));
    print_shape(in[i]);
    printf("\n");
  }
  if (tvk_realize(nin, in) != TVK_OK) {
    fprintf(stderr, "onnx_run: inputs: %s\n", tvk_ctx_error(ctx));
    return 1;
  }

  t0 = now();
  if (tvk_onnx_run(m, nin, in, nout, out) != TVK_OK) {
    fprintf(stderr, "onnx_run: %s\n", tvk_onnx_last_error());
    return 1;
  }
  if (tvk_realize(nout, out) != TVK_OK) {
    fprintf(stderr, "onnx_run: %s\n", tvk_ctx_error(ctx));
    return 1;
  }
  double t_first = now() - t0;
  for (int k = 0; k < nout; k++) {
    tvk_onnx_value_info vi;
    tvk_onnx_output_info(m, k, &vi);
    printf("output %d '%s': %s ", k, vi.name, tvk_dtype_name(tvk_dtype_of(out[k])));
    print_shape(out[k]);
    double *v = fetch(out[k]);
    int64_t n = tvk_numel(out[k]);
    printf(" =");
    for (int64_t j = 0; v && j < n && j < 6; j++) printf(" %.6g", v[j]);
    printf(n > 6 ? " ...\n" : "\n");
    if (data && v) { /* compare with the expected output when there is one */
      char path[4096];
      struct stat st;
      snprintf(path, sizeof path, "%s/output_%d.pb", data, k);
      tvk_tensor *want;
      if (stat(path, &st) == 0 && tvk_onnx_load_tensor(ctx, path, &want) == TVK_OK) {
        double *w = fetch(want), worst = 0;
        bool ok = w && tvk_numel(want) == n;
        for (int64_t j = 0; ok && j < n; j++) {
          double e = fabs(v[j] - w[j]);
          if (!(isnan(v[j]) && isnan(w[j]))) worst = e > worst || isnan(e) ? e : worst;
          if (!(e <= 1e-7 + 1e-3 * fabs(w[j])) && !(isnan(v[j]) && isnan(w[j]))) ok = false;
        }
        printf("         vs %s: %s (largest difference %.3g)\n", path, ok ? "match" : "DIFFER",
               worst);
        rc |= !ok;
        free(w);
        tvk_release(want);
      }
    }
    free(v);
  }

  double *t_warm = malloc(sizeof(double) * (size_t)runs),
         *t_jit = malloc(sizeof(double) * (size_t)runs);
  for (int r = 0; r < runs; r++) {
    for (int k = 0; k < nout; k++) tvk_release(out[k]);
    t0 = now();
    if (tvk_onnx_run(m, nin, in, nout, out) != TVK_OK || tvk_realize(nout, out) != TVK_OK ||
        tvk_sync(ctx) != TVK_OK) {
      fprintf(stderr, "onnx_run: warm run: %s %s\n", tvk_onnx_last_error(), tvk_ctx_error(ctx));
      return 1;
    }
    t_warm[r] = now() - t0;
  }
  for (int k = 0; k < nout; k++) tvk_release(out[k]);
  jit_user ju = {m};
  tvk_jit *jit = tvk_jit_create(ctx, jit_fn, &ju);
  int jit_ok = jit != NULL;
  for (int r = 0; jit_ok && r < runs + 2; r++) { /* the first two capture */
    t0 = now();
    jit_ok = tvk_jit_run(jit, nin, in, nout, out) == TVK_OK && tvk_sync(ctx) == TVK_OK;
    if (r >= 2) t_jit[r - 2] = now() - t0;
    for (int k = 0; jit_ok && k < nout; k++) tvk_release(out[k]);
  }
  printf("load %.1f ms, first run %.1f ms (schedule, compile, run), warm run %.3f ms (median of "
         "%d)",
         1e3 * t_load, 1e3 * t_first, 1e3 * median(t_warm, runs), runs);
  if (jit_ok)
    printf(", captured (tvk_jit) %.3f ms\n", 1e3 * median(t_jit, runs));
  else
    printf(", no capture: %s\n", tvk_ctx_error(ctx));
  free(t_warm);
  free(t_jit);
  tvk_jit_destroy(jit);
  for (int i = 0; i < nin; i++) tvk_release(in[i]);
  tvk_onnx_destroy(m);
  tvk_ctx_destroy(ctx);
  return rc;
}
