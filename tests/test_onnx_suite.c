/* The ONNX backend test suite as tvk's reference: every model of Debian's
 * libonnx-testdata (node, pytorch-converted, pytorch-operator, simple) is
 * loaded with tvk_onnx_load, run on the device on each of its
 * test_data_set_*'s inputs, and compared with the expected outputs the suite
 * ships (rtol 1e-3, atol 1e-7, as the suite's own runner).
 *
 * A case that cannot pass is listed, with its reason, in
 * tests/onnx_expected_failures.txt. The run fails on a case that fails and is
 * not listed, and on a listed case that passes (so that the list stays true).
 *
 *   test_onnx_suite DEVICE LIST DATA_DIR [SUBSTRING]
 * exits 77 (skip) when DATA_DIR or the device is missing. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tvk.h"
#include "tvk_onnx.h"

#define MAX_CASES 4096

typedef struct {
  char name[160]; /* "node/test_abs" */
  char device[8]; /* "all", "cpu", "vk" */
  char reason[240];
  bool hit;
} listed;

static listed *list;
static int nlist;

static bool read_list(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open the list %s\n", path);
    return false;
  }
  list = calloc(MAX_CASES, sizeof *list);
  char line[512];
  while (fgets(line, sizeof line, f) && nlist < MAX_CASES) {
    char *p = line;
    while (*p == ' ') p++;
    if (*p == '#' || *p == '\n' || !*p) continue;
    listed *l = &list[nlist];
    int used = 0;
    if (sscanf(p, "%159s %7s %n", l->name, l->device, &used) < 2 || !used) {
      fprintf(stderr, "%s: a line that is not 'CASE all|cpu|vk REASON': %s", path, line);
      fclose(f);
      return false;
    }
    snprintf(l->reason, sizeof l->reason, "%s", p + used);
    l->reason[strcspn(l->reason, "\n")] = 0;
    if (strcmp(l->device, "all") && strcmp(l->device, "cpu") && strcmp(l->device, "vk")) {
      fprintf(stderr, "%s: device '%s' of %s is not all, cpu or vk\n", path, l->device, l->name);
      fclose(f);
      return false;
    }
    if (!l->reason[0]) {
      fprintf(stderr, "%s: %s has no reason\n", path, l->name);
      fclose(f);
      return false;
    }
    nlist++;
  }
  fclose(f);
  return true;
}

static listed *find_listed(const char *name, bool vk) {
  for (int i = 0; i < nlist; i++)
    if (!strcmp(list[i].name, name) &&
        (!strcmp(list[i].device, "all") || !strcmp(list[i].device, vk ? "vk" : "cpu")))
      return &list[i];
  return NULL;
}

static double half_bits(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

static double elem(const void *p, tvk_dtype dt, int64_t i) {
  switch (dt) {
  case TVK_BOOL: return ((const uint8_t *)p)[i] != 0;
  case TVK_INT8: return ((const int8_t *)p)[i];
  case TVK_UINT8: return ((const uint8_t *)p)[i];
  case TVK_INT16: return ((const int16_t *)p)[i];
  case TVK_UINT16: return ((const uint16_t *)p)[i];
  case TVK_INT32: return ((const int32_t *)p)[i];
  case TVK_UINT32: return ((const uint32_t *)p)[i];
  case TVK_INT64: return (double)((const int64_t *)p)[i];
  case TVK_UINT64: return (double)((const uint64_t *)p)[i];
  case TVK_FLOAT16: return half_bits(((const uint16_t *)p)[i]);
  case TVK_BFLOAT16: {
    uint32_t x = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
  }
  case TVK_FLOAT32: return ((const float *)p)[i];
  case TVK_FLOAT64: return ((const double *)p)[i];
  }
  return 0;
}

static void *to_host(tvk_tensor *t, char *why, size_t n) {
  size_t bytes = (size_t)tvk_numel(t) * tvk_dtype_size(tvk_dtype_of(t));
  void *buf = malloc(bytes ? bytes : 1);
  if (tvk_to_host(t, buf, bytes) != TVK_OK) {
    snprintf(why, n, "run: %s", tvk_ctx_error(tvk_ctx_of(t)));
    free(buf);
    return NULL;
  }
  return buf;
}

/* Compares output and expected; false with a reason. */
static bool same(tvk_tensor *got, tvk_tensor *want, int k, char *why, size_t n) {
  if (tvk_dtype_of(got) != tvk_dtype_of(want)) {
    snprintf(why, n, "output %d is %s; expected %s", k, tvk_dtype_name(tvk_dtype_of(got)),
             tvk_dtype_name(tvk_dtype_of(want)));
    return false;
  }
  bool shape_ok = tvk_ndim(got) == tvk_ndim(want);
  for (int d = 0; shape_ok && d < tvk_ndim(got); d++)
    shape_ok = tvk_shape(got)[d] == tvk_shape(want)[d];
  if (!shape_ok) {
    char a[128] = "", b[128] = "";
    for (int d = 0; d < tvk_ndim(got); d++)
      snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? "," : "",
               (long long)tvk_shape(got)[d]);
    for (int d = 0; d < tvk_ndim(want); d++)
      snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? "," : "",
               (long long)tvk_shape(want)[d]);
    snprintf(why, n, "output %d has shape (%s); expected (%s)", k, a, b);
    return false;
  }
  void *g = to_host(got, why, n);
  if (!g) return false;
  void *w = to_host(want, why, n);
  if (!w) {
    free(g);
    return false;
  }
  tvk_dtype dt = tvk_dtype_of(want);
  bool ok = true;
  for (int64_t i = 0; i < tvk_numel(want) && ok; i++) {
    double a = elem(g, dt, i), b = elem(w, dt, i);
    if (isnan(a) && isnan(b)) continue;
    if (a == b) continue;
    if (!(fabs(a - b) <= 1e-7 + 1e-3 * fabs(b))) {
      snprintf(why, n, "output %d, element %lld: %.9g; expected %.9g", k, (long long)i, a, b);
      ok = false;
    }
  }
  free(g);
  free(w);
  return ok;
}

static bool run_set(tvk_ctx *ctx, tvk_onnx_model *m, const char *set, char *why, size_t n) {
  int nin = tvk_onnx_input_count(m), nout = tvk_onnx_output_count(m);
  tvk_tensor *in[64] = {0}, *out[64] = {0}, *want[64] = {0};
  char path[1800];
  if (nin > 64 || nout > 64) {
    snprintf(why, n, "%d inputs, %d outputs", nin, nout);
    return false;
  }
  for (int i = 0; i < nin; i++) {
    snprintf(path, sizeof path, "%s/input_%d.pb", set, i);
    if (tvk_onnx_load_tensor(ctx, path, &in[i]) != TVK_OK) {
      snprintf(why, n, "input: %s", tvk_onnx_last_error());
      return false;
    }
  }
  snprintf(path, sizeof path, "%s/input_%d.pb", set, nin);
  struct stat st;
  if (stat(path, &st) == 0) {
    snprintf(why, n, "the data set has more inputs than the model's %d", nin);
    return false;
  }
  if (tvk_onnx_run(m, nin, in, nout, out) != TVK_OK) {
    snprintf(why, n, "run: %s", tvk_onnx_last_error());
    return false;
  }
  if (tvk_realize(nout, out) != TVK_OK) {
    snprintf(why, n, "realize: %s", tvk_ctx_error(ctx));
    return false;
  }
  for (int k = 0; k < nout; k++) {
    snprintf(path, sizeof path, "%s/output_%d.pb", set, k);
    if (tvk_onnx_load_tensor(ctx, path, &want[k]) != TVK_OK) {
      snprintf(why, n, "expected output: %s", tvk_onnx_last_error());
      return false;
    }
    if (!same(out[k], want[k], k, why, n)) return false;
  }
  return true;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs one case; true when it passes, else why says what failed. */
static bool run_case(tvk_ctx *ctx, const char *dir, char *why, size_t n) {
  char path[1700];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  size_t scope = tvk_scope_begin(ctx);
  tvk_onnx_model *m = NULL;
  bool ok = true;
  if (tvk_onnx_load(ctx, path, &m) != TVK_OK) {
    snprintf(why, n, "load: %s", tvk_onnx_last_error());
    ok = false;
  }
  DIR *d = ok ? opendir(dir) : NULL;
  char *sets[64];
  int nsets = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    if (!strncmp(e->d_name, "test_data_set_", 14) && nsets < 64) sets[nsets++] = strdup(e->d_name);
  if (d) closedir(d);
  qsort(sets, (size_t)nsets, sizeof *sets, by_name);
  if (ok && !nsets) {
    snprintf(why, n, "no test_data_set_*");
    ok = false;
  }
  for (int i = 0; i < nsets; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, sets[i]);
    if (ok) ok = run_set(ctx, m, path, why, n);
    free(sets[i]);
  }
  tvk_onnx_destroy(m);
  tvk_scope_end(ctx, scope, 0, NULL);
  tvk_ctx_clear_error(ctx);
  return ok;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s DEVICE LIST DATA_DIR [SUBSTRING]\n", argv[0]);
    return 2;
  }
  const char *device = argv[1], *filter = argc > 4 ? argv[4] : NULL;
  bool vk = !strncmp(device, "VK", 2);
  struct stat st;
  if (stat(argv[3], &st) != 0) {
    printf("skip: no ONNX test data at %s (Debian: libonnx-testdata)\n", argv[3]);
    return 77;
  }
  if (!read_list(argv[2])) return 2;
  tvk_ctx *ctx;
  if (tvk_ctx_create(device, &ctx) != TVK_OK) {
    printf("skip: no device %s: %s\n", device, tvk_last_create_error());
    return getenv("TVK_REQUIRE_VK") && atoi(getenv("TVK_REQUIRE_VK")) && vk ? 1 : 77;
  }
  const char *groups[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
  int pass = 0, expected = 0, unexpected = 0, now_pass = 0;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
    char gdir[1024];
    snprintf(gdir, sizeof gdir, "%s/%s", argv[3], groups[g]);
    DIR *d = opendir(gdir);
    if (!d) continue;
    char **names = malloc(sizeof *names * MAX_CASES);
    int nn = 0;
    for (struct dirent *e; (e = readdir(d)) && nn < MAX_CASES;)
      if (e->d_name[0] != '.') names[nn++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, by_name);
    for (int i = 0; i < nn; i++) {
      char name[200], dir[1300], why[1024] = "";
      snprintf(name, sizeof name, "%s/%s", groups[g], names[i]);
      snprintf(dir, sizeof dir, "%s/%s", gdir, names[i]);
      free(names[i]);
      if (filter && !strstr(name, filter)) continue;
      listed *l = find_listed(name, vk);
      if (l) l->hit = true;
      struct timespec a, b;
      clock_gettime(CLOCK_MONOTONIC, &a);
      bool ok = run_case(ctx, dir, why, sizeof why);
      clock_gettime(CLOCK_MONOTONIC, &b);
      double sec = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
      if (ok && !l) {
        pass++;
      } else if (ok) {
        now_pass++;
        printf("NOW PASSES (remove it from the list): %s (listed: %s)\n", name, l->reason);
      } else if (l) {
        expected++;
        if (getenv("TVK_ONNX_VERBOSE")) printf("listed   %s: %s\n", name, why);
      } else {
        unexpected++;
        printf("FAIL     %s: %s\n", name, why);
      }
      if (sec > 2) printf("slow     %s: %.1f s\n", name, sec);
      fflush(stdout);
    }
    free(names);
  }
  int stale = 0;
  for (int i = 0; i < nlist && !filter; i++)
    if (!list[i].hit &&
        (!strcmp(list[i].device, "all") || !strcmp(list[i].device, vk ? "vk" : "cpu"))) {
      printf("NOT FOUND (remove it from the list): %s\n", list[i].name);
      stale++;
    }
  tvk_stats stats;
  tvk_stats_get_sized(ctx, &stats, sizeof stats);
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("onnx suite on %s: %d passed, %d listed as failing, %d failed, %d listed but passing, "
         "%d listed but absent, %llu validation messages, %.0f s\n",
         device, pass, expected, unexpected, now_pass, stale,
         (unsigned long long)stats.validation_messages,
         (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  tvk_ctx_destroy(ctx);
  free(list);
  return unexpected || now_pass || stale || stats.validation_messages ? 1 : 0;
}
