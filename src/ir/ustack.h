/* A growable stack of UOp pointers, for the iterative graph walks that must
 * not recurse (graphs can be deeper than the C stack). Zero-initialise; free
 * v when done. */
#ifndef TVK_IR_USTACK_H
#define TVK_IR_USTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "ir/uop.h"
#include "ir/vec.h"

typedef struct {
  UOp **v;
  size_t n, cap;
} UStack;

/* false on out of memory (the stack is unchanged). */
static inline bool ustack_push(UStack *s, UOp *u) { return VEC_PUSH(s->v, s->n, s->cap, u); }

#endif
