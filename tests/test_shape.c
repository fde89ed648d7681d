/* Tests of View / ShapeTracker (src/ir/view.c).
 *
 * The reference is a model written differently from the code under test: an
 * explicit array holding, for every logical element, the memory offset it reads
 * (-1 for padding). Each movement op rebuilds that array with plain loops. Random
 * op sequences run on both, and every element is compared, through st_index_int
 * and through the index/valid UOps (codegen/view_index.c) evaluated with uop_eval. */
/* cmocka.h needs these first */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h" /* st_to_indexed_uops: the index UOps lowering builds */
#include "ir/alu.h"
#include "ir/sint_expr.h"
#include "ir/symbolic.h"
#include "ir/uop.h"
#include "ir/view.h"

#define LIMIT 1024 /* largest element count the random tests build */
#define MAXD 6     /* most dims the random tests build */

/* ---------------------------------------------------------------- PRNG */

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static int rnd_n(int n) { return (int)(rnd() % (uint64_t)n); }

/* ---------------------------------------------------------------- ops as data */

typedef enum { M_RESHAPE, M_PERMUTE, M_EXPAND, M_PAD, M_SHRINK, M_FLIP, M_KINDS } MKind;

typedef struct {
  MKind kind;
  int ndim;                 /* reshape */
  sint shape[TVK_MAX_DIMS]; /* reshape, expand */
  int order[TVK_MAX_DIMS];  /* permute */
  sint pr[TVK_MAX_DIMS][2]; /* pad (before, after), shrink [lo, hi) */
  bool flip[TVK_MAX_DIMS];
} MOp;

static const char *kind_name[] = {"reshape", "permute", "expand", "pad", "shrink", "flip"};

static void print_op(const MOp *op, int ndim) {
  fprintf(stderr, "  %s(", kind_name[op->kind]);
  int n = op->kind == M_RESHAPE ? op->ndim : ndim;
  for (int d = 0; d < n; d++) {
    switch (op->kind) {
    case M_RESHAPE:
    case M_EXPAND: fprintf(stderr, "%" PRId64 ",", op->shape[d]); break;
    case M_PERMUTE: fprintf(stderr, "%d,", op->order[d]); break;
    case M_PAD:
    case M_SHRINK: fprintf(stderr, "(%" PRId64 ",%" PRId64 "),", op->pr[d][0], op->pr[d][1]); break;
    case M_FLIP: fprintf(stderr, "%d,", op->flip[d]); break;
    default: break;
    }
  }
  fprintf(stderr, ")\n");
}

static void print_st(const ShapeTracker *st) {
  for (int i = 0; i < st->nviews; i++) {
    const View *v = &st->views[i];
    fprintf(stderr, "  view %d: shape(", i);
    for (int d = 0; d < v->ndim; d++) fprintf(stderr, "%" PRId64 ",", v->shape[d]);
    fprintf(stderr, ") strides(");
    for (int d = 0; d < v->ndim; d++) fprintf(stderr, "%" PRId64 ",", v->strides[d]);
    fprintf(stderr, ") offset %" PRId64, v->offset);
    if (v->has_mask) {
      fprintf(stderr, " mask(");
      for (int d = 0; d < v->ndim; d++)
        fprintf(stderr, "(%" PRId64 ",%" PRId64 "),", v->mask[d][0], v->mask[d][1]);
      fprintf(stderr, ")");
    }
    fprintf(stderr, "%s\n", v->contiguous ? " contiguous" : "");
  }
}

/* ---------------------------------------------------------------- the model */

typedef struct {
  int ndim;
  sint shape[TVK_MAX_DIMS];
  sint n;
  sint *src; /* n entries: memory offset of each element, -1 for padding */
} Model;

static sint prod(int ndim, const sint *shape) {
  sint n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

static Model model_new(int ndim, const sint *shape) {
  Model m = {.ndim = ndim, .n = prod(ndim, shape)};
  memcpy(m.shape, shape, sizeof(sint) * (size_t)ndim);
  m.src = malloc(sizeof(sint) * (size_t)(m.n ? m.n : 1));
  for (sint i = 0; i < m.n; i++) m.src[i] = i;
  return m;
}

/* Multi-index of flat element i (row-major), and back. */
static void to_multi(int ndim, const sint *shape, sint i, sint *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
}
static sint to_flat(int ndim, const sint *shape, const sint *idx) {
  sint f = 0;
  for (int d = 0; d < ndim; d++) f = f * shape[d] + idx[d];
  return f;
}

/* Element j of the result reads element `from(j)` of the input (or padding). */
static void model_apply(Model *m, const MOp *op) {
  Model r = {.ndim = m->ndim};
  memcpy(r.shape, m->shape, sizeof r.shape);
  switch (op->kind) {
  case M_RESHAPE:
    r.ndim = op->ndim;
    memcpy(r.shape, op->shape, sizeof r.shape);
    break;
  case M_PERMUTE:
    for (int d = 0; d < m->ndim; d++) r.shape[d] = m->shape[op->order[d]];
    break;
  case M_EXPAND: memcpy(r.shape, op->shape, sizeof r.shape); break;
  case M_PAD:
    for (int d = 0; d < m->ndim; d++) r.shape[d] = m->shape[d] + op->pr[d][0] + op->pr[d][1];
    break;
  case M_SHRINK:
    for (int d = 0; d < m->ndim; d++) r.shape[d] = op->pr[d][1] - op->pr[d][0];
    break;
  default: break;
  }
  r.n = prod(r.ndim, r.shape);
  r.src = malloc(sizeof(sint) * (size_t)(r.n ? r.n : 1));
  for (sint j = 0; j < r.n; j++) {
    sint out[TVK_MAX_DIMS], in[TVK_MAX_DIMS];
    bool pad = false;
    to_multi(r.ndim, r.shape, j, out);
    for (int d = 0; d < m->ndim; d++) {
      switch (op->kind) {
      case M_PERMUTE: in[op->order[d]] = out[d]; break;
      case M_EXPAND: in[d] = m->shape[d] == 1 ? 0 : out[d]; break;
      case M_PAD:
        in[d] = out[d] - op->pr[d][0];
        pad = pad || in[d] < 0 || in[d] >= m->shape[d];
        break;
      case M_SHRINK: in[d] = out[d] + op->pr[d][0]; break;
      case M_FLIP: in[d] = op->flip[d] ? m->shape[d] - 1 - out[d] : out[d]; break;
      default: break;
      }
    }
    sint from = op->kind == M_RESHAPE ? j : to_flat(m->ndim, m->shape, in);
    r.src[j] = pad ? -1 : m->src[from];
  }
  free(m->src);
  *m = r;
}

static ShapeTracker *st_apply(const ShapeTracker *st, const MOp *op) {
  switch (op->kind) {
  case M_RESHAPE: return st_reshape(st, op->ndim, op->shape);
  case M_PERMUTE: return st_permute(st, op->order);
  case M_EXPAND: return st_expand(st, op->shape);
  case M_PAD: return st_pad(st, (const sint(*)[2])op->pr);
  case M_SHRINK: return st_shrink(st, (const sint(*)[2])op->pr);
  case M_FLIP: return st_flip(st, op->flip);
  default: return NULL;
  }
}

/* ---------------------------------------------------------------- random ops */

static void gen_reshape(const Model *m, MOp *op) {
  op->kind = M_RESHAPE;
  int choice = rnd_n(4);
  if (m->n == 0) { /* any shape holding a zero */
    op->ndim = 1 + rnd_n(4);
    for (int d = 0; d < op->ndim; d++) op->shape[d] = rnd_n(4);
    op->shape[rnd_n(op->ndim)] = 0;
    return;
  }
  if (choice == 0 && m->ndim >= 2) { /* merge two adjacent dims */
    int a = rnd_n(m->ndim - 1);
    op->ndim = m->ndim - 1;
    for (int d = 0, o = 0; d < m->ndim; d++, o++) {
      op->shape[o] = m->shape[d];
      if (d == a) op->shape[o] *= m->shape[++d];
    }
    return;
  }
  if (choice == 1 && m->ndim >= 1 && m->ndim < MAXD) { /* split a dim in two */
    int a = rnd_n(m->ndim);
    sint s = m->shape[a], f = 1;
    for (sint c = 1; c <= s; c++)
      if (s % c == 0 && rnd_n(2)) f = c;
    op->ndim = m->ndim + 1;
    for (int d = 0, o = 0; d < m->ndim; d++, o++) {
      op->shape[o] = m->shape[d];
      if (d == a) op->shape[o] = f, op->shape[++o] = s / f;
    }
    return;
  }
  /* any shape: the prime factors dealt into dims, with 1s sprinkled in */
  op->ndim = rnd_n(MAXD + 1);
  sint n = m->n;
  if (op->ndim == 0 && n != 1) op->ndim = 1;
  for (int d = 0; d < op->ndim; d++) op->shape[d] = 1;
  for (sint p = 2; n > 1; p++)
    while (n % p == 0) n /= p, op->shape[rnd_n(op->ndim)] *= p;
}

/* A random permutation of 0..n-1 (Fisher-Yates). */
static void random_order(int n, int *order) {
  for (int d = 0; d < n; d++) order[d] = d;
  for (int d = n - 1; d > 0; d--) {
    int j = rnd_n(d + 1), t = order[d];
    order[d] = order[j], order[j] = t;
  }
}

static void gen_op(const Model *m, MOp *op) {
  memset(op, 0, sizeof *op);
  op->kind = (MKind)rnd_n(M_KINDS);
  int nd = m->ndim;
  switch (op->kind) {
  case M_RESHAPE: gen_reshape(m, op); break;
  case M_PERMUTE: random_order(nd, op->order); break;
  case M_EXPAND:
    for (int d = 0; d < nd; d++)
      op->shape[d] = m->shape[d] != 1 ? m->shape[d] : rnd_n(16) == 0 ? 0 : 1 + rnd_n(4);
    if (prod(nd, op->shape) > LIMIT) memcpy(op->shape, m->shape, sizeof op->shape);
    break;
  case M_PAD:
    for (int d = 0; d < nd; d++)
      if (rnd_n(2)) op->pr[d][0] = rnd_n(3), op->pr[d][1] = rnd_n(3);
    {
      sint n = 1;
      for (int d = 0; d < nd; d++) n *= m->shape[d] + op->pr[d][0] + op->pr[d][1];
      if (n > LIMIT) memset(op->pr, 0, sizeof op->pr);
    }
    break;
  case M_SHRINK:
    for (int d = 0; d < nd; d++) {
      sint a = rnd_n((int)m->shape[d] + 1), b = rnd_n((int)m->shape[d] + 1);
      if (rnd_n(3) == 0) a = 0, b = m->shape[d];
      op->pr[d][0] = a < b ? a : b, op->pr[d][1] = a < b ? b : a;
      if (rnd_n(8) && op->pr[d][0] == op->pr[d][1] && m->shape[d] > 0) /* mostly nonempty */
        op->pr[d][0] = 0, op->pr[d][1] = m->shape[d];
    }
    break;
  case M_FLIP:
    for (int d = 0; d < nd; d++) op->flip[d] = rnd_n(2);
    break;
  default: break;
  }
}

static void gen_base_shape(int *ndim, sint *shape) {
  *ndim = rnd_n(5);
  for (int d = 0; d < *ndim; d++) shape[d] = rnd_n(20) == 0 ? 0 : 1 + rnd_n(4);
}

/* ---------------------------------------------------------------- checks */

typedef struct {
  int ndim0;
  sint shape0[TVK_MAX_DIMS];
  int nops;
  MOp ops[16];
} Seq;

static void print_seq(const Seq *s, const char *what) {
  fprintf(stderr, "FAILED (%s) from shape(", what);
  for (int d = 0; d < s->ndim0; d++) fprintf(stderr, "%" PRId64 ",", s->shape0[d]);
  fprintf(stderr, ")\n");
  Model m = model_new(s->ndim0, s->shape0);
  for (int i = 0; i < s->nops; i++) {
    print_op(&s->ops[i], m.ndim);
    model_apply(&m, &s->ops[i]);
  }
  free(m.src);
}

/* Element-wise agreement of st with the model through st_index_int. */
static bool agrees_int(const ShapeTracker *st, const Model *m) {
  if (st_ndim(st) != m->ndim || st_numel(st) != m->n) return false;
  if (memcmp(st_shape(st), m->shape, sizeof(sint) * (size_t)m->ndim)) return false;
  for (sint j = 0; j < m->n; j++) {
    sint idx[TVK_MAX_DIMS], off = 12345;
    to_multi(m->ndim, m->shape, j, idx);
    bool valid = st_index_int(st, idx, &off);
    if (valid != (m->src[j] >= 0) || (valid && off != m->src[j])) {
      fprintf(stderr, "element %" PRId64 ": tracker (%d, %" PRId64 "), model %" PRId64 "\n", j,
              valid, off, m->src[j]);
      return false;
    }
  }
  return true;
}

/* The same through the index/valid UOps, evaluated with RANGE bindings, and
 * with variable var (a sint variable, or 0 for none) bound to val. */
static bool agrees_uops_at(UCtx *ctx, const ShapeTracker *st, const Model *m, sint var,
                           int64_t val) {
  size_t mark = uop_pool_mark(ctx);
  UOp *rng[TVK_MAX_DIMS + 1], *index, *valid;
  bool ok = true;
  for (int d = 0; d < m->ndim; d++) rng[d] = uop_range_n(ctx, m->shape[d], d);
  int nv = m->ndim + (var != 0);
  if (var) rng[m->ndim] = sint_uop(ctx, DT(INT32), var);
  assert_true(st_to_indexed_uops(st, ctx, DT(INT32), rng, &index, &valid));
  assert_true(dt_eq(index->dtype, DT(INT32)) && dt_eq(valid->dtype, DT(BOOL)));
  for (sint j = 0; ok && j < m->n; j++) {
    sint idx[TVK_MAX_DIMS];
    CVal vals[TVK_MAX_DIMS + 1], iv, vv;
    to_multi(m->ndim, m->shape, j, idx);
    for (int d = 0; d < m->ndim; d++) vals[d].i = idx[d];
    vals[m->ndim].i = val;
    assert_true(uop_eval(valid, nv, rng, vals, &vv));
    ok = (vv.i != 0) == (m->src[j] >= 0);
    if (ok && vv.i) {
      assert_true(uop_eval(index, nv, rng, vals, &iv));
      ok = iv.i == m->src[j];
    }
    if (!ok) {
      fprintf(stderr, "uops disagree at element %" PRId64 " (model %" PRId64 ")\n", j, m->src[j]);
      char *is = uop_render(index), *vs = uop_render(valid);
      fprintf(stderr, "index = %s\nvalid = %s\n", is ? is : "?", vs ? vs : "?");
      free(is), free(vs);
    }
  }
  uop_pool_drain(ctx, mark);
  return ok;
}

static bool agrees_uops(UCtx *ctx, const ShapeTracker *st, const Model *m) {
  return agrees_uops_at(ctx, st, m, 0, 0);
}

/* Brute-force real size: the largest offset any element reads, plus one. */
static sint model_real_size(const Model *m) {
  sint r = 0;
  for (sint j = 0; j < m->n; j++)
    if (m->src[j] + 1 > r) r = m->src[j] + 1;
  return r;
}

static bool check_all(UCtx *ctx, const ShapeTracker *st, const Model *m, sint base_n, bool uops) {
  if (!agrees_int(st, m)) return false;
  sint rs = st_real_size(st), brute = model_real_size(m);
  if (rs < brute || rs > base_n || (st->nviews == 1 && rs != brute)) {
    fprintf(stderr, "real size %" PRId64 ", brute force %" PRId64 "\n", rs, brute);
    return false;
  }
  return !uops || agrees_uops(ctx, st, m);
}

/* Build a random sequence on both the tracker and the model. */
static ShapeTracker *run_seq(Seq *s, Model *m, int maxops) {
  *m = model_new(s->ndim0, s->shape0);
  ShapeTracker *st = st_from_shape(s->ndim0, s->shape0);
  assert_non_null(st);
  s->nops = 1 + rnd_n(maxops);
  for (int i = 0; i < s->nops; i++) {
    gen_op(m, &s->ops[i]);
    ShapeTracker *next = st_apply(st, &s->ops[i]);
    if (!next) {
      print_seq(s, "op returned NULL");
      print_st(st);
    }
    assert_non_null(next);
    st_free(st);
    st = next;
    model_apply(m, &s->ops[i]);
  }
  return st;
}

/* ---------------------------------------------------------------- random tests */

static void test_random_sequences(void **state) {
  (void)state;
  UCtx *ctx = uctx_new();
  rng_state = 0x9e3779b97f4a7c15ull;
  int views_hist[4] = {0};
  for (int iter = 0; iter < 6000; iter++) {
    Seq s;
    Model m;
    gen_base_shape(&s.ndim0, s.shape0);
    ShapeTracker *st = run_seq(&s, &m, 10);
    views_hist[st->nviews < 4 ? st->nviews : 3]++;
    bool ok = check_all(ctx, st, &m, prod(s.ndim0, s.shape0), iter % 3 == 0);
    if (!ok) {
      fprintf(stderr, "iteration %d\n", iter);
      print_seq(&s, "tracker disagrees with model");
      print_st(st);
    }
    assert_true(ok);
    /* simplify keeps the meaning and never adds views */
    ShapeTracker *simp = st_simplify(st);
    assert_true(simp->nviews <= st->nviews);
    if (!agrees_int(simp, &m)) {
      print_seq(&s, "simplify");
      print_st(st);
      print_st(simp);
      fail();
    }
    st_free(simp);
    st_free(st);
    free(m.src);
  }
  /* both single-view and stacked trackers were exercised */
  assert_true(views_hist[1] > 1000 && views_hist[2] > 100);
  assert_int_equal(uctx_live(ctx), 0);
  uctx_free(ctx);
}

/* st_compose(a, b) indexes like applying b's ops after a's. */
static void test_random_compose(void **state) {
  (void)state;
  rng_state = 0x1234567887654321ull;
  UCtx *ctx = uctx_new();
  for (int iter = 0; iter < 3000; iter++) {
    Seq sa, sb;
    Model ma, mb;
    gen_base_shape(&sa.ndim0, sa.shape0);
    ShapeTracker *a = run_seq(&sa, &ma, 5);
    sb.ndim0 = ma.ndim;
    memcpy(sb.shape0, ma.shape, sizeof sb.shape0);
    ShapeTracker *b = run_seq(&sb, &mb, 5);
    ShapeTracker *c = st_compose(a, b);
    assert_non_null(c);
    assert_true(c->nviews <= a->nviews + b->nviews);
    for (int i = 0; i < sb.nops; i++) model_apply(&ma, &sb.ops[i]); /* b after a, on the model */
    bool ok = check_all(ctx, c, &ma, prod(sa.ndim0, sa.shape0), iter % 3 == 0);
    if (!ok) {
      print_seq(&sa, "compose: a");
      print_seq(&sb, "compose: b");
      print_st(a);
      print_st(b);
      print_st(c);
    }
    assert_true(ok);
    st_free(a), st_free(b), st_free(c);
    free(ma.src), free(mb.src);
  }
  assert_int_equal(uctx_live(ctx), 0);
  uctx_free(ctx);
}

/* Equal trackers hash equally; the same ops give equal trackers. */
static void test_eq_hash(void **state) {
  (void)state;
  rng_state = 0xdeadbeefcafef00dull;
  for (int iter = 0; iter < 2000; iter++) {
    Seq s;
    Model m;
    gen_base_shape(&s.ndim0, s.shape0);
    uint64_t saved = rng_state;
    ShapeTracker *a = run_seq(&s, &m, 6);
    free(m.src);
    rng_state = saved;
    ShapeTracker *b = run_seq(&s, &m, 6);
    free(m.src);
    ShapeTracker *c = st_clone(a);
    assert_true(st_eq(a, b) && st_eq(a, c));
    assert_true(st_hash(a) == st_hash(b) && st_hash(a) == st_hash(c));
    st_free(a), st_free(b), st_free(c);
  }
  /* different trackers: eq implies same hash, and these differ */
  sint s23[] = {2, 3}, s32[] = {3, 2};
  ShapeTracker *x = st_from_shape(2, s23), *y = st_from_shape(2, s32);
  ShapeTracker *z = st_permute(y, (int[]){1, 0});
  assert_false(st_eq(x, y));
  assert_false(st_eq(x, z)); /* same shape, transposed strides */
  assert_true(st_hash(x) != st_hash(z));
  st_free(x), st_free(y), st_free(z);
}

/* ---------------------------------------------------------------- merge rules */

static ShapeTracker *shape_of(int n, const sint *s) {
  ShapeTracker *st = st_from_shape(n, s);
  assert_non_null(st);
  return st;
}

/* Replace *st with the result of op (the old one is freed). */
static void step(ShapeTracker **st, ShapeTracker *next) {
  assert_non_null(next);
  st_free(*st);
  *st = next;
}

/* Compare a tracker with a model built by the same ops. */
static void same_as_model(const ShapeTracker *st, int n0, const sint *s0, const MOp *ops,
                          int nops) {
  Model m = model_new(n0, s0);
  for (int i = 0; i < nops; i++) model_apply(&m, &ops[i]);
  assert_true(agrees_int(st, &m));
  free(m.src);
}

static void test_reshape_contiguous(void **state) {
  (void)state;
  ShapeTracker *st = shape_of(3, (sint[]){2, 3, 4});
  const sint *shapes[] = {(sint[]){6, 4},         (sint[]){24},       (sint[]){4, 6},
                          (sint[]){2, 2, 6},      (sint[]){1, 24, 1}, (sint[]){},
                          (sint[]){2, 1, 3, 1, 4}};
  const int nds[] = {2, 1, 2, 3, 3, 0, 5};
  for (int i = 0; i < 7; i++) {
    if (nds[i] == 0) continue; /* 24 elements cannot be a scalar */
    step(&st, st_reshape(st, nds[i], shapes[i]));
    assert_int_equal(st->nviews, 1);
    assert_true(st_contiguous(st));
  }
  st_free(st);
  /* size-0 shapes stay one contiguous view */
  st = shape_of(2, (sint[]){0, 3});
  step(&st, st_reshape(st, 3, (sint[]){3, 0, 5}));
  assert_int_equal(st->nviews, 1);
  assert_true(st_contiguous(st));
  assert_int_equal(st_real_size(st), 0);
  st_free(st);
  /* 1 <-> scalar */
  st = shape_of(0, NULL);
  step(&st, st_reshape(st, 3, (sint[]){1, 1, 1}));
  step(&st, st_reshape(st, 0, NULL));
  assert_int_equal(st->nviews, 1);
  assert_true(st_contiguous(st));
  assert_int_equal(st_real_size(st), 1);
  st_free(st);
}

/* Each case: base shape, ops, and the number of views the seed's rules give. */
typedef struct {
  const char *name;
  int n0;
  sint s0[4];
  int nops;
  MOp ops[3];
  int nviews;
} MergeCase;

/* One case per line reads as a table. */
/* clang-format off */
#define RESHAPE(n, ...) {.kind = M_RESHAPE, .ndim = n, .shape = {__VA_ARGS__}}
#define PERMUTE(...) {.kind = M_PERMUTE, .order = {__VA_ARGS__}}
#define PAD(...) {.kind = M_PAD, .pr = {__VA_ARGS__}}
#define SHRINK(...) {.kind = M_SHRINK, .pr = {__VA_ARGS__}}
#define EXPAND(...) {.kind = M_EXPAND, .shape = {__VA_ARGS__}}
#define FLIP(...) {.kind = M_FLIP, .flip = {__VA_ARGS__}}

static const MergeCase merge_cases[] = {
  {"split a dim of a transpose", 2, {4, 6}, 2, {PERMUTE(1, 0), RESHAPE(3, 2, 3, 4)}, 1},
  {"split the other dim of a transpose", 2, {4, 6}, 2, {PERMUTE(1, 0), RESHAPE(3, 6, 2, 2)}, 1},
  {"flatten a transpose", 2, {4, 6}, 2, {PERMUTE(1, 0), RESHAPE(1, 24)}, 2},
  {"merge permuted dims still adjacent", 3, {2, 3, 4}, 2, {PERMUTE(2, 0, 1), RESHAPE(2, 4, 6)}, 1},
  {"merge the outer pad", 2, {2, 3}, 2, {PAD({1, 1}, {0, 0}), RESHAPE(1, 12)}, 1},
  {"merge across an inner pad", 2, {2, 3}, 2, {PAD({0, 0}, {1, 1}), RESHAPE(1, 10)}, 2},
  {"split a padded dim along the mask", 1, {6}, 2, {PAD({2, 2}), RESHAPE(2, 5, 2)}, 1},
  {"split a padded dim across the mask", 1, {6}, 2, {PAD({2, 2}), RESHAPE(2, 2, 5)}, 2},
  {"split a shrunk dim", 2, {4, 4}, 2, {SHRINK({0, 4}, {0, 2}), RESHAPE(3, 2, 2, 2)}, 1},
  {"flatten a shrink", 2, {4, 4}, 2, {SHRINK({0, 4}, {0, 2}), RESHAPE(1, 8)}, 2},
  {"flatten a row shrink", 2, {4, 4}, 2, {SHRINK({1, 3}, {0, 4}), RESHAPE(1, 8)}, 1},
  {"split an expand", 2, {1, 3}, 2, {EXPAND(4, 3), RESHAPE(3, 2, 2, 3)}, 1},
  {"flatten an expand", 2, {1, 3}, 2, {EXPAND(4, 3), RESHAPE(1, 12)}, 2},
  {"flatten a flip", 2, {2, 3}, 2, {FLIP(false, true), RESHAPE(1, 6)}, 2},
  {"flatten a full flip", 2, {2, 3}, 2, {FLIP(true, true), RESHAPE(1, 6)}, 1},
  {"add ones to a padded view", 2, {2, 3}, 2, {PAD({1, 0}, {0, 2}), RESHAPE(4, 1, 3, 5, 1)}, 1},
  {"pad of one row", 2, {1, 3}, 3, {PAD({1, 1}, {0, 0}), RESHAPE(1, 9), RESHAPE(2, 3, 3)}, 1},
  {"transpose, pad, split", 2, {2, 3}, 3, {PERMUTE(1, 0), PAD({0, 0}, {2, 2}), RESHAPE(3, 3, 3, 2)},
   1},
};
/* clang-format on */

static void test_merge_rules(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof merge_cases / sizeof merge_cases[0]; i++) {
    const MergeCase *c = &merge_cases[i];
    ShapeTracker *st = shape_of(c->n0, c->s0);
    for (int k = 0; k < c->nops; k++) step(&st, st_apply(st, &c->ops[k]));
    if (st->nviews != c->nviews) {
      fprintf(stderr, "case '%s': %d views, expected %d\n", c->name, st->nviews, c->nviews);
      print_st(st);
    }
    assert_int_equal(st->nviews, c->nviews);
    same_as_model(st, c->n0, c->s0, c->ops, c->nops);
    st_free(st);
  }
}

/* Canonical forms of View.create. */
static void test_canonical(void **state) {
  (void)state;
  /* size-1 dims get stride 0; full masks are dropped */
  View v = view_make(3, (sint[]){2, 1, 3}, (sint[]){3, 7, 1}, 0,
                     (const sint(*)[2])(sint[][2]){{0, 2}, {0, 1}, {0, 3}});
  assert_int_equal(v.strides[1], 0);
  assert_false(v.has_mask);
  assert_true(v.contiguous);
  /* a dim masked to one index: stride 0, address moved into the offset */
  v = view_make(2, (sint[]){4, 3}, (sint[]){3, 1}, 0,
                (const sint(*)[2])(sint[][2]){{2, 3}, {0, 3}});
  assert_int_equal(v.strides[0], 0);
  assert_int_equal(v.offset, 6);
  assert_true(v.has_mask);
  assert_false(v.contiguous);
  /* an empty mask in any dim: everything invalid, one canonical form */
  View e1 = view_make(2, (sint[]){4, 3}, (sint[]){3, 1}, 5,
                      (const sint(*)[2])(sint[][2]){{1, 1}, {0, 3}});
  View e2 = view_make(2, (sint[]){4, 3}, (sint[]){0, 2}, 0,
                      (const sint(*)[2])(sint[][2]){{0, 4}, {2, 1}});
  ShapeTracker *a = st_from_view(&e1), *b = st_from_view(&e2);
  assert_true(st_eq(a, b));
  assert_int_equal(st_real_size(a), 0);
  sint off;
  assert_false(st_index_int(a, (sint[]){1, 1}, &off));
  st_free(a), st_free(b);
  /* zero-size shapes: one contiguous form whatever the strides */
  View z = view_make(2, (sint[]){0, 3}, (sint[]){9, 9}, 4, NULL);
  assert_true(z.contiguous);
  assert_int_equal(z.offset, 0);
  assert_int_equal(z.strides[0], 0);
  /* strides_for_shape */
  sint st[4];
  strides_for_shape(4, (sint[]){2, 1, 3, 4}, st);
  assert_true(st[0] == 12 && st[1] == 0 && st[2] == 4 && st[3] == 1);
}

static void test_real_size(void **state) {
  (void)state;
  ShapeTracker *st = shape_of(2, (sint[]){4, 5});
  assert_int_equal(st_real_size(st), 20);
  step(&st, st_shrink(st, (const sint(*)[2])(sint[][2]){{1, 3}, {0, 2}}));
  assert_int_equal(st_real_size(st), 12); /* last element read: (2,1) = 11 */
  step(&st, st_pad(st, (const sint(*)[2])(sint[][2]){{2, 2}, {3, 3}}));
  assert_int_equal(st_real_size(st), 12);
  step(&st, st_flip(st, (bool[]){true, true}));
  assert_int_equal(st_real_size(st), 12);
  st_free(st);
  st = shape_of(1, (sint[]){10});
  step(&st, st_shrink(st, (const sint(*)[2])(sint[][2]){{3, 3}}));
  assert_int_equal(st_real_size(st), 0);
  st_free(st);
  /* an expanded scalar reads one element */
  st = shape_of(2, (sint[]){1, 1});
  step(&st, st_expand(st, (sint[]){5, 7}));
  assert_int_equal(st_real_size(st), 1);
  st_free(st);
}

static void test_compose_cases(void **state) {
  (void)state;
  /* transpose composed with its inverse is contiguous again */
  ShapeTracker *a = shape_of(2, (sint[]){2, 3}), *b = shape_of(2, (sint[]){3, 2});
  step(&a, st_permute(a, (int[]){1, 0}));
  step(&b, st_permute(b, (int[]){1, 0}));
  ShapeTracker *c = st_compose(a, b);
  assert_non_null(c);
  assert_true(st_contiguous(c));
  st_free(c);
  /* b reaching past a's elements is rejected */
  ShapeTracker *big = shape_of(1, (sint[]){7});
  assert_null(st_compose(a, big));
  st_free(big);
  /* reshape on top of a transpose stacks, and composing its views back gives
   * the same tracker */
  ShapeTracker *flat = st_reshape(a, 1, (sint[]){6});
  assert_int_equal(flat->nviews, 2);
  ShapeTracker *lo = st_from_view(&flat->views[0]), *hi = st_from_view(&flat->views[1]);
  c = st_compose(lo, hi);
  assert_true(st_eq(c, flat));
  st_free(c), st_free(lo), st_free(hi), st_free(flat);
  st_free(a), st_free(b);
  /* b reads only a padded column of a: one view, every element invalid */
  static const MOp pa[] = {PAD({0, 0}, {2, 2})}, pb[] = {SHRINK({0, 2}, {0, 1})};
  a = shape_of(2, (sint[]){2, 3});
  step(&a, st_apply(a, &pa[0]));
  b = shape_of(2, (sint[]){2, 7});
  step(&b, st_apply(b, &pb[0]));
  c = st_compose(a, b);
  assert_int_equal(c->nviews, 1);
  assert_int_equal(st_real_size(c), 0);
  MOp both[] = {pa[0], pb[0]};
  same_as_model(c, 2, (sint[]){2, 3}, both, 2);
  st_free(a), st_free(b), st_free(c);
}

static void test_bad_arguments(void **state) {
  (void)state;
  ShapeTracker *st = shape_of(2, (sint[]){2, 3});
  sint big[TVK_MAX_DIMS + 1];
  for (int i = 0; i <= TVK_MAX_DIMS; i++) big[i] = 1;
  assert_null(st_from_shape(-1, big));
  assert_null(st_from_shape(TVK_MAX_DIMS + 1, big));
  assert_null(st_from_shape(2, (sint[]){2, -1}));
  assert_null(st_from_shape(3, (sint[]){INT64_MAX / 2, 4, 4})); /* element count overflows */
  assert_null(st_reshape(st, 2, (sint[]){4, 2}));
  assert_null(st_reshape(st, 2, (sint[]){-2, -3}));
  assert_null(st_reshape(st, TVK_MAX_DIMS + 1, big));
  assert_null(st_permute(st, (int[]){0, 0}));
  assert_null(st_permute(st, (int[]){0, 2}));
  assert_null(st_permute(st, (int[]){-1, 0}));
  assert_null(st_expand(st, (sint[]){4, 3}));
  assert_null(st_expand(st, (sint[]){2, -3}));
  assert_null(st_pad(st, (const sint(*)[2])(sint[][2]){{0, -1}, {0, 0}}));
  assert_null(st_pad(st, (const sint(*)[2])(sint[][2]){{INT64_MAX, 0}, {0, 0}}));
  assert_null(st_shrink(st, (const sint(*)[2])(sint[][2]){{0, 3}, {0, 3}}));
  assert_null(st_shrink(st, (const sint(*)[2])(sint[][2]){{2, 1}, {0, 3}}));
  assert_null(st_shrink(st, (const sint(*)[2])(sint[][2]){{-1, 1}, {0, 3}}));
  assert_null(st_permute(st, NULL));
  assert_null(st_reshape(NULL, 1, (sint[]){6}));
  View neg = view_make(1, (sint[]){3}, (sint[]){-1}, 0, NULL); /* reads below address 0 */
  assert_null(st_from_view(&neg));
  /* size-1 dims may expand to 0 and a size-0 dim stays 0 */
  ShapeTracker *one = shape_of(2, (sint[]){1, 3});
  ShapeTracker *zero = st_expand(one, (sint[]){0, 3});
  assert_non_null(zero);
  assert_int_equal(st_numel(zero), 0);
  assert_null(st_expand(zero, (sint[]){1, 3}));
  st_free(zero), st_free(one), st_free(st);
}

/* The worked example of docs/shapetracker.md: a 2x3 tensor, transposed and
 * padded by one column on each side. */
static void test_doc_example(void **state) {
  (void)state;
  ShapeTracker *st = shape_of(2, (sint[]){2, 3});
  step(&st, st_permute(st, (int[]){1, 0}));
  step(&st, st_pad(st, (const sint(*)[2])(sint[][2]){{0, 0}, {1, 1}}));
  assert_int_equal(st->nviews, 1);
  const View *v = st_top(st);
  assert_true(v->shape[0] == 3 && v->shape[1] == 4);
  assert_true(v->strides[0] == 1 && v->strides[1] == 3 && v->offset == -3);
  assert_true(v->has_mask && v->mask[0][0] == 0 && v->mask[0][1] == 3);
  assert_true(v->mask[1][0] == 1 && v->mask[1][1] == 3);
  /* the simplified index math the page shows (a golden test: update the page too) */
  UCtx *ctx = uctx_new();
  UOp *r[2] = {uop_range_n(ctx, 3, 0), uop_range_n(ctx, 4, 1)}, *index, *valid;
  assert_true(st_to_indexed_uops(st, ctx, DT(INT32), r, &index, &valid));
  char *is = uop_render(index), *vs = uop_render(valid);
  assert_string_equal(is, "ridx0+ridx1*3-3");
  assert_string_equal(vs, "(0<ridx1)&(ridx1<3)");
  free(is), free(vs);
  step(&st, st_reshape(st, 1, (sint[]){12}));
  assert_int_equal(st->nviews, 2);
  r[0] = uop_range_n(ctx, 12, 0);
  assert_true(st_to_indexed_uops(st, ctx, DT(INT32), r, &index, &valid));
  is = uop_render(index), vs = uop_render(valid);
  assert_string_equal(is, "ridx0//4+ridx0%4*3-3");
  assert_string_equal(vs, "(0<ridx0%4)&(ridx0%4<3)");
  free(is), free(vs);
  uctx_free(ctx);
  st_free(st);
}

/* ---------------------------------------------------------------- symbolic shapes */

/* Symbolic trackers are checked through substitution: ops whose arguments are
 * expressions in a variable n build one tracker; for each value of n, the
 * tracker with n substituted must index every element as the model does
 * when the same ops run with n replaced by that value. */

#define SYM_LO 1
#define SYM_HI 6

static sint sym_n(void) { return sint_var("n", SYM_LO, SYM_HI); }

static void print_sym(int n, const sint *v, const char *what) {
  fprintf(stderr, "  %s (", what);
  for (int d = 0; d < n; d++) {
    char txt[96];
    sint_str(v[d], txt, sizeof txt);
    fprintf(stderr, "%s, ", txt);
  }
  fprintf(stderr, ")\n");
}

static MOp op_eval(const MOp *op, int ndim, sint n, int64_t v) {
  MOp r = *op;
  int k = op->kind == M_RESHAPE ? op->ndim : ndim;
  for (int d = 0; d < k; d++) {
    r.shape[d] = sint_eval(op->shape[d], 1, &n, &v);
    r.pr[d][0] = sint_eval(op->pr[d][0], 1, &n, &v);
    r.pr[d][1] = sint_eval(op->pr[d][1], 1, &n, &v);
  }
  return r;
}

/* A random op on the symbolic shape (ndim, shape) valid for every n; the
 * element count stays at most LIMIT at n's largest value. */
static void gen_sym_op(int ndim, const sint *shape, sint n, MOp *op) {
  memset(op, 0, sizeof *op);
  op->kind = (MKind)rnd_n(M_KINDS);
  sint numel = 1;
  for (int d = 0; d < ndim; d++) numel = sint_mul(numel, shape[d]);
  switch (op->kind) {
  case M_RESHAPE: {
    op->ndim = ndim;
    memcpy(op->shape, shape, sizeof op->shape);
    int a = ndim ? rnd_n(ndim) : 0;
    if (rnd_n(2) && ndim >= 2 && a < ndim - 1) { /* merge a with a + 1 */
      op->shape[a] = sint_mul(shape[a], shape[a + 1]);
      for (int d = a + 1; d < ndim - 1; d++) op->shape[d] = shape[d + 1];
      op->ndim = ndim - 1;
    } else if (ndim >= 1 && ndim < MAXD) { /* split a by a factor every n allows */
      sint f = 1;
      for (sint c = 2; c <= 4; c++)
        if (sint_fmod(shape[a], c) == 0 && rnd_n(2)) f = c;
      bool outer = rnd_n(2);
      for (int d = ndim; d > a + 1; d--) op->shape[d] = shape[d - 1];
      op->shape[a] = outer ? f : sint_fdiv(shape[a], f);
      op->shape[a + 1] = outer ? sint_fdiv(shape[a], f) : f;
      op->ndim = ndim + 1;
    }
    break;
  }
  case M_PERMUTE: random_order(ndim, op->order); break;
  case M_EXPAND:
    for (int d = 0; d < ndim; d++)
      op->shape[d] = shape[d] != 1 ? shape[d] : rnd_n(2) ? n : 1 + rnd_n(3);
    break;
  case M_PAD:
    for (int d = 0; d < ndim; d++)
      if (rnd_n(2)) op->pr[d][0] = rnd_n(3), op->pr[d][1] = rnd_n(2) ? rnd_n(3) : n;
    break;
  case M_SHRINK:
    for (int d = 0; d < ndim; d++) {
      sint lo = rnd_n(3), hi = sint_sub(shape[d], rnd_n(3));
      if (!sint_proven_le(lo, hi) || rnd_n(3) == 0) lo = 0, hi = shape[d];
      op->pr[d][0] = lo, op->pr[d][1] = hi;
    }
    break;
  case M_FLIP:
    for (int d = 0; d < ndim; d++) op->flip[d] = rnd_n(2);
    break;
  default: break;
  }
  /* keep the element count small at the largest n: an op that grows it too
   * much becomes a flip of nothing */
  int nd = op->kind == M_RESHAPE ? op->ndim : ndim;
  sint after = 1;
  for (int d = 0; d < nd; d++) {
    sint sz = op->kind == M_EXPAND || op->kind == M_RESHAPE ? op->shape[d]
              : op->kind == M_PAD ? sint_add(sint_add(shape[d], op->pr[d][0]), op->pr[d][1])
                                  : shape[d];
    after = sint_mul(after, sz);
  }
  if (sint_vmax(after) > LIMIT) memset(op, 0, sizeof *op), op->kind = M_FLIP;
}

static void test_symbolic_random(void **state) {
  (void)state;
  UCtx *ctx = uctx_new();
  rng_state = 0x5eed5eed12345678ull;
  sint n = sym_n();
  int symbolic_end = 0, one_view = 0;
  for (int iter = 0; iter < 1500; iter++) {
    int ndim0 = 1 + rnd_n(3), nops = 1 + rnd_n(8);
    sint shape0[TVK_MAX_DIMS], shape[TVK_MAX_DIMS];
    for (int d = 0; d < ndim0; d++) {
      int c = rnd_n(4);
      shape0[d] = c == 0 ? n : c == 1 ? sint_add(n, 1) : c == 2 ? sint_mul(n, 2) : 1 + rnd_n(3);
    }
    MOp ops[16];
    int nds[16];
    ShapeTracker *st = st_from_shape(ndim0, shape0);
    assert_non_null(st);
    for (int i = 0; i < nops; i++) {
      nds[i] = st_ndim(st);
      memcpy(shape, st_shape(st), sizeof shape);
      gen_sym_op(nds[i], shape, n, &ops[i]);
      ShapeTracker *next = st_apply(st, &ops[i]);
      if (!next) {
        fprintf(stderr, "iteration %d op %d (%s) returned NULL\n", iter, i, kind_name[ops[i].kind]);
        print_sym(st_ndim(st), st_shape(st), "from");
        print_sym(ops[i].kind == M_RESHAPE ? ops[i].ndim : st_ndim(st), ops[i].shape, "arg");
      }
      assert_non_null(next);
      st_free(st);
      st = next;
    }
    symbolic_end += st_is_symbolic(st);
    one_view += st->nviews == 1;
    for (int64_t v = SYM_LO; v <= SYM_HI; v++) {
      sint sh0[TVK_MAX_DIMS];
      for (int d = 0; d < ndim0; d++) sh0[d] = sint_eval(shape0[d], 1, &n, &v);
      Model m = model_new(ndim0, sh0);
      for (int i = 0; i < nops; i++) {
        MOp c = op_eval(&ops[i], nds[i], n, v);
        model_apply(&m, &c);
      }
      ShapeTracker *at = st_substitute(st, 1, &n, &v);
      assert_non_null(at);
      assert_false(st_is_symbolic(at));
      /* and the symbolic tracker's own index UOps, with n a DEFINE_VAR bound to v */
      bool ok = agrees_int(at, &m) && agrees_uops_at(ctx, st, &m, n, v);
      /* the symbolic bound on the memory it reads holds at this n */
      sint rs = sint_eval(st_real_size(st), 1, &n, &v);
      ok = ok && rs >= model_real_size(&m);
      if (!ok) {
        fprintf(stderr, "iteration %d, n = %lld: real size %lld, model %lld\n", iter, (long long)v,
                (long long)rs, (long long)model_real_size(&m));
        print_st(at);
      }
      assert_true(ok);
      st_free(at);
      free(m.src);
    }
    st_free(st);
  }
  /* most sequences kept the variable and a single view */
  assert_true(symbolic_end > 1000);
  assert_true(one_view > 500);
  assert_int_equal(uctx_live(ctx), 0);
  uctx_free(ctx);
}

/* Views a symbolic dim goes through without a second view, as the integer
 * rules would keep them. */
static void test_symbolic_cases(void **state) {
  (void)state;
  sint n = sym_n(), n4 = sint_mul(n, 4);
  ShapeTracker *a = st_from_shape(2, (sint[]){n, 4});
  assert_true(st_contiguous(a) && st_is_symbolic(a));
  assert_int_equal(st_numel(a), n4);
  assert_int_equal(st_real_size(a), n4);
  assert_int_equal(st_top(a)->strides[0], 4);
  /* (n, 4) -> (4n) -> (n, 2, 2): contiguous throughout */
  ShapeTracker *b = st_reshape(a, 1, (sint[]){n4});
  ShapeTracker *c = st_reshape(b, 3, (sint[]){n, 2, 2});
  assert_true(st_contiguous(b) && st_contiguous(c));
  /* a transpose (4, n) has strides (1, 4); merging it back needs a new view */
  ShapeTracker *t = st_permute(a, (int[]){1, 0});
  assert_int_equal(t->nviews, 1);
  assert_int_equal(st_top(t)->strides[0], 1);
  assert_int_equal(st_top(t)->strides[1], 4);
  ShapeTracker *tr = st_reshape(t, 1, (sint[]){n4});
  assert_int_equal(tr->nviews, 2);
  /* the rows of (n, 4) past the first: shape (n-1, 4), offset 4, still one view */
  ShapeTracker *s = st_shrink(a, (const sint(*)[2])(sint[][2]){{1, n}, {0, 4}});
  assert_non_null(s);
  assert_int_equal(s->nviews, 1);
  assert_int_equal(st_shape(s)[0], sint_sub(n, 1));
  assert_int_equal(st_top(s)->offset, 4);
  /* padding a symbolic dim masks [1, n + 1) */
  ShapeTracker *p = st_pad(a, (const sint(*)[2])(sint[][2]){{1, 1}, {0, 0}});
  assert_true(st_top(p)->has_mask);
  assert_int_equal(st_top(p)->mask[0][1], sint_add(n, 1));
  assert_int_equal(st_shape(p)[0], sint_add(n, 2));
  /* (1, 4) broadcast along n */
  ShapeTracker *r = st_from_shape(2, (sint[]){1, 4});
  ShapeTracker *e = st_expand(r, (sint[]){n, 4});
  assert_int_equal(st_top(e)->strides[0], 0);
  assert_int_equal(st_real_size(e), 4);
  /* arguments that are not valid for every n are refused */
  assert_null(st_shrink(a, (const sint(*)[2])(sint[][2]){{0, 3}, {0, 4}})); /* n may be 1 */
  assert_null(st_reshape(a, 2, (sint[]){sint_add(n, 1), 4}));               /* another count */
  assert_null(st_expand(a, (sint[]){sint_mul(n, 2), 4}));                   /* n is not 1 */
  /* concrete evaluation wants a substitution first */
  sint off;
  assert_false(st_index_int(a, (sint[]){0, 0}, &off));
  ShapeTracker *at = st_substitute(a, 1, &n, (int64_t[]){3});
  assert_int_equal(st_shape(at)[0], 3);
  assert_true(st_index_int(at, (sint[]){2, 1}, &off));
  assert_int_equal(off, 9);
  ShapeTracker *list[] = {a, b, c, t, tr, s, p, r, e, at};
  for (size_t i = 0; i < sizeof list / sizeof *list; i++) st_free(list[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_canonical),        cmocka_unit_test(test_reshape_contiguous),
      cmocka_unit_test(test_merge_rules),      cmocka_unit_test(test_real_size),
      cmocka_unit_test(test_compose_cases),    cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_doc_example),      cmocka_unit_test(test_eq_hash),
      cmocka_unit_test(test_random_sequences), cmocka_unit_test(test_random_compose),
      cmocka_unit_test(test_symbolic_cases),   cmocka_unit_test(test_symbolic_random),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
