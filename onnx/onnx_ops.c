/* Finding an op by its ONNX name in the families' tables. */
#include <string.h>

#include "onnx_ops.h"

const onnx_op *onnx_op_find(const char *name) {
  const onnx_op *tables[] = {onnx_ops_math, onnx_ops_shape, onnx_ops_nn,     onnx_ops_index,
                             onnx_ops_loss, onnx_ops_quant, onnx_ops_einsum, onnx_ops_rnn};
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
    for (const onnx_op *op = tables[t]; op->name; op++)
      if (!strcmp(op->name, name)) return op;
  return NULL;
}
