/* Tests of the GLSL language table (backend_vk/vk_glsl.c) and the grid lowering
 * (lower.c, CG_MODE_GRID).
 *
 *  - compile: kernel ASTs built by hand, for every op on every dtype and every
 *    cast, rendered for three feature sets (the device's, without 8/16-bit
 *    storage so those elements are packed, and none at all) and compiled with
 *    shaderc: valid GLSL with no warnings, or TVK_ERR_DTYPE naming the missing
 *    Vulkan feature;
 *  - golden: the exact source of two tiny kernels;
 *  - run (when a Vulkan device exists): the same kernels on the Vulkan device,
 *    in the device's language and in the packed one, and in C on the CPU
 *    device, on the same inputs (edge values first, then random ones from a
 *    fixed-seed PRNG). Both are checked against the IR's constant evaluation
 *    (alu_exec, cval_cast) and against each other: integers and bool bit for
 *    bit, floats exactly for the correctly rounded ops and within the stated
 *    tolerances for the transcendental ones; then shapes: reduces, views, a
 *    grid larger than maxComputeWorkGroupCount, empty outputs, push-constant
 *    vars, long (unrolled) reduces.
 * The devices compile into the build tree's kernel cache (test_cache_dir), so
 * a second run compiles none of their kernels (shaderc still compiles every
 * kernel of the compile tests: that is what they test). With TVK_VALIDATE=1
 * the validation layer is on and any message fails the suite. */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <shaderc/shaderc.h>

#include "../backend_vk/vk_core.h"
#include "../backend_vk/vk_glsl.h"
#include "codegen/codegen.h"
#include "codegen/kernel.h"
#include "codegen/render.h"
#include "ir/alu.h"
#include "ir/view.h"
#include "runtime/device.h"
#include "test_util.h"

enum { L_DEV, L_PACKED, L_MIN, NLANG };
static const char *const lang_names[NLANG] = {"device features", "packed 8/16-bit", "no features"};

typedef struct {
  Device *cpu;
  Device *vk; /* NULL: no Vulkan device; the run tests skip */
  Lang *lang[NLANG];
  shaderc_compiler_t sc;
  shaderc_compile_options_t so;
  UCtx *c;
} Suite;

/* ---------------------------------------------------------------- helpers */

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(double lo, double hi) {
  return lo + (hi - lo) * (double)(xorshift64(&rng) >> 11) / 9007199254740992.0;
}

/* ---- AST builders: tests/test_util.h ---- */

static ShapeTracker *shp1(int64_t n) { return st_from_shape(1, &n); }

/* ---- host buffers of any dtype, in tvk's storage layout ---- */

typedef struct {
  ScalarType dt;
  int64_t n;
  void *data;
  size_t bytes;
} HostBuf;

static HostBuf hb_new(ScalarType dt, int64_t n) {
  size_t bytes = (size_t)n * dt_scalar_size(dt);
  HostBuf h = {dt, n, calloc(bytes ? bytes : 1, 1), bytes};
  assert_non_null(h.data);
  return h;
}
static HostBuf hb_copy(const HostBuf *h) {
  HostBuf r = hb_new(h->dt, h->n);
  memcpy(r.data, h->data, h->bytes);
  return r;
}
static void hb_free(HostBuf *h) { free(h->data), h->data = NULL; }

static void hb_set(HostBuf *h, int64_t i, CVal v) {
  uint8_t *p = (uint8_t *)h->data + (size_t)i * dt_scalar_size(h->dt);
  switch (h->dt) {
  case DT_BOOL: *p = v.i != 0; break;
  case DT_FLOAT16: *(uint16_t *)p = f32_to_f16((float)v.f); break;
  case DT_BFLOAT16: *(uint16_t *)p = f32_to_bf16((float)v.f); break;
  case DT_FLOAT32: *(float *)p = (float)v.f; break;
  case DT_FLOAT64: *(double *)p = v.f; break;
  default: memcpy(p, &v.i, dt_scalar_size(h->dt)); break; /* low bytes: little-endian */
  }
}
static CVal hb_get(const HostBuf *h, int64_t i) {
  const uint8_t *p = (const uint8_t *)h->data + (size_t)i * dt_scalar_size(h->dt);
  CVal v = {.i = 0};
  switch (h->dt) {
  case DT_BOOL: v.i = *p != 0; break;
  case DT_FLOAT16: v.f = f16_to_f32(*(const uint16_t *)p); break;
  case DT_BFLOAT16: v.f = bf16_to_f32(*(const uint16_t *)p); break;
  case DT_FLOAT32: v.f = *(const float *)p; break;
  case DT_FLOAT64: v.f = *(const double *)p; break;
  default:
    memcpy(&v.i, p, dt_scalar_size(h->dt));
    v.i = dt_truncate_i(h->dt, v.i); /* sign-extends the low bytes */
    break;
  }
  return v;
}

/* The value of the double x (float dtypes) or the integer k (others) in dt. */
static CVal val_f(ScalarType dt, double x) { return cval_cast((CVal){.f = x}, DT_FLOAT64, dt); }
static CVal val_i(ScalarType dt, int64_t k) { return cval_cast((CVal){.i = k}, DT_INT64, dt); }

static bool is_float(ScalarType t) { return (DT_BITS_FLOAT >> t) & 1u; }

/* Edge values of a dtype, then (from index nsp on) random ones. */
static const double float_edges[] = {0.0, -0.0, 1.0,  -1.0,   0.5,      -2.5,
                                     3.0, 1e-3, 100., -100.,  INFINITY, -INFINITY,
                                     NAN, 1e30, 7.25, 6.0e-5, 1.0e-40,  65504.0};
#define NFEDGE ((int)(sizeof float_edges / sizeof *float_edges))
static int64_t int_edge(ScalarType t, int k) {
  int64_t mn = dt_min_i(dt_make(t)), mx = dt_max_i(dt_make(t));
  const int64_t e[] = {0, 1, -1, 2, -2, 7, -7, mn, mn + 1, mx, mx - 1, 100, -100, 255, 128};
  if (t == DT_UINT64 && k == 9) return -1; /* uint64's max as its bit pattern */
  return e[k];
}
#define NIEDGE 15

static CVal edge(ScalarType t, int k) {
  if (t == DT_BOOL) return (CVal){.i = k & 1};
  return is_float(t) ? val_f(t, float_edges[k]) : val_i(t, int_edge(t, k));
}
static int nedges(ScalarType t) { return t == DT_BOOL ? 2 : is_float(t) ? NFEDGE : NIEDGE; }

static CVal random_val(ScalarType t, double lo, double hi) {
  if (is_float(t)) return val_f(t, urand(lo, hi));
  return val_i(t, (int64_t)xorshift64(&rng));
}

/* a and b of n elements: every pair of edges first, then random values. */
static void fill_pairs(HostBuf *a, HostBuf *b, double lo, double hi) {
  ScalarType t = a->dt;
  int ne = nedges(t);
  for (int64_t i = 0; i < a->n; i++) {
    bool pair = i < ne * ne;
    hb_set(a, i, pair ? edge(t, (int)(i / ne)) : random_val(t, lo, hi));
    hb_set(b, i, pair ? edge(t, (int)(i % ne)) : random_val(t, lo, hi));
  }
}

/* ---- comparing ---- */

typedef struct {
  double rtol, atol;
} Tol;
static const Tol EXACT = {0, 0};

/* NaN matches NaN, inf the same inf, ints and bools bit for bit; finite floats
 * within atol + rtol * |want| (-0 equals 0). */
static bool same(ScalarType t, CVal got, CVal want, Tol tol) {
  if (!is_float(t)) return got.i == want.i;
  if (isnan(want.f) || isnan(got.f)) return isnan(want.f) && isnan(got.f);
  if (isinf(want.f) || isinf(got.f)) return got.f == want.f;
  return fabs(got.f - want.f) <= tol.atol + tol.rtol * fabs(want.f);
}

static void val_str(ScalarType t, CVal v, char *buf, size_t n) {
  if (is_float(t))
    snprintf(buf, n, "%.17g", v.f);
  else
    snprintf(buf, n, "%lld", (long long)v.i);
}

/* ---------------------------------------------------------------- shaderc */

/* Renders sink in L (grid mode) into *ks; the status of codegen. */
static tvk_status glsl_of(const Lang *L, UOp *sink, KernelSource *ks) {
  CodegenOpts o = {.lang = L, .mode = CG_MODE_GRID, .local_size = 64};
  return codegen_kernel_opts(sink, NULL, &o, ks);
}

/* shaderc accepts src without a warning. */
static void compile_ok(Suite *s, const char *src, const char *what) {
  shaderc_compilation_result_t r = shaderc_compile_into_spv(
      s->sc, src, strlen(src), shaderc_compute_shader, "kernel.comp", "main", s->so);
  bool ok = shaderc_result_get_compilation_status(r) == shaderc_compilation_status_success &&
            shaderc_result_get_num_warnings(r) == 0;
  if (!ok) {
    fprintf(stderr, "%s\n", src);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: %s", what, shaderc_result_get_error_message(r));
    shaderc_result_release(r);
    fail_msg("%s", msg);
  }
  shaderc_result_release(r);
}

/* Renders and compiles sink in language k, or expects TVK_ERR_DTYPE naming the
 * feature when the language lacks one of the dtypes `uses` (DT_BITs). */
static void check_compiles(Suite *s, int k, UOp *sink, uint32_t uses, const char *what) {
  const Lang *L = s->lang[k];
  uint32_t missing = 0;
  for (int d = 0; d < DT_COUNT; d++)
    if ((uses >> d & 1) && !L->type[d]) missing |= DT_BIT(d);
  KernelSource ks;
  tvk_status st = glsl_of(L, sink, &ks);
  char full[200];
  snprintf(full, sizeof full, "%s (%s)", what, lang_names[k]);
  if (missing) {
    if (st != TVK_ERR_DTYPE) fail_msg("%s: status %d, expected TVK_ERR_DTYPE", full, st);
    bool i64 = missing & (DT_BIT(DT_INT64) | DT_BIT(DT_UINT64));
    const char *feature = i64 ? "shaderInt64" : "shaderFloat64";
    if (!strstr(ks.err.msg, feature))
      fail_msg("%s: '%s' does not name %s", full, ks.err.msg, feature);
    return;
  }
  if (st != TVK_OK) fail_msg("%s: codegen: %s", full, ks.err.msg);
  compile_ok(s, ks.src, full);
  kernel_source_free(&ks);
}

/* ---------------------------------------------------------------- running */

/* Generates sink for d (C in cores mode when L is NULL, else L in grid mode),
 * compiles it on d, runs it on copies of hb and leaves the buffers in out. */
static void run_with(Device *d, const CodegenOpts *o, UOp *sink, int nb, const HostBuf *hb,
                     HostBuf *out, int nv, const int32_t *vals) {
  KernelSource ks;
  if (codegen_kernel_opts(sink, NULL, o, &ks) != TVK_OK) fail_msg("codegen: %s", ks.err.msg);
  assert_int_equal(ks.nbufs, nb);
  DevProgram *p = NULL;
  bool hit;
  if (d->ops->compile(d, ks.name, ks.src, &p, &hit, NULL) != TVK_OK)
    fail_msg("compile %s: %s\n%s", ks.name, d->err.msg, ks.src);
  DevBuffer *bufs[64];
  assert_true(nb <= 64);
  for (int i = 0; i < nb; i++) {
    out[i] = hb_copy(&hb[i]);
    assert_int_equal(d->ops->alloc(d, out[i].bytes, &bufs[i]), TVK_OK);
    assert_int_equal(d->ops->copy_in(d, bufs[i], 0, out[i].data, out[i].bytes), TVK_OK);
  }
  LaunchDims dims;
  memcpy(dims.global, ks.global, sizeof dims.global);
  memcpy(dims.local, ks.local, sizeof dims.local);
  if (d->ops->launch(d, p, bufs, nb, vals, nv, &dims) != TVK_OK)
    fail_msg("launch %s: %s", ks.name, d->err.msg);
  assert_int_equal(d->ops->sync(d), TVK_OK);
  for (int i = 0; i < nb; i++) {
    assert_int_equal(d->ops->copy_out(d, bufs[i], 0, out[i].data, out[i].bytes), TVK_OK);
    d->ops->free(d, bufs[i]);
  }
  d->ops->program_free(d, p);
  kernel_source_free(&ks);
}

static void run_on(Device *d, const Lang *L, UOp *sink, int nb, const HostBuf *hb, HostBuf *out,
                   int nv, const int32_t *vals) {
  CodegenOpts o = {.lang = L, .mode = L ? CG_MODE_GRID : CG_MODE_CORES, .local_size = 64};
  run_with(d, &o, sink, nb, hb, out, nv, vals);
}

/* Output j of the Vulkan run against the CPU run: equal within tol. */
static void agree(const HostBuf *vk, const HostBuf *cpu, Tol tol, const char *what) {
  for (int64_t i = 0; i < vk->n; i++) {
    CVal g = hb_get(vk, i), w = hb_get(cpu, i);
    if (!same(vk->dt, g, w, tol)) {
      char a[64], b[64];
      val_str(vk->dt, g, a, sizeof a), val_str(vk->dt, w, b, sizeof b);
      fail_msg("%s [%lld]: Vulkan %s, CPU %s", what, (long long)i, a, b);
    }
  }
}

static void free_all(HostBuf *h, int n) {
  for (int i = 0; i < n; i++) hb_free(&h[i]);
}

/* ---------------------------------------------------------------- fixtures */

static int suite_setup(void **state) {
  Suite *s = calloc(1, sizeof *s);
  if (!s) return -1;
  Error err;
  const char *validate = getenv("TVK_VALIDATE");
  DeviceOptions o = {.cache_dir = test_cache_dir(), .validate = validate && atoi(validate) > 0};
  if (cpu_device_create(&o, &s->cpu, &err) != TVK_OK) {
    fprintf(stderr, "cpu device: %s\n", err.msg);
    return -1;
  }
  uint32_t features = 0x3ff; /* with no Vulkan device, render for one that has everything */
  if (vk_device_create(&o, -1, &s->vk, &err) == TVK_OK) {
    features = vk_lang_features(vk_of(s->vk));
  } else if (vk_required()) {
    fprintf(stderr, "TVK_REQUIRE_VK is set and there is no Vulkan device: %s\n", err.msg);
    return -1;
  } else {
    fprintf(stderr, "no Vulkan device (%s): only the compile tests run\n", err.msg);
  }
  /* The compile tests target Vulkan 1.1 (below), where the float controls of a
   * newer device come from VK_KHR_shader_float_controls: its SPIR-V extension
   * must then be named. */
  if (features & (VKFEAT_PRESERVE32 | VKFEAT_PRESERVE64)) features |= VKFEAT_FLOAT_CONTROLS_EXT;
  s->lang[L_DEV] = vk_glsl_lang_new(features);
  s->lang[L_PACKED] = vk_glsl_lang_new(features & ~(uint32_t)(VKFEAT_STORAGE8 | VKFEAT_STORAGE16));
  s->lang[L_MIN] = vk_glsl_lang_new(0);
  s->sc = shaderc_compiler_initialize();
  s->so = shaderc_compile_options_initialize();
  if (!s->lang[L_DEV] || !s->lang[L_PACKED] || !s->lang[L_MIN] || !s->sc || !s->so) return -1;
  shaderc_compile_options_set_target_env(s->so, shaderc_target_env_vulkan,
                                         shaderc_env_version_vulkan_1_1);
  shaderc_compile_options_set_optimization_level(s->so, shaderc_optimization_level_performance);
  *state = s;
  return 0;
}

static int suite_teardown(void **state) {
  Suite *s = *state;
  uint64_t messages = s->vk ? vk_validation_messages(s->vk) : 0;
  if (s->vk) s->vk->ops->destroy(s->vk);
  s->cpu->ops->destroy(s->cpu);
  for (int k = 0; k < NLANG; k++) vk_glsl_lang_free(s->lang[k]);
  shaderc_compile_options_release(s->so);
  shaderc_compiler_release(s->sc);
  free(s);
  if (messages)
    fprintf(stderr, "%llu Vulkan validation message(s)\n", (unsigned long long)messages);
  return messages ? -1 : 0;
}

static int test_setup(void **state) { return uctx_setup(&((Suite *)*state)->c); }
static int test_teardown(void **state) { return uctx_teardown(&((Suite *)*state)->c); }

#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)

/* ---------------------------------------------------------------- op kernels */

/* One output of an op kernel: op on operands 'a', 'b' (inputs 0 and 1), 's' (a
 * shift amount, input 2) or 'c' (a < b, WHERE's condition). */
typedef struct {
  Op op;
  const char *args;
} Case;

static const Case int_cases[] = {
    {OP_NEG, "a"},   {OP_ADD, "ab"},    {OP_SUB, "ab"},   {OP_MUL, "ab"}, {OP_MULACC, "aba"},
    {OP_IDIV, "ab"}, {OP_MOD, "ab"},    {OP_SHL, "as"},   {OP_SHR, "as"}, {OP_POW, "ab"},
    {OP_MAX, "ab"},  {OP_CMPLT, "ab"},  {OP_CMPNE, "ab"}, {OP_AND, "ab"}, {OP_OR, "ab"},
    {OP_XOR, "ab"},  {OP_WHERE, "cab"},
};
static const Case float_cases[] = {
    {OP_NEG, "a"},   {OP_ADD, "ab"},     {OP_SUB, "ab"},   {OP_MUL, "ab"},
    {OP_FDIV, "ab"}, {OP_MULACC, "aba"}, {OP_IDIV, "ab"},  {OP_MOD, "ab"},
    {OP_MAX, "ab"},  {OP_CMPLT, "ab"},   {OP_CMPNE, "ab"}, {OP_WHERE, "cab"},
};
static const Case math_cases[] = {
    {OP_EXP2, "a"}, {OP_LOG2, "a"}, {OP_SIN, "a"}, {OP_SQRT, "a"}, {OP_RECIP, "a"},
};
static const Case pow_cases[] = {{OP_POW, "ab"}};
static const Case bool_cases[] = {
    {OP_NEG, "a"},  {OP_ADD, "ab"},  {OP_SUB, "ab"},   {OP_MUL, "ab"},
    {OP_MAX, "ab"}, {OP_IDIV, "ab"}, {OP_CMPLT, "ab"}, {OP_CMPNE, "ab"},
    {OP_AND, "ab"}, {OP_OR, "ab"},   {OP_XOR, "ab"},   {OP_WHERE, "cab"},
};
#define NCASES(a) ((int)(sizeof a / sizeof *a))

static bool is_cmp(Op op) { return op == OP_CMPLT || op == OP_CMPNE; }

/* The kernel: output j (buffer j) is case j on inputs of n elements of dtype t,
 * at buffers nc, nc + 1, nc + 2 ('a', 'b', 's'). */
static UOp *case_sink(UCtx *c, ScalarType t, const Case *cs, int nc, int64_t n) {
  UOp *in[3] = {ld(c, nc, t, shp1(n)), NULL, NULL}, *st[32];
  for (int j = 0; j < nc; j++) {
    for (const char *p = cs[j].args; *p; p++) {
      if (*p == 'b' || *p == 'c') in[1] = in[1] ? in[1] : ld(c, nc + 1, t, shp1(n));
      if (*p == 's') in[2] = in[2] ? in[2] : ld(c, nc + 2, t, shp1(n));
    }
  }
  for (int j = 0; j < nc; j++) {
    UOp *src[3];
    int k = 0;
    for (const char *p = cs[j].args; *p; p++)
      src[k++] = *p == 'a' ? in[0] : *p == 'b' ? in[1] : *p == 's' ? in[2] : uop_lt(in[0], in[1]);
    UOp *x = uop_alu(cs[j].op, k, src);
    st[j] = store(c, j, is_cmp(cs[j].op) ? DT_BOOL : t, shp1(n), x);
  }
  return uop_sink(c, nc, st);
}

/* What alu_exec says case cs gives on element i of the inputs; false where it
 * does not evaluate (negative shift amounts and exponents, float MOD of NaN). */
static bool case_ref(ScalarType t, const Case *cs, const HostBuf *in, int64_t i, CVal *res) {
  CVal src[3];
  int k = 0;
  for (const char *p = cs->args; *p; p++) {
    if (*p == 'c') {
      CVal ab[2] = {hb_get(&in[0], i), hb_get(&in[1], i)};
      if (!alu_exec(OP_CMPLT, DT_BOOL, t, ab, &src[k++])) return false;
    } else {
      src[k++] = hb_get(&in[*p == 'a' ? 0 : *p == 'b' ? 1 : 2], i);
    }
  }
  return alu_exec(cs->op, is_cmp(cs->op) ? DT_BOOL : t, t, src, res);
}

/* Tolerance of op on dtype t: exact for the correctly rounded ops; the
 * device's division and fused multiply-add may be an ulp or two off; the
 * transcendental ops as the op suite's (a few ulps; float16/bfloat16 one ulp
 * of their own after the float32 result rounds). */
static Tol tol_of(Op op, ScalarType t) {
  bool math = op == OP_EXP2 || op == OP_LOG2 || op == OP_SIN || op == OP_SQRT || op == OP_RECIP ||
              op == OP_POW;
  bool near = op == OP_FDIV || op == OP_MULACC;
  if (!is_float(t) || (!math && !near)) return EXACT;
  switch (t) {
  case DT_FLOAT16: return (Tol){1e-3, 6e-8};
  case DT_BFLOAT16: return (Tol){8e-3, 1e-38};
  case DT_FLOAT64: return math ? (Tol){1e-13, 1e-15} : (Tol){5e-16, 0};
  default: return math ? (Tol){2e-6, 1e-6} : (Tol){2.5e-7, 0};
  }
}

/* Documented limits (docs/vulkan.md): float64 sin reduces exactly only for
 * |x| < 1.3e7. */
static bool beyond_limits(ScalarType t, Op op, CVal a) {
  return t == DT_FLOAT64 && op == OP_SIN && fabs(a.f) >= 1.3e7;
}

/* Vulkan gives fma() the precision of OpFMul then OpFAdd, so a device may
 * round a * b before adding (lavapipe does): a MULACC's result may then be off
 * by half an ulp of a * b besides an ulp of its own, more than a relative
 * tolerance allows where the sum cancels. Whether case cs's result `got` at
 * element i is within that of `want`. */
static bool mulacc_within(ScalarType t, const Case *cs, const HostBuf *in, int64_t i, CVal got,
                          CVal want, Tol tol) {
  if (cs->op != OP_MULACC || !is_float(t) || strcmp(cs->args, "aba") != 0) return false;
  if (isnan(got.f) || isnan(want.f) || isinf(got.f) || isinf(want.f)) return false;
  double half_ulp = t == DT_FLOAT64    ? 0x1p-53
                    : t == DT_FLOAT16  ? 0x1p-11
                    : t == DT_BFLOAT16 ? 0x1p-8
                                       : 0x1p-24;
  double prod = hb_get(&in[0], i).f * hb_get(&in[1], i).f;
  return fabs(got.f - want.f) <= tol.atol + tol.rtol * fabs(want.f) + half_ulp * fabs(prod);
}

static const char *lang_short(int k) { return k == L_DEV ? "device" : "packed"; }

/* Runs the cases on the CPU and on the Vulkan device (in the device's and the
 * packed language); every output against alu_exec and the CPU's. */
static void run_cases(Suite *s, ScalarType t, const Case *cs, int nc, HostBuf *in, int nin) {
  int nb = nc + nin;
  HostBuf hb[40], cpu[40], vk[40];
  for (int j = 0; j < nc; j++) hb[j] = hb_new(is_cmp(cs[j].op) ? DT_BOOL : t, in[0].n);
  for (int k = 0; k < nin; k++) hb[nc + k] = in[k];
  UOp *sink = case_sink(s->c, t, cs, nc, in[0].n);
  run_on(s->cpu, NULL, sink, nb, hb, cpu, 0, NULL);
  for (int k = L_DEV; k <= L_PACKED; k++) {
    run_on(s->vk, s->lang[k], sink, nb, hb, vk, 0, NULL);
    for (int j = 0; j < nc; j++) {
      char what[160];
      snprintf(what, sizeof what, "%s %s (%s)", dt_scalar_name(t), op_name(cs[j].op),
               lang_short(k));
      Tol tol = tol_of(cs[j].op, t);
      for (int64_t i = 0; i < in[0].n; i++)
        if (beyond_limits(t, cs[j].op, hb_get(&in[0], i)) ||
            mulacc_within(t, &cs[j], in, i, hb_get(&vk[j], i), hb_get(&cpu[j], i), tol))
          hb_set(&vk[j], i, hb_get(&cpu[j], i));
      agree(&vk[j], &cpu[j], tol, what);
      for (int64_t i = 0; i < in[0].n; i++) {
        CVal want, got = hb_get(&vk[j], i);
        if (beyond_limits(t, cs[j].op, hb_get(&in[0], i))) continue;
        if (!case_ref(t, &cs[j], in, i, &want) || same(vk[j].dt, got, want, tol)) continue;
        char g[64], w[64], a[64], b[64];
        val_str(vk[j].dt, got, g, sizeof g), val_str(vk[j].dt, want, w, sizeof w);
        val_str(t, hb_get(&in[0], i), a, sizeof a);
        val_str(t,
                nin > 1 ? hb_get(&in[nin > 2 && strchr(cs[j].args, 's') ? 2 : 1], i)
                        : (CVal){.i = 0},
                b, sizeof b);
        fail_msg("%s(%s, %s) [%lld]: Vulkan %s, alu_exec %s", what, a, b, (long long)i, g, w);
      }
    }
    free_all(vk, nb);
  }
  free_all(cpu, nb);
  for (int j = 0; j < nc; j++) hb_free(&hb[j]);
}

/* ---------------------------------------------------------------- compile */

static const ScalarType all_dts[] = {DT_BOOL,     DT_INT8,    DT_UINT8,  DT_INT16,  DT_UINT16,
                                     DT_INT32,    DT_UINT32,  DT_INT64,  DT_UINT64, DT_FLOAT16,
                                     DT_BFLOAT16, DT_FLOAT32, DT_FLOAT64};
#define NDTS ((int)(sizeof all_dts / sizeof *all_dts))

/* Every op of every dtype renders to GLSL that shaderc compiles, in each
 * language (or is refused with the missing feature named). */
static void test_compile_ops(void **state) {
  Suite *s = *state;
  for (int k = 0; k < NLANG; k++) {
    for (int d = 0; d < NDTS; d++) {
      ScalarType t = all_dts[d];
      char what[96];
      uint32_t uses = DT_BIT(t) | DT_BIT(DT_BOOL);
      if (t == DT_BOOL) {
        snprintf(what, sizeof what, "bool ops");
        check_compiles(s, k, case_sink(s->c, t, bool_cases, NCASES(bool_cases), 5), uses, what);
      } else if (is_float(t)) {
        snprintf(what, sizeof what, "%s ops", dt_scalar_name(t));
        check_compiles(s, k, case_sink(s->c, t, float_cases, NCASES(float_cases), 5), uses, what);
        snprintf(what, sizeof what, "%s math", dt_scalar_name(t));
        check_compiles(s, k, case_sink(s->c, t, math_cases, NCASES(math_cases), 5), uses, what);
        snprintf(what, sizeof what, "%s pow", dt_scalar_name(t));
        check_compiles(s, k, case_sink(s->c, t, pow_cases, 1, 5), uses, what);
      } else {
        snprintf(what, sizeof what, "%s ops", dt_scalar_name(t));
        check_compiles(s, k, case_sink(s->c, t, int_cases, NCASES(int_cases), 5), uses, what);
      }
      uop_pool_drain(s->c, 0);
    }
  }
}

/* out_j = cast(a, dts[j]) for every target the language has. */
static UOp *cast_sink(UCtx *c, ScalarType from, const Lang *L, int64_t n, int *nout,
                      ScalarType *to) {
  UOp *a = NULL, *st[NDTS];
  int m = 0;
  for (int d = 0; d < NDTS; d++)
    if (all_dts[d] != from && (!L || L->type[all_dts[d]])) to[m++] = all_dts[d];
  a = ld(c, m, from, shp1(n));
  for (int j = 0; j < m; j++) st[j] = store(c, j, to[j], shp1(n), uop_cast(a, dt_make(to[j])));
  *nout = m;
  return uop_sink(c, m, st);
}

/* Every cast between dtypes compiles in each language. */
static void test_compile_casts(void **state) {
  Suite *s = *state;
  for (int k = 0; k < NLANG; k++) {
    for (int d = 0; d < NDTS; d++) {
      ScalarType to[NDTS];
      int m;
      char what[96];
      snprintf(what, sizeof what, "casts from %s", dt_scalar_name(all_dts[d]));
      UOp *sink = cast_sink(s->c, all_dts[d], s->lang[k], 5, &m, to);
      check_compiles(s, k, sink, DT_BIT(all_dts[d]), what);
      uop_pool_drain(s->c, 0);
    }
  }
}

/* Without shaderInt64 / shaderFloat64 a kernel using the dtype is refused with
 * TVK_ERR_DTYPE naming the feature, also when the dtype is only a buffer. */
static void test_refused(void **state) {
  Suite *s = *state;
  const Lang *L = s->lang[L_MIN];
  struct {
    ScalarType t;
    const char *word;
  } cases[] = {
      {DT_INT64, "shaderInt64"}, {DT_UINT64, "shaderInt64"}, {DT_FLOAT64, "shaderFloat64"}};
  for (int k = 0; k < 3; k++) {
    UCtx *c = s->c;
    /* a float64 input summed into float32: the dtype is only loaded and cast */
    UOp *x = uop_cast(ld(c, 1, cases[k].t, shp1(8)), DT(FLOAT32));
    KernelSource ks;
    assert_int_equal(glsl_of(L, sink1(store(c, 0, DT_FLOAT32, shp1(8), x)), &ks), TVK_ERR_DTYPE);
    if (!strstr(ks.err.msg, cases[k].word))
      fail_msg("'%s' does not name %s", ks.err.msg, cases[k].word);
    if (!strstr(ks.err.msg, dt_scalar_name(cases[k].t)))
      fail_msg("'%s' does not name %s", ks.err.msg, dt_scalar_name(cases[k].t));
  }
}

/* ---------------------------------------------------------------- run: ops */

#define SKIP_WITHOUT_VK(s)                                                                         \
  do {                                                                                             \
    if (!(s)->vk) skip();                                                                          \
  } while (0)

/* Whether the device's language has dtype t. */
static bool has(const Suite *s, ScalarType t) { return s->lang[L_DEV]->type[t] != NULL; }

enum { NRAND = 200 };

/* Every integer op of every integer dtype: every pair of edge values (0, +-1,
 * the extremes, ...) and random ones; shift amounts from -2 to the width + 2. */
static void test_run_int_ops(void **state) {
  Suite *s = *state;
  SKIP_WITHOUT_VK(s);
  for (int d = 0; d < NDTS; d++) {
    ScalarType t = all_dts[d];
    if (is_float(t) || t == DT_BOOL || !has(s, t)) continue;
    int64_t n = NIEDGE * NIEDGE + NRAND, w = dt_bits(dt_make(t));
    HostBuf in[3] = {hb_new(t, n), hb_new(t, n), hb_new(t, n)};
    fill_pairs(&in[0], &in[1], 0, 0);
    for (int64_t i = 0; i < n; i++)
      hb_set(&in[2], i, val_i(t, (int64_t)(xorshift64(&rng) % (uint64_t)(w + 5)) - 2));
    run_cases(s, t, int_cases, NCASES(int_cases), in, 3);
    free_all(in, 3);
    uop_pool_drain(s->c, 0);
  }
}

static void test_run_bool_ops(void **state) {
  Suite *s = *state;
  SKIP_WITHOUT_VK(s);
  HostBuf in[2] = {hb_new(DT_BOOL, 300), hb_new(DT_BOOL, 300)};
  fill_pairs(&in[0], &in[1], 0, 0);
  run_cases(s, DT_BOOL, bool_cases, NCASES(bool_cases), in, 2);
  free_all(in, 2);
}

/* Inputs of the math ops: the edges of each (0, negative, inf, NaN, a
 * denormal, arguments sin must reduce), then random ones in [-20, 20]. */
static const double math_edges[] = {0.0,      -0.0,      1.0,        -1.0,   0.5,   2.0,
                                    INFINITY, -INFINITY, NAN,        1e-3,   100.0, -100.0,
                                    1000.25,  -6000.5,   88.5,       -150.0, 3e38,  1e-40,
                                    0.75,     1e10,      -123456.75, 8000.5, 6434.0};
/* pow: bases and exponents with C's special cases, then a in [0.1, 4), b in [-3, 3) */
static const double pow_a[] = {0.0, -0.0, 1.0,      -1.0,      2.0, -2.0,
                               0.5, 3.0,  INFINITY, -INFINITY, NAN, 0.25};
static const double pow_b[] = {0.0, -0.0, 1.0,      -1.0,      2.0, 3.0, -3.0,
                               0.5, -0.5, INFINITY, -INFINITY, NAN, 2.5};
#define NPA ((int)(sizeof pow_a / sizeof *pow_a))
#define NPB ((int)(sizeof pow_b / sizeof *pow_b))

/* Every float op of every float dtype, against alu_exec and the CPU: the
 * arithmetic on every pair of edges, the math functions on their edges, pow on
 * C's special cases. */
static void test_run_float_ops(void **state) {
  Suite *s = *state;
  SKIP_WITHOUT_VK(s);
  for (int d = 0; d < NDTS; d++) {
    ScalarType t = all_dts[d];
    if (!is_float(t) || !has(s, t)) continue;
    int64_t n = NFEDGE * NFEDGE + NRAND;
    HostBuf in[2] = {hb_new(t, n), hb_new(t, n)};
    fill_pairs(&in[0], &in[1], -100, 100);
    run_cases(s, t, float_cases, NCASES(float_cases), in, 2);
    free_all(in, 2);

    int ne = (int)(sizeof math_edges / sizeof *math_edges);
    HostBuf x = hb_new(t, ne + NRAND);
    for (int64_t i = 0; i < x.n; i++)
      hb_set(&x, i, i < ne ? val_f(t, math_edges[i]) : val_f(t, urand(-20, 20)));
    run_cases(s, t, math_cases, NCASES(math_cases), &x, 1);
    hb_free(&x);

    HostBuf p[2] = {hb_new(t, NPA * NPB + NRAND), hb_new(t, NPA * NPB + NRAND)};
    for (int64_t i = 0; i < p[0].n; i++) {
      bool pair = i < NPA * NPB;
      hb_set(&p[0], i, val_f(t, pair ? pow_a[i / NPB] : urand(0.1, 4)));
      hb_set(&p[1], i, val_f(t, pair ? pow_b[i % NPB] : urand(-3, 3)));
    }
    run_cases(s, t, pow_cases, 1, p, 2);
    free_all(p, 2);
    uop_pool_drain(s->c, 0);
  }
}

/* ---------------------------------------------------------------- run: casts */

/* Values where casts round, wrap or saturate: ties of float16, bfloat16 and
 * float32, the edges of every int width, float -> int out of range, NaN, inf,
 * denormals. Ints are taken modulo the source width. */
static const double cast_fedges[] = {0.0,
                                     -0.0,
                                     0.5,
                                     -0.5,
                                     1.5,
                                     2.5,
                                     -2.5,
                                     255.5,
                                     256.0,
                                     -129.0,
                                     65504.0,
                                     65519.0,
                                     65520.0,
                                     1e5,
                                     3e9,
                                     -3e9,
                                     5e18,
                                     1e19,
                                     -1e19,
                                     1e20,
                                     9.3e18,
                                     1.8446744073709552e19,
                                     1e300,
                                     1.00048828125,
                                     1.00146484375,
                                     1.00390625,
                                     1.01171875,
                                     1.0000000596046448,
                                     1.0000001788139343,
                                     NAN,
                                     INFINITY,
                                     -INFINITY,
                                     1e-40,
                                     6e-8,
                                     3e-5,
                                     -1e-45,
                                     0.1,
                                     -7.75,
                                     2147483647.5};
static const int64_t cast_iedges[] = {0,
                                      1,
                                      -1,
                                      127,
                                      128,
                                      255,
                                      256,
                                      -129,
                                      32767,
                                      32768,
                                      65535,
                                      65536,
                                      65519,
                                      65520,
                                      0x01008001,
                                      0x01018001,
                                      16777217,
                                      2147483647,
                                      -2147483647 - 1,
                                      4294967295,
                                      9007199254740993,
                                      INT64_MAX,
                                      INT64_MIN,
                                      0x0100800000000001};

/* Every cast between the device's dtypes, bit for bit against cval_cast (the
 * IR's constant folding) and the CPU. */
static void test_run_casts(void **state) {
  Suite *s = *state;
  SKIP_WITHOUT_VK(s);
  int nf = (int)(sizeof cast_fedges / sizeof *cast_fedges);
  int ni = (int)(sizeof cast_iedges / sizeof *cast_iedges);
  for (int d = 0; d < NDTS; d++) {
    ScalarType from = all_dts[d], to[NDTS];
    if (!has(s, from)) continue;
    int m;
    int64_t n = (is_float(from) ? nf : ni) + NRAND;
    UOp *sink = cast_sink(s->c, from, s->lang[L_DEV], n, &m, to);
    HostBuf hb[NDTS + 1], cpu[NDTS + 1], vk[NDTS + 1];
    for (int j = 0; j < m; j++) hb[j] = hb_new(to[j], n);
    HostBuf *a = &hb[m];
    *a = hb_new(from, n);
    for (int64_t i = 0; i < n; i++) {
      if (is_float(from))
        hb_set(a, i, val_f(from, i < nf ? cast_fedges[i] : urand(-1e6, 1e6)));
      else
        hb_set(a, i, val_i(from, i < ni ? cast_iedges[i] : (int64_t)xorshift64(&rng)));
    }
    run_on(s->cpu, NULL, sink, m + 1, hb, cpu, 0, NULL);
    for (int k = L_DEV; k <= L_PACKED; k++) {
      run_on(s->vk, s->lang[k], sink, m + 1, hb, vk, 0, NULL);
      for (int j = 0; j < m; j++) {
        char what[96];
        snprintf(what, sizeof what, "cast %s -> %s (%s)", dt_scalar_name(from),
                 dt_scalar_name(to[j]), lang_short(k));
        agree(&vk[j], &cpu[j], EXACT, what);
        for (int64_t i = 0; i < n; i++) {
          CVal got = hb_get(&vk[j], i), want = cval_cast(hb_get(a, i), from, to[j]);
          if (same(to[j], got, want, EXACT)) continue;
          char g[64], w[64], x[64];
          val_str(to[j], got, g, sizeof g), val_str(to[j], want, w, sizeof w);
          val_str(from, hb_get(a, i), x, sizeof x);
          fail_msg("%s of %s: Vulkan %s, cval_cast %s", what, x, g, w);
        }
      }
      free_all(vk, m + 1);
    }
    free_all(cpu, m + 1);
    free_all(hb, m + 1);
    uop_pool_drain(s->c, 0);
  }
}

/* ---------------------------------------------------------------- run: shapes */

/* Runs sink on both devices (both languages on Vulkan) and checks that every
 * buffer agrees within tol; returns the CPU's buffers in cpu (caller frees). */
static void run_agree(Suite *s, UOp *sink, int nb, const HostBuf *hb, HostBuf *cpu, Tol tol, int nv,
                      const int32_t *vals, const char *what) {
  HostBuf vk[16];
  run_on(s->cpu, NULL, sink, nb, hb, cpu, nv, vals);
  for (int k = L_DEV; k <= L_PACKED; k++) {
    run_on(s->vk, s->lang[k], sink, nb, hb, vk, nv, vals);
    for (int i = 0; i < nb; i++) {
      char w[160];
      snprintf(w, sizeof w, "%s, buffer %d (%s)", what, i, lang_short(k));
      agree(&vk[i], &cpu[i], tol, w);
    }
    free_all(vk, nb);
  }
}

static HostBuf random_buf(ScalarType t, int64_t n, double lo, double hi) {
  HostBuf h = hb_new(t, n);
  for (int64_t i = 0; i < n; i++) hb_set(&h, i, random_val(t, lo, hi));
  return h;
}

/* The error of a blocked float32 sum (codegen.h, CG_SUM_BLOCK) relative to the
 * sum of |x|: an element passes through at most 16 additions in each level of
 * at most 16 iterations (log16(2^24) = 6 levels here): under 6 * 16 = 96
 * roundings of 2^-24 each. */
#define SUM_BOUND (100 * 0x1p-24)

/* Reduces over the first, middle, last and all axes of a (37, 129, 5) input,
 * float32 sums and maxes, an int8 sum that wraps, a float16 sum: the grid
 * covers the output axes, the reduce axes stay loops. Vulkan and the CPU agree
 * bit for bit (they add in the same order); float32 sums are within the bound
 * of blocked accumulation of the exact sum. */
static void test_run_reduces(void **state) {
  Suite *s = *state;
  SKIP_WITHOUT_VK(s);
  enum { A = 37, B = 65, C = 5 }; /* all three reduced: within the loop budget */
  UCtx *c = s->c;
  const ScalarType ts[] = {DT_FLOAT32, DT_INT8, DT_FLOAT16};
  const struct {
    Op op;
    int n;
    int64_t axes[3], out[3];
  } rs[] = {{OP_ADD, 1, {1}, {A, 1, C}},
            {OP_MAX, 2, {0, 2}, {1, B, 1}},
            {OP_ADD, 3, {0, 1, 2}, {1, 1, 1}},
            {OP_ADD, 1, {2}, {A, B, 1}}};
  for (int k = 0; k < 3; k++) {
    ScalarType t = ts[k];
    HostBuf x = random_buf(t, A * B * C, -4, 4);
    for (int j = 0; j < 4; j++) {
      UOp *in = ld(c, 1, t, shp(3, (int64_t)A, (int64_t)B, (int64_t)C));
      UOp *r = reduce(in, rs[j].op, rs[j].n, rs[j].axes);
      UOp *sink = sink1(store(c, 0, t, st_from_shape(3, rs[j].out), r));
      HostBuf hb[2] = {hb_new(t, rs[j].out[0] * rs[j].out[1] * rs[j].out[2]), x}, cpu[2];
      char what[64];
      snprintf(what, sizeof what, "%s reduce %d", dt_scalar_name(t), j);
      run_agree(s, sink, 2, hb, cpu, EXACT, 0, NULL, what);
      if (j == 0 && t == DT_FLOAT32) /* exact sums, in double */
        for (int i = 0; i < A * C; i++) {
          double acc = 0, mag = 0;
          for (int b = 0; b < B; b++) {
            double v = hb_get(&x, (i / C * B + b) * C + i % C).f;
            acc += v, mag += fabs(v);
          }
          assert_true(fabs(hb_get(&cpu[0], i).f - acc) <= SUM_BOUND * mag);
        }
      free_all(cpu, 2);
      hb_free(&hb[0]);
    }
    hb_free(&x);
    uop_pool_drain(c, 0);
  }
}

/* A matmul's k loop unrolled by 4 in order so A's row is read in quads
 * (vectorize.c, unroll_for_quads): the same bits as the kernel without
 * 4-vectors, and the source has the quads. (8, 12) x 48, as a reduce of a
 * product over the last axis of (8, 12, 48). */
static void test_run_unrolled_same_bits(void **state) {
  Suite *s = *state;
  SKIP_WITHOUT_VK(s);
  UCtx *c = s->c;
  const int64_t M = 8, N = 12, K = 48;
  UOp *sink = matmul_sink(c, DT_FLOAT32, M, N, K);
  /* the register tile alone (no work-group tile or staging: A from global) */
  OptPlan tile = {2, {{OPT_UPCAST, 1, 4}, {OPT_UPCAST, 0, 4}}};
  CodegenOpts o = {.lang = s->lang[L_DEV], .mode = CG_MODE_GRID, .local_size = 64, .plan = &tile};
  KernelSource ks;
  assert_int_equal(codegen_kernel_opts(sink, NULL, &o, &ks), TVK_OK);
  assert_non_null(strstr(ks.src, "precise vec4 val0 = data1v[")); /* A's quad along k */
  kernel_source_free(&ks);
  Lang scalar = *s->lang[L_DEV];
  scalar.max_vector = 0; /* no 4-vectors: neither quads nor the unroll */
  CodegenOpts so = o;
  so.lang = &scalar;
  HostBuf hb[3] = {hb_new(DT_FLOAT32, M * N), random_buf(DT_FLOAT32, M * K, -4, 4),
                   random_buf(DT_FLOAT32, K * N, -4, 4)};
  HostBuf quad[3], plain[3];
  run_with(s->vk, &o, sink, 3, hb, quad, 0, NULL);
  run_with(s->vk, &so, sink, 3, hb, plain, 0, NULL);
  assert_memory_equal(quad[0].data, plain[0].data, quad[0].bytes);
  free_all(quad, 3), free_all(plain, 3), free_all(hb, 3);
  /* a sum over (4, 16, 24) read with axis 1 contiguous, axis 2 grouped: the
   * blocked sum's outer level loops over axis 1 and holds the inner level's
   * accumulator, so it must not be unrolled (copies would share that
   * accumulator; the random plan test once caught it) */
  ShapeTracker *x0 = shp(3, (int64_t)4, (int64_t)24, (int64_t)16);
  ShapeTracker *x1 = st_permute(x0, (const int[]){0, 2, 1});
  st_free(x0);
  UOp *all = reduce(ld(c, 1, DT_FLOAT32, x1), OP_ADD, 3, (const int64_t[]){0, 1, 2});
  UOp *sink2 = sink1(store(c, 0, DT_FLOAT32, shp(3, (int64_t)1, (int64_t)1, (int64_t)1), all));
  OptPlan grp = {1, {{OPT_GROUP, 2, 16}}};
  o.plan = so.plan = &grp, o.max_local = so.max_local = 64;
  o.shared_bytes = so.shared_bytes = 16384;
  HostBuf hx[2] = {hb_new(DT_FLOAT32, 1), random_buf(DT_FLOAT32, 4 * 24 * 16, -4, 4)};
  run_with(s->vk, &o, sink2, 2, hx, quad, 0, NULL);
  run_with(s->vk, &so, sink2, 2, hx, plain, 0, NULL);
  assert_memory_equal(quad[0].data, plain[0].data, quad[0].bytes);
  free_all(quad, 2), free_all(plain, 2), free_all(hx, 2);
  uop_pool_drain(c, 0);
}

/* Loads through permuted, padded (gated loads), flipped, shrunk and expanded
 * views, in int32 and in uint8 (packed without 8-bit storage). */
static void test_run_views(void **state) {
  Suite *s = *state;
  SKIP_WITHOUT_VK(s);
  UCtx *c = s->c;
  const ScalarType ts[] = {DT_INT32, DT_UINT8, DT_FLOAT16};
  for (int k = 0; k < 3; k++) {
    ScalarType t = ts[k];
    ShapeTracker *b0 = shp(3, (int64_t)3, (int64_t)4, (int64_t)5);
    ShapeTracker *p = st_permute(b0, (const int[]){2, 0, 1});               /* (5, 3, 4) */
    ShapeTracker *q = st_pad(p, (const sint[][2]){{1, 1}, {0, 2}, {1, 0}}); /* (7, 5, 5) */
    ShapeTracker *f = st_flip(q, (const bool[]){true, false, true});
    ShapeTracker *e0 = shp(3, (int64_t)7, (int64_t)1, (int64_t)5);
    ShapeTracker *e = st_expand(e0, (const sint[]){7, 5, 5});
    ShapeTracker *w0 = shp(3, (int64_t)9, (int64_t)6, (int64_t)8);
    ShapeTracker *w = st_shrink(w0, (const sint[][2]){{1, 8}, {0, 5}, {2, 7}});
    UOp *x = uop_add(uop_add(ld(c, 1, t, f), ld(c, 2, t, e)), ld(c, 3, t, w));
    UOp *sink = sink1(store(c, 0, t, shp(3, (int64_t)7, (int64_t)5, (int64_t)5), x));
    st_free(b0), st_free(p), st_free(q), st_free(e0), st_free(w0);
    HostBuf hb[4] = {hb_new(t, 175), random_buf(t, 60, -8, 8), random_buf(t, 35, -8, 8),
                     random_buf(t, 432, -8, 8)},
            cpu[4];
    run_agree(s, sink, 4, hb, cpu, EXACT, 0, NULL, dt_scalar_name(t));
    free_all(cpu, 4);
    free_all(hb, 4);
    uop_pool_drain(c, 0);
  }
}

/* More work groups than maxComputeWorkGroupCount[0] (65535 on most devices):
 * the dispatcher spreads them over y and z and the kernel rebuilds the linear
 * id; every element is written once. */
static void test_run_big_grid(void **state) {
  Suite *s = *state;
  SKIP_WITHOUT_VK(s);
  int64_t n = 64 * (int64_t)vk_of(s->vk)->lim.max_wg_count[0] + 77;
  UCtx *c = s->c;
  UOp *x = uop_add(ld(c, 1, DT_INT32, shp1(n)), uop_const_int(c, DT(INT32), 1000));
  UOp *sink = sink1(store(c, 0, DT_INT32, shp1(n), x));
  HostBuf hb[2] = {hb_new(DT_INT32, n), hb_new(DT_INT32, n)}, out[2];
  for (int64_t i = 0; i < n; i++) hb_set(&hb[1], i, (CVal){.i = i});
  for (int64_t i = 0; i < n; i++) hb_set(&hb[0], i, (CVal){.i = -1});
  run_on(s->vk, s->lang[L_DEV], sink, 2, hb, out, 0, NULL);
  for (int64_t i = 0; i < n; i++)
    if (hb_get(&out[0], i).i != i + 1000)
      fail_msg("[%lld]: %lld", (long long)i, (long long)hb_get(&out[0], i).i);
  free_all(out, 2);
  free_all(hb, 2);
}

/* An empty output launches nothing; a one-element output one invocation. */
static void test_run_empty_and_one(void **state) {
  Suite *s = *state;
  SKIP_WITHOUT_VK(s);
  UCtx *c = s->c;
  for (int64_t n = 0; n <= 1; n++) {
    UOp *x =
        uop_mul(ld(c, 1, DT_FLOAT32, shp(2, n, (int64_t)1)), uop_const_float(c, DT(FLOAT32), 3));
    UOp *sink = sink1(store(c, 0, DT_FLOAT32, shp(2, n, (int64_t)1), x));
    KernelSource ks;
    assert_int_equal(glsl_of(s->lang[L_DEV], sink, &ks), TVK_OK);
    assert_int_equal(ks.global[0], n);
    assert_int_equal(ks.local[0], 1);
    kernel_source_free(&ks);
    HostBuf hb[2] = {hb_new(DT_FLOAT32, n), hb_new(DT_FLOAT32, n)}, cpu[2];
    for (int64_t i = 0; i < n; i++) hb_set(&hb[1], i, (CVal){.f = 1.5});
    run_agree(s, sink, 2, hb, cpu, EXACT, 0, NULL, "empty/one");
    if (n == 1) assert_true(hb_get(&cpu[0], 0).f == 4.5);
    free_all(cpu, 2), free_all(hb, 2);
  }
}

/* Symbolic values reach the kernel as push constants after the grid. */
static void test_run_vars(void **state) {
  Suite *s = *state;
  SKIP_WITHOUT_VK(s);
  enum { N = 300 };
  UCtx *c = s->c;
  UOp *n = uop_var(c, "n", 1, 1000), *m = uop_var(c, "m", -100, 100);
  UOp *a = ld(c, 1, DT_INT32, shp1(N));
  UOp *sink = sink1(store(c, 0, DT_INT32, shp1(N), uop_add(uop_mul(a, n), m)));
  HostBuf hb[2] = {hb_new(DT_INT32, N), random_buf(DT_INT32, N, 0, 0)}, out[2];
  const int32_t vals[2] = {-7, 3}; /* sorted by name: m, n */
  run_on(s->vk, s->lang[L_DEV], sink, 2, hb, out, 2, vals);
  for (int i = 0; i < N; i++) {
    int32_t want = (int32_t)((uint32_t)hb_get(&hb[1], i).i * 3u - 7u);
    assert_int_equal(hb_get(&out[0], i).i, want);
  }
  free_all(out, 2), free_all(hb, 2);
}

/* Symbolic sizes on the device: one shader for every n of an (n, 5) input,
 * its work groups counted from n at each launch (kernel_groups), against
 * double-precision references: out = a * 2 + b (b broadcast along n), the
 * sum of each row, and the max of each column (a reduce over n); with the
 * heuristic's plan (plan NULL) or the given one (upcasts of the symbolic
 * axis leave its last block masked). */
enum { SYM_N = 70 };
static void sym_run(Suite *s, UOp *sink, int which, const OptPlan *plan) {
  KernelSource ks;
  CodegenOpts o = {.lang = s->lang[L_DEV], .mode = CG_MODE_GRID, .local_size = 64, .plan = plan};
  if (codegen_kernel_opts(sink, NULL, &o, &ks) != TVK_OK) fail_msg("codegen: %s", ks.err.msg);
  assert_int_equal(ks.nvars, 1);
  if (plan) assert_int_equal(ks.plan.n, plan->n);            /* applied as given */
  assert_true(which == 2 ? ks.groups == 0 : ks.groups != 0); /* the column max has 5 outputs */
  DevProgram *p = NULL;
  bool hit;
  if (s->vk->ops->compile(s->vk, ks.name, ks.src, &p, &hit, NULL) != TVK_OK)
    fail_msg("compile %s: %s\n%s", ks.name, s->vk->err.msg, ks.src);
  static const int32_t ns[] = {1, 2, 63, 64, 65, SYM_N};
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
    int32_t n = ns[k];
    float a[SYM_N * 5], b[5], out[SYM_N * 5];
    double want[SYM_N * 5];
    for (int i = 0; i < n * 5; i++) a[i] = (float)((i * 37 % 101) - 50) / 8.0f;
    for (int i = 0; i < 5; i++) b[i] = (float)i - 2.5f;
    int64_t nout = which == 0 ? n * 5 : which == 1 ? n : 5;
    for (int64_t e = 0; e < nout; e++) {
      if (which == 0) want[e] = (double)a[e] * 2 + b[e % 5];
      if (which == 1) {
        want[e] = 0;
        for (int c = 0; c < 5; c++) want[e] += a[e * 5 + c];
      }
      if (which == 2) {
        want[e] = a[e];
        for (int r = 1; r < n; r++) want[e] = a[r * 5 + e] > want[e] ? a[r * 5 + e] : want[e];
      }
    }
    DevBuffer *bufs[3];
    size_t bytes[3] = {(size_t)nout * 4, (size_t)n * 5 * 4, 5 * 4};
    const void *src[3] = {out, a, b};
    int nb = which == 0 ? 3 : 2;
    for (int i = 0; i < nb; i++) {
      assert_int_equal(s->vk->ops->alloc(s->vk, bytes[i], &bufs[i]), TVK_OK);
      if (i) assert_int_equal(s->vk->ops->copy_in(s->vk, bufs[i], 0, src[i], bytes[i]), TVK_OK);
    }
    LaunchDims dims;
    memcpy(dims.global, ks.global, sizeof dims.global);
    memcpy(dims.local, ks.local, sizeof dims.local);
    dims.global[0] = kernel_groups(&ks, &n);
    if (which != 2 && !plan)
      assert_int_equal(dims.global[0], (nout + ks.local[0] - 1) / ks.local[0]);
    if (s->vk->ops->launch(s->vk, p, bufs, nb, &n, 1, &dims) != TVK_OK)
      fail_msg("launch %s: %s", ks.name, s->vk->err.msg);
    assert_int_equal(s->vk->ops->sync(s->vk), TVK_OK);
    assert_int_equal(s->vk->ops->copy_out(s->vk, bufs[0], 0, out, bytes[0]), TVK_OK);
    for (int i = 0; i < nb; i++) s->vk->ops->free(s->vk, bufs[i]);
    for (int64_t e = 0; e < nout; e++)
      if (fabs(out[e] - want[e]) > 1e-5 * (1 + fabs(want[e])))
        fail_msg("%s n=%d [%lld]: %g, want %g", ks.name, n, (long long)e, out[e], want[e]);
  }
  s->vk->ops->program_free(s->vk, p);
  kernel_source_free(&ks);
}

static void test_run_symbolic(void **state) {
  Suite *s = *state;
  SKIP_WITHOUT_VK(s);
  UCtx *c = s->c;
  sint n = sint_var("n", 1, SYM_N);
  ShapeTracker *row = shp(2, (int64_t)1, (int64_t)5), *bc = st_expand(row, (sint[]){n, 5});
  st_free(row);
  UOp *a = ld(c, 1, DT_FLOAT32, st_from_shape(2, (sint[]){n, 5}));
  UOp *ew =
      store(c, 0, DT_FLOAT32, st_from_shape(2, (sint[]){n, 5}),
            uop_add(uop_mul(a, uop_const_float(c, DT(FLOAT32), 2.0)), ld(c, 2, DT_FLOAT32, bc)));
  UOp *k[3];
  int64_t ax1 = 1, ax0 = 0;
  k[0] = sink1(ew);
  k[1] =
      sink1(store(c, 0, DT_FLOAT32, st_from_shape(2, (sint[]){n, 1}), reduce(a, OP_ADD, 1, &ax1)));
  k[2] = sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)1, (int64_t)5), reduce(a, OP_MAX, 1, &ax0)));
  for (int i = 0; i < 3; i++) sym_run(s, k[i], i, NULL);
  /* plans: upcasts of both axes (n's by 4 and 8: masked tails at 1, 2, 63,
   * 65, 70), an unroll of the fixed reduce */
  const OptPlan plans[3] = {{2, {{OPT_UPCAST, 0, 4}, {OPT_UPCAST, 1, 5}}},
                            {2, {{OPT_UPCAST, 0, 8}, {OPT_UNROLL, 1, 5}}},
                            {1, {{OPT_UPCAST, 1, 5}}}};
  for (int i = 0; i < 3; i++) sym_run(s, k[i], i, &plans[i]);
  /* the reduce over n unrolled by 4: full blocks, then the 1, 2, 3 or 0
   * elements left in a loop of their own (lower.c) */
  const OptPlan unrolled = {2, {{OPT_UPCAST, 1, 5}, {OPT_UNROLL, 0, 4}}};
  sym_run(s, k[2], 2, &unrolled);
  /* steps that change the work-group structure are refused, with the reason */
  KernelSource ks;
  const OptPlan local = {1, {{OPT_LOCAL, 1, 5}}};
  CodegenOpts o = {.lang = s->lang[L_DEV], .mode = CG_MODE_GRID, .local_size = 64, .plan = &local};
  assert_int_equal(codegen_kernel_opts(k[0], NULL, &o, &ks), TVK_ERR_INVALID_ARG);
  if (!strstr(ks.err.msg, "takes UPCAST and UNROLL only")) fail_msg("the message: %s", ks.err.msg);
  kernel_source_free(&ks);
}

/* A kernel whose reduce would run more than CG_GRID_LOOP_BUDGET iterations in
 * one invocation is refused in grid mode, naming the count (lavapipe would
 * end it early; the frontend splits such reduces first: nn_precision's
 * test_awkward_lengths runs them end to end). The CPU's loops have no such
 * limit: the same sum and max over 100003 elements run there, checked
 * against double. */
static void test_run_long_reduce(void **state) {
  Suite *s = *state;
  SKIP_WITHOUT_VK(s);
  UCtx *c = s->c;
  enum { N = 100003 };
  HostBuf hb[3] = {hb_new(DT_FLOAT32, 1), hb_new(DT_FLOAT32, 1), random_buf(DT_FLOAT32, N, -1, 1)};
  UOp *x = ld(c, 2, DT_FLOAT32, shp1(N));
  const int64_t ax0[] = {0};
  UOp *st[2] = {store(c, 0, DT_FLOAT32, shp1(1), reduce(x, OP_ADD, 1, ax0)),
                store(c, 1, DT_FLOAT32, shp1(1), reduce(x, OP_MAX, 1, ax0))};
  UOp *sink = uop_sink(c, 2, st);
  KernelSource ks;
  assert_int_equal(glsl_of(s->lang[L_DEV], sink, &ks), TVK_ERR_INVALID_ARG);
  if (!strstr(ks.err.msg, "reduce iterations, more than the 16384"))
    fail_msg("the message: %s", ks.err.msg);
  kernel_source_free(&ks);
  HostBuf cpu[3];
  run_on(s->cpu, NULL, sink, 3, hb, cpu, 0, NULL);
  double acc = 0, mag = 0;
  float mx = -INFINITY;
  for (int i = 0; i < N; i++) {
    float v = (float)hb_get(&hb[2], i).f;
    acc += v, mag += fabs(v), mx = v > mx ? v : mx;
  }
  assert_true(fabs(hb_get(&cpu[0], 0).f - acc) <= SUM_BOUND * mag && hb_get(&cpu[1], 0).f == mx);
  free_all(cpu, 3), free_all(hb, 3);
}

/* ---------------------------------------------------------------- golden */

/* Compares the source with the golden text; TVK_GOLDEN_PRINT=1 prints it as a
 * C string to paste after an intended change (review it first). */
static void check_golden(UOp *sink, uint32_t features, const char *golden) {
  Lang *L = vk_glsl_lang_new(features);
  assert_non_null(L);
  KernelSource ks;
  tvk_status st = glsl_of(L, sink, &ks);
  vk_glsl_lang_free(L);
  if (st != TVK_OK) fail_msg("codegen: %s", ks.err.msg);
  if (getenv("TVK_GOLDEN_PRINT")) {
    printf("static const char golden_%s[] =\n", ks.name);
    for (const char *p = ks.src; *p;) {
      const char *nl = strchr(p, '\n');
      size_t len = nl ? (size_t)(nl - p) : strlen(p);
      printf("    \"");
      for (size_t i = 0; i < len; i++) printf(p[i] == '"' || p[i] == '\\' ? "\\%c" : "%c", p[i]);
      printf("%s\"\n", nl ? "\\n" : "");
      p += len + (nl ? 1 : 0);
    }
    printf("    ;\n");
  }
  if (strcmp(ks.src, golden) != 0) {
    fprintf(stderr, "got:\n%s\nexpected:\n%s\n", ks.src, golden);
    kernel_source_free(&ks);
    fail_msg("the source differs from the golden one");
  }
  kernel_source_free(&ks);
}

static const char golden_r_2_3[] =
    "#version 450\n"
    "#extension GL_EXT_shader_8bit_storage : require\n"
    "#extension GL_EXT_shader_16bit_storage : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n"
    "layout(set = 0, binding = 0, std430) buffer tvk_buf0 { precise float data0[]; };\n"
    "layout(set = 0, binding = 1, std430) readonly buffer tvk_buf1 { precise float data1[]; };\n"
    "layout(push_constant, std430) uniform tvk_push {\n"
    "  uint grid_x, grid_y, grid_z;\n"
    "} pc;\n"
    "layout(local_size_x = 2, local_size_y = 1, local_size_z = 1) in;\n"
    "void main() {  // r_2_3\n"
    "  uint tvk_lin = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y +\n"
    "                 gl_NumWorkGroups.y * gl_WorkGroupID.z);\n"
    "  if (tvk_lin >= pc.grid_x * pc.grid_y * pc.grid_z) return;\n"
    "  const float tvk_zero = uintBitsToFloat(pc.grid_x >> 31);\n"
    "  precise float acc0 = float(tvk_zero);\n"
    "  for (int ridx1 = 0; ridx1 < 3; ridx1++) {\n"
    "    precise float val0 = data1[(int(gl_LocalInvocationID.x)+(ridx1*2))];\n"
    "    acc0 = (acc0+val0);\n"
    "  }\n"
    "  data0[int(gl_LocalInvocationID.x)] = (float(tvk_zero)>acc0?float(tvk_zero):acc0);\n"
    "}\n";

static const char golden_E_3_25[] =
    "#version 450\n"
    "// 8-bit elements on a device without storageBuffer8BitAccess: four to a uint,\n"
    "// element i in byte i & 3 of word i >> 2 (the host's little-endian bytes). A\n"
    "// store changes only its own byte, with two atomics, because other invocations\n"
    "// may store the other bytes of the word at the same time.\n"
    "// The value goes through a precise variable: glslang marks the float ops\n"
    "// behind a precise store (NoContraction), but not behind an atomic's operand.\n"
    "int tvk_ld8s(uint w, int k) { return bitfieldExtract(int(w), k * 8, 8); }\n"
    "uint tvk_ld8u(uint w, int k) { return bitfieldExtract(w, k * 8, 8); }\n"
    "#define TVK_ST8(w, k, v) { precise uint tvk_v_ = uint(v); uint tvk_sh_ = uint(k) * 8u; "
    "atomicAnd(w, ~(0xffu << tvk_sh_)); atomicOr(w, (tvk_v_ & 0xffu) << tvk_sh_); }\n"
    "// 16-bit elements on a device without storageBuffer16BitAccess: two to a uint,\n"
    "// element i in half i & 1 of word i >> 1 (little-endian). A store changes only\n"
    "// its own half, with two atomics, the value through a precise variable (see\n"
    "// pack8.glsl).\n"
    "int tvk_ld16s(uint w, int k) { return bitfieldExtract(int(w), k * 16, 16); }\n"
    "uint tvk_ld16u(uint w, int k) { return bitfieldExtract(w, k * 16, 16); }\n"
    "#define TVK_ST16(w, k, v) { precise uint tvk_v_ = uint(v); uint tvk_sh_ = uint(k) * 16u; "
    "atomicAnd(w, ~(0xffffu << tvk_sh_)); atomicOr(w, (tvk_v_ & 0xffffu) << tvk_sh_); }\n"
    "// IDIV on integers as alu.c: truncates toward zero, x / 0 = 0, and the most\n"
    "// negative value / -1 wraps to itself. Computed on magnitudes in the unsigned\n"
    "// type: GLSL leaves / on negative operands and on 0 to the driver.\n"
    "uint tvk_idiv_u32(uint a, uint b) {\n"
    "  if (b == uint(0)) return uint(0);\n"
    "  bool na = a < uint(0), nb = b < uint(0);\n"
    "  uint q = (na ? uint(0) - uint(a) : uint(a)) / (nb ? uint(0) - uint(b) : uint(b));\n"
    "  return uint(na != nb ? uint(0) - q : q);\n"
    "}\n"
    "layout(set = 0, binding = 0, std430) buffer tvk_buf0 { precise uint data0[]; };\n"
    "layout(set = 0, binding = 1, std430) readonly buffer tvk_buf1 { precise uint data1[]; };\n"
    "layout(set = 0, binding = 2, std430) readonly buffer tvk_buf2 { precise uint data2[]; };\n"
    "layout(push_constant, std430) uniform tvk_push {\n"
    "  uint grid_x, grid_y, grid_z;\n"
    "} pc;\n"
    "layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;\n"
    "void main() {  // E_3_25\n"
    "  uint tvk_lin = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y +\n"
    "                 gl_NumWorkGroups.y * gl_WorkGroupID.z);\n"
    "  if (tvk_lin >= pc.grid_x * pc.grid_y * pc.grid_z) return;\n"
    "  const float tvk_zero = uintBitsToFloat(pc.grid_x >> 31);\n"
    "  precise int alu0 = ((int(tvk_lin)*64)+int(gl_LocalInvocationID.x));\n"
    "  precise int alu1 = ((alu0<74)?alu0:74);\n"
    "  precise uint val0 = tvk_ld8u(data1[(alu1) >> 2], (alu1) & 3);\n"
    "  precise uint cast0 = val0;\n"
    "  precise uint val1 = tvk_ld8u(data2[(alu1) >> 2], (alu1) & 3);\n"
    "  precise uint cast1 = val1;\n"
    "  precise uint cast2 = bitfieldExtract(((cast0<cast1)?bitfieldExtract(tvk_idiv_u32(cast1, "
    "cast0), 0, 8):cast1), 0, 8);\n"
    "  precise int alu2 = ((alu0<75)?1:0);\n"
    "  for (int ridx2 = 0; ridx2 < alu2; ridx2++) {\n"
    "    TVK_ST8(data0[(alu1) >> 2], (alu1) & 3, uint(cast2));\n"
    "  }\n"
    "}\n";

/* out[i] = max(0, sum_j a[j, i]) for a 3 x 2 float32 matrix read transposed,
 * on a device with every feature: one invocation per output, the reduce a loop. */
static void test_golden_sum(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  ShapeTracker *b0 = shp(2, (int64_t)3, (int64_t)2), *st = st_permute(b0, (const int[]){1, 0});
  st_free(b0);
  const int64_t ax[] = {1};
  UOp *x =
      uop_max(reduce(ld(c, 1, DT_FLOAT32, st), OP_ADD, 1, ax), uop_const_float(c, DT(FLOAT32), 0));
  uint32_t all = VKFEAT_STORAGE8 | VKFEAT_STORAGE16 | VKFEAT_INT64 | VKFEAT_FLOAT64;
  check_golden(sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)2, (int64_t)1), x)), all,
               golden_r_2_3);
}

/* out = a < b ? b // a : b for 3 x 25 uint8, on a device without 8-bit
 * storage: packed loads and the byte store, the C-semantics division helper,
 * the bounds check of the last of two work groups. */
static void test_golden_packed(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  UOp *a = ld(c, 1, DT_UINT8, shp(2, (int64_t)3, (int64_t)25)),
      *b = ld(c, 2, DT_UINT8, shp(2, (int64_t)3, (int64_t)25));
  UOp *x = uop_where(uop_lt(a, b), uop_idiv(b, a), b);
  check_golden(sink1(store(c, 0, DT_UINT8, shp(2, (int64_t)3, (int64_t)25), x)), 0, golden_E_3_25);
}

/* The source of sink under `plan` in the device language with features f. */
static char *glsl_planned_for(UOp *sink, const OptPlan *plan, uint32_t f) {
  Lang *L = vk_glsl_lang_new(f);
  assert_non_null(L);
  CodegenOpts o = {.lang = L, .mode = CG_MODE_GRID, .local_size = 64, .plan = plan};
  KernelSource ks;
  tvk_status st = codegen_kernel_opts(sink, NULL, &o, &ks);
  vk_glsl_lang_free(L);
  if (st != TVK_OK) fail_msg("codegen: %s", ks.err.msg);
  char *src = strdup(ks.src);
  kernel_source_free(&ks);
  assert_non_null(src);
  return src;
}

#define ALL_FEATURES (VKFEAT_STORAGE8 | VKFEAT_STORAGE16 | VKFEAT_INT64 | VKFEAT_FLOAT64)

/* The source of sink under `plan` in the device language with every feature
 * but 8-wide access. */
static char *glsl_planned(UOp *sink, const OptPlan *plan) {
  return glsl_planned_for(sink, plan, ALL_FEATURES);
}

static const char golden_E_2_2u4[] =
    "#version 450\n"
    "#extension GL_EXT_shader_8bit_storage : require\n"
    "#extension GL_EXT_shader_16bit_storage : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n"
    "layout(set = 0, binding = 0, std430) buffer tvk_buf0 { precise float data0[]; };\n"
    "layout(set = 0, binding = 0, std430) buffer tvk_vbuf0 { precise vec4 data0v[]; };\n"
    "layout(set = 0, binding = 1, std430) readonly buffer tvk_buf1 { precise float data1[]; };\n"
    "layout(set = 0, binding = 1, std430) readonly buffer tvk_vbuf1 { precise vec4 data1v[]; };\n"
    "layout(set = 0, binding = 2, std430) readonly buffer tvk_buf2 { precise float data2[]; };\n"
    "layout(set = 0, binding = 2, std430) readonly buffer tvk_vbuf2 { precise vec4 data2v[]; };\n"
    "layout(push_constant, std430) uniform tvk_push {\n"
    "  uint grid_x, grid_y, grid_z;\n"
    "} pc;\n"
    "layout(local_size_x = 4, local_size_y = 1, local_size_z = 1) in;\n"
    "void main() {  // E_2_2u4\n"
    "  uint tvk_lin = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y +\n"
    "                 gl_NumWorkGroups.y * gl_WorkGroupID.z);\n"
    "  if (tvk_lin >= pc.grid_x * pc.grid_y * pc.grid_z) return;\n"
    "  const float tvk_zero = uintBitsToFloat(pc.grid_x >> 31);\n"
    "  precise vec4 val0 = data1v[int(gl_LocalInvocationID.x)];\n"
    "  precise vec4 val1 = data2v[((((int(gl_LocalInvocationID.x)/2)*2)+((int(gl_LocalInvocationID."
    "x)%2)*(-1)))+1)];\n"
    "  data0v[int(gl_LocalInvocationID.x)] = vec4((val0[0]*val1[3]), (val0[1]*val1[2]), "
    "(val0[2]*val1[1]), (val0[3]*val1[0]));\n"
    "}\n";

/* out = a * flip(b) on float32 (2, 8), the inner axis upcast by 4: one vec4
 * load of each input and one vec4 store per invocation (vectorize.c); the
 * flipped view reads its quad in reverse lane order. */
static void test_golden_vec4(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  ShapeTracker *b0 = shp(2, (int64_t)2, (int64_t)8), *bf = st_flip(b0, (const bool[]){false, true});
  st_free(b0);
  UOp *x = uop_mul(ld(c, 1, DT_FLOAT32, shp(2, (int64_t)2, (int64_t)8)), ld(c, 2, DT_FLOAT32, bf));
  UOp *sink = sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)2, (int64_t)8), x));
  OptPlan plan = {1, {{OPT_UPCAST, 1, 4}}};
  char *src = glsl_planned(sink, &plan);
  if (strcmp(src, golden_E_2_2u4) != 0) {
    fprintf(stderr, "got:\n%s\nexpected:\n%s\n", src, golden_E_2_2u4);
    free(src);
    fail_msg("the source differs from the golden one");
  }
  compile_ok(s, src, "vec4 kernel");
  free(src);
}

static const char golden_E_2_2u8[] =
    "#version 450\n"
    "#extension GL_EXT_shader_8bit_storage : require\n"
    "#extension GL_EXT_shader_16bit_storage : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n"
    "// runs of 8 32-bit elements accessed as one u64vec4 (VKFEAT_WIDE)\n"
    "uint tvk_lane8(u64vec4 v, int i) { return unpackUint2x32(v[i >> 1])[i & 1]; }\n"
    "layout(set = 0, binding = 0, std430) buffer tvk_buf0 { precise float data0[]; };\n"
    "layout(set = 0, binding = 0, std430) buffer tvk_wbuf0 { precise u64vec4 data0w[]; };\n"
    "layout(set = 0, binding = 1, std430) readonly buffer tvk_buf1 { precise float data1[]; }"
    ";\n"
    "layout(set = 0, binding = 1, std430) readonly buffer tvk_wbuf1 { precise u64vec4 data1w["
    "]; };\n"
    "layout(set = 0, binding = 2, std430) readonly buffer tvk_buf2 { precise float data2[]; }"
    ";\n"
    "layout(set = 0, binding = 2, std430) readonly buffer tvk_wbuf2 { precise u64vec4 data2w["
    "]; };\n"
    "layout(push_constant, std430) uniform tvk_push {\n"
    "  uint grid_x, grid_y, grid_z;\n"
    "} pc;\n"
    "layout(local_size_x = 4, local_size_y = 1, local_size_z = 1) in;\n"
    "void main() {  // E_2_2u8\n"
    "  uint tvk_lin = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y +\n"
    "                 gl_NumWorkGroups.y * gl_WorkGroupID.z);\n"
    "  if (tvk_lin >= pc.grid_x * pc.grid_y * pc.grid_z) return;\n"
    "  const float tvk_zero = uintBitsToFloat(pc.grid_x >> 31);\n"
    "  precise u64vec4 val0 = data1w[int(gl_LocalInvocationID.x)];\n"
    "  precise u64vec4 val1 = data2w[((((int(gl_LocalInvocationID.x)/2)*2)+((int(gl_LocalInvo"
    "cationID.x)%2)*(-1)))+1)];\n"
    "  data0w[int(gl_LocalInvocationID.x)] = u64vec4(packUint2x32(uvec2(floatBitsToUint((uint"
    "BitsToFloat(tvk_lane8(val0, 0))*uintBitsToFloat(tvk_lane8(val1, 7)))), floatBitsToUint(("
    "uintBitsToFloat(tvk_lane8(val0, 1))*uintBitsToFloat(tvk_lane8(val1, 6)))))), packUint2x3"
    "2(uvec2(floatBitsToUint((uintBitsToFloat(tvk_lane8(val0, 2))*uintBitsToFloat(tvk_lane8(v"
    "al1, 5)))), floatBitsToUint((uintBitsToFloat(tvk_lane8(val0, 3))*uintBitsToFloat(tvk_lan"
    "e8(val1, 4)))))), packUint2x32(uvec2(floatBitsToUint((uintBitsToFloat(tvk_lane8(val0, 4)"
    ")*uintBitsToFloat(tvk_lane8(val1, 3)))), floatBitsToUint((uintBitsToFloat(tvk_lane8(val0"
    ", 5))*uintBitsToFloat(tvk_lane8(val1, 2)))))), packUint2x32(uvec2(floatBitsToUint((uintB"
    "itsToFloat(tvk_lane8(val0, 6))*uintBitsToFloat(tvk_lane8(val1, 1)))), floatBitsToUint((u"
    "intBitsToFloat(tvk_lane8(val0, 7))*uintBitsToFloat(tvk_lane8(val1, 0)))))));\n"
    "}\n";

/* out = a * flip(b) on float32 (2, 16), the inner axis upcast by 8, for a
 * CPU-type device (VKFEAT_WIDE): one 32-byte access (u64vec4) of each input
 * and of the output per invocation, the flipped view's lanes taken in reverse;
 * and the values on the device against the products in double precision. */
static void test_golden_octet(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  ShapeTracker *b0 = shp(2, (int64_t)2, (int64_t)16),
               *bf = st_flip(b0, (const bool[]){false, true});
  st_free(b0);
  UOp *x = uop_mul(ld(c, 1, DT_FLOAT32, shp(2, (int64_t)2, (int64_t)16)), ld(c, 2, DT_FLOAT32, bf));
  UOp *sink = sink1(store(c, 0, DT_FLOAT32, shp(2, (int64_t)2, (int64_t)16), x));
  OptPlan plan = {1, {{OPT_UPCAST, 1, 8}}};
  char *src = glsl_planned_for(sink, &plan, ALL_FEATURES | VKFEAT_WIDE);
  if (strcmp(src, golden_E_2_2u8) != 0) {
    fprintf(stderr, "got:\n%s\nexpected:\n%s\n", src, golden_E_2_2u8);
    free(src);
    fail_msg("the source differs from the golden one");
  }
  compile_ok(s, src, "u64vec4 kernel");
  free(src);
  if (!s->vk || !(vk_of(s->vk)->features & VKFEAT_INT64)) return;
  Lang *L = vk_glsl_lang_new(vk_of(s->vk)->features | VKFEAT_WIDE);
  assert_non_null(L);
  HostBuf hb[3] = {hb_new(DT_FLOAT32, 32), hb_new(DT_FLOAT32, 32), hb_new(DT_FLOAT32, 32)}, out[3];
  for (int i = 0; i < 32; i++) { /* distinct values, none exact in binary */
    hb_set(&hb[1], i, (CVal){.f = (double)(i * 37 % 101 - 50) / 7.0});
    hb_set(&hb[2], i, (CVal){.f = (double)(i * 53 % 97 - 40) / 3.0});
  }
  CodegenOpts o = {.lang = L, .mode = CG_MODE_GRID, .local_size = 64, .plan = &plan};
  run_with(s->vk, &o, sink, 3, hb, out, 0, NULL);
  vk_glsl_lang_free(L);
  for (int r = 0; r < 2; r++)
    for (int j = 0; j < 16; j++) {
      double want = hb_get(&hb[1], r * 16 + j).f * hb_get(&hb[2], r * 16 + 15 - j).f;
      if ((float)want != (float)hb_get(&out[0], r * 16 + j).f)
        fail_msg("[%d, %d]: %g, want %g", r, j, hb_get(&out[0], r * 16 + j).f, want);
    }
  free_all(out, 3), free_all(hb, 3);
}

/* What must stay scalar: a quad that does not start at a multiple of 4 (a
 * view shifted by one), a buffer read and written by the kernel, 8-bit
 * elements, gated (padded) loads; and a quad of int32 that may go wide. */
static void test_vec4_refusals(void **state) {
  Suite *s = *state;
  UCtx *c = s->c;
  OptPlan plan = {1, {{OPT_UPCAST, 1, 4}}};
  const int64_t n[2] = {2, 8};
  /* a[:, 1:9] of a (2, 9) buffer: every quad starts at 9r + 1 + 4b */
  ShapeTracker *a0 = shp(2, (int64_t)2, (int64_t)9);
  ShapeTracker *a1 = st_shrink(a0, (const sint[][2]){{0, 2}, {1, 9}});
  st_free(a0);
  UOp *sink = sink1(store(c, 0, DT_FLOAT32, st_from_shape(2, n), ld(c, 1, DT_FLOAT32, a1)));
  char *src = glsl_planned(sink, &plan);
  assert_null(strstr(src, "data1v"));
  assert_non_null(strstr(src, "data0v")); /* the store's quads are aligned */
  free(src);
  /* out += 1 in place: buffer 0 read and written */
  UOp *io = uop_add(ld(c, 0, DT_FLOAT32, st_from_shape(2, n)), uop_const_float(c, DT(FLOAT32), 1));
  sink = sink1(store(c, 0, DT_FLOAT32, st_from_shape(2, n), io));
  src = glsl_planned(sink, &plan);
  assert_null(strstr(src, "vec4"));
  free(src);
  /* int8 copy */
  sink = sink1(store(c, 0, DT_INT8, st_from_shape(2, n), ld(c, 1, DT_INT8, st_from_shape(2, n))));
  src = glsl_planned(sink, &plan);
  assert_null(strstr(src, "vec4"));
  free(src);
  /* a padded view: gated loads stay scalar, the store goes wide */
  ShapeTracker *p0 = shp(2, (int64_t)2, (int64_t)6);
  ShapeTracker *p1 = st_pad(p0, (const sint[][2]){{0, 0}, {1, 1}});
  st_free(p0);
  sink = sink1(store(c, 0, DT_FLOAT32, st_from_shape(2, n), ld(c, 1, DT_FLOAT32, p1)));
  src = glsl_planned(sink, &plan);
  assert_null(strstr(src, "data1v"));
  assert_non_null(strstr(src, "data0v"));
  free(src);
  /* int32: ivec4 both ways */
  sink = sink1(store(c, 0, DT_INT32, st_from_shape(2, n), ld(c, 1, DT_INT32, st_from_shape(2, n))));
  src = glsl_planned(sink, &plan);
  assert_non_null(strstr(src, "ivec4 data1v[]"));
  assert_non_null(strstr(src, "] = val0;")); /* the loaded vector, stored as it is */
  compile_ok(s, src, "ivec4 kernel");
  free(src);
  uop_pool_drain(c, 0);
}

/* Every ALU op of ops.def that the IR evaluates on a dtype (alu_exec, the
 * constant folder's semantics) has a spelling for that dtype in the C table
 * and in the GLSL table: a new op row, or a new dtype for an op, cannot be
 * folded at compile time and then fail to render. */
static const Spell *spelling(const Lang *L, Op op, ScalarType s) {
  static const TypeClass class_of[DT_COUNT] = {
      [DT_BOOL] = CL_BOOL,     [DT_INT8] = CL_SINT,      [DT_INT16] = CL_SINT,
      [DT_INT32] = CL_SINT,    [DT_INT64] = CL_SINT,     [DT_UINT8] = CL_UINT,
      [DT_UINT16] = CL_UINT,   [DT_UINT32] = CL_UINT,    [DT_UINT64] = CL_UINT,
      [DT_FLOAT16] = CL_FLOAT, [DT_BFLOAT16] = CL_FLOAT, [DT_FLOAT32] = CL_FLOAT,
      [DT_FLOAT64] = CL_FLOAT,
  };
  const Spell *row = L->alu_dt[s];
  if (row && row[op].expr) return &row[op];
  const Spell *sp = &L->alu[class_of[s]][op];
  return sp->expr ? sp : NULL;
}

static void test_every_alu_op_spelled(void **state) {
  (void)state;
  Lang *glsl = vk_glsl_lang_new(UINT32_MAX); /* every feature: the widest table */
  assert_non_null(glsl);
  const Lang *langs[] = {&lang_c, glsl};
  const ScalarType dts[] = {DT_BOOL,   DT_INT8,  DT_UINT8,  DT_INT16,   DT_UINT16, DT_INT32,
                            DT_UINT32, DT_INT64, DT_UINT64, DT_FLOAT32, DT_FLOAT64};
  int checked = 0;
  for (int op = 1; op < OP_COUNT; op++) {
    if (!op_in((Op)op, G_ALU)) continue;
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
      ScalarType in = dts[d];
      ScalarType out = op == OP_CMPLT || op == OP_CMPNE ? DT_BOOL : in;
      bool f = in == DT_FLOAT32 || in == DT_FLOAT64;
      CVal src[3] = {{.i = 1}, {.i = 3}, {.i = 2}}, res;
      if (f) src[1].f = 3, src[2].f = 2;
      if (!f && op != OP_WHERE) src[0].i = 3;
      if (f && op != OP_WHERE) src[0].f = 3;
      if (!alu_exec((Op)op, out, in, src, &res)) continue;
      for (size_t l = 0; l < 2; l++) {
        if (!spelling(langs[l], (Op)op, in))
          fail_msg("%s has no spelling for %s on %s", langs[l]->name, op_name((Op)op),
                   dt_scalar_name(in));
        checked++;
      }
    }
  }
  assert_true(checked > 100); /* the IR evaluates most ops on most dtypes */
  vk_glsl_lang_free(glsl);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_alu_op_spelled),
      T(test_compile_ops),
      T(test_compile_casts),
      T(test_refused),
      T(test_golden_sum),
      T(test_golden_packed),
      T(test_golden_vec4),
      T(test_golden_octet),
      T(test_vec4_refusals),
      T(test_run_int_ops),
      T(test_run_bool_ops),
      T(test_run_float_ops),
      T(test_run_casts),
      T(test_run_reduces),
      T(test_run_unrolled_same_bits),
      T(test_run_views),
      T(test_run_big_grid),
      T(test_run_empty_and_one),
      T(test_run_vars),
      T(test_run_long_reduce),
      T(test_run_symbolic),
  };
  return cmocka_run_group_tests(tests, suite_setup, suite_teardown);
}
