/* coldstart: how long an application waits for its first result.
 *
 *   build/samples/coldstart [DEVICE ...] [--runs N] [--model mlp|block]
 *
 * For each device (default: CPU and VK) and model, starts this program N times
 * (default 5) as a fresh process with an empty kernel cache ("cold"), then N
 * times more on the cache the last cold run filled ("warm"), and prints the
 * medians of:
 *  - first: from the process's start (posix_spawn in the parent) to the first
 *    forward's result on the host: loading libtvk, the context, the weights'
 *    upload, scheduling, compiling and running;
 *  - kernels: a second forward of the same process, which only runs kernels:
 *    "first - kernels" is what a cold or warm start adds;
 *  - optimised: from the start until every kernel's optimised build is in
 *    place (tvk_ctx_wait_compiles); equal to first where there is one tier;
 *  - compiled / hits: tvk_stats of the child.
 * Models (weights: fixed pseudo-random host data, uploaded with tvk_from_data):
 *  - mlp: a batch of 64 through 784-512-512-10, ReLU, log_softmax;
 *  - block: one pre-norm transformer block, 64 tokens of width 256, 4 heads,
 *    causal attention, a GELU MLP of width 1024, residuals.
 * Each child checks its result against plain double-precision loops here and
 * fails loudly when it differs, so a fast wrong answer shows.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, posix_spawn, mkdtemp */
#include <math.h>
#include <spawn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "models.h"
#include "tvk.h"

extern char **environ;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + 1e-6 * (double)ts.tv_nsec;
}

/* ---- the child: one process, one first result ---- */

static int child(const char *model, const char *device, double t_spawn) {
  double t0 = now_ms();
  const Model *m = NULL;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
    if (!strcmp(models[i].name, model)) m = &models[i];
  if (!m) return fprintf(stderr, "coldstart: no model '%s'\n", model), 2;
  tvk_ctx *ctx;
  if (tvk_ctx_create(device, &ctx) != TVK_OK)
    return fprintf(stderr, "coldstart: %s\n", tvk_last_create_error()), 77;
  rng_state = 0x853c49e6748fea9bULL;
  Weights w = {ctx, 0, {0}, {0}};
  m->weights(&w);
  tvk_tensor *out = m->forward(w.w);
  size_t n = (size_t)tvk_numel(out);
  float *res = malloc(n * sizeof *res);
  tvk_status st = tvk_to_host(out, res, n * sizeof *res);
  double t_first = now_ms();
  tvk_release(out);
  if (st != TVK_OK) return fprintf(stderr, "coldstart: %s\n", tvk_ctx_error(ctx)), 1;
  double k0 = now_ms();
  out = m->forward(w.w);
  st = tvk_to_host(out, res, n * sizeof *res);
  double t_kernels = now_ms() - k0;
  tvk_release(out);
  if (st == TVK_OK) st = tvk_ctx_wait_compiles(ctx);
  double t_opt = now_ms();
  if (st != TVK_OK) return fprintf(stderr, "coldstart: %s\n", tvk_ctx_error(ctx)), 1;
  tvk_stats s;
  tvk_stats_get(ctx, &s);
  double *ref = m->ref(w.host), err = 0;
  for (size_t i = 0; i < n; i++) err = fmax(err, fabs(res[i] - ref[i]) / (1 + fabs(ref[i])));
  free(ref);
  free(res);
  for (int i = 0; i < w.nw; i++) free(w.host[i]);
  tvk_ctx_destroy(ctx);
  if (!(err < 1e-3))
    return fprintf(stderr, "coldstart: %s: wrong result (error %g)\n", model, err), 1;
  /* The parent's clock reading at the spawn is the start; without it (run by
   * hand) main's. */
  double start = t_spawn > 0 ? t_spawn : t0;
  printf("%.3f %.3f %.3f %llu %llu\n", t_first - start, t_kernels, t_opt - start,
         (unsigned long long)s.kernels_compiled, (unsigned long long)s.cache_hits);
  return 0;
}

/* ---- the parent ---- */

typedef struct {
  double first, kernels, opt;
  unsigned long long compiled, hits;
} Sample;

/* Runs `self --child model device start` with TVK_CACHE_DIR=cache; 0 and *out
 * on success, 77 when the device is missing, else 1. */
static int spawn_child(const char *self, const char *model, const char *device, const char *cache,
                       Sample *out) {
  int fds[2];
  if (pipe(fds) != 0) return 1;
  size_t ne = 0;
  while (environ[ne]) ne++;
  char **env = calloc(ne + 2, sizeof *env);
  char cache_var[4200];
  snprintf(cache_var, sizeof cache_var, "TVK_CACHE_DIR=%s", cache);
  size_t k = 0;
  for (size_t i = 0; i < ne; i++)
    if (strncmp(environ[i], "TVK_CACHE_DIR=", 14)) env[k++] = environ[i];
  env[k++] = cache_var;
  char start[64];
  double t = now_ms();
  snprintf(start, sizeof start, "%.6f", t);
  char *argv[] = {(char *)self, "--child", (char *)model, (char *)device, start, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  int rc = posix_spawn(&pid, self, &fa, NULL, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  close(fds[1]);
  if (rc != 0) return close(fds[0]), 1;
  char line[256] = {0};
  FILE *f = fdopen(fds[0], "r");
  bool got = f && fgets(line, sizeof line, f);
  if (f) fclose(f);
  int ws;
  waitpid(pid, &ws, 0);
  if (WIFEXITED(ws) && WEXITSTATUS(ws) == 77) return 77;
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0 || !got) return 1;
  return sscanf(line, "%lf %lf %lf %llu %llu", &out->first, &out->kernels, &out->opt,
                &out->compiled, &out->hits) == 5
             ? 0
             : 1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const Sample *s, int n, size_t field) {
  double v[64];
  for (int i = 0; i < n; i++) memcpy(&v[i], (const char *)&s[i] + field, sizeof(double));
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void remove_tree(const char *dir) {
  char *argv[] = {"rm", "-rf", (char *)dir, NULL};
  pid_t pid;
  if (posix_spawnp(&pid, "rm", NULL, NULL, argv, environ) == 0) waitpid(pid, NULL, 0);
}

/* The cold and warm rows of one model on one device; 0, 77 (no device) or 1. */
static int measure(const char *self, const char *model, const char *device, int runs) {
  Sample cold[64], warm[64];
  char dir[4096] = "";
  for (int i = 0; i < runs; i++) {
    if (*dir) remove_tree(dir);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tvk-coldstart-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return perror("coldstart: mkdtemp"), 1;
    int rc = spawn_child(self, model, device, dir, &cold[i]);
    if (rc) return remove_tree(dir), rc;
  }
  for (int i = 0; i < runs; i++) {
    int rc = spawn_child(self, model, device, dir, &warm[i]);
    if (rc) return remove_tree(dir), rc;
  }
  remove_tree(dir);
  for (int c = 0; c < 2; c++) {
    const Sample *s = c ? warm : cold;
    printf("%-6s %-5s %-5s %10.1f %10.2f %10.1f %10.1f %9llu %6llu\n", device, model,
           c ? "warm" : "cold", median(s, runs, offsetof(Sample, first)),
           median(s, runs, offsetof(Sample, kernels)),
           median(s, runs, offsetof(Sample, first)) - median(s, runs, offsetof(Sample, kernels)),
           median(s, runs, offsetof(Sample, opt)), s[runs - 1].compiled, s[runs - 1].hits);
  }
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "--child")) return child(argv[2], argv[3], atof(argv[4]));
  const char *devices[8], *only = NULL;
  int ndev = 0, runs = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--model") && i + 1 < argc)
      only = argv[++i];
    else if (ndev < 8)
      devices[ndev++] = argv[i];
  }
  if (runs < 1 || runs > 64) return fprintf(stderr, "coldstart: --runs is 1 to 64\n"), 2;
  if (!ndev) devices[ndev++] = "CPU", devices[ndev++] = "VK";
  /* The child is this program: /proc/self/exe, so that PATH plays no part. */
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return fprintf(stderr, "coldstart: cannot find its own executable\n"), 1;
  self[len] = '\0';
  printf("medians of %d runs; ms; 'start' = first - kernels\n", runs);
  printf("%-6s %-5s %-5s %10s %10s %10s %10s %9s %6s\n", "device", "model", "cache", "first",
         "kernels", "start", "optimised", "compiled", "hits");
  int bad = 0;
  for (int d = 0; d < ndev; d++)
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
      if (only && strcmp(only, models[m].name)) continue;
      int rc = measure(self, models[m].name, devices[d], runs);
      if (rc == 77) {
        printf("%-6s (no such device)\n", devices[d]);
        break;
      }
      bad |= rc != 0;
    }
  return bad;
}
