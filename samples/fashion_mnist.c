/* Trains a small CNN or an MLP on Fashion-MNIST (28x28 grey images of
 * clothes, 10 classes, 60,000 for training and 10,000 for testing) with
 * tvk_grad and Adam, and reports the test accuracy.
 *
 *   build/samples/fashion_mnist [DEVICE] [--model cnn|mlp] [--epochs E]
 *       [--batch B] [--lr LR] [--steps S] [--subset N] [--data DIR]
 *       [--min-accuracy PCT] [--seed S] [--check-progress] [--help]
 *
 *  - cnn: conv 3x3 (1 -> 16) + ReLU + 2x2 max pool, conv 3x3 (16 -> 32) + ReLU
 *    + 2x2 max pool, linear (32*7*7 -> 10); mlp: 784 -> 256 + ReLU -> 10.
 *    Weights start as PyTorch's defaults do (uniform in +-1/sqrt(fan_in)).
 *  - Each step (forward, gradients, Adam's update) is one tvk_realize; the
 *    batch is shuffled on the host and uploaded with tvk_from_data. A last
 *    batch smaller than B is dropped, so every step has one shape.
 *  - After each epoch it prints the mean training loss, the test accuracy,
 *    the training images per second and the process's resident memory.
 *  - --steps stops training after S steps in all and --subset trains on the
 *    first N images and tests on the first N/6 (the short run ctest does).
 *    --check-progress (ctest's) also checks that the mean loss of the last
 *    20 steps fell below 40% of the first step's (it needs 21 steps or
 *    more). --help prints the usage.
 *
 * The data: Debian's dataset-fashion-mnist package (scripts/install-deps.sh
 * installs it) puts the four IDX files, gzipped, in
 * /usr/share/datasets/fashion-mnist; --data or $TVK_FASHION_MNIST name
 * another directory. Without zlib the files must be gunzipped first.
 * samples/fashion_mnist.py trains the same models in PyTorch.
 *
 * Exits 0 on success; 2 when the accuracy is below --min-accuracy or the
 * short run's loss did not fall; 3 on a Vulkan validation message; 77 when
 * the data or the device is missing; 1 on any other error. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef TVK_SAMPLE_ZLIB
#include <zlib.h>
#endif

#include "tvk.h"

/* ---------------------------------------------------------------- the data */

typedef struct {
  int n;           /* images */
  uint8_t *pixels; /* n * 784 */
  uint8_t *labels; /* n */
} Set;

/* A file read whole: gunzipped where zlib is there (gzread reads plain files
 * too), else as it is. */
#ifdef TVK_SAMPLE_ZLIB
typedef gzFile File;
static File file_open(const char *path) { return gzopen(path, "rb"); }
static long file_read(File f, uint8_t *buf, size_t n) { return gzread(f, buf, (unsigned)n); }
static void file_close(File f) { gzclose(f); }
#else
typedef FILE *File;
static File file_open(const char *path) { return fopen(path, "rb"); }
static long file_read(File f, uint8_t *buf, size_t n) { return (long)fread(buf, 1, n, f); }
static void file_close(File f) { fclose(f); }
#endif

/* All of path; NULL on failure. */
static uint8_t *read_file(const char *path, size_t *len) {
  size_t cap = 1 << 20, n = 0;
  uint8_t *buf = malloc(cap);
  File f = buf ? file_open(path) : NULL;
  if (!f) {
    free(buf);
    return NULL;
  }
  for (long got; (got = file_read(f, buf + n, cap - n)) > 0;) {
    n += (size_t)got;
    uint8_t *b = n == cap ? realloc(buf, cap *= 2) : buf;
    if (!b) {
      file_close(f);
      free(buf);
      return NULL;
    }
    buf = b;
  }
  file_close(f);
  *len = n;
  return buf;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* One IDX file: magic 0x801 (labels) or 0x803 (28x28 images), big-endian
 * counts, then one byte per label or pixel. */
static uint8_t *read_idx(const char *dir, const char *name, uint32_t magic, int *count) {
  char path[4096];
  size_t len = 0;
  uint8_t *data = NULL;
  const char *ext[2] = {".gz", ""};
  for (int i = 0; i < 2 && !data; i++) {
    snprintf(path, sizeof path, "%s/%s%s", dir, name, ext[i]);
    data = read_file(path, &len);
  }
  if (!data) {
    fprintf(stderr, "fashion_mnist: cannot read %s/%s(.gz)\n", dir, name);
    return NULL;
  }
  size_t head = magic == 0x803 ? 16 : 8, each = magic == 0x803 ? 784 : 1;
  if (len < head || be32(data) != magic ||
      (magic == 0x803 && (be32(data + 8) != 28 || be32(data + 12) != 28)) ||
      len - head < (size_t)be32(data + 4) * each) {
    fprintf(stderr,
            "fashion_mnist: %s is not an IDX file of %s (%zu bytes, magic 0x%x, "
            "expected 0x%x)\n",
            path, magic == 0x803 ? "28x28 images" : "labels", len, len >= 4 ? be32(data) : 0,
            magic);
    free(data);
    return NULL;
  }
  *count = (int)be32(data + 4);
  memmove(data, data + head, (size_t)*count * each);
  return data;
}

static bool load_set(const char *dir, const char *prefix, Set *s) {
  char im[64], lb[64];
  snprintf(im, sizeof im, "%s-images-idx3-ubyte", prefix);
  snprintf(lb, sizeof lb, "%s-labels-idx1-ubyte", prefix);
  int ni = 0, nl = 0;
  s->pixels = read_idx(dir, im, 0x803, &ni);
  s->labels = s->pixels ? read_idx(dir, lb, 0x801, &nl) : NULL;
  if (s->labels && ni != nl)
    fprintf(stderr, "fashion_mnist: %s has %d images and %d labels\n", prefix, ni, nl);
  s->n = ni < nl ? ni : nl;
  return s->labels && ni == nl;
}

/* Pixels to floats, normalised with the training set's mean and deviation. */
static void to_input(const Set *s, const int *idx, int n, float *x, int32_t *y) {
  for (int i = 0; i < n; i++) {
    const uint8_t *p = s->pixels + (size_t)idx[i] * 784;
    for (int k = 0; k < 784; k++) x[(size_t)i * 784 + k] = (p[k] / 255.0f - 0.2860f) / 0.3530f;
    y[i] = s->labels[idx[i]];
  }
}

/* ---------------------------------------------------------------- the models */

static uint64_t rng = 0x853c49e6748fea9bULL;
static uint32_t next_u32(void) {
  rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t)(rng >> 32);
}

enum { MAXP = 6 };

typedef struct {
  bool cnn;
  int np;
  tvk_tensor *p[MAXP];
  float *host[MAXP];
} Model;

/* A parameter of the given shape, uniform in +-1/sqrt(fan_in). */
static bool add_param(Model *m, tvk_ctx *ctx, int nd, const int64_t *shape, int64_t fan_in) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  float *h = malloc((size_t)n * sizeof *h);
  if (!h) return false;
  double bound = 1 / sqrt((double)fan_in);
  for (int64_t i = 0; i < n; i++) h[i] = (float)((next_u32() * 0x1p-32 * 2 - 1) * bound);
  m->host[m->np] = h;
  m->p[m->np++] = tvk_from_data(ctx, TVK_FLOAT32, nd, shape, h);
  return true;
}

static bool model_init(Model *m, tvk_ctx *ctx, bool cnn) {
  memset(m, 0, sizeof *m);
  m->cnn = cnn;
  bool ok = true;
  if (cnn) {
    ok = ok && add_param(m, ctx, 4, (int64_t[]){16, 1, 3, 3}, 9);
    ok = ok && add_param(m, ctx, 1, (int64_t[]){16}, 9);
    ok = ok && add_param(m, ctx, 4, (int64_t[]){32, 16, 3, 3}, 16 * 9);
    ok = ok && add_param(m, ctx, 1, (int64_t[]){32}, 16 * 9);
    ok = ok && add_param(m, ctx, 2, (int64_t[]){10, 32 * 7 * 7}, 32 * 7 * 7);
    ok = ok && add_param(m, ctx, 1, (int64_t[]){10}, 32 * 7 * 7);
  } else {
    ok = ok && add_param(m, ctx, 2, (int64_t[]){256, 784}, 784);
    ok = ok && add_param(m, ctx, 1, (int64_t[]){256}, 784);
    ok = ok && add_param(m, ctx, 2, (int64_t[]){10, 256}, 256);
    ok = ok && add_param(m, ctx, 1, (int64_t[]){10}, 256);
  }
  return ok;
}

static void model_free(Model *m) {
  for (int i = 0; i < m->np; i++) free(m->host[i]);
}

/* Logits (n, 10) of x (n, 1, 28, 28). */
static tvk_tensor *forward(const Model *m, tvk_tensor *x) {
  int64_t n = tvk_shape(x)[0];
  if (!m->cnn) {
    tvk_tensor *h = tvk_reshape(x, 2, (int64_t[]){n, 784});
    h = tvk_relu(tvk_linear(h, m->p[0], m->p[1]));
    return tvk_linear(h, m->p[2], m->p[3]);
  }
  const int64_t pad[4] = {1, 1, 1, 1}, pool[2] = {2, 2};
  tvk_tensor *h = tvk_conv2d(x, m->p[0], m->p[1], NULL, pad, NULL, 1);
  h = tvk_max_pool2d(tvk_relu(h), pool, NULL, NULL); /* (n, 16, 14, 14) */
  h = tvk_conv2d(h, m->p[2], m->p[3], NULL, pad, NULL, 1);
  h = tvk_max_pool2d(tvk_relu(h), pool, NULL, NULL); /* (n, 32, 7, 7) */
  h = tvk_reshape(h, 2, (int64_t[]){n, 32 * 7 * 7});
  return tvk_linear(h, m->p[4], m->p[5]);
}

/* ---------------------------------------------------------------- the run */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Resident memory in MiB (Linux), or -1. */
static double rss_mib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = -1, rss = -1;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = -1;
    fclose(f);
  }
  return rss < 0 ? -1 : (double)rss * 4096.0 / (1 << 20);
}

typedef struct {
  const char *device, *model, *data;
  int epochs, batch, steps, subset;
  bool check_progress;
  double lr, min_accuracy;
  uint64_t seed;
} Args;

static const char usage_text[] =
    "usage: fashion_mnist [DEVICE] [--model cnn|mlp] [--epochs E] [--batch B] [--lr LR]\n"
    "       [--steps S] [--subset N] [--data DIR] [--min-accuracy PCT] [--seed S]\n"
    "       [--check-progress] [--help]\n"
    "  DEVICE      CPU, VK or VK:n (default: $TVK_DEVICE, else the best device)\n"
    "  --model     cnn (default) or mlp\n"
    "  --epochs    passes over the training set (default 2)\n"
    "  --batch     images per step (default 50)\n"
    "  --lr        Adam's learning rate (default 0.001)\n"
    "  --steps     stop after S steps in all\n"
    "  --subset    train on the first N images (>= 600), test on the first N/6\n"
    "  --data      the directory of the four IDX files (default\n"
    "              /usr/share/datasets/fashion-mnist, or $TVK_FASHION_MNIST)\n"
    "  --min-accuracy  exit 2 when the test accuracy is below PCT\n"
    "  --seed      the shuffling's and the weights' seed (default 1)\n"
    "  --check-progress  exit 2 unless the last 20 steps' mean loss is below\n"
    "              40% of the first step's (needs 21 steps or more)\n";

static int usage(const char *why) {
  fprintf(stderr, "fashion_mnist: %s\n%s", why, usage_text);
  return 1;
}

static int parse(int argc, char **argv, Args *a) {
  const char *env = getenv("TVK_FASHION_MNIST");
  *a = (Args){.model = "cnn",
              .data = env && *env ? env : "/usr/share/datasets/fashion-mnist",
              .epochs = 2,
              .batch = 50,
              .lr = 1e-3,
              .seed = 1};
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
      fputs(usage_text, stdout);
      return -1;
    }
    if (!strcmp(k, "--check-progress")) {
      a->check_progress = true;
      continue;
    }
    if (k[0] != '-') {
      if (a->device) return usage("more than one device given");
      a->device = k;
      continue;
    }
    if (!v) return usage("an option lacks its value");
    char *end = NULL;
    double num = strtod(v, &end);
    bool isnum = end && end != v && *end == '\0';
    i++;
    if (!strcmp(k, "--model")) {
      if (strcmp(v, "cnn") && strcmp(v, "mlp")) return usage("--model is cnn or mlp");
      a->model = v;
    } else if (!strcmp(k, "--data")) {
      a->data = v;
    } else if (!isnum) {
      return usage("a numeric option has a value that is not a number");
    } else if (!strcmp(k, "--epochs") && num >= 1 && num <= 1000) {
      a->epochs = (int)num;
    } else if (!strcmp(k, "--batch") && num >= 1 && num <= 10000) {
      a->batch = (int)num;
    } else if (!strcmp(k, "--lr") && num > 0) {
      a->lr = num;
    } else if (!strcmp(k, "--steps") && num >= 1) {
      a->steps = (int)num;
    } else if (!strcmp(k, "--subset") && num >= 600) {
      a->subset = (int)num;
    } else if (!strcmp(k, "--min-accuracy") && num >= 0 && num <= 100) {
      a->min_accuracy = num;
    } else if (!strcmp(k, "--seed") && num >= 0) {
      a->seed = (uint64_t)num;
    } else {
      return usage("unknown option, or a value out of range (epochs >= 1, batch >= 1, lr > 0, "
                   "steps >= 1, subset >= 600, min-accuracy in [0, 100])");
    }
  }
  if (a->check_progress && a->steps && a->steps < 21)
    return usage("--check-progress needs 21 steps or more (--steps)");
  return 0;
}

/* Percent of set's first n images the model classifies right, in batches
 * of up to 500 (the last one may be smaller: one more set of kernels). */
static tvk_status evaluate(tvk_ctx *ctx, const Model *m, const Set *s, int n, double *acc) {
  enum { EB = 500 };
  static float x[EB * 784];
  static int32_t y[EB], pred[EB];
  int idx[EB], right = 0;
  tvk_status st = TVK_OK;
  for (int b = 0; b < n && st == TVK_OK; b += EB) {
    int nb = n - b < EB ? n - b : EB;
    for (int i = 0; i < nb; i++) idx[i] = b + i;
    to_input(s, idx, nb, x, y);
    size_t scope = tvk_scope_begin(ctx);
    tvk_tensor *xt = tvk_from_data(ctx, TVK_FLOAT32, 4, (int64_t[]){nb, 1, 28, 28}, x);
    st = tvk_to_host(tvk_argmax(forward(m, xt), 1, false), pred, (size_t)nb * sizeof *pred);
    tvk_scope_end(ctx, scope, 0, NULL);
    for (int i = 0; i < nb; i++) right += pred[i] == y[i];
  }
  *acc = n ? 100.0 * right / n : 0;
  return st;
}

int main(int argc, char **argv) {
  Args a;
  int parsed = parse(argc, argv, &a);
  if (parsed) return parsed < 0 ? 0 : 1; /* -1: --help */
  rng ^= a.seed * 0x9e3779b97f4a7c15ULL;
  Set train = {0}, test = {0};
  if (!load_set(a.data, "train", &train) || !load_set(a.data, "t10k", &test)) {
    fprintf(stderr,
            "fashion_mnist: no Fashion-MNIST data in %s (Debian: apt-get install "
            "dataset-fashion-mnist; or --data DIR / TVK_FASHION_MNIST)\n",
            a.data);
    free(train.pixels), free(train.labels), free(test.pixels), free(test.labels);
    return 77;
  }
  int ntrain = a.subset && a.subset < train.n ? a.subset : train.n;
  int ntest = a.subset && a.subset / 6 < test.n ? a.subset / 6 : test.n;

  tvk_ctx *ctx;
  tvk_ctx_options opt = {.device = a.device, .progress = 1};
  tvk_status st = tvk_ctx_create_opts(&opt, &ctx);
  if (st != TVK_OK) {
    fprintf(stderr, "fashion_mnist: %s\n", tvk_last_create_error());
    free(train.pixels), free(train.labels), free(test.pixels), free(test.labels);
    return st == TVK_ERR_DEVICE ? 77 : 1;
  }
  bool cnn = !strcmp(a.model, "cnn");
  int B = a.batch, per_epoch = ntrain / B;
  printf("device: %s; model %s; %d training images, %d test; batch %d, Adam lr %g\n",
         tvk_ctx_device(ctx), a.model, ntrain, ntest, B, a.lr);
  Model m = {0};
  tvk_optim *adam = NULL;
  float *x = malloc((size_t)B * 784 * sizeof *x);
  int32_t *y = malloc((size_t)B * sizeof *y);
  int *order = malloc((size_t)ntrain * sizeof *order);
  if (!x || !y || !order || !model_init(&m, ctx, cnn)) {
    fprintf(stderr, "fashion_mnist: out of memory\n");
    st = TVK_ERR_OUT_OF_MEMORY;
  }
  tvk_optim_options ao = {.kind = TVK_OPTIM_ADAM, .lr = a.lr};
  if (st == TVK_OK && !(adam = tvk_optim_create(ctx, m.np, m.p, &ao))) st = TVK_ERR_INVALID_ARG;
  for (int i = 0; st == TVK_OK && i < ntrain; i++) order[i] = i;

  int step = 0, total = a.steps ? a.steps : a.epochs * per_epoch;
  double first_loss = NAN, tail_loss = 0, acc = 0;
  int tail_n = 0;
  for (int epoch = 0; step < total && st == TVK_OK; epoch++) {
    for (int i = ntrain - 1; i > 0; i--) { /* Fisher-Yates */
      int j = (int)(next_u32() % (uint32_t)(i + 1)), t = order[i];
      order[i] = order[j], order[j] = t;
    }
    double t0 = now_s(), loss_sum = 0;
    int nsteps = 0;
    for (int b = 0; b < per_epoch && step < total && st == TVK_OK; b++, step++, nsteps++) {
      to_input(&train, order + (size_t)b * B, B, x, y);
      size_t scope = tvk_scope_begin(ctx);
      tvk_tensor *xt = tvk_from_data(ctx, TVK_FLOAT32, 4, (int64_t[]){B, 1, 28, 28}, x);
      tvk_tensor *yt = tvk_from_data(ctx, TVK_INT32, 1, (int64_t[]){B}, y);
      tvk_tensor *loss = tvk_cross_entropy(forward(&m, xt), yt), *g[MAXP], *all[MAXP + 1];
      st = tvk_grad(loss, m.np, m.p, g);
      if (st == TVK_OK) st = tvk_optim_step(adam, g);
      for (int i = 0; i < m.np; i++) all[i] = m.p[i];
      all[m.np] = loss;
      if (st == TVK_OK) st = tvk_realize(m.np + 1, all);
      float l = NAN;
      if (st == TVK_OK) st = tvk_to_host(loss, &l, sizeof l);
      tvk_scope_end(ctx, scope, 0, NULL);
      if (step == 0) first_loss = l;
      if (step >= total - 20) tail_loss += l, tail_n++;
      loss_sum += l;
    }
    double dt = now_s() - t0;
    if (st == TVK_OK) st = evaluate(ctx, &m, &test, ntest, &acc);
    if (st == TVK_OK)
      printf("epoch %d: %d steps, loss %.4f, test accuracy %.2f%%, %.0f images/s (%.1f s), "
             "RSS %.0f MiB\n",
             epoch + 1, nsteps, loss_sum / nsteps, acc, nsteps * B / dt, dt, rss_mib());
    fflush(stdout);
  }
  int rc = 0;
  if (st != TVK_OK) {
    fprintf(stderr, "fashion_mnist: %s: %s\n", tvk_status_name(st), tvk_ctx_error(ctx));
    rc = 1;
  } else {
    tvk_stats s;
    tvk_stats_get(ctx, &s);
    printf("test accuracy %.2f%% after %d steps; %llu kernels compiled, peak %.1f MiB on the "
           "device\n",
           acc, step, (unsigned long long)s.kernels_compiled, s.bytes_peak / 1048576.0);
    if (a.check_progress && !(tail_loss / tail_n < 0.4 * first_loss)) {
      fprintf(stderr, "fashion_mnist: the loss fell from %.4f to only %.4f (last 20 steps)\n",
              first_loss, tail_loss / tail_n);
      rc = 2;
    }
    if (acc < a.min_accuracy) {
      fprintf(stderr, "fashion_mnist: test accuracy %.2f%% is below %.2f%%\n", acc, a.min_accuracy);
      rc = 2;
    }
    if (s.validation_messages) {
      fprintf(stderr, "fashion_mnist: %llu Vulkan validation messages\n",
              (unsigned long long)s.validation_messages);
      rc = 3;
    }
  }
  tvk_optim_destroy(adam);
  tvk_ctx_destroy(ctx);
  model_free(&m);
  free(x), free(y), free(order);
  free(train.pixels), free(train.labels), free(test.pixels), free(test.labels);
  return rc;
}
