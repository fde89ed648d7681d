/* Vector memory access (codegen.h): four scalar loads of one buffer at
 * elements i, i+1, i+2, i+3 with i a multiple of 4 become one 4-wide load
 * (and GEPs of its lanes); four such stores become one 4-wide store of a
 * VECTORIZE. On a GPU that is one 128-bit memory instruction instead of
 * four: a warp whose lanes take neighbouring quads reads whole 512-byte runs
 * per instruction, and the instruction count of a memory-bound kernel drops
 * by four. Where the language has 8-wide access (Lang.wide_type with
 * max_vector 8: a CPU-type Vulkan device, whose every access is a loop over
 * its SIMD lanes, so that the count of accesses matters and not their width),
 * runs of eight at multiples of 8 become one 8-wide access first. The quads
 * come from upcast axes (opt.h): a matmul's register tile along a contiguous
 * axis of B, an unrolled reduce along a contiguous row.
 *
 * Only buffers the kernel either reads or writes, not both: the language
 * addresses a buffer's quads through a second declaration of it, and two
 * declarations of one binding may be assumed not to alias. Only 32-bit
 * elements (the language's vec_type), ungated accesses, and only where the
 * index's alignment is proven: its base (the index without its constant
 * term) has a known factor of 4 (alignment counts from the start of the
 * binding, so any device's offset alignment is fine). Nothing here changes
 * a value: the same elements are read and written. */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/render.h"
#include "ir/pattern.h"
#include "ir/symbolic.h"

#define QUAD 4
#define OCTET 8

/* A known factor of integer expression u (the gcd of what its terms are
 * multiples of); 1 where nothing is known. `budget` bounds the nodes looked
 * at, as index expressions share subtrees. */
static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

#define FACTOR_ANY ((int64_t)1 << 40) /* of 0: a multiple of everything */

static int64_t factor(const UOp *u, int *budget) {
  if (--*budget < 0) return 1;
  switch ((Op)u->op) {
  case OP_CONST: {
    int64_t v = u->arg.i < 0 ? -u->arg.i : u->arg.i;
    return v == 0 || v > FACTOR_ANY ? FACTOR_ANY : v;
  }
  case OP_MUL: {
    int64_t a = factor(u->src[0], budget), b = factor(u->src[1], budget);
    return a >= FACTOR_ANY / b ? FACTOR_ANY : a * b;
  }
  case OP_ADD:
  case OP_SUB: return gcd64(factor(u->src[0], budget), factor(u->src[1], budget));
  case OP_NEG: return factor(u->src[0], budget);
  case OP_SHL: {
    const UOp *k = u->src[1];
    if (k->op != OP_CONST || k->arg.i < 0 || k->arg.i > 30) return 1;
    int64_t a = factor(u->src[0], budget);
    return a >= FACTOR_ANY >> k->arg.i ? FACTOR_ANY : a << k->arg.i;
  }
  case OP_CAST: /* between int dtypes that hold the value (index math widens) */
    return dt_is_int(u->dtype) && dt_is_int(u->src[0]->dtype) &&
                   dt_bits(u->dtype) >= dt_bits(u->src[0]->dtype)
               ? factor(u->src[0], budget)
               : 1;
  default: return 1;
  }
}

/* A scalar access of a buffer that may go in a quad. */
typedef struct {
  UOp *global;  /* the DEFINE_GLOBAL */
  UOp *base;    /* the index less its constant term; NULL: the index is a constant */
  int64_t off;  /* the constant term */
  UOp *uop;     /* the LOAD, or the STORE */
  uint32_t key; /* stores: which tail of sources (position of the first store with it) */
} Access;

static int cmp_access(const void *pa, const void *pb) {
  const Access *a = pa, *b = pb;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  if (a->global != b->global) return (uintptr_t)a->global < (uintptr_t)b->global ? -1 : 1;
  if (a->base != b->base) return (uintptr_t)a->base < (uintptr_t)b->base ? -1 : 1;
  return a->off < b->off ? -1 : a->off > b->off;
}

/* Whether the language has w-wide access of 32-bit dtype t. */
static bool has_width(const Lang *L, int t, int w) {
  return w == OCTET ? L->max_vector >= OCTET && L->wide_type[t] : L->vec_type[t] != NULL;
}

/* Whether `place` (an INDEX) addresses a buffer of the kernel that the
 * language has quads or octets of and that is only read (want_read) or only
 * written. */
static bool quad_place(const UOp *place, const Lang *L, const KernelDesc *kd, bool want_read) {
  if (place->op != OP_INDEX || place->src[0]->op != OP_DEFINE_GLOBAL) return false;
  int64_t b = place->src[0]->arg.i;
  if (b < 0 || b >= kd->nbufs) return false;
  const KernelBuf *kb = &kd->bufs[b];
  if (kb->read != want_read || kb->written == want_read) return false;
  DType d = place->dtype;
  return d.count == 1 && dt_scalar_size((ScalarType)d.scalar) == 4 &&
         (has_width(L, d.scalar, QUAD) || has_width(L, d.scalar, OCTET));
}

static void split_index(UOp *idx, Access *a) {
  if (idx->op == OP_CONST) {
    a->base = NULL, a->off = idx->arg.i;
  } else if (idx->op == OP_ADD && idx->src[1]->op == OP_CONST) {
    a->base = idx->src[0], a->off = idx->src[1]->arg.i;
  } else {
    a->base = idx, a->off = 0;
  }
}

/* Whether sorted accesses v[i..i+w-1] are one aligned run of w. */
static bool is_run(const Access *v, size_t n, size_t i, int w) {
  if (i + (size_t)w > n) return false;
  const Access *a = &v[i];
  if (a->off % w) return false;
  for (int j = 1; j < w; j++) {
    const Access *b = &v[i + j];
    if (b->key != a->key || b->global != a->global || b->base != a->base || b->off != a->off + j)
      return false;
  }
  int budget = 256;
  return !a->base || factor(a->base, &budget) % w == 0;
}

/* The width of the access run starting at v[i] of 32-bit dtype t: 8, 4, or 0
 * for none. */
static int run_width(const Lang *L, const Access *v, size_t n, size_t i, int t) {
  if (has_width(L, t, OCTET) && is_run(v, n, i, OCTET)) return OCTET;
  return has_width(L, t, QUAD) && is_run(v, n, i, QUAD) ? QUAD : 0;
}

/* The place of the run of w starting at a: INDEX(global, (base + off) / w)
 * as a pointer to w-vectors. */
static UOp *run_place_of(const Access *a, DType idt, DType elem, int w) {
  UCtx *c = a->global->ctx;
  UOp *first = a->base ? uop_add_c(a->base, a->off) : uop_const_int(c, idt, a->off);
  UOp *q = first ? uop_simplify(uop_idiv_c(first, w)) : NULL;
  DType pt = dt_ptr(dt_vec(elem, w), ADDR_GLOBAL);
  return q ? uop_new(c, OP_INDEX, pt, 2, (UOp *[]){a->global, q}, arg_none()) : NULL;
}

static tvk_status oom(Error *err) {
  return err_first(err, TVK_ERR_OUT_OF_MEMORY, "codegen: out of memory in vectorize_memory");
}

/* ---------------------------------------------------------------- unrolling */

/* Whether global index idx is rng + rest, with rest a known multiple of 4:
 * the loop's 4 neighbouring iterations then read one aligned quad. */
static bool unit_term(UOp *idx, UOp *rng) {
  UOp *terms[32];
  int n = 0, at = 0;
  terms[n++] = idx;
  bool found = false;
  int64_t g = 0;
  while (at < n) { /* flatten the sum */
    UOp *t = terms[at++];
    if (t->op == OP_ADD && n + 2 <= 32) {
      terms[n++] = t->src[0], terms[n++] = t->src[1];
      continue;
    }
    UOp *r = t->op == OP_CAST ? t->src[0] : t;
    if (r == rng && !found) {
      found = true;
      continue;
    }
    int budget = 256;
    g = gcd64(g, factor(t, &budget));
  }
  return found && (g == 0 || g % QUAD == 0);
}

/* Whether the update value v of an accumulator reads, through a global
 * load of a read-only 32-bit buffer, neighbouring elements as rng steps,
 * and holds no other accumulator: an inner level of a blocked sum (or any
 * reduce nested in v) lives inside rng's loop, and copies of it would
 * share one accumulator. */
static bool reads_along(UOp *v, UOp *rng, const Lang *L, const KernelDesc *kd) {
  size_t n = 0;
  UOp **t = uop_toposort(v, &n);
  bool yes = false, nested = false;
  for (size_t i = 0; t && i < n; i++) {
    nested |= t[i]->op == OP_ASSIGN;
    yes |= t[i]->op == OP_LOAD && quad_place(t[i]->src[0], L, kd, true) &&
           unit_term(t[i]->src[0]->src[1], rng);
  }
  bool ok = t && yes && !nested;
  free(t);
  return ok;
}

tvk_status unroll_for_quads(UOp *sink, const Lang *L, const KernelDesc *kd, UOp **out, Error *err) {
  *out = sink;
  if (!L->max_vector || L->max_vector < QUAD) return TVK_OK;
  size_t n = 0;
  UOp **t = uop_toposort(sink, &n);
  if (!t) return oom(err);
  UOp **from = calloc(n + 1, sizeof *from), **to = calloc(n + 1, sizeof *to);
  UOp **assigns = calloc(n + 1, sizeof *assigns);
  tvk_status status = TVK_OK;
  if (!from || !to || !assigns) {
    status = oom(err);
    goto done;
  }
  int64_t next_id = 0;
  size_t nassign = 0;
  for (size_t i = 0; i < n; i++) {
    if (t[i]->op == OP_RANGE && t[i]->arg.i >= next_id) next_id = t[i]->arg.i + 1;
    if (t[i]->op == OP_ASSIGN) assigns[nassign++] = t[i];
  }
  UOp *res = sink;
  /* each loop that is the innermost of some accumulator, once */
  for (size_t i = 0; i < n && res; i++) {
    UOp *rng = t[i];
    if (rng->op != OP_RANGE || rng->src[0]->op != OP_CONST) continue;
    int64_t trip = rng->src[0]->arg.i;
    if (trip < QUAD || trip % QUAD) continue;
    /* its accumulators: every ASSIGN whose accumulator has rng last; none
     * may have it elsewhere */
    int nmap = 0;
    bool ok = true, along = false;
    for (size_t j = 0; j < nassign && ok; j++) {
      UOp *a = assigns[j], *acc = a->src[0];
      for (uint32_t k = 1; k + 1 < acc->nsrc; k++) ok &= acc->src[k] != rng;
      if (!ok || acc->src[acc->nsrc - 1] != rng) continue;
      from[nmap++] = a;
      along = along || reads_along(a->src[1], rng, L, kd);
    }
    if (!ok || !nmap || !along) continue;
    /* rng -> rng' * 4 + u; each update applied 4 times in order, the u-th
     * on the value the (u-1)-th left: the same additions in the same order */
    UCtx *c = sink->ctx;
    UOp *r4 = uop_range(c, uop_const_int(c, rng->dtype, trip / QUAD), next_id++);
    UOp *base = r4 ? uop_mul_c(r4, QUAD) : NULL;
    for (int m = 0; m < nmap && base; m++) {
      UOp *a = from[m], *acc = a->src[0];
      UOp *asrc[1 + TVK_MAX_DIMS * CG_MAX_DIGITS + 1];
      if (acc->nsrc > sizeof asrc / sizeof *asrc) {
        base = NULL;
        break;
      }
      memcpy(asrc, acc->src, acc->nsrc * sizeof *asrc);
      asrc[acc->nsrc - 1] = r4;
      UOp *acc4 = uop_new(c, OP_DEFINE_ACC, acc->dtype, (int)acc->nsrc, asrc, acc->arg);
      UOp *v = acc4;
      for (int u = 0; u < QUAD && v; u++) {
        UOp *at = uop_add_c(base, u);
        v = at ? uop_substitute(a->src[1], 2, (UOp *[]){acc, rng}, (UOp *[]){v, at}) : NULL;
      }
      to[m] = v ? uop_new(c, OP_ASSIGN, a->dtype, 2, (UOp *[]){acc4, v}, arg_none()) : NULL;
      if (!to[m]) base = NULL;
    }
    if (!base) {
      status = oom(err);
      goto done;
    }
    res = uop_substitute(res, nmap, from, to);
  }
  if (!res) {
    status = oom(err);
  } else if (res != sink) {
    UOp *simple = uop_simplify(res); /* the new indices: base + 4 r' + u */
    if (!simple)
      status = oom(err);
    else
      *out = simple;
  }
done:
  free(t), free(from), free(to), free(assigns);
  return status;
}

tvk_status vectorize_memory(UOp *sink, const Lang *L, const KernelDesc *kd, UOp **out, Error *err) {
  *out = sink;
  if (!L->max_vector || L->max_vector < QUAD) return TVK_OK;
  size_t n = 0;
  UOp **topo = uop_toposort(sink, &n);
  if (!topo) return oom(err);
  Access *ld = calloc(n + 1, sizeof *ld), *st = calloc(sink->nsrc + 1u, sizeof *st);
  UOp **from = calloc(n + 1, sizeof *from), **to = calloc(n + 1, sizeof *to);
  UOp **srcs = calloc(sink->nsrc + 1u, sizeof *srcs);
  tvk_status status = TVK_OK;
  if (!ld || !st || !from || !to || !srcs) {
    status = oom(err);
    goto done;
  }
  size_t nld = 0, nst = 0, nmap = 0;
  for (size_t i = 0; i < n; i++) {
    UOp *u = topo[i];
    if (u->op != OP_LOAD || u->nsrc != 1 || !quad_place(u->src[0], L, kd, true)) continue;
    Access *a = &ld[nld++];
    a->global = u->src[0]->src[0], a->uop = u;
    split_index(u->src[0]->src[1], a);
  }
  qsort(ld, nld, sizeof *ld, cmp_access);
  for (size_t i = 0; i < nld; i++) {
    DType elem = dt_scalar(ld[i].uop->dtype);
    int w = run_width(L, ld, nld, i, elem.scalar);
    if (!w) continue;
    UOp *place = run_place_of(&ld[i], ld[i].uop->src[0]->src[1]->dtype, elem, w);
    UOp *vload = place ? uop_new(sink->ctx, OP_LOAD, dt_vec(elem, w), 1, &place, arg_none()) : NULL;
    for (int j = 0; j < w; j++) {
      from[nmap] = ld[i + j].uop;
      to[nmap++] = vload ? uop_new(sink->ctx, OP_GEP, elem, 1, &vload, arg_int(j)) : NULL;
      if (!to[nmap - 1]) {
        status = oom(err);
        goto done;
      }
    }
    i += (size_t)w - 1;
  }
  UOp *res = nmap ? uop_substitute(sink, (int)nmap, from, to) : sink;
  if (!res) {
    status = oom(err);
    goto done;
  }

  /* stores, grouped also by what follows the value (gate, output ranges);
   * substituting loads keeps the sink's sources (st and srcs are that long) */
  uint32_t nres = res->nsrc <= sink->nsrc ? res->nsrc : 0;
  for (uint32_t i = 0; i < nres; i++) {
    UOp *u = res->src[i];
    if (u->op != OP_STORE || u->nsrc < 2 || !quad_place(u->src[0], L, kd, false)) continue;
    if (u->nsrc > 2 && u->src[2]->op != OP_RANGE) continue; /* gated */
    Access *a = &st[nst++];
    a->global = u->src[0]->src[0], a->uop = u, a->key = i;
    for (uint32_t j = 0; j < i; j++) { /* the first store with the same tail names the group */
      UOp *v = res->src[j];
      if (v->op != OP_STORE || v->nsrc != u->nsrc) continue;
      if (!memcmp(v->src + 2, u->src + 2, (u->nsrc - 2) * sizeof *u->src)) {
        a->key = j;
        break;
      }
    }
    split_index(u->src[0]->src[1], a);
  }
  qsort(st, nst, sizeof *st, cmp_access);
  /* the sink's sources, each quad of stores replaced by one vector store */
  if (nst) memcpy(srcs, res->src, res->nsrc * sizeof *srcs);
  bool stores_changed = false;
  for (size_t i = 0; i < nst; i++) {
    UOp *s0 = st[i].uop;
    DType elem = dt_scalar(s0->src[1]->dtype);
    int w = run_width(L, st, nst, i, elem.scalar);
    if (!w) continue;
    UOp *lanes[OCTET];
    bool whole = true; /* the lanes of one vector in order: store it as it is */
    for (int j = 0; j < w; j++) {
      lanes[j] = st[i + j].uop->src[1];
      whole = whole && lanes[j]->op == OP_GEP && lanes[j]->arg.i == j &&
              lanes[j]->src[0] == lanes[0]->src[0] && lanes[0]->src[0]->dtype.count == w;
    }
    UOp *vec = whole ? lanes[0]->src[0]
                     : uop_new(sink->ctx, OP_VECTORIZE, dt_vec(elem, w), w, lanes, arg_none());
    UOp *place = run_place_of(&st[i], s0->src[0]->src[1]->dtype, elem, w);
    UOp *ssrc[2 + TVK_MAX_DIMS + 2];
    uint32_t ns = s0->nsrc <= 2 + TVK_MAX_DIMS + 2 ? s0->nsrc : 0;
    if (!ns) continue; /* more output ranges than any lowering makes */
    memcpy(ssrc, s0->src, ns * sizeof *ssrc);
    ssrc[0] = place, ssrc[1] = vec;
    UOp *vstore =
        vec && place ? uop_new(sink->ctx, OP_STORE, s0->dtype, (int)ns, ssrc, arg_none()) : NULL;
    if (!vstore) {
      status = oom(err);
      goto done;
    }
    for (uint32_t k = 0; k < res->nsrc; k++) {
      if (res->src[k] == s0) srcs[k] = vstore;
      for (int j = 1; j < w; j++)
        if (res->src[k] == st[i + j].uop) srcs[k] = NULL;
    }
    stores_changed = true;
    i += (size_t)w - 1;
  }
  if (stores_changed) {
    uint32_t m = 0;
    for (uint32_t k = 0; k < res->nsrc; k++)
      if (srcs[k]) srcs[m++] = srcs[k];
    res = uop_sink(sink->ctx, (int)m, srcs);
  }
  if (!res)
    status = oom(err);
  else
    *out = res;
done:
  free(topo), free(ld), free(st), free(from), free(to), free(srcs);
  return status;
}
