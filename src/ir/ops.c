#include "ops.h"

#include <assert.h>

_Static_assert(OP_COUNT <= 128, "OpSet holds 128 ops");
_Static_assert(OP_COUNT <= 256, "ops are stored in a uint8_t");

static const char *const names[OP_COUNT] = {
    [OP_NONE] = "NONE",
#define OP(name, facts) [OP_##name] = #name,
#include "ops.def"
#undef OP
};

/* The derived facts (ops.def): ALU ops are elementwise, elementwise ops are
 * kernel-AST values, values may appear in a kernel AST. */
#define WITH_ALU(g) ((g) | (((g) & (G_UNARY | G_BINARY | G_TERNARY)) ? G_ALU | G_ELEMENTWISE : 0u))
#define WITH_VALUE(g) ((g) | ((g)&G_ELEMENTWISE ? G_AST_VALUE : 0u))
#define WITH_AST(g) ((g) | ((g)&G_AST_VALUE ? G_AST : 0u))
static const uint32_t groups_of[OP_COUNT] = {
#define OP(name, facts) [OP_##name] = WITH_AST(WITH_VALUE(WITH_ALU(facts))),
#include "ops.def"
#undef OP
};

const char *op_name(Op op) {
  assert(op < OP_COUNT);
  return names[op];
}

uint32_t op_groups(Op op) {
  assert(op < OP_COUNT);
  return groups_of[op];
}

int op_arity(Op op) {
  uint32_t g = op_groups(op);
  return g & G_UNARY ? 1 : g & G_BINARY ? 2 : g & G_TERNARY ? 3 : 0;
}

OpSet opset_of_groups(uint32_t groups) {
  OpSet s = {{0, 0}};
  for (int op = 1; op < OP_COUNT; op++)
    if (groups_of[op] & groups) opset_add(&s, (Op)op);
  return s;
}
