/* The CPU backend's fast tier: a kernel compiled in memory by libtcc
 * (TinyCC), with no process, no file and no system headers, in about a
 * millisecond. Its code runs 2-7x slower than the system compiler's, so it
 * serves a kernel's first launches while the optimised build proceeds
 * (cpu_device.c), or alone where no compiler is installed.
 *
 * Without TVK_HAVE_TCC (libtvk.so, which cannot link Debian's libtcc.a; or
 * libtcc not found at build time, or TVK_TCC=OFF) the tier runs the tcc
 * executable where one is installed, and is missing otherwise: then the
 * backend uses the system compiler only. */
#include "cpu_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TVK_HAVE_TCC
#include <libtcc.h>

/* libtcc 0.9.27 keeps the compiler's state in globals: one compile at a time
 * in the process. A compile takes about a millisecond, so this costs little. */
static pthread_mutex_t tcc_mu = PTHREAD_MUTEX_INITIALIZER;

/* What TinyCC said, for the error message: its first errors. */
typedef struct {
  char text[1024];
  size_t len;
} TccLog;

static void on_tcc_message(void *opaque, const char *msg) {
  TccLog *l = opaque;
  int n = snprintf(l->text + l->len, sizeof l->text - l->len, "%s%s", l->len ? "\n" : "", msg);
  if (n > 0)
    l->len += (size_t)n < sizeof l->text - l->len ? (size_t)n : sizeof l->text - 1 - l->len;
}

/* The run-time helpers TinyCC calls for conversions between floats and
 * 64-bit unsigned integers (its libtcc1.a, which -nostdlib leaves out since
 * it may not be installed): the same conversions, compiled here. */
static uint64_t tcc_f32_to_u64(float x) { return (uint64_t)x; }
static uint64_t tcc_f64_to_u64(double x) { return (uint64_t)x; }
static float tcc_u64_to_f32(uint64_t x) { return (float)x; }
static double tcc_u64_to_f64(uint64_t x) { return (double)x; }

/* What kernels call, resolved here: TinyCC with -nostdlib looks up no
 * symbol in the process. libm's functions are those render_c.c's prelude
 * and helpers declare; memset, memcpy and memmove are what TinyCC itself emits for
 * initialising or copying a large object. */
typedef void (*AnyFn)(void);
#define FN(f)                                                                                      \
  { #f, (AnyFn)f }
static const struct {
  const char *name;
  AnyFn fn;
} tcc_symbols[] = {
    {"__fixunssfdi", (AnyFn)tcc_f32_to_u64},
    {"__fixunsdfdi", (AnyFn)tcc_f64_to_u64},
    {"__floatundisf", (AnyFn)tcc_u64_to_f32},
    {"__floatundidf", (AnyFn)tcc_u64_to_f64},
    FN(exp2),
    FN(exp2f),
    FN(log2),
    FN(log2f),
    FN(sin),
    FN(sinf),
    FN(sqrt),
    FN(sqrtf),
    FN(floor),
    FN(floorf),
    FN(trunc),
    FN(rint),
    FN(fabs),
    FN(fmod),
    FN(copysign),
    FN(pow),
    FN(ldexp),
    FN(frexp),
    FN(fmaf),
    FN(fma),
    FN(memset),
    FN(memcpy),
    FN(memmove),
};
#undef FN

bool cpu_tcc_available(void) { return true; }

tvk_status cpu_tcc_compile(const char *name, const char *src, void **state, CpuKernelFn *fn,
                           Error *err) {
  *state = NULL;
  *fn = NULL;
  TccLog log = {{0}, 0};
  pthread_mutex_lock(&tcc_mu);
  TCCState *s = tcc_new();
  if (!s) {
    pthread_mutex_unlock(&tcc_mu);
    return err_set(err, TVK_ERR_OUT_OF_MEMORY, "TinyCC: out of memory for kernel '%s'", name);
  }
  tcc_set_error_func(s, &log, on_tcc_message);
  /* Kernels include nothing (render_c.c's prelude) and call only what
   * tcc_symbols gives them: no headers, no libraries, no libtcc1.a. */
  tcc_set_options(s, "-nostdinc -nostdlib");
  tcc_set_output_type(s, TCC_OUTPUT_MEMORY);
  int rc = tcc_compile_string(s, src);
  for (size_t i = 0; rc == 0 && i < sizeof tcc_symbols / sizeof tcc_symbols[0]; i++) {
    void *p;
    memcpy(&p, &tcc_symbols[i].fn, sizeof p); /* POSIX: function and data pointers convert */
    rc = tcc_add_symbol(s, tcc_symbols[i].name, p);
  }
  if (rc == 0) rc = tcc_relocate(s, TCC_RELOCATE_AUTO);
  void *sym = rc == 0 ? tcc_get_symbol(s, name) : NULL;
  pthread_mutex_unlock(&tcc_mu);
  if (!sym) {
    cpu_tcc_free(s);
    return err_set(err, TVK_ERR_COMPILE, "TinyCC failed on kernel '%s': %s", name,
                   rc != 0 ? (log.len ? log.text : "(no message)") : "no such function");
  }
  memcpy(fn, &sym, sizeof *fn);
  *state = s;
  return TVK_OK;
}

void cpu_tcc_free(void *state) {
  if (!state) return;
  pthread_mutex_lock(&tcc_mu); /* the last state's delete frees the globals */
  tcc_delete(state);
  pthread_mutex_unlock(&tcc_mu);
}

#else /* no libtcc: the tcc executable */

/* Debian's libtcc.a is not position independent, so the shared library
 * cannot link it. It runs TinyCC as a program instead: the source to a
 * private temporary directory, `tcc -shared` (a few milliseconds, a process
 * start included), dlopen, and the files removed at once (the mapping
 * stays). The .so links TinyCC's own libtcc1.a and libm, so it needs no
 * symbol table of ours. */

#include <dlfcn.h>
#include <errno.h>
#include <unistd.h>

/* Seconds a tcc run may take: far more than a kernel needs (milliseconds). */
enum { TCC_TIMEOUT_S = 60 };

static pthread_once_t tcc_once = PTHREAD_ONCE_INIT;
static char tcc_exe[1024];
static bool tcc_found;

/* $TVK_TCC_EXE, else "tcc" from PATH, when it answers -v. */
static void find_tcc(void) {
  const char *env = getenv("TVK_TCC_EXE");
  snprintf(tcc_exe, sizeof tcc_exe, "%s", env && *env ? env : "tcc");
  CpuRun *r = malloc(sizeof *r);
  char *argv[] = {tcc_exe, "-v", NULL};
  tcc_found = r && cpu_run_process(argv, TCC_TIMEOUT_S, r) == 0 && !r->timed_out && r->status == 0;
  free(r);
}

bool cpu_tcc_available(void) {
  pthread_once(&tcc_once, find_tcc);
  return tcc_found;
}

/* dir/name.ext, or "" when it does not fit. */
static void path_in(char *out, size_t n, const char *dir, const char *name, const char *ext) {
  if ((size_t)snprintf(out, n, "%s/%s.%s", dir, name, ext) >= n) out[0] = '\0';
}

tvk_status cpu_tcc_compile(const char *name, const char *src, void **state, CpuKernelFn *fn,
                           Error *err) {
  *state = NULL;
  if (fn) *fn = NULL;
  if (!cpu_tcc_available())
    return err_set(err, TVK_ERR_DEVICE,
                   "kernel '%s': TinyCC is not available: this libtvk has no libtcc built in, and "
                   "'%s' does not run (install tcc, or set TVK_TCC_EXE to its path)",
                   name, tcc_exe);
  const char *tmp = getenv("TMPDIR");
  char dir[1024], c[1280], so[1280];
  snprintf(dir, sizeof dir, "%s/tvk-tcc-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir))
    return err_set(err, TVK_ERR_DEVICE,
                   "TinyCC: cannot make a directory in '%s' for kernel '%s': %s",
                   tmp && *tmp ? tmp : "/tmp", name, strerror(errno));
  path_in(c, sizeof c, dir, name, "c");
  path_in(so, sizeof so, dir, name, "so");
  FILE *f = c[0] && so[0] ? fopen(c, "w") : NULL;
  bool wrote = f && fputs(src, f) >= 0;
  if (f && fclose(f) != 0) wrote = false;
  tvk_status st = TVK_OK;
  CpuRun *r = wrote ? malloc(sizeof *r) : NULL;
  if (!wrote)
    st = err_set(err, TVK_ERR_DEVICE, "TinyCC: cannot write kernel '%s' to '%s'", name, dir);
  else if (!r)
    st = err_set(err, TVK_ERR_OUT_OF_MEMORY, "TinyCC: out of memory for kernel '%s'", name);
  if (st == TVK_OK) {
    char *argv[] = {tcc_exe, "-shared", "-o", so, c, "-lm", NULL};
    int rc = cpu_run_process(argv, TCC_TIMEOUT_S, r);
    if (rc != 0)
      st = err_set(err, TVK_ERR_DEVICE, "TinyCC: cannot run '%s': %s", tcc_exe, strerror(rc));
    else if (r->timed_out || r->status != 0)
      st = err_set(err, TVK_ERR_COMPILE, "TinyCC failed on kernel '%s'%s: %s", name,
                   r->timed_out ? " (timed out)" : "", r->len ? r->out : "(no message)");
  }
  free(r);
  void *h = st == TVK_OK ? dlopen(so, RTLD_NOW | RTLD_LOCAL) : NULL;
  void *sym = h ? dlsym(h, name) : NULL;
  if (st == TVK_OK && !sym) {
    const char *why = dlerror();
    st = err_set(err, TVK_ERR_COMPILE, "TinyCC's build of kernel '%s' does not load: %s", name,
                 why ? why : "no such function");
    if (h) dlclose(h);
  }
  unlink(c), unlink(so), rmdir(dir);
  if (st != TVK_OK) return st;
  if (fn) memcpy(fn, &sym, sizeof *fn);
  *state = h;
  return TVK_OK;
}

void cpu_tcc_free(void *state) {
  if (state) dlclose(state);
}

#endif
