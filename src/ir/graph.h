/* The tensor graph: what tvk.h calls build and the scheduler reads. This is
 * the contract between the frontend (which builds it, src/frontend/) and the
 * scheduler (which turns it into kernels, src/schedule/), as codegen/kernel.h
 * is between the scheduler and codegen. A tensor holds one node (retained);
 * the nodes are:
 *
 *   VIEW(BUFFER)            realized data: BUFFER has the element dtype and
 *                           arg_ints(id, numel) (graph_buffer); the VIEW's
 *                           ShapeTracker gives the tensor's shape and how it
 *                           reads the buffer
 *   VIEW(CONST)             a constant: CONST (no sources) holds the value, the
 *                           VIEW gives the shape (all strides 0; masked by pads)
 *   VIEW(x)                 any movement of x; a VIEW never sits on a VIEW (the
 *                           frontend composes them: graph_view)
 *   ALU(a, b, ...)          elementwise: every source has the same shape, and the
 *                           same dtype except WHERE's bool condition
 *   CAST(x)                 elementwise conversion
 *   REDUCE_AXIS(x)          arg_reduce(op, axes), op ADD/MUL/MAX; reduced axes
 *                           keep size 1 (keepdim=false is a reshape on top)
 *   CONTIGUOUS(x)           x, materialised in row-major order
 *   VIEW(ARANGE)            tvk_arange's leaf: element i is i (int32), computed
 *                           by the kernels that read it, never stored
 *   VALUE, VIEW(VALUE)      a float32 scalar given to the kernels at launch
 *                           (tvk_scalar's): arg_ints(serial, bits) (graph_value)
 *   ASSIGN(VIEW(BUFFER), v) tvk_assign: v written into that buffer in place
 *   CAST(x) to x's own dtype tvk_detach: x, with no gradient through it
 *   COPY(x)                 tvk_to_device: x in another device's memory,
 *                           arg_int(device); x is data on its device, or a
 *                           node the scheduler materialises there first, or
 *                           of no device (constants: computed on the target)
 *   MULTI(p0, p1, ...)      tvk_shard: the parts on their devices, cut along
 *                           arg_int(axis) or (-1) replicated; its shape is
 *                           the whole tensor's. The frontend turns a graph
 *                           over it into per-device graphs before it is
 *                           scheduled (frontend/shard.c)
 *
 * Shapes are derived (graph_shape): VIEW from its tracker, REDUCE_AXIS from its
 * source with 1s at the axes, everything else from its first source that has one.
 *
 * A BUFFER names memory that the frontend owns; the graph only knows its id,
 * dtype and element count. BUFFER, CONST, DEFINE_VAR and ARANGE are the leaves:
 * data that needs no kernel (graph_is_leaf). So is VALUE.
 */
#ifndef TVK_IR_GRAPH_H
#define TVK_IR_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/uop.h"
#include "ir/view.h"

/* BUFFER(id) of numel elements of s in the memory of device `device` (an
 * index of the frontend's context; UOp.device) (autoreleased; NULL on out of
 * memory). */
UOp *graph_buffer_on(UCtx *ctx, ScalarType s, int64_t id, int64_t numel, int device);
/* ... on the context's first device. */
static inline UOp *graph_buffer(UCtx *ctx, ScalarType s, int64_t id, int64_t numel) {
  return graph_buffer_on(ctx, s, id, numel, 0);
}
/* COPY(x): x's value in the memory of device `device` (autoreleased; NULL on
 * out of memory). */
UOp *graph_copy(UOp *x, int device);
/* MULTI(parts[0..n)): the parts (each on its own device) of one tensor cut
 * along `axis`, or -1: each a full copy (autoreleased; NULL on out of
 * memory). */
UOp *graph_multi(int n, UOp *const *parts, int axis);
static inline int64_t graph_buffer_id(const UOp *buffer) { return buffer->arg.ints.v[0]; }
static inline int64_t graph_buffer_numel(const UOp *buffer) { return buffer->arg.ints.v[1]; }

/* VALUE: the float32 scalar v, the node's own through `serial` (autoreleased;
 * NULL on out of memory). */
UOp *graph_value(UCtx *ctx, uint64_t serial, float v);
static inline uint32_t graph_value_bits(const UOp *value) { return (uint32_t)value->arg.ints.v[1]; }

/* Leaves of the tensor graph: data that needs no kernel. */
static inline bool graph_is_leaf(const UOp *u) { return op_in((Op)u->op, G_LEAF); }

/* tvk_detach's marker: a CAST that changes nothing (uop_cast never makes one). */
static inline bool graph_is_detach(const UOp *u) {
  return u->op == OP_CAST && u->nsrc == 1 && dt_eq(u->dtype, u->src[0]->dtype);
}

/* Every node has the device its data lives on (UOp.device): a BUFFER's
 * (graph_buffer_on), a COPY's, else its sources'. */

/* Shape of a tensor-graph node (see above); returns ndim. */
int graph_shape(UOp *u, int64_t *shape);
/* Elements of a node's shape. */
sint graph_numel(UOp *u);
/* VIEW(x, st) composing with a VIEW x already is (autoreleased; st copied).
 * NULL on out of memory, and for a NULL x or st (a builder that ran out). */
UOp *graph_view(UOp *x, const ShapeTracker *st);

#endif
