/* The neural-network op suite (ctest `nn`): every op of tvk.h's "shape and
 * indexing", "neural-network ops", "more creation" and "in-place update"
 * sections against references computed in the test by plain loops in double
 * (nn_*.c, one file per group), on the device named by the first argument, as
 * the op suite does (ctest `nn_cpu`, and `nn_vk` with validation):
 *
 *   test_nn CPU              every group on the CPU (the default)
 *   test_nn VK 'test_conv*'  on Vulkan, only the tests whose name matches
 *
 * Exits 77 (ctest's SKIP_RETURN_CODE) when the device does not exist. */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_suite.h"
#include "nn_util.h"
#include "ref.h"

NnSuite nn;
static Rng rng; /* ref.h's xorshift64*, reseeded for every test */

#define NN_GROUPS(X) X(linalg) X(norm) X(index) X(random) X(precision)
#define DECL(g)                                                                                    \
  extern const struct CMUnitTest nn_##g##_tests[];                                                 \
  extern const size_t nn_##g##_count;
NN_GROUPS(DECL)

/* ---------------------------------------------------------------- helpers */

int nn_setup(void **state) {
  (void)state;
  tvk_status st = tvk_ctx_create(nn.device, &nn.ctx);
  if (st != TVK_OK) {
    fprintf(stderr, "tvk_ctx_create(%s): %s: %s\n", nn.device, tvk_status_name(st),
            tvk_last_create_error());
    return -1;
  }
  nn.fails = 0;
  rng = (Rng){0x2545f4914f6cdd1dULL}; /* fixed: every run draws the same inputs */
  return 0;
}

int nn_teardown(void **state) {
  (void)state;
  return api_ctx_close_checked(&nn.ctx, nn.device);
}

double nn_uniform(double lo, double hi) { return rng_unif(&rng, lo, hi); }

double *nn_rand_vals(int64_t n, double lo, double hi) {
  double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
  for (int64_t i = 0; v && i < n; i++) v[i] = nn_uniform(lo, hi);
  return v;
}

double *nn_rand_ints(int64_t n, int64_t lo, int64_t hi) {
  double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
  for (int64_t i = 0; v && i < n; i++) v[i] = (double)rng_int(&rng, lo, hi - 1);
  return v;
}

tvk_tensor *nn_tensor(tvk_dtype dt, int ndim, const int64_t *shape, const double *vals) {
  RArr a = ref_new(dt, ndim, shape);
  for (int64_t i = 0; i < a.n; i++) {
    if (ref_is_float(dt))
      a.v[i].f = ref_round(dt, vals[i]);
    else
      a.v[i].i = dt == TVK_BOOL ? vals[i] != 0 : ref_wrap(dt, (uint64_t)(int64_t)vals[i]);
  }
  void *bytes = ref_pack(&a);
  tvk_tensor *t = tvk_from_data(nn.ctx, dt, ndim, shape, bytes);
  free(bytes);
  ref_free(&a);
  return t;
}

double *nn_fetch(tvk_tensor *t) {
  if (tvk_status_of(t) != TVK_OK) {
    printf("FAIL: fetch of an error tensor: %s\n", tvk_error_of(t));
    return NULL;
  }
  RArr a = ref_new(tvk_dtype_of(t), tvk_ndim(t), tvk_shape(t));
  size_t nbytes = (size_t)a.n * tvk_dtype_size(a.dt);
  void *bytes = malloc(nbytes ? nbytes : 1);
  double *out = malloc((size_t)(a.n > 0 ? a.n : 1) * sizeof *out);
  tvk_status st = bytes && out ? tvk_to_host(t, bytes, nbytes) : TVK_ERR_OUT_OF_MEMORY;
  if (st == TVK_OK) {
    ref_unpack(&a, bytes);
    for (int64_t i = 0; i < a.n; i++) out[i] = ref_as_double(a.dt, a.v[i]);
  } else {
    printf("FAIL: tvk_to_host: %s: %s\n", tvk_status_name(st), tvk_ctx_error(nn.ctx));
    free(out);
    out = NULL;
  }
  free(bytes);
  ref_free(&a);
  return out;
}

bool nn_expect(bool ok, const char *fmt, ...) {
  if (ok) return true;
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL [%s]: ", nn.device);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  nn.fails++;
  return false;
}

static void shape_str(char *b, size_t n, int ndim, const int64_t *shape) {
  size_t k = (size_t)snprintf(b, n, "(");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(b + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (k < n) snprintf(b + k, n - k, ")");
}

bool nn_check(const char *what, tvk_tensor *t, tvk_dtype dt, int ndim, const int64_t *shape,
              const double *ref, double rtol, double atol) {
  if (!nn_expect(t && tvk_status_of(t) == TVK_OK, "%s: error tensor: %s", what,
                 t ? tvk_error_of(t) : "NULL"))
    return false;
  char got_s[256], want_s[256];
  shape_str(got_s, sizeof got_s, tvk_ndim(t), tvk_shape(t));
  shape_str(want_s, sizeof want_s, ndim, shape);
  if (!nn_expect(!strcmp(got_s, want_s), "%s: shape %s, expected %s", what, got_s, want_s))
    return false;
  if (!nn_expect(tvk_dtype_of(t) == dt, "%s: dtype %s, expected %s", what,
                 tvk_dtype_name(tvk_dtype_of(t)), tvk_dtype_name(dt)))
    return false;
  double *got = nn_fetch(t);
  if (!nn_expect(got != NULL, "%s: fetch failed", what)) return false;
  int64_t n = nn_numel(ndim, shape), bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++) {
    double g = got[i], e = ref[i];
    bool ok = isnan(e) ? isnan(g) : (g == e || fabs(g - e) <= atol + rtol * fabs(e));
    if (!ok && bad++ == 0) first = i;
  }
  if (bad)
    nn_expect(false, "%s %s %s: %lld of %lld wrong, first at %lld: got %.9g expected %.9g", what,
              tvk_dtype_name(dt), want_s, (long long)bad, (long long)n, (long long)first,
              got[first], ref[first]);
  free(got);
  return bad == 0;
}

bool nn_check_error(const char *what, tvk_tensor *t, tvk_status want) {
  if (!nn_expect(t != NULL, "%s: NULL tensor", what)) return false;
  if (getenv("TVK_NN_VERBOSE")) printf("  %s: %s\n", what, tvk_error_of(t));
  return nn_expect(tvk_status_of(t) == want && tvk_error_of(t)[0],
                   "%s: status %s (\"%s\"), expected %s", what, tvk_status_name(tvk_status_of(t)),
                   tvk_error_of(t), tvk_status_name(want));
}

int nn_kernels(tvk_tensor *t) {
  tvk_stats a, b;
  tvk_stats_get(nn.ctx, &a);
  tvk_status st = tvk_realize(1, &t);
  tvk_stats_get(nn.ctx, &b);
  nn_expect(st == TVK_OK, "realize: %s: %s", tvk_status_name(st), tvk_ctx_error(nn.ctx));
  return (int)(b.kernels_run - a.kernels_run);
}

bool nn_expect_kernels(const char *what, tvk_tensor *t, int want) {
  int k = nn_kernels(t);
  return nn_expect(k == want, "%s: %d kernel(s), expected %d", what, k, want);
}

void nn_finish(void) { assert_int_equal(nn.fails, 0); }

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
  nn.device = argc > 1 ? argv[1] : "CPU";
  if (argc > 2) cmocka_set_test_filter(argv[2]);
  if (api_device_missing("test_nn", nn.device)) return 77;
  int failed = 0;
  char name[64];
#define RUN(g)                                                                                     \
  if (nn_##g##_count) {                                                                            \
    snprintf(name, sizeof name, "nn_%s on %s", #g, nn.device);                                     \
    failed += _cmocka_run_group_tests(name, nn_##g##_tests, nn_##g##_count, NULL, NULL);           \
  }
  NN_GROUPS(RUN)
#undef RUN
  return failed ? 1 : 0;
}
