/* Shared by the neural-network op suite (ctest `nn_cpu`, `nn_vk`): a fresh
 * context per test on the device under test, inputs from a fixed-seed PRNG, and
 * checks of a tensor against a reference the test computed itself (plain loops
 * in double).
 *
 * Each group file tests/nn_<group>.c defines its tests with NN_TEST and exports
 *   const struct CMUnitTest nn_<group>_tests[];  const size_t nn_<group>_count;
 * test_nn.c runs every group on the device its argument names (ctest runs it
 * once per device, Vulkan with validation).
 *
 * It is an outside user's test: only tvk.h. Include after <cmocka.h>. */
#ifndef TVK_TESTS_NN_UTIL_H
#define TVK_TESTS_NN_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "tvk.h"

typedef struct {
  const char *device; /* "CPU", "VK" */
  tvk_ctx *ctx;       /* fresh for every test */
  int fails;          /* failed checks in the current test */
} NnSuite;

extern NnSuite nn;

int nn_setup(void **state);
/* Fails the test on a Vulkan validation message. */
int nn_teardown(void **state);
#define NN_TEST(f) cmocka_unit_test_setup_teardown(f, nn_setup, nn_teardown)

/* The number of elements of a shape (1 for 0-d). */
static inline int64_t nn_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

/* Uniform double in [lo, hi) from the suite's PRNG (reset per test). */
double nn_uniform(double lo, double hi);
/* n values uniform in [lo, hi) (malloc'd; the caller frees). */
double *nn_rand_vals(int64_t n, double lo, double hi);
/* n integers uniform in [lo, hi) as doubles (malloc'd). */
double *nn_rand_ints(int64_t n, int64_t lo, int64_t hi);

/* A tensor of dtype dt holding vals (converted; float16/bfloat16 round to nearest
 * even), on nn.ctx. */
tvk_tensor *nn_tensor(tvk_dtype dt, int ndim, const int64_t *shape, const double *vals);
/* The elements of t as doubles (malloc'd, numel of them); NULL (and a FAIL line)
 * when t is in an error state or tvk_to_host fails. */
double *nn_fetch(tvk_tensor *t);

/* Checks t: status OK, dtype dt, the shape, and every element within
 * atol + rtol * |ref| of ref (NaN only matches NaN). Prints a FAIL line with the
 * first bad index, got and expected, and counts a failure. Returns true if
 * everything matched. */
bool nn_check(const char *what, tvk_tensor *t, tvk_dtype dt, int ndim, const int64_t *shape,
              const double *ref, double rtol, double atol);
/* Checks that t is an error tensor with the status; prints its message when
 * TVK_NN_VERBOSE is set. */
bool nn_check_error(const char *what, tvk_tensor *t, tvk_status want);
/* Counts a failure with a message (printf-style) unless ok. */
bool nn_expect(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Realizes t and returns the number of kernels that ran for it. */
int nn_kernels(tvk_tensor *t);
/* Realizes t and counts a failure unless exactly `want` kernels ran for it:
 * the counts docs/ops_*.md promise. Realize the inputs first. */
bool nn_expect_kernels(const char *what, tvk_tensor *t, int want);
/* Fails the cmocka test if any check failed. Call at the end of every test. */
void nn_finish(void);

#endif
