/* The op tables, one per family of ops, each next to its functions; a table
 * ends with an entry whose name is NULL. onnx_op_find searches them all. */
#ifndef TVK_ONNX_OPS_H
#define TVK_ONNX_OPS_H

#include "onnx_internal.h"

extern const onnx_op onnx_ops_math[];
extern const onnx_op onnx_ops_shape[];
extern const onnx_op onnx_ops_nn[];
extern const onnx_op onnx_ops_index[];
extern const onnx_op onnx_ops_loss[];
extern const onnx_op onnx_ops_quant[];
extern const onnx_op onnx_ops_einsum[];
extern const onnx_op onnx_ops_rnn[];

#endif
