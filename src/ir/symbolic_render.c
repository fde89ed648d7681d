/* The readable renderer of UOp expressions (the seed's `renderer`): Python
 * syntax, for messages, tests and debug output. Bounds and sym_infer are in
 * symbolic_bounds.c, rules in symbolic_rules.c and symbolic_divmod.c. */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alu.h"
#include "ir/strbuf.h"
#include "symbolic_internal.h"

/* ---------------------------------------------------------------- renderer */

/* Output stops growing past this (a DAG with heavy sharing renders
 * exponentially long); the text then ends in "...". */
#define RENDER_MAX_CHARS (1u << 20)
#define RENDER_MAX_DEPTH 2000

typedef struct {
  Str s;
  size_t limit; /* most chars the text may have (RENDER_MAX_CHARS - 3: room for "...") */
  bool cut;     /* the text (or the graph's depth) passed a limit: it ends in "..." */
} Out;

static void put(Out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(Out *o, const char *fmt, ...) {
  if (o->s.oom || o->cut) return;
  va_list ap;
  va_start(ap, fmt);
  int need = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (need < 0) return;
  if (o->s.len + (size_t)need > o->limit) {
    o->cut = true;
    return;
  }
  va_start(ap, fmt);
  str_vprintf(&o->s, fmt, ap);
  va_end(ap);
}

/* Python's precedence, loosest first. */
enum {
  P_TOP = 0,
  P_TERNARY,
  P_NOT,
  P_CMP,
  P_OR,
  P_XOR,
  P_AND,
  P_SHIFT,
  P_ADD,
  P_MUL,
  P_UNARY,
  P_ATOM,
};

static void render(Out *o, UOp *u, int min_prec, int depth);

static void render_const(Out *o, UOp *u) {
  DType d = u->dtype;
  if (dt_is_bool(d))
    put(o, "%s", u->arg.i ? "True" : "False");
  else if (dt_is_float(d)) {
    char b[40];
    snprintf(b, sizeof b, "%.9g", u->arg.f);
    put(o, "%s%s", b, strpbrk(b, ".eni") ? "" : ".0"); /* 1 -> 1.0; inf, nan as is */
  } else if (d.scalar == DT_UINT64)
    put(o, "%" PRIu64, (uint64_t)u->arg.i);
  else
    put(o, "%" PRId64, u->arg.i);
}

static int64_t const_int(const UOp *u, bool *ok) {
  int64_t v = 0;
  *ok = dt_is_int(u->dtype) && sym_const(u, &v);
  return v;
}

/* Infix spelling and precedence of binary ops; NULL for ops rendered otherwise. */
static const char *infix(Op op, int *prec) {
  switch (op) {
  case OP_ADD: return *prec = P_ADD, "+";
  case OP_SUB: return *prec = P_ADD, "-";
  case OP_MUL: return *prec = P_MUL, "*";
  case OP_IDIV: return *prec = P_MUL, "//";
  case OP_MOD: return *prec = P_MUL, "%";
  case OP_FDIV: return *prec = P_MUL, "/";
  case OP_SHL: return *prec = P_SHIFT, "<<";
  case OP_SHR: return *prec = P_SHIFT, ">>";
  case OP_AND: return *prec = P_AND, "&";
  case OP_XOR: return *prec = P_XOR, "^";
  case OP_OR: return *prec = P_OR, "|";
  case OP_CMPLT: return *prec = P_CMP, "<";
  case OP_CMPNE: return *prec = P_CMP, "!=";
  default: return NULL;
  }
}

/* The precedence u renders at (to decide on parentheses before rendering). */
static int prec_of(UOp *u) {
  int p = P_ATOM;
  bool ok;
  Op op = (Op)u->op;
  if (op == OP_CONST)
    return dt_is_float(u->dtype) ? (u->arg.f < 0 ? P_UNARY : P_ATOM)
                                 : (const_int(u, &ok) < 0 && ok ? P_UNARY : P_ATOM);
  if (op == OP_WHERE) return P_TERNARY;
  if (op == OP_NEG) return P_UNARY;
  if (op == OP_MULACC) return P_ADD;
  if (op == OP_CMPNE && dt_is_bool(u->src[0]->dtype) && u->src[1]->op == OP_CONST &&
      u->src[1]->arg.i == 1)
    return P_NOT;
  if (op == OP_MUL && const_int(u->src[1], &ok) == -1 && ok) return P_UNARY;
  if (infix(op, &p)) return p;
  return P_ATOM;
}

/* a + b*-n, a + -n render as a - b*n, a - n. */
static bool render_minus(Out *o, UOp *u, int depth) {
  UOp *a = u->src[0], *b = u->src[1];
  bool ok;
  int64_t c;
  if (b->op == OP_CONST && (c = const_int(b, &ok)) < 0 && ok && c != INT64_MIN) {
    render(o, a, P_ADD, depth);
    put(o, "-%" PRId64, -c);
    return true;
  }
  if (b->op == OP_MUL && (c = const_int(b->src[1], &ok)) < 0 && ok && c != INT64_MIN) {
    render(o, a, P_ADD, depth);
    put(o, "-");
    render(o, b->src[0], P_MUL + (c != -1), depth);
    if (c != -1) put(o, "*%" PRId64, -c);
    return true;
  }
  return false;
}

static void render_call(Out *o, const char *name, UOp *u, int depth) {
  put(o, "%s(", name);
  for (uint32_t i = 0; i < u->nsrc; i++) {
    if (i) put(o, ", ");
    render(o, u->src[i], P_TOP, depth);
  }
  put(o, ")");
}

/* u at precedence prec_of(u), no outer parentheses. */
static void render_bare(Out *o, UOp *u, int depth) {
  Op op = (Op)u->op;
  int p = 0;
  const char *sym;
  switch (op) {
  case OP_CONST: render_const(o, u); return;
  case OP_DEFINE_VAR:
  case OP_SPECIAL:
    if (u->arg.kind == ARG_VAR) return put(o, "%s", u->arg.var.name);
    break;
  case OP_RANGE:
    if (u->arg.kind == ARG_INT) return put(o, "ridx%" PRId64, u->arg.i);
    break;
  case OP_WHERE:
    render(o, u->src[1], P_TERNARY + 1, depth);
    put(o, " if ");
    render(o, u->src[0], P_TERNARY + 1, depth);
    put(o, " else ");
    render(o, u->src[2], P_TERNARY, depth);
    return;
  case OP_NEG:
    put(o, "-");
    render(o, u->src[0], P_UNARY, depth);
    return;
  case OP_MAX: render_call(o, "max", u, depth); return;
  case OP_CAST: render_call(o, dt_scalar_name((ScalarType)u->dtype.scalar), u, depth); return;
  case OP_BITCAST: render_call(o, "bitcast", u, depth); return;
  case OP_MULACC:
    render(o, u->src[0], P_MUL, depth);
    put(o, "*");
    render(o, u->src[1], P_MUL + 1, depth);
    put(o, "+");
    render(o, u->src[2], P_ADD + 1, depth);
    return;
  default: break;
  }
  if (prec_of(u) == P_NOT) {
    put(o, "not ");
    render(o, u->src[0], P_NOT, depth);
    return;
  }
  if (prec_of(u) == P_UNARY && op == OP_MUL) {
    put(o, "-");
    render(o, u->src[0], P_UNARY, depth);
    return;
  }
  if (op == OP_ADD && render_minus(o, u, depth)) return;
  if ((sym = infix(op, &p)) && u->nsrc == 2) {
    /* left-associative; comparisons do not chain in Python, so both sides bind tighter */
    render(o, u->src[0], p == P_CMP ? p + 1 : p, depth);
    put(o, "%s", sym);
    render(o, u->src[1], p + 1, depth);
    return;
  }
  char name[32]; /* unary math as functions: exp2(x); other ops by their IR name */
  snprintf(name, sizeof name, "%s", op_name(op));
  if (op_in(op, G_UNARY))
    for (char *c = name; *c; c++) *c = (char)tolower((unsigned char)*c);
  render_call(o, name, u, depth);
}

static void render(Out *o, UOp *u, int min_prec, int depth) {
  if (depth > RENDER_MAX_DEPTH) {
    o->cut = true;
    return;
  }
  bool paren = prec_of(u) < min_prec;
  if (paren) put(o, "(");
  render_bare(o, u, depth + 1);
  if (paren) put(o, ")");
}

char *uop_render_raw(UOp *u) {
  Out o = {.limit = RENDER_MAX_CHARS - 3}; /* room left for "..." */
  render(&o, u, P_TOP, 0);
  if (o.cut) str_add(&o.s, "...");
  return str_take(&o.s);
}

char *uop_render(UOp *u) {
  UCtx *ctx = u->ctx;
  size_t mark = uop_pool_mark(ctx);
  UOp *s = uop_simplify(u);
  char *text = s ? uop_render_raw(s) : NULL;
  uop_pool_drain(ctx, mark);
  return text;
}
