/* sint expressions as UOps of another context: the bridge from a symbolic
 * view to the index arithmetic of a kernel (codegen/view_index.c). sint.h is
 * the interface of sints; this header adds what needs UOps. */
#ifndef TVK_IR_SINT_EXPR_H
#define TVK_IR_SINT_EXPR_H

#include "sint.h"
#include "uop.h"

/* s as a UOp of ctx with integer dtype dt (autoreleased): a CONST for an
 * integer, else its expression with each variable an int32 DEFINE_VAR with
 * the variable's name and range (a kernel's launch value; cast to dt where dt
 * is wider), so the simplifier knows its bounds and two expressions over one
 * variable share the node. NULL for SINT_NONE, or out of memory. */
UOp *sint_uop(UCtx *ctx, DType dt, sint s);

#endif
