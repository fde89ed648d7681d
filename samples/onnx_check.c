/* onnx_check: run ONNX models against their expected outputs.
 *
 *   build/samples/onnx_check [--device D] [--expect FILE] [--filter S] [-v] DIR...
 *
 * Finds every case folder under the DIRs (a model.onnx beside
 * test_data_set_*, the ONNX backend test suite's layout: Debian's
 * libonnx-testdata has over a thousand in /usr/share/libonnx-testdata/data),
 * runs each data set (input_N.pb in, output_N.pb expected) and compares with
 * the suite's tolerance, |got - want| <= 1e-7 + 1e-3 |want| (NaN matches NaN).
 * One line per case: pass with the worst error as a fraction of the
 * tolerance, FAIL with what went wrong (the load error, the element that
 * differs); then "N passed, M failed".
 *
 * A case is named by its folder and the folder above ("node/test_abs").
 * --expect FILE lists cases that cannot pass, one per line: "CASE DEVICES
 * REASON" with DEVICES all, cpu or vk (tests/onnx_expected_failures.txt is
 * tvk's). With it the run fails only on a case that fails and is not listed,
 * and on a listed case that passes, so the list stays true; listed cases
 * print only with -v. Exit status 0 when nothing failed that way, 1
 * otherwise, 2 for bad arguments, 77 when no DIR exists or the device is
 * missing (a skip for ctest). */
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

#define MAX_CASES 8192

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
    fprintf(stderr, "onnx_check: cannot open %s\n", path);
    return false;
  }
  list = calloc(MAX_CASES, sizeof *list);
  char line[512];
  bool ok = list != NULL;
  while (ok && fgets(line, sizeof line, f) && nlist < MAX_CASES) {
    char *p = line;
    while (*p == ' ') p++;
    if (*p == '#' || *p == '\n' || !*p) continue;
    listed *l = &list[nlist];
    int used = 0;
    if (sscanf(p, "%159s %7s %n", l->name, l->device, &used) < 2 || !used) {
      fprintf(stderr, "%s: a line that is not 'CASE all|cpu|vk REASON': %s", path, line);
      ok = false;
      break;
    }
    snprintf(l->reason, sizeof l->reason, "%s", p + used);
    l->reason[strcspn(l->reason, "\n")] = 0;
    if (strcmp(l->device, "all") && strcmp(l->device, "cpu") && strcmp(l->device, "vk")) {
      fprintf(stderr, "%s: device '%s' of %s is not all, cpu or vk\n", path, l->device, l->name);
      ok = false;
    } else if (!l->reason[0]) {
      fprintf(stderr, "%s: %s has no reason\n", path, l->name);
      ok = false;
    }
    nlist++;
  }
  fclose(f);
  return ok;
}

static listed *find_listed(const char *name, bool vk) {
  for (int i = 0; i < nlist; i++)
    if (!strcmp(list[i].name, name) &&
        (!strcmp(list[i].device, "all") || !strcmp(list[i].device, vk ? "vk" : "cpu")))
      return &list[i];
  return NULL;
}

/* ---- comparing ---- */

static double *fetch(tvk_tensor *t, char *why, size_t n) {
  tvk_tensor *d = tvk_cast(t, TVK_FLOAT64);
  int64_t cnt = tvk_numel(d);
  double *v = malloc(sizeof(double) * (size_t)(cnt ? cnt : 1));
  if (v && tvk_to_host(d, v, sizeof(double) * (size_t)cnt) != TVK_OK) {
    snprintf(why, n, "run: %s", tvk_ctx_error(tvk_ctx_of(t)));
    free(v);
    v = NULL;
  }
  tvk_release(d);
  return v;
}

static void shape_str(const tvk_tensor *t, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int d = 0; d < tvk_ndim(t) && k < n; d++)
    k += (size_t)snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)tvk_shape(t)[d]);
  if (k < n) snprintf(buf + k, n - k, ")");
}

/* Compares output k with the expected one; false with a reason. *worst is
 * the largest |got - want| / (atol + rtol |want|) seen. */
static bool same(tvk_tensor *got, tvk_tensor *want, int k, double *worst, char *why, size_t n) {
  if (tvk_dtype_of(got) != tvk_dtype_of(want)) {
    snprintf(why, n, "output %d is %s; expected %s", k, tvk_dtype_name(tvk_dtype_of(got)),
             tvk_dtype_name(tvk_dtype_of(want)));
    return false;
  }
  bool ok = tvk_ndim(got) == tvk_ndim(want);
  for (int d = 0; ok && d < tvk_ndim(got); d++) ok = tvk_shape(got)[d] == tvk_shape(want)[d];
  if (!ok) {
    char a[128], b[128];
    shape_str(got, a, sizeof a), shape_str(want, b, sizeof b);
    snprintf(why, n, "output %d has shape %s; expected %s", k, a, b);
    return false;
  }
  double *g = fetch(got, why, n), *w = g ? fetch(want, why, n) : NULL;
  ok = g && w;
  for (int64_t i = 0; ok && i < tvk_numel(want); i++) {
    if ((isnan(g[i]) && isnan(w[i])) || g[i] == w[i]) continue;
    double frac = fabs(g[i] - w[i]) / (1e-7 + 1e-3 * fabs(w[i]));
    if (frac > *worst || isnan(frac)) *worst = frac;
    if (!(frac <= 1)) {
      snprintf(why, n, "output %d, element %lld: %.9g; expected %.9g", k, (long long)i, g[i], w[i]);
      ok = false;
    }
  }
  free(g), free(w);
  return ok;
}

/* ---- one case ---- */

static bool run_set(tvk_ctx *ctx, tvk_onnx_model *m, const char *set, double *worst, char *why,
                    size_t n) {
  int nin = tvk_onnx_input_count(m), nout = tvk_onnx_output_count(m);
  tvk_tensor *in[64] = {0}, *out[64] = {0}, *want;
  char path[4700];
  if (nin > 64 || nout > 64) {
    snprintf(why, n, "%d inputs, %d outputs (at most 64)", nin, nout);
    return false;
  }
  for (int i = 0; i < nin; i++) {
    snprintf(path, sizeof path, "%s/input_%d.pb", set, i);
    if (tvk_onnx_load_tensor(ctx, path, &in[i]) != TVK_OK) {
      snprintf(why, n, "input: %s", tvk_onnx_last_error());
      return false;
    }
  }
  struct stat st;
  snprintf(path, sizeof path, "%s/input_%d.pb", set, nin);
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
    if (stat(path, &st) != 0) continue; /* an output the data does not give */
    if (tvk_onnx_load_tensor(ctx, path, &want) != TVK_OK) {
      snprintf(why, n, "expected output: %s", tvk_onnx_last_error());
      return false;
    }
    if (!same(out[k], want, k, worst, why, n)) return false;
  }
  return true;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs one case folder; true when it passes. */
static bool run_case(tvk_ctx *ctx, const char *dir, double *worst, char *why, size_t n) {
  char path[4500];
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
  for (int i = 0; i < nsets; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, sets[i]);
    if (ok) ok = run_set(ctx, m, path, worst, why, n);
    free(sets[i]);
  }
  tvk_onnx_destroy(m);
  tvk_scope_end(ctx, scope, 0, NULL);
  tvk_ctx_clear_error(ctx);
  return ok;
}

/* ---- finding cases ---- */

static char **cases;
static int ncases;

static bool is_case(const char *dir) {
  char path[4200];
  struct stat st;
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  if (stat(path, &st) != 0) return false;
  DIR *d = opendir(dir);
  bool sets = false;
  for (struct dirent *e; d && !sets && (e = readdir(d));)
    sets = !strncmp(e->d_name, "test_data_set_", 14);
  if (d) closedir(d);
  return sets;
}

static void find_cases(const char *dir, int depth) {
  if (is_case(dir)) {
    if (ncases < MAX_CASES) cases[ncases++] = strdup(dir);
    return;
  }
  if (depth > 6) return;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char sub[4200];
    struct stat st;
    snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
    if (stat(sub, &st) == 0 && S_ISDIR(st.st_mode)) find_cases(sub, depth + 1);
  }
  if (d) closedir(d);
}

/* "parent/case" of a case folder's path. */
static const char *case_name(const char *path) {
  const char *end = path + strlen(path), *p = end;
  int slashes = 0;
  while (p > path && slashes < 2)
    if (*--p == '/') slashes++;
  return slashes == 2 ? p + 1 : path;
}

int main(int argc, char **argv) {
  const char *device = NULL, *expect = NULL, *filter = NULL;
  bool verbose = false;
  cases = calloc(MAX_CASES, sizeof *cases);
  int ndirs = 0, dirs_found = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc)
      device = argv[++i];
    else if (!strcmp(argv[i], "--expect") && i + 1 < argc)
      expect = argv[++i];
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
      filter = argv[++i];
    else if (!strcmp(argv[i], "-v"))
      verbose = true;
    else if (argv[i][0] == '-') {
      fprintf(stderr, "usage: %s [--device D] [--expect FILE] [--filter S] [-v] DIR...\n", argv[0]);
      return 2;
    } else {
      struct stat st;
      ndirs++;
      if (stat(argv[i], &st) == 0) dirs_found++, find_cases(argv[i], 0);
    }
  }
  if (!ndirs) {
    fprintf(stderr, "usage: %s [--device D] [--expect FILE] [--filter S] [-v] DIR...\n", argv[0]);
    return 2;
  }
  if (!dirs_found) {
    printf("skip: none of the folders exists (Debian's test data: libonnx-testdata)\n");
    return 77;
  }
  if (expect && !read_list(expect)) return 2;
  qsort(cases, (size_t)ncases, sizeof *cases, by_name);
  tvk_ctx *ctx;
  tvk_ctx_options opt = {.device = device};
  if (tvk_ctx_create_opts(&opt, &ctx) != TVK_OK) {
    printf("skip: no device %s: %s\n", device ? device : "(default)", tvk_last_create_error());
    const char *req = getenv("TVK_REQUIRE_VK");
    return req && atoi(req) && device && !strncmp(device, "VK", 2) ? 1 : 77;
  }
  bool vk = !strncmp(tvk_ctx_device(ctx), "Vulkan", 6);
  printf("onnx_check on %s: %d cases\n", tvk_ctx_device(ctx), ncases);
  int pass = 0, fail = 0, expected = 0, now_pass = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < ncases; i++) {
    const char *name = case_name(cases[i]);
    if (filter && !strstr(name, filter)) continue;
    listed *l = expect ? find_listed(name, vk) : NULL;
    if (l) l->hit = true;
    char why[1024] = "";
    double worst = 0;
    bool ok = run_case(ctx, cases[i], &worst, why, sizeof why);
    if (ok && !l) {
      pass++;
      printf("pass     %s (worst error %.2g of the tolerance)\n", name, worst);
    } else if (ok) {
      now_pass++;
      printf("PASSES   %s, listed as failing (%s): remove it from %s\n", name, l->reason, expect);
    } else if (l) {
      expected++;
      if (verbose) printf("listed   %s: %s\n", name, why);
    } else {
      fail++;
      printf("FAIL     %s: %s\n", name, why);
    }
    fflush(stdout);
  }
  int stale = 0;
  for (int i = 0; i < nlist && !filter; i++)
    if (!list[i].hit &&
        (!strcmp(list[i].device, "all") || !strcmp(list[i].device, vk ? "vk" : "cpu"))) {
      printf("ABSENT   %s is listed but was not found: remove it from %s\n", list[i].name, expect);
      stale++;
    }
  tvk_stats stats;
  tvk_stats_get(ctx, &stats);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  if (stats.validation_messages)
    printf("%llu Vulkan validation messages\n", (unsigned long long)stats.validation_messages);
  printf("%d passed, %d failed", pass, fail);
  if (expect)
    printf(" (%d more listed as failing, %d listed but passing, %d listed but absent)", expected,
           now_pass, stale);
  printf(" on %s in %.0f s\n", vk ? "Vulkan" : "the CPU", sec);
  for (int i = 0; i < ncases; i++) free(cases[i]);
  free(cases);
  free(list);
  tvk_ctx_destroy(ctx);
  return fail || now_pass || stale || stats.validation_messages ? 1 : 0;
}
