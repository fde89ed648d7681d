/* The shared C-family walker: a linear program + a language table -> source
 * (render.h). Each UOp becomes either a statement (loops, loads, stores,
 * accumulators, named values) or an expression inlined into its only user. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/render.h"
#include "ir/ptrmap.h"
#include "ir/strbuf.h"
#include "ir/symbolic.h"
#include "ir/vec.h"

/* ---------------------------------------------------------------- templates */

#define SUBST_OPS 8 /* $0 .. $7: an 8-vector's lanes */

typedef struct {
  const char *op[SUBST_OPS];
  DType t, s;                /* $T $U $N $F $W from t; $S $M from s */
  const char *v, *b, *r, *k; /* $V $B $R $K */
  int64_t i;                 /* $I */
} Subst;

static const char *or_empty(const char *s) { return s ? s : ""; }

static void expand(const Lang *L, Str *out, const char *tmpl, const Subst *s) {
  for (const char *p = tmpl; *p; p++) {
    const char *q = strchr(p, '$');
    if (!q) {
      str_add(out, p);
      return;
    }
    str_addn(out, p, (size_t)(q - p));
    p = q + 1;
    switch (*p) {
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7': str_add(out, or_empty(s->op[*p - '0'])); break;
    case 'T':
      str_add(out, or_empty(s->t.count > 4   ? L->wide_type[s->t.scalar]
                            : s->t.count > 1 ? L->vec_type[s->t.scalar]
                                             : L->type[s->t.scalar]));
      break;
    case 'S': str_add(out, or_empty(L->type[s->s.scalar])); break;
    case 'U': str_add(out, or_empty(L->wrap_type[s->t.scalar])); break;
    case 'N': str_add(out, or_empty(L->short_name[s->t.scalar])); break;
    case 'M': str_add(out, or_empty(L->short_name[s->s.scalar])); break;
    case 'F': str_add(out, or_empty(L->math_suffix[s->t.scalar])); break;
    case 'W': str_printf(out, "%d", dt_bits(s->t)); break;
    case 'V': str_add(out, or_empty(s->v)); break;
    case 'B': str_add(out, or_empty(s->b)); break;
    case 'R': str_add(out, or_empty(s->r)); break;
    case 'K': str_add(out, or_empty(s->k)); break;
    case 'I': str_printf(out, "%" PRId64, s->i); break;
    case '$': str_add(out, "$"); break;
    default:
      p--;
      str_add(out, "$");
      break; /* not a placeholder: keep it */
    }
    if (!*p) return;
  }
}

/* How many times the template uses operand k. */
static int uses(const char *tmpl, int k) {
  int n = 0;
  for (const char *p = tmpl; p && (p = strchr(p, '$')); p += 2) {
    if (p[1] == '0' + k) n++;
    if (!p[1]) break;
  }
  return n;
}

/* ---------------------------------------------------------------- spellings */

static TypeClass class_of(DType d) {
  if (dt_is_bool(d)) return CL_BOOL;
  if (dt_is_float(d)) return CL_FLOAT;
  return dt_is_unsigned(d) ? CL_UINT : CL_SINT;
}

/* The dtype an ALU op computes in: its operands' (WHERE's last two). */
static DType operand_dtype(const UOp *u) { return u->src[u->nsrc - 1]->dtype; }

/* Whether integer op u provably needs no wrap-around or guard (render.h,
 * alu_fits): computed here from the sources' bounds, in int64 without overflow. */
static bool fits(const Lang *L, UOp *u) {
  DType d = u->dtype;
  if (!dt_is_int(d) || u->nsrc < 1 || !uop_bounds_exact(u->src[0])) return false;
  int64_t alo = uop_vmin(u->src[0]), ahi = uop_vmax(u->src[0]), lo = 0, hi = 0, p[4] = {0};
  if (u->op == OP_NEG) return alo > dt_min_i(d) && -ahi >= dt_min_i(d) && -alo <= dt_max_i(d);
  if (u->nsrc != 2 || !uop_bounds_exact(u->src[1])) return false;
  int64_t blo = uop_vmin(u->src[1]), bhi = uop_vmax(u->src[1]);
  bool ok = true;
  switch ((Op)u->op) {
  case OP_ADD:
    ok = !__builtin_add_overflow(alo, blo, &lo) && !__builtin_add_overflow(ahi, bhi, &hi);
    break;
  case OP_SUB:
    ok = !__builtin_sub_overflow(alo, bhi, &lo) && !__builtin_sub_overflow(ahi, blo, &hi);
    break;
  case OP_MUL:
    ok = !__builtin_mul_overflow(alo, blo, &p[0]) && !__builtin_mul_overflow(alo, bhi, &p[1]) &&
         !__builtin_mul_overflow(ahi, blo, &p[2]) && !__builtin_mul_overflow(ahi, bhi, &p[3]);
    lo = p[0] < p[1] ? p[0] : p[1], lo = lo < p[2] ? lo : p[2], lo = lo < p[3] ? lo : p[3];
    hi = p[0] > p[1] ? p[0] : p[1], hi = hi > p[2] ? hi : p[2], hi = hi > p[3] ? hi : p[3];
    break;
  case OP_IDIV:
  case OP_MOD: return L->fits_nonneg_divmod ? alo >= 0 && blo >= 1 : blo >= 1 || bhi <= -2;
  case OP_SHL:
    if (alo < 0 || blo < 0 || bhi >= dt_bits(d) - 1 || bhi >= 62) return false;
    lo = 0, ok = !__builtin_mul_overflow(ahi, INT64_C(1) << bhi, &hi);
    break;
  case OP_SHR: return alo >= 0 && blo >= 0 && bhi < dt_bits(d);
  default: return false;
  }
  return ok && lo >= dt_min_i(d) && hi <= dt_max_i(d) && (d.scalar != DT_UINT64 || lo >= 0);
}

static const Spell *spell_of(const Lang *L, UOp *u) {
  if (L->alu_fits[u->op].expr && fits(L, u)) return &L->alu_fits[u->op];
  if (u->op == OP_CAST || u->op == OP_BITCAST) {
    uint32_t from = DT_BIT(u->src[0]->dtype.scalar), to = DT_BIT(u->dtype.scalar);
    const CastSpell *t = u->op == OP_CAST ? L->casts : L->bitcasts;
    int n = u->op == OP_CAST ? L->ncasts : L->nbitcasts;
    for (int i = 0; i < n; i++)
      if ((t[i].from & from) && (t[i].to & to)) return &t[i].spell;
    return NULL;
  }
  if (!op_in((Op)u->op, G_ALU)) return NULL;
  const Spell *row = L->alu_dt[operand_dtype(u).scalar];
  if (row && row[u->op].expr) return &row[u->op];
  const Spell *sp = &L->alu[class_of(operand_dtype(u))][u->op];
  return sp->expr ? sp : NULL;
}

/* The element dtype's own template, or the common one. */
static const char *elem_tmpl(const char *const *per, const UOp *place, const char *common) {
  const char *t = per[place->dtype.scalar];
  return t ? t : common;
}

/* The place of an element, a 4-vector or an 8-vector of a buffer. */
static const char *index_tmpl(const Lang *L, const UOp *u) {
  if (u->dtype.count > 4) return L->wide_index;
  return u->dtype.count > 1 ? L->vec_index : elem_tmpl(L->index_elem, u, L->index);
}

/* A lane of a 4-vector or an 8-vector. */
static const char *gep_tmpl(const Lang *L, const UOp *u) {
  return u->src[0]->dtype.count > 4 ? L->wide_gep[u->dtype.scalar] : L->gep;
}

/* A 4-vector or an 8-vector of its sources. */
static const char *vectorize_tmpl(const Lang *L, const UOp *u) {
  return u->dtype.count > 4 ? L->wide_vectorize[u->dtype.scalar] : L->vectorize;
}

/* A STORE's gate: its third source unless that is a RANGE (it runs once per
 * output element) or a BARRIER (it runs after one); NULL: none. */
static UOp *store_gate(const UOp *u) {
  if (u->nsrc < 3 || u->src[2]->op == OP_RANGE || u->src[2]->op == OP_BARRIER) return NULL;
  return u->src[2];
}

/* The template a UOp renders its sources through, with the operand each
 * source fills (-1: none); used to find sources that must be named. */
static const char *user_template(const Lang *L, UOp *u, int *slot_of_src) {
  for (uint32_t k = 0; k < u->nsrc && k < SUBST_OPS; k++) slot_of_src[k] = (int)k;
  switch ((Op)u->op) {
  case OP_INDEX: return index_tmpl(L, u);
  case OP_GEP: return gep_tmpl(L, u);
  case OP_VECTORIZE: return vectorize_tmpl(L, u);
  case OP_LOAD: return u->nsrc == 3 ? L->load_gated : NULL;
  case OP_STORE:
    if (store_gate(u)) return elem_tmpl(L->store_gated_elem, u->src[0], L->store_gated);
    return elem_tmpl(L->store_elem, u->src[0], L->store);
  case OP_ASSIGN: slot_of_src[0] = -1, slot_of_src[1] = 0; return L->assign;
  default: break;
  }
  const Spell *sp = spell_of(L, u);
  return sp ? sp->expr : NULL;
}

/* ---------------------------------------------------------------- the walker */

typedef struct {
  const Lang *L;
  const LinearProgram *lp;
  const RenderInfo *info;
  PtrMap pos;      /* UOp -> position in the program */
  char **expr;     /* per position: its name, literal, or inline expression */
  int *users;      /* per position: uses by later UOps */
  size_t *user;    /* per position: its last user */
  int *block;      /* per position: position of the innermost open RANGE, or -1 */
  bool *named;     /* per position: must be a variable */
  bool *vec_bufs;  /* per buffer: accessed as 4-vectors (declared again as such) */
  bool *wide_bufs; /* per buffer: accessed as 8-vectors (declared again as such) */
  bool subgroups;  /* some SUBGROUP_REDUCE (the language's subgroup_header) */
  bool wide;       /* some 8-vector access (the language's wide_header) */
  int nval, nalu, ncast;
  int depth;
  Str body;
  Str locals; /* DEFINE_LOCAL declarations, at file scope */
  char **helpers;
  size_t nhelpers, caphelpers;
  Error *err;
} Walker;

static size_t pos_of(const Walker *w, const UOp *u) { return (size_t)*ptrmap_ref(&w->pos, u); }
static const char *ex(const Walker *w, const UOp *u) { return w->expr[pos_of(w, u)]; }

static bool fail_oom(Walker *w) {
  err_first(w->err, TVK_ERR_OUT_OF_MEMORY, "render: out of memory");
  return false;
}

/* Counts users, finds blocks, marks what must be named. */
static bool prepass(Walker *w) {
  const LinearProgram *lp = w->lp;
  int open[130], nopen = 0;
  for (size_t p = 0; p < lp->n; p++) {
    UOp *u = lp->uops[p];
    if (!ptrmap_put(&w->pos, u, (int64_t)p)) return fail_oom(w);
    if (u->dtype.scalar != DT_VOID && !w->L->type[u->dtype.scalar]) {
      const char *why = w->L->no_type[u->dtype.scalar];
      err_first(w->err, TVK_ERR_DTYPE, "render: %s has no %s%s%s", w->L->name,
                dt_scalar_name((ScalarType)u->dtype.scalar), why ? ": " : "", why ? why : "");
      return false;
    }
    if (u->dtype.count > 1 && u->dtype.count > w->L->max_vector) {
      char d[48];
      err_first(w->err, TVK_ERR_DTYPE, "render: %s has no vector type for %s", w->L->name,
                dt_str(u->dtype, d));
      return false;
    }
    if (u->op == OP_INDEX && u->dtype.count > 1) {
      bool wide = u->dtype.count > 4;
      const Lang *L = w->L;
      if (!(wide ? L->wide_index && L->wide_buf_decl_file && L->wide_type[u->dtype.scalar] &&
                       L->wide_gep[u->dtype.scalar] && L->wide_vectorize[u->dtype.scalar]
                 : L->vec_index && L->vec_buf_decl_file && L->vec_type[u->dtype.scalar]) ||
          u->src[0]->op != OP_DEFINE_GLOBAL || u->src[0]->arg.i < 0 ||
          u->src[0]->arg.i >= w->info->nbufs) {
        err_first(w->err, TVK_ERR_INTERNAL, "render: %s has no %d-vector access of this buffer",
                  L->name, wide ? 8 : 4);
        return false;
      }
      (wide ? w->wide_bufs : w->vec_bufs)[u->src[0]->arg.i] = true;
    }
    if ((u->op == OP_GEP && !w->L->gep) || (u->op == OP_VECTORIZE && !w->L->vectorize)) {
      err_first(w->err, TVK_ERR_INTERNAL, "render: %s has no %s", w->L->name, op_name((Op)u->op));
      return false;
    }
    if (u->op == OP_ENDRANGE) nopen--;
    w->block[p] = nopen ? open[nopen - 1] : -1;
    if (u->op == OP_RANGE) {
      if (nopen == (int)(sizeof open / sizeof *open)) {
        err_first(w->err, TVK_ERR_INTERNAL, "render: loops nested too deep");
        return false;
      }
      open[nopen++] = (int)p;
    }
    if (u->op == OP_ENDRANGE || u->op == OP_DEFINE_ACC) { /* their RANGE sources are not uses */
      if (u->op == OP_DEFINE_ACC)
        w->users[pos_of(w, u->src[0])]++, w->user[pos_of(w, u->src[0])] = p;
      continue;
    }
    int slot[SUBST_OPS] = {-1, -1, -1, -1, -1, -1, -1, -1};
    const char *tmpl = user_template(w->L, u, slot);
    for (uint32_t k = 0; k < u->nsrc; k++) {
      int64_t *sp = ptrmap_ref(&w->pos, u->src[k]);
      if (!sp) {
        err_first(w->err, TVK_ERR_INTERNAL, "render: %s used before it is defined",
                  op_name((Op)u->src[k]->op));
        return false;
      }
      size_t s = (size_t)*sp;
      w->users[s]++, w->user[s] = p;
      if (u->op == OP_RANGE || (k < SUBST_OPS && slot[k] >= 0 && uses(tmpl, slot[k]) > 1))
        w->named[s] = true;
    }
  }
  return true;
}

/* Deepest nesting of brackets in an expression inlined into its user.
 * Compilers cap nesting (clang: 256 by default, -fbracket-depth), so a longer
 * chain of single-use ops is cut into named steps; a statement then nests at
 * most this much plus a template's few levels. */
#define RENDER_MAX_NEST 32

static int nesting(const char *s) {
  int d = 0, most = 0;
  for (; *s; s++) {
    if (*s == '(' || *s == '[' || *s == '{') most = ++d > most ? d : most;
    if (*s == ')' || *s == ']' || *s == '}') d--;
  }
  return most;
}

/* Whether the expression rhs of position p goes inline into its one user. */
static bool inline_ok(const Walker *w, size_t p, const char *rhs) {
  Op op = (Op)w->lp->uops[p]->op;
  if (op != OP_CAST && op != OP_BITCAST && !op_in(op, G_ALU)) return false;
  return w->users[p] == 1 && !w->named[p] && w->block[w->user[p]] == w->block[p] &&
         nesting(rhs) <= RENDER_MAX_NEST;
}

static void line(Walker *w, const char *tmpl, const Subst *s) {
  for (int d = 0; d <= w->depth; d++) str_add(&w->body, w->L->indent);
  expand(w->L, &w->body, tmpl, s);
  str_add(&w->body, "\n");
}

static char *expand_new(const Lang *L, const char *tmpl, const Subst *s) {
  Str t = {0};
  expand(L, &t, tmpl, s);
  return str_take(&t);
}

static char *printf_new(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *printf_new(const char *fmt, ...) {
  Str t = {0};
  va_list ap;
  va_start(ap, fmt);
  str_vprintf(&t, fmt, ap);
  va_end(ap);
  return str_take(&t);
}

/* ---------------------------------------------------------------- constants */

static char *render_float(const Lang *L, DType dt, double f) {
  Subst s = {.t = dt};
  if (isnan(f)) return expand_new(L, L->nan, &s);
  if (isinf(f)) return expand_new(L, f > 0 ? L->inf : L->ninf, &s);
  if (f == 0 && !signbit(f) && L->pos_zero) return expand_new(L, L->pos_zero, &s);
  char num[64];
  snprintf(num, sizeof num, "%.*g", L->float_digits[dt.scalar] ? L->float_digits[dt.scalar] : 17,
           f);
  if (!strpbrk(num, ".e")) strcat(num, ".0");
  const char *suf = or_empty(L->lit_suffix[dt.scalar]);
  return signbit(f) ? printf_new("(%s%s)", num, suf) : printf_new("%s%s", num, suf);
}

static char *render_int(const Lang *L, DType dt, int64_t v) {
  const char *suf = or_empty(L->lit_suffix[dt.scalar]);
  if (dt.scalar == DT_UINT64) return printf_new("%" PRIu64 "%s", (uint64_t)v, suf);
  if (v < 0 && v == dt_min_i(dt)) return printf_new("(%" PRId64 "%s-1%s)", v + 1, suf, suf);
  return v < 0 ? printf_new("(%" PRId64 "%s)", v, suf) : printf_new("%" PRId64 "%s", v, suf);
}

static char *render_const(const Walker *w, const UOp *u) {
  const Lang *L = w->L;
  DType dt = u->dtype;
  if (dt_is_bool(dt)) return printf_new("%s", u->arg.i ? L->true_lit : L->false_lit);
  if ((L->storage_only & DT_BIT(dt.scalar)) && dt_is_float(dt)) {
    float f = (float)u->arg.f;
    uint16_t bits = dt.scalar == DT_FLOAT16 ? f32_to_f16(f) : f32_to_bf16(f);
    char hex[16];
    snprintf(hex, sizeof hex, "0x%04x", bits);
    return expand_new(L, L->storage_lit, &(Subst){.op = {hex}, .t = dt});
  }
  if (dt_is_float(dt)) return render_float(L, dt, u->arg.f);
  return render_int(L, dt, u->arg.i);
}

/* ---------------------------------------------------------------- ops */

static bool add_helper(Walker *w, const char *tmpl, const Subst *s) {
  char *h = expand_new(w->L, tmpl, s);
  if (!h) return fail_oom(w);
  for (size_t i = 0; i < w->nhelpers; i++) {
    if (strcmp(w->helpers[i], h) == 0) {
      free(h);
      return true;
    }
  }
  if (!VEC_PUSH(w->helpers, w->nhelpers, w->caphelpers, h)) {
    free(h);
    return fail_oom(w);
  }
  return true;
}

/* Binds rhs (taken: freed here) to a new variable <prefix><n> of u's dtype:
 * the value of position p. */
static bool declare(Walker *w, size_t p, const UOp *u, char *rhs, const char *prefix,
                    int *counter) {
  w->expr[p] = rhs ? printf_new("%s%d", prefix, (*counter)++) : NULL;
  if (w->expr[p]) line(w, w->L->decl, &(Subst){.op = {rhs}, .t = u->dtype, .v = w->expr[p]});
  free(rhs);
  return w->expr[p] ? true : fail_oom(w);
}

/* ALU ops and casts: the expression, inlined or bound to a new variable. */
static bool render_alu(Walker *w, size_t p, UOp *u) {
  bool cast = u->op == OP_CAST || u->op == OP_BITCAST;
  if (!cast && (w->L->storage_only >> operand_dtype(u).scalar & 1u)) {
    err_first(w->err, TVK_ERR_INTERNAL, "render: %s on storage-only %s (legalize missed it)",
              op_name((Op)u->op), dt_scalar_name((ScalarType)operand_dtype(u).scalar));
    return false;
  }
  const Spell *sp = spell_of(w->L, u);
  if (!sp) {
    char a[48], b[48];
    err_first(w->err, TVK_ERR_DTYPE, "render: %s has no spelling for %s of %s to %s", w->L->name,
              op_name((Op)u->op), dt_str(u->src[0]->dtype, a), dt_str(u->dtype, b));
    return false;
  }
  Subst s = {.t = cast ? u->dtype : operand_dtype(u), .s = u->src[0]->dtype};
  for (uint32_t k = 0; k < u->nsrc && k < SUBST_OPS; k++) s.op[k] = ex(w, u->src[k]);
  if (sp->needs && !add_helper(w, sp->needs, &s)) return false;
  if (sp->needs2 && !add_helper(w, sp->needs2, &s)) return false;
  if (sp->helper && !add_helper(w, sp->helper, &s)) return false;
  char *rhs = expand_new(w->L, sp->expr, &s);
  if (!rhs) return fail_oom(w);
  if (inline_ok(w, p, rhs)) {
    w->expr[p] = rhs;
    return true;
  }
  return declare(w, p, u, rhs, cast ? "cast" : "alu", cast ? &w->ncast : &w->nalu);
}

/* A template applied to one expression (NULL template: the expression itself). */
static char *convert(const Lang *L, const char *tmpl, const char *x, DType t) {
  return tmpl ? expand_new(L, tmpl, &(Subst){.op = {x}, .t = t}) : printf_new("%s", x);
}

/* Work-group memory holds values, not buffer elements: no conversions. */
static bool is_local_place(const UOp *index) {
  return index->op == OP_INDEX && index->src[0]->op == OP_DEFINE_LOCAL;
}

static bool render_load(Walker *w, size_t p, UOp *u) {
  const Lang *L = w->L;
  const char *conv = is_local_place(u->src[0]) ? NULL : L->load_conv[u->dtype.scalar];
  char *val = convert(L, conv, ex(w, u->src[0]), u->dtype), *rhs = val;
  if (val && u->nsrc == 3) {
    rhs = expand_new(L, L->load_gated,
                     &(Subst){.op = {val, ex(w, u->src[1]), ex(w, u->src[2])}, .t = u->dtype});
    free(val);
  }
  return declare(w, p, u, rhs, "val", &w->nval);
}

static bool render_store(Walker *w, UOp *u) {
  bool gated = store_gate(u) != NULL;
  DType t = u->src[1]->dtype;
  bool local = is_local_place(u->src[0]);
  char *val = convert(w->L, local ? NULL : w->L->store_conv[t.scalar], ex(w, u->src[1]), t);
  if (!val) return fail_oom(w);
  Subst s = {.op = {ex(w, u->src[0]), val, gated ? ex(w, u->src[2]) : NULL}, .t = t};
  const Lang *L = w->L;
  line(w,
       local && gated ? L->store_gated
       : local        ? L->store
       : gated        ? elem_tmpl(L->store_gated_elem, u->src[0], L->store_gated)
                      : elem_tmpl(L->store_elem, u->src[0], L->store),
       &s);
  free(val);
  return true;
}

static const char *special_text(const Lang *L, const char *name) {
  for (int i = 0; i < L->nspecials; i++)
    if (strcmp(L->specials[i].name, name) == 0) return L->specials[i].text;
  return NULL;
}

static int var_number(const Walker *w, const UOp *u) {
  for (int i = 0; i < w->info->nvars; i++)
    if (w->info->vars[i] == u) return i;
  return -1;
}

/* A variable's name in the source: v<position in vals>_<its name, made an identifier>. */
static char *var_name(int i, const char *name) {
  Str t = {0};
  str_printf(&t, "v%d_", i);
  for (const char *p = name; *p; p++) {
    char c = *p;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    str_addn(&t, ok ? p : "_", 1);
  }
  return str_take(&t);
}

static bool render_one(Walker *w, size_t p) {
  UOp *u = w->lp->uops[p];
  const Lang *L = w->L;
  switch ((Op)u->op) {
  case OP_DEFINE_GLOBAL: w->expr[p] = printf_new("data%" PRId64, u->arg.i); break;
  case OP_DEFINE_LOCAL:
    if (!L->local_decl)
      return err_first(w->err, TVK_ERR_DTYPE, "render: %s has no work-group memory", L->name),
             false;
    w->expr[p] = printf_new("temp%" PRId64, u->arg.ints.v[0]);
    expand(L, &w->locals, L->local_decl,
           &(Subst){.t = dt_scalar(u->dtype), .v = w->expr[p], .i = u->arg.ints.v[1]});
    break;
  case OP_BARRIER:
    if (!L->barrier)
      return err_first(w->err, TVK_ERR_DTYPE, "render: %s has no barrier", L->name), false;
    line(w, L->barrier, &(Subst){0});
    w->expr[p] = printf_new("%s", "");
    break;
  case OP_DEFINE_VAR: {
    int i = var_number(w, u);
    if (i < 0)
      return err_first(w->err, TVK_ERR_INTERNAL, "render: DEFINE_VAR '%s' is not in the var list",
                       u->arg.var.name),
             false;
    w->expr[p] = var_name(i, u->arg.var.name);
    break;
  }
  case OP_SPECIAL: {
    const char *t = special_text(L, u->arg.var.name);
    if (!t)
      return err_first(w->err, TVK_ERR_DTYPE, "render: %s has no SPECIAL '%s'", L->name,
                       u->arg.var.name),
             false;
    w->expr[p] = printf_new("%s", t);
    break;
  }
  case OP_CONST: w->expr[p] = render_const(w, u); break;
  case OP_RANGE:
    w->expr[p] = printf_new("ridx%" PRId64, u->arg.i);
    line(w, L->range_open, &(Subst){.op = {ex(w, u->src[0])}, .t = u->dtype, .v = w->expr[p]});
    w->depth++;
    break;
  case OP_ENDRANGE:
    w->depth--;
    line(w, L->range_close, &(Subst){0});
    w->expr[p] = printf_new("%s", "");
    break;
  case OP_DEFINE_ACC:
    w->expr[p] = printf_new("acc%" PRId64, u->arg.i);
    line(w, L->decl, &(Subst){.op = {ex(w, u->src[0])}, .t = u->dtype, .v = w->expr[p]});
    break;
  case OP_ASSIGN:
    line(w, L->assign, &(Subst){.op = {ex(w, u->src[1])}, .t = u->dtype, .v = ex(w, u->src[0])});
    w->expr[p] = printf_new("%s", ex(w, u->src[0]));
    break;
  case OP_INDEX:
    w->expr[p] = expand_new(L, index_tmpl(L, u),
                            &(Subst){.op = {ex(w, u->src[0]), ex(w, u->src[1])}, .t = u->dtype});
    w->wide |= u->dtype.count > 4;
    break;
  case OP_GEP: /* a lane of a named vector (a LOAD): an expression */
    w->expr[p] = expand_new(L, gep_tmpl(L, u), &(Subst){.op = {ex(w, u->src[0])}, .i = u->arg.i});
    break;
  case OP_VECTORIZE: {
    Subst sv = {.t = u->dtype};
    for (uint32_t k = 0; k < u->nsrc && k < SUBST_OPS; k++) sv.op[k] = ex(w, u->src[k]);
    w->expr[p] = expand_new(L, vectorize_tmpl(L, u), &sv);
    break;
  }
  case OP_LOAD: return render_load(w, p, u);
  case OP_SUBGROUP_REDUCE: {
    const char *t = u->arg.i >= 0 && u->arg.i < OP_COUNT ? L->subgroup_reduce[u->arg.i] : NULL;
    if (!t)
      return err_first(w->err, TVK_ERR_DTYPE, "render: %s has no subgroup %s", L->name,
                       u->arg.i >= 0 && u->arg.i < OP_COUNT ? op_name((Op)u->arg.i) : "op"),
             false;
    w->subgroups = true;
    return declare(w, p, u, expand_new(L, t, &(Subst){.op = {ex(w, u->src[0])}, .t = u->dtype}),
                   "alu", &w->nalu);
  }
  case OP_STORE:
    if (!render_store(w, u)) return false;
    w->expr[p] = printf_new("%s", "");
    break;
  default:
    if (op_in((Op)u->op, G_ELEMENTWISE)) return render_alu(w, p, u);
    return err_first(w->err, TVK_ERR_INTERNAL, "render: %s in a linear program",
                     op_name((Op)u->op)),
           false;
  }
  return w->expr[p] ? true : fail_oom(w);
}

/* ---------------------------------------------------------------- the kernel */

/* What goes at file scope after the buffers: the block of the vars and the
 * work-group size (GLSL's push constants and local_size). */
static void file_scope_tail(Walker *w, Str *out) {
  const Lang *L = w->L;
  const RenderInfo *in = w->info;
  if (L->push_open) {
    str_add(out, L->push_open);
    for (int i = 0; i < in->nvars; i++) {
      char *name = var_name(i, in->vars[i]->arg.var.name);
      if (!name)
        out->oom = true;
      else
        expand(L, out, L->push_member, &(Subst){.v = name, .i = i, .t = in->vars[i]->dtype});
      free(name);
    }
    str_add(out, or_empty(L->push_close));
  }
  str_addn(out, w->locals.p ? w->locals.p : "", w->locals.len);
  if (L->launch_decl) {
    char n[3][24];
    for (int k = 0; k < 3; k++) snprintf(n[k], sizeof n[k], "%" PRId64, in->local[k]);
    expand(L, out, L->launch_decl, &(Subst){.op = {n[0], n[1], n[2]}, .k = in->name});
  }
}

static void assemble(Walker *w, Str *out) {
  const Lang *L = w->L;
  const RenderInfo *in = w->info;
  str_add(out, or_empty(L->file_header));
  if (w->subgroups) str_add(out, or_empty(L->subgroup_header));
  if (w->wide) str_add(out, or_empty(L->wide_header));
  if (in->register_tile)
    str_add(out, or_empty(L->tile_header));
  else if (in->open_loops)
    str_add(out, or_empty(L->open_loops_header));
  if (in->register_tile || in->unrolled) str_add(out, or_empty(L->lanes_header));
  if (in->fma) str_add(out, or_empty(L->fma_header));
  for (size_t i = 0; i < w->nhelpers; i++) str_add(out, w->helpers[i]);
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) {
      file_scope_tail(w, out);
      expand(L, out, L->func_open, &(Subst){.k = in->name});
    }
    for (int i = 0; i < in->nbufs; i++) {
      char name[32];
      snprintf(name, sizeof name, "data%d", i);
      const KernelBuf *b = &in->bufs[i];
      Subst s = {.v = name,
                 .i = i,
                 .b = L->buf_type[b->dtype],
                 .r = b->written ? "" : L->ro_qualifier,
                 .t = dt_make((ScalarType)b->dtype)};
      expand(L, out, pass ? L->buf_decl : L->buf_decl_file, &s);
      if (!pass && w->vec_bufs && w->vec_bufs[i]) {
        s.b = L->vec_type[b->dtype];
        expand(L, out, L->vec_buf_decl_file, &s);
      }
      if (!pass && w->wide_bufs && w->wide_bufs[i]) {
        s.b = L->wide_type[b->dtype];
        expand(L, out, L->wide_buf_decl_file, &s);
      }
    }
  }
  for (int i = 0; i < in->nvars; i++) {
    char *name = var_name(i, in->vars[i]->arg.var.name);
    Subst sv = {.v = name, .i = i, .t = in->vars[i]->dtype};
    if (!name)
      out->oom = true;
    else
      expand(L, out, sv.t.scalar == DT_FLOAT32 ? L->var_decl_f32 : L->var_decl, &sv);
    if (name && L->var_unused && !ptrmap_ref(&w->pos, in->vars[i]))
      expand(L, out, L->var_unused, &sv);
    free(name);
  }
  if (in->nvars == 0) str_add(out, or_empty(L->no_vars));
  for (int i = 0; i < L->nspecials; i++) {
    bool used = false;
    for (size_t p = 0; p < w->lp->n && !used; p++) {
      UOp *u = w->lp->uops[p];
      used = u->op == OP_SPECIAL && strcmp(u->arg.var.name, L->specials[i].name) == 0;
    }
    if (!used) str_add(out, or_empty(L->specials[i].unused));
  }
  str_addn(out, w->body.p ? w->body.p : "", w->body.len);
  str_add(out, L->func_close);
}

tvk_status render_program(const LinearProgram *lp, const Lang *lang, const RenderInfo *info,
                          char **src, Error *err) {
  *src = NULL;
  Walker w = {.L = lang, .lp = lp, .info = info, .err = err};
  size_t n = lp->n ? lp->n : 1;
  w.expr = calloc(n, sizeof *w.expr);
  w.users = calloc(n, sizeof *w.users);
  w.user = calloc(n, sizeof *w.user);
  w.block = calloc(n, sizeof *w.block);
  w.named = calloc(n, sizeof *w.named);
  w.vec_bufs = calloc(info->nbufs > 0 ? (size_t)info->nbufs : 1, sizeof *w.vec_bufs);
  w.wide_bufs = calloc(info->nbufs > 0 ? (size_t)info->nbufs : 1, sizeof *w.wide_bufs);
  bool ok = w.expr && w.users && w.user && w.block && w.named && w.vec_bufs && w.wide_bufs &&
            ptrmap_init(&w.pos, n);
  if (!ok) fail_oom(&w);
  ok = ok && prepass(&w);
  for (size_t p = 0; ok && p < lp->n; p++) ok = render_one(&w, p);
  if (ok) {
    Str out = {0};
    assemble(&w, &out);
    *src = str_take(&out); /* NULL (and freed) when out ran out of memory */
    if (*src && (w.body.oom || w.locals.oom)) free(*src), *src = NULL;
    if (!*src) fail_oom(&w);
  }
  for (size_t p = 0; w.expr && p < lp->n; p++) free(w.expr[p]);
  for (size_t i = 0; i < w.nhelpers; i++) free(w.helpers[i]);
  free(w.helpers);
  free(w.expr), free(w.users), free(w.user), free(w.block), free(w.named), free(w.vec_bufs);
  free(w.wide_bufs);
  free(w.body.p);
  free(w.locals.p);
  ptrmap_free(&w.pos);
  return err->status;
}
