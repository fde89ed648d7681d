/* The CPU backend's fast tier: a kernel compiled in memory by libtcc
 * (TinyCC), with no process, no file and no system headers, in about a
 * millisecond. Its code runs 2-7x slower than the system compiler's, so it
 * serves a kernel's first launches while the optimised build proceeds
 * (cpu_device.c), or alone where no compiler is installed.
 *
 * Without TVK_HAVE_TCC (libtcc not found at build time, or TVK_TCC=OFF) the
 * tier reports itself missing and the backend uses the system compiler only. */
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

#else /* no libtcc */

bool cpu_tcc_available(void) { return false; }

tvk_status cpu_tcc_compile(const char *name, const char *src, void **state, CpuKernelFn *fn,
                           Error *err) {
  (void)src;
  *state = NULL;
  if (fn) *fn = NULL;
  return err_set(err, TVK_ERR_DEVICE,
                 "kernel '%s': the CPU tiers are 'fast' (TinyCC only), and this tvk was built "
                 "without libtcc (TVK_TCC; Debian: libtcc-dev)",
                 name);
}

void cpu_tcc_free(void *state) { (void)state; }

#endif
