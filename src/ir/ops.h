/* IR op codes and op groups, generated from ops.def. */
#ifndef TVK_IR_OPS_H
#define TVK_IR_OPS_H

#include <stdbool.h>
#include <stdint.h>

/* Op groups as bits (the seed's GroupOp). */
enum {
  G_UNARY = 1u << 0,
  G_BINARY = 1u << 1,
  G_TERNARY = 1u << 2,
  G_ALU = 1u << 3, /* derived: unary | binary | ternary */
  G_IRREDUCIBLE = 1u << 4,
  G_MOVEMENT = 1u << 5,
  G_BUFFER = 1u << 6,
  G_BLOCK = 1u << 7,
  G_COMMUTATIVE = 1u << 8,  /* f(a,b) = f(b,a) */
  G_ASSOCIATIVE = 1u << 9,  /* f(f(a,b),c) = f(a,f(b,c)) */
  G_IDEMPOTENT = 1u << 10,  /* f(x,x) = x */
  G_UNSAFEPAD = 1u << 11,   /* does not keep f(0) = 0 */
};

/* OP_NONE is not an op: it terminates op lists in patterns. */
typedef enum {
  OP_NONE = 0,
#define OP(name, groups) OP_##name,
#include "ops.def"
#undef OP
  OP_COUNT
} Op;

const char *op_name(Op op);
uint32_t op_groups(Op op);
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
