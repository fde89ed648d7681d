/* The rewrite engine: UPat matching, PatternMatcher, graph_rewrite and
 * uop_substitute. See pattern.h for the API and docs/rewrite.md for how it works. */
#include "pattern.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ptrmap.h"
#include "ir/vec.h"

/* A PERM pattern tries nsrc! orders; more than this is a bug in a rule table. */
#define PERM_MAX 8

/* ================================================================ matching
 *
 * A pattern can match one UOp in several ways (PERM tries every order of its
 * sub-patterns, ALT every alternative), and the seed enumerates all of them in a
 * fixed order, calling the rule function for each until one returns a node. We
 * do the same without building lists: the matcher walks the pattern depth first
 * and, at each complete match, calls a continuation (Cont). The continuation
 * returns true to stop the enumeration, false to backtrack into the next way.
 *
 * Captures live in one array of UPAT_SLOTS pointers. Invariant of every match
 * function: when it returns false the array is as it was on entry; when it
 * returns true the array holds the captures of the match that stopped it. */

typedef struct Cont Cont;
struct Cont {
  bool (*fn)(const Cont *k, UOp **caps);
};

static bool match_pat(const UPat *p, UOp *u, UOp **caps, const Cont *k);

static bool accept_first(const Cont *k, UOp **caps) {
  (void)k, (void)caps;
  return true;
}
static const Cont ACCEPT = {accept_first};

static bool ops_same(const uint8_t *a, const uint8_t *b) {
  if (!a || !b) return a == b;
  for (; *a == *b; a++, b++)
    if (*a == OP_NONE) return true;
  return false;
}

static bool arg_same(const Arg *a, const Arg *b) {
  if (!a || !b) return a == b;
  return arg_eq(a, b);
}

/* Structural equality of patterns: the seed dedupes the permutations of a
 * source list whose patterns are all the same object; in C two PAT_ANY(X)
 * literals are different objects, so compare what they mean. */
static bool upat_same(const UPat *a, const UPat *b) {
  if (a == b) return true;
  if (a->groups != b->groups || a->dtypes != b->dtypes || a->slot != b->slot ||
      a->kind != b->kind || a->nsrc != b->nsrc || a->any_len != b->any_len)
    return false;
  if (!ops_same(a->ops, b->ops) || !arg_same(a->arg, b->arg)) return false;
  if ((a->cval == NULL) != (b->cval == NULL)) return false;
  if (a->cval && a->cval->f != b->cval->f) return false;
  for (int i = 0; i < a->nsrc; i++)
    if (!upat_same(a->src[i], b->src[i])) return false;
  return true;
}

static bool perm_all_same(const UPat *p) {
  for (int i = 1; i < p->nsrc; i++)
    if (!upat_same(p->src[0], p->src[i])) return false;
  return true;
}

/* A deterministic pattern matches a given UOp in at most one way, so a sequence
 * of them can be matched in a loop rather than by nested continuations: this
 * keeps the C stack flat when a REPEAT runs over a node with many sources. */
static bool pat_det(const UPat *p) {
  switch ((UPatSrcKind)p->kind) {
  case UPAT_SRC_ANY: return true;
  case UPAT_ALT: return p->nsrc == 0 || (p->nsrc == 1 && pat_det(p->src[0]));
  case UPAT_SRC_REPEAT: return pat_det(p->src[0]);
  case UPAT_SRC_PERM:
    if (p->nsrc > 1 && !perm_all_same(p)) return false;
    /* fallthrough */
  case UPAT_SRC_TUPLE:
    for (int i = 0; i < p->nsrc; i++)
      if (!pat_det(p->src[i])) return false;
    return true;
  }
  return false;
}

static bool op_ok(const UPat *p, Op op) {
  if (!p->ops && !p->groups) return true;
  if (p->groups & op_groups(op)) return true;
  if (p->ops)
    for (const uint8_t *o = p->ops; *o != OP_NONE; o++)
      if (*o == op) return true;
  return false;
}

/* Everything about u itself, sources aside. */
static bool node_ok(const UPat *p, const UOp *u) {
  if (!op_ok(p, (Op)u->op)) return false;
  if (p->dtypes && !((p->dtypes >> u->dtype.scalar) & 1u)) return false;
  if (p->arg && !arg_eq(p->arg, &u->arg)) return false;
  /* cval compares the value as a number, so 0, 0.0, -0.0 and false all match 0 */
  if (p->cval && (u->op != OP_CONST || uop_const_double(u) != p->cval->f)) return false;
  return true;
}

/* TUPLE and PERM: exactly nsrc sources, or at least nsrc with any_len. The
 * seed's zip would also accept fewer sources with any_len, leaving captures
 * unset; a C rule function would then read NULL, so we require them all. */
static bool len_ok(const UPat *p, const UOp *u) {
  return p->any_len ? u->nsrc >= p->nsrc : u->nsrc == p->nsrc;
}

/* Matches sources srcs[i..n) against pats[j] (pats[0] for every j when
 * repeat), then calls next. */
typedef struct {
  Cont base;
  const UPat *const *pats;
  UOp *const *srcs;
  uint32_t i, n;
  bool repeat;
  const Cont *next;
} SeqCont;

static bool match_seq(const UPat *const *pats, bool repeat, UOp *const *srcs, uint32_t i,
                      uint32_t n, UOp **caps, const Cont *next);

static bool seq_resume(const Cont *k, UOp **caps) {
  const SeqCont *s = (const SeqCont *)k;
  return match_seq(s->pats, s->repeat, s->srcs, s->i, s->n, caps, s->next);
}

static bool match_seq(const UPat *const *pats, bool repeat, UOp *const *srcs, uint32_t i,
                      uint32_t n, UOp **caps, const Cont *next) {
  UOp *saved[UPAT_SLOTS];
  memcpy(saved, caps, sizeof saved);
  bool rep_det = repeat && i < n && pat_det(pats[0]);
  for (; i < n; i++) { /* the deterministic prefix, in a loop */
    const UPat *p = pats[repeat ? 0 : i];
    if (repeat ? !rep_det : !pat_det(p)) break;
    if (!match_pat(p, srcs[i], caps, &ACCEPT)) goto fail;
  }
  bool stop;
  if (i == n) {
    stop = next->fn(next, caps);
  } else {
    SeqCont sc = {{seq_resume}, pats, srcs, i + 1, n, repeat, next};
    stop = match_pat(pats[repeat ? 0 : i], srcs[i], caps, &sc.base);
  }
  if (stop) return true;
fail:
  memcpy(caps, saved, sizeof saved);
  return false;
}

/* Next permutation in lexicographic order (itertools.permutations' order). */
static bool next_perm(uint8_t *a, int n) {
  int i = n - 2;
  while (i >= 0 && a[i] >= a[i + 1]) i--;
  if (i < 0) return false;
  int j = n - 1;
  while (a[j] <= a[i]) j--;
  uint8_t t = a[i];
  a[i] = a[j], a[j] = t;
  for (int l = i + 1, r = n - 1; l < r; l++, r--) t = a[l], a[l] = a[r], a[r] = t;
  return true;
}

static bool match_perm(const UPat *p, UOp *u, UOp **caps, const Cont *k) {
  int n = p->nsrc;
  if (n <= 1 || perm_all_same(p)) return match_seq(p->src, false, u->src, 0, (uint32_t)n, caps, k);
  if (n > PERM_MAX) {
    assert(!"PERM pattern with more than PERM_MAX sources");
    return false;
  }
  uint8_t idx[PERM_MAX];
  const UPat *order[PERM_MAX];
  for (int i = 0; i < n; i++) idx[i] = (uint8_t)i;
  do {
    for (int i = 0; i < n; i++) order[i] = p->src[idx[i]];
    if (match_seq(order, false, u->src, 0, (uint32_t)n, caps, k)) return true;
  } while (next_perm(idx, n));
  return false;
}

static bool match_src(const UPat *p, UOp *u, UOp **caps, const Cont *k) {
  switch ((UPatSrcKind)p->kind) {
  case UPAT_SRC_ANY: return k->fn(k, caps);
  case UPAT_SRC_TUPLE: return len_ok(p, u) && match_seq(p->src, false, u->src, 0, p->nsrc, caps, k);
  case UPAT_SRC_PERM: return len_ok(p, u) && match_perm(p, u, caps, k);
  case UPAT_SRC_REPEAT:
    assert(p->nsrc == 1 && "REPEAT takes one sub-pattern");
    return match_seq(p->src, true, u->src, 0, u->nsrc, caps, k);
  case UPAT_ALT:
    for (int i = 0; i < p->nsrc; i++)
      if (match_pat(p->src[i], u, caps, k)) return true;
    return false;
  }
  assert(!"bad UPat kind");
  return false;
}

static bool match_pat(const UPat *p, UOp *u, UOp **caps, const Cont *k) {
  if (!node_ok(p, u)) return false;
  assert(p->slot < UPAT_SLOTS);
  UOp *old = caps[p->slot];
  if (p->slot) {
    if (old && old != u) return false; /* a slot named twice must be the same node */
    caps[p->slot] = u;
  }
  if (match_src(p, u, caps, k)) return true;
  if (p->slot) caps[p->slot] = old;
  return false;
}

bool upat_match(const UPat *p, UOp *u, UOp **captures) {
  UOp *caps[UPAT_SLOTS] = {u};
  if (!match_pat(p, u, caps, &ACCEPT)) return false;
  memcpy(captures, caps, sizeof caps);
  return true;
}

/* ================================================================ PatternMatcher */

typedef struct {
  const UPat *pat;
  RuleFn fn;
  OpSet need; /* early reject: ops that must appear among the node's sources */
} PmRule;

struct PatternMatcher {
  int nrules;
  PmRule *rules;
  int *order;              /* rule indices grouped by op, in table order */
  int start[OP_COUNT + 1]; /* the rules for op o are order[start[o] .. start[o+1]) */
};

/* The ops a pattern's root can match; false when it can match any op. */
static bool root_ops(const UPat *p, OpSet *s) {
  if (p->kind == UPAT_ALT && !p->ops && !p->groups) {
    for (int i = 0; i < p->nsrc; i++)
      if (!root_ops(p->src[i], s)) return false;
    return true;
  }
  if (!p->ops && !p->groups) return false;
  OpSet g = opset_of_groups(p->groups);
  s->w[0] |= g.w[0], s->w[1] |= g.w[1];
  if (p->ops)
    for (const uint8_t *o = p->ops; *o != OP_NONE; o++) opset_add(s, (Op)*o);
  return true;
}

static bool single_op(const UPat *p, Op *op) {
  if (p->kind == UPAT_ALT || p->groups || !p->ops || p->ops[0] == OP_NONE || p->ops[1] != OP_NONE)
    return false;
  *op = (Op)p->ops[0];
  return true;
}

/* The seed's early_reject: the ops of the source patterns that name exactly one
 * op. A node lacking any of them among its sources cannot match. */
static OpSet early_reject(const UPat *p) {
  OpSet s = {{0, 0}};
  int n = 0;
  if (p->kind == UPAT_SRC_TUPLE || p->kind == UPAT_SRC_PERM) n = p->nsrc;
  if (p->kind == UPAT_SRC_REPEAT) n = 1;
  Op op;
  for (int i = 0; i < n; i++)
    if (single_op(p->src[i], &op)) opset_add(&s, op);
  return s;
}

/* Builds the by-op index over pm->rules. */
static PatternMatcher *pm_index(PatternMatcher *pm) {
  size_t nr = pm->nrules ? (size_t)pm->nrules : 1;
  OpSet *ops = malloc(sizeof *ops * nr);
  if (!ops) goto oom;
  size_t total = 0;
  for (int r = 0; r < pm->nrules; r++) {
    ops[r] = (OpSet){{0, 0}};
    if (!root_ops(pm->rules[r].pat, &ops[r])) ops[r] = (OpSet){{~1ull, ~0ull}}; /* all but NONE */
    for (int o = 1; o < OP_COUNT; o++) total += opset_has(ops[r], (Op)o);
  }
  pm->order = malloc(sizeof *pm->order * (total ? total : 1));
  if (!pm->order) goto oom;
  int at = 0;
  for (int o = 0; o < OP_COUNT; o++) {
    pm->start[o] = at;
    for (int r = 0; r < pm->nrules && o != OP_NONE; r++)
      if (opset_has(ops[r], (Op)o)) pm->order[at++] = r;
  }
  pm->start[OP_COUNT] = at;
  free(ops);
  return pm;
oom:
  free(ops);
  pm_free(pm);
  return NULL;
}

static PatternMatcher *pm_alloc(int nrules) {
  PatternMatcher *pm = calloc(1, sizeof *pm);
  if (!pm) return NULL;
  pm->nrules = nrules;
  pm->rules = malloc(sizeof *pm->rules * (size_t)(nrules ? nrules : 1));
  if (!pm->rules) {
    free(pm);
    return NULL;
  }
  return pm;
}

PatternMatcher *pm_new(const Rule *rules, int nrules) {
  assert(nrules >= 0);
  PatternMatcher *pm = pm_alloc(nrules);
  if (!pm) return NULL;
  for (int r = 0; r < nrules; r++) {
    assert(rules[r].pat && rules[r].fn);
    pm->rules[r] = (PmRule){rules[r].pat, rules[r].fn, early_reject(rules[r].pat)};
  }
  return pm_index(pm);
}

PatternMatcher *pm_concat(const PatternMatcher *a, const PatternMatcher *b) {
  PatternMatcher *pm = pm_alloc(a->nrules + b->nrules);
  if (!pm) return NULL;
  memcpy(pm->rules, a->rules, sizeof *a->rules * (size_t)a->nrules);
  memcpy(pm->rules + a->nrules, b->rules, sizeof *b->rules * (size_t)b->nrules);
  return pm_index(pm);
}

void pm_free(PatternMatcher *pm) {
  if (!pm) return;
  free(pm->order);
  free(pm->rules);
  free(pm);
}

/* Calls the rule function on each match until it returns a node. */
typedef struct {
  Cont base;
  RuleFn fn;
  void *ctx;
  UOp *u;
  UOp **out;
} RuleCont;

static bool rule_call(const Cont *k, UOp **caps) {
  const RuleCont *rc = (const RuleCont *)k;
  UOp *copy[UPAT_SLOTS]; /* the function may scribble on its array; ours drives backtracking */
  memcpy(copy, caps, sizeof copy);
  UOp *r = rc->fn(rc->ctx, copy);
  /* Returning the node itself means "no change" (the seed would loop forever). */
  if (!r || r == rc->u) return false;
  *rc->out = r;
  return true;
}

static bool opset_covers(OpSet have, OpSet need) {
  return !(need.w[0] & ~have.w[0]) && !(need.w[1] & ~have.w[1]);
}

UOp *pm_rewrite(const PatternMatcher *pm, UOp *u, void *ctx) {
  int from = pm->start[u->op], to = pm->start[u->op + 1];
  if (from == to) return NULL;
  OpSet have = {{0, 0}};
  for (uint32_t i = 0; i < u->nsrc; i++) opset_add(&have, (Op)u->src[i]->op);
  for (int j = from; j < to; j++) {
    const PmRule *r = &pm->rules[pm->order[j]];
    if (!opset_covers(have, r->need)) continue;
    UOp *out = NULL;
    RuleCont rc = {{rule_call}, r->fn, ctx, u, &out};
    UOp *caps[UPAT_SLOTS] = {u};
    if (match_pat(r->pat, u, caps, &rc.base)) return out;
  }
  return NULL;
}

/* ================================================================ memo table
 *
 * The map gives each node its entry. An entry with val == NULL is "in
 * progress": the node is on the work stack. The table holds a reference on
 * every key and value, so no node it names can be freed (and its address
 * reused) while the rewrite runs. */

typedef struct {
  UOp *key, *val;
} MemoEnt;

typedef struct {
  PtrMap index; /* key -> its entry in e */
  MemoEnt *e;
  size_t n, cap;
} Memo;

/* u's entry, or NULL; valid until the next memo_add. */
static MemoEnt *memo_find(const Memo *m, const UOp *u) {
  int64_t i = ptrmap_get(&m->index, u);
  return i < 0 ? NULL : &m->e[i];
}

/* Adds u (not present) with val NULL; NULL on out of memory. */
static MemoEnt *memo_add(Memo *m, UOp *u) {
  if (!VEC_RESERVE(m->e, m->cap, m->n + 1) || !ptrmap_put(&m->index, u, (int64_t)m->n)) return NULL;
  m->e[m->n] = (MemoEnt){uop_retain(u), NULL};
  return &m->e[m->n++];
}

static void memo_free(Memo *m) {
  for (size_t i = 0; i < m->n; i++) {
    uop_release(m->e[i].val);
    uop_release(m->e[i].key);
  }
  free(m->e);
  ptrmap_free(&m->index);
  *m = (Memo){0};
}

/* ================================================================ graph_rewrite
 *
 * The seed's RewriteContext is two mutually recursive functions; deep graphs
 * (a chain of 100,000 ADDs) would overflow the C stack, so the recursion is
 * turned into an explicit stack of frames. A frame is one pending call
 * rewrite(n); its state says where in the seed's function body it is:
 *
 *   ST_RULE  (bottom-up only) apply the rules to n; on a result r, rewrite(n) =
 *            rewrite(r) (the seed's while loop, unrolled one step per frame)
 *   ST_SRC   rewrite the sources one by one; then rebuild n if any changed, and
 *            rewrite(n) = rewrite(rebuilt); else (top-down) apply the rules
 *   ST_LINK  rewrite(n) is the result of rewrite(next), now known
 *
 * Every node gets a memo entry when its frame is pushed, marked in progress,
 * and its result when the frame is popped. Meeting an in-progress node again
 * means the rules loop (a -> b -> a), which the seed would recurse on forever. */

enum { ST_RULE, ST_SRC, ST_LINK };

typedef struct {
  UOp *n, *next;
  uint32_t i; /* ST_SRC: next source to visit */
  uint8_t state;
} Frame;

typedef struct {
  const PatternMatcher *pm;
  void *ctx;
  bool bottom_up;
  const Memo *subst; /* uop_substitute's map; NULL in graph_rewrite */
  Memo memo;
  Frame *stack;
  size_t nstack, capstack;
  UOp **scratch;
  size_t capscratch;
} Rw;

/* The result of a node whose frame is done. An in-progress node is only met
 * again on a rule cycle; without asserts we stop there and keep the node. */
static UOp *rw_result(const Rw *rw, UOp *n) {
  const MemoEnt *e = memo_find(&rw->memo, n);
  assert(e);
  return e->val ? e->val : n;
}

static bool rw_set(Rw *rw, UOp *n, UOp *v) {
  MemoEnt *e = memo_find(&rw->memo, n);
  if (!e && !(e = memo_add(&rw->memo, n))) return false;
  assert(!e->val);
  e->val = uop_retain(v);
  return true;
}

/* Starts rewrite(n): 1 when a frame was pushed, 0 when the result is already
 * known, -1 on out of memory. */
static int rw_enter(Rw *rw, UOp *n) {
  const MemoEnt *e = memo_find(&rw->memo, n);
  if (e) {
    assert(e->val && "rewrite rules loop: a node rewrites back into itself");
    return 0;
  }
  if (rw->subst && (e = memo_find(rw->subst, n))) return rw_set(rw, n, e->val) ? 0 : -1;
  if (!VEC_RESERVE(rw->stack, rw->capstack, rw->nstack + 1) || !memo_add(&rw->memo, n)) return -1;
  uint8_t st = rw->bottom_up && !rw->subst ? ST_RULE : ST_SRC;
  rw->stack[rw->nstack++] = (Frame){n, NULL, 0, st};
  return 1;
}

static bool rw_finish(Rw *rw, UOp *v) {
  Frame *f = &rw->stack[--rw->nstack];
  return rw_set(rw, f->n, v);
}

/* rewrite(f->n) = rewrite(next). */
static int rw_link(Rw *rw, Frame *f, UOp *next) {
  f->next = next;
  f->state = ST_LINK;
  return rw_enter(rw, next);
}

/* The new sources of f->n into rw->scratch; true if any changed. */
static bool rw_gather(Rw *rw, const UOp *n, bool *changed) {
  if (!VEC_RESERVE(rw->scratch, rw->capscratch, n->nsrc)) return false;
  *changed = false;
  for (uint32_t i = 0; i < n->nsrc; i++) {
    rw->scratch[i] = rw_result(rw, n->src[i]);
    *changed |= rw->scratch[i] != n->src[i];
  }
  return true;
}

/* All sources of f->n are rewritten. */
static int rw_sources_done(Rw *rw, Frame *f) {
  bool changed;
  if (!rw_gather(rw, f->n, &changed)) return -1;
  if (changed) {
    UOp *r = uop_replace_src(f->n, (int)f->n->nsrc, rw->scratch);
    if (!r) return -1;
    if (rw->subst) return rw_finish(rw, r) ? 0 : -1; /* substitution does not revisit */
    return rw_link(rw, f, r);
  }
  UOp *r = rw->bottom_up || rw->subst ? NULL : pm_rewrite(rw->pm, f->n, rw->ctx);
  if (r) return rw_link(rw, f, r);
  return rw_finish(rw, f->n) ? 0 : -1;
}

/* One step of the frame on top of the stack; -1 on out of memory. */
static int rw_step(Rw *rw) {
  Frame *f = &rw->stack[rw->nstack - 1];
  switch (f->state) {
  case ST_RULE: {
    UOp *r = pm_rewrite(rw->pm, f->n, rw->ctx);
    if (r) return rw_link(rw, f, r);
    f->state = ST_SRC;
    return 0;
  }
  case ST_SRC:
    if (f->i < f->n->nsrc) return rw_enter(rw, f->n->src[f->i++]);
    return rw_sources_done(rw, f);
  case ST_LINK: return rw_finish(rw, rw_result(rw, f->next)) ? 0 : -1;
  }
  assert(!"bad frame state");
  return -1;
}

static UOp *rw_run(Rw *rw, UOp *sink) {
  UCtx *uctx = sink->ctx;
  size_t mark = uop_pool_mark(uctx);
  UOp *res = NULL;
  int rc = rw_enter(rw, sink);
  while (rc >= 0 && rw->nstack) rc = rw_step(rw);
  if (rc >= 0)
    res = uop_pool_drain_keep(uctx, mark, rw_result(rw, sink));
  else
    uop_pool_drain(uctx, mark);
  /* After the drain: the memo's references keep res alive until it is in the
   * outer pool; releasing them now frees every temporary. */
  memo_free(&rw->memo);
  free(rw->stack);
  free(rw->scratch);
  return res;
}

UOp *graph_rewrite(UOp *sink, const PatternMatcher *pm, void *ctx, bool bottom_up) {
  if (!sink) return NULL;
  Rw rw = {.pm = pm, .ctx = ctx, .bottom_up = bottom_up};
  uint64_t failed = uctx_alloc_failures(sink->ctx);
  UOp *res = rw_run(&rw, sink);
  /* a rule that could not build its replacement returned NULL, which reads
   * as "no match": the result would be half rewritten */
  return uctx_alloc_failures(sink->ctx) == failed ? res : NULL;
}

/* A simultaneous substitution: every occurrence of from[i] becomes to[i], and
 * the replacements are not looked into again. The seed's _substitute instead
 * rewrites bottom-up with the map as a rule, so it would also substitute inside
 * to[i], and never ends when to[i] contains from[i] (x -> x + 1); for maps
 * whose targets contain no keys the two agree. */
UOp *uop_substitute(UOp *root, int n, UOp *const *from, UOp *const *to) {
  if (!root) return NULL;
  Memo map = {0};
  for (int i = 0; i < n; i++) {
    MemoEnt *e = memo_find(&map, from[i]); /* a key given twice: the last wins, as in a dict */
    if (!e && !(e = memo_add(&map, from[i]))) {
      memo_free(&map);
      return NULL;
    }
    uop_release(e->val);
    e->val = uop_retain(to[i]);
  }
  Rw rw = {.subst = &map};
  uint64_t failed = uctx_alloc_failures(root->ctx);
  UOp *res = rw_run(&rw, root);
  memo_free(&map);
  return uctx_alloc_failures(root->ctx) == failed ? res : NULL;
}
