/* hello: normalise a batch of vectors to unit length with tvk and print what
 * came out, and on which device.
 *
 *   build/samples/hello            (device: $TVK_DEVICE, else the best available)
 *   build/samples/hello CPU
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tvk.h"

enum { BATCH = 1024, DIM = 64 };

static int fail(tvk_ctx *ctx, const char *what, tvk_status st) {
  fprintf(stderr, "hello: %s failed: %s: %s\n", what, tvk_status_name(st), tvk_ctx_error(ctx));
  tvk_ctx_destroy(ctx);
  return 1;
}

int main(int argc, char **argv) {
  tvk_ctx *ctx;
  tvk_ctx_options opt = {.device = argc > 1 ? argv[1] : NULL, .progress = 1};
  tvk_status st = tvk_ctx_create_opts(&opt, &ctx);
  if (st != TVK_OK) {
    fprintf(stderr, "hello: no device: %s\n", tvk_last_create_error());
    return 1;
  }
  printf("device: %s\n", tvk_ctx_device(ctx));

  /* x[i][j] = sin(i + 0.1 j): a deterministic batch of vectors */
  float *x = malloc(sizeof(float) * BATCH * DIM), *y = malloc(sizeof(float) * BATCH * DIM);
  if (!x || !y) return 1;
  for (int i = 0; i < BATCH; i++)
    for (int j = 0; j < DIM; j++) x[i * DIM + j] = sinf((float)i + 0.1f * (float)j);

  int64_t shape[2] = {BATCH, DIM};
  int last = 1;
  tvk_tensor *t = tvk_from_data(ctx, TVK_FLOAT32, 2, shape, x);
  tvk_tensor *sq = tvk_mul(t, t);
  tvk_tensor *norm2 = tvk_sum(sq, 1, &last, true); /* (BATCH, 1) */
  tvk_tensor *inv = tvk_rsqrt(norm2);
  tvk_tensor *unit = tvk_mul(t, inv); /* broadcasts (BATCH, 1) over (BATCH, DIM) */
  st = tvk_to_host(unit, y, sizeof(float) * BATCH * DIM);
  if (st != TVK_OK) return fail(ctx, "to_host", st);

  /* every row should now have length 1 */
  double checksum = 0, worst = 0;
  for (int i = 0; i < BATCH; i++) {
    double len2 = 0;
    for (int j = 0; j < DIM; j++)
      len2 += (double)y[i * DIM + j] * y[i * DIM + j], checksum += y[i * DIM + j];
    if (fabs(len2 - 1) > worst) worst = fabs(len2 - 1);
  }
  printf("normalised %d vectors of %d floats\n", BATCH, DIM);
  printf("y[0][0..3] = %.6f %.6f %.6f %.6f\n", y[0], y[1], y[2], y[3]);
  printf("checksum = %.6f, max | |y_i|^2 - 1 | = %.2e\n", checksum, worst);

  tvk_stats s;
  tvk_stats_get(ctx, &s);
  printf("kernels run: %llu, compiled: %llu, cache hits: %llu\n", (unsigned long long)s.kernels_run,
         (unsigned long long)s.kernels_compiled, (unsigned long long)s.cache_hits);

  tvk_ctx_destroy(ctx); /* releases every tensor too */
  free(x);
  free(y);
  if (worst > 1e-5) {
    fprintf(stderr, "hello: rows are not unit length (%.2e)\n", worst);
    return 1;
  }
  return 0;
}
