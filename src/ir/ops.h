/* IR op codes and op groups, generated from ops.def. */
#ifndef TVK_IR_OPS_H
#define TVK_IR_OPS_H

#include <stdbool.h>
#include <stdint.h>

/* The facts of an op, as bits (the seed's GroupOp and what tvk's passes ask). */
enum {
  G_UNARY = 1u << 0,        /* an ALU op of one operand */
  G_BINARY = 1u << 1,       /* ... of two */
  G_TERNARY = 1u << 2,      /* ... of three */
  G_ALU = 1u << 3,          /* derived: unary | binary | ternary */
  G_ELEMENTWISE = 1u << 4,  /* one output element from the same element of each input: ALU, CAST */
  G_COMMUTATIVE = 1u << 5,  /* f(a,b) = f(b,a) */
  G_ASSOCIATIVE = 1u << 6,  /* f(f(a,b),c) = f(a,f(b,c)) */
  G_IDEMPOTENT = 1u << 7,   /* f(x,x) = x */
  G_KEEPS_ZERO = 1u << 8,   /* f(0, ..) = 0 (+0 or -0): a padded view may be pushed below it */
  G_REDUCE_OP = 1u << 9,    /* a REDUCE_AXIS may reduce with it */
  G_IRREDUCIBLE = 1u << 10, /* a constant or variable: a leaf of index math */
  G_LEAF = 1u << 11,        /* a tensor-graph leaf: data no kernel computes (ir/graph.h) */
  G_AST = 1u << 12,         /* may appear in a kernel AST (codegen/kernel.h) */
  G_AST_VALUE = 1u << 13,   /* computes a value in a kernel AST (derived: elementwise) */
  G_DEFINE = 1u << 14,      /* a definition the linearizer puts before all other code */
};

/* OP_NONE is not an op: it terminates op lists in patterns. */
typedef enum {
  OP_NONE = 0,
#define OP(name, facts) OP_##name,
#include "ops.def"
#undef OP
  OP_COUNT
} Op;

const char *op_name(Op op);
uint32_t op_groups(Op op);
/* Operands of an ALU op (1, 2 or 3); 0 for any other op. */
int op_arity(Op op);
static inline bool op_in(Op op, uint32_t groups) { return (op_groups(op) & groups) != 0; }

/* A set of ops as a bitset (OP_COUNT < 128). */
typedef struct {
  uint64_t w[2];
} OpSet;

static inline bool opset_has(OpSet s, Op op) { return (s.w[op >> 6] >> (op & 63)) & 1u; }
static inline void opset_add(OpSet *s, Op op) { s->w[op >> 6] |= 1ull << (op & 63); }
/* All ops of the given groups. */
OpSet opset_of_groups(uint32_t groups);

#endif
