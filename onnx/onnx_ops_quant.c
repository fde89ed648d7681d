/* ONNX's linear quantization: QuantizeLinear, DequantizeLinear and
 * DynamicQuantizeLinear, per tensor or per axis, into uint8 or int8. Rounding
 * is to nearest even (tvk_round), then saturation to the type's range. */
#include "onnx_internal.h"
#include "onnx_ops.h"

#define IN(i) onnx_in(c, i)
#define CTX (c->m->ctx)

/* A per-axis parameter (a 1-D scale or zero point) shaped to broadcast along
 * axis of an ndim-dim input; a scalar stays. */
static tvk_tensor *along(onnx_run_ctx *c, tvk_tensor *p, int ndim) {
  if (tvk_ndim(p) == 0 || (tvk_ndim(p) == 1 && tvk_shape(p)[0] == 1)) return p;
  int axis = onnx_axis(onnx_attr_int(c, "axis", 1), ndim);
  if (axis < 0 || tvk_ndim(p) != 1) return p; /* the op reports the mismatch */
  int64_t shape[TVK_MAX_DIMS];
  for (int i = 0; i < ndim; i++) shape[i] = i == axis ? tvk_shape(p)[0] : 1;
  return tvk_reshape(p, ndim, shape);
}

static tvk_tensor *saturate_round(onnx_run_ctx *c, tvk_tensor *v, tvk_dtype dt) {
  double lo = dt == TVK_INT8 ? -128 : 0, hi = dt == TVK_INT8 ? 127 : 255;
  tvk_dtype f = tvk_dtype_of(v);
  v = tvk_minimum(tvk_maximum(tvk_round(v), onnx_scalar(c, f, lo)), onnx_scalar(c, f, hi));
  return tvk_cast(v, dt);
}

static tvk_status op_quantize(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0);
  int nd = tvk_ndim(x);
  tvk_dtype zdt = onnx_has_in(c, 2) ? onnx_in_dtype(c, 2) : TVK_UINT8;
  if (zdt != TVK_UINT8 && zdt != TVK_INT8)
    return onnx_node_fail(c, TVK_ERR_DTYPE, "zero point of %s (uint8 or int8)",
                          tvk_dtype_name(zdt));
  tvk_tensor *v = tvk_div(x, along(c, IN(1), nd));
  v = tvk_round(v);
  if (onnx_has_in(c, 2)) v = tvk_add(v, tvk_cast(along(c, IN(2), nd), tvk_dtype_of(v)));
  return onnx_set_out(c, 0, saturate_round(c, v, zdt));
}

static tvk_status op_dequantize(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0);
  int nd = tvk_ndim(x);
  tvk_tensor *scale = along(c, IN(1), nd);
  tvk_dtype f = tvk_dtype_of(scale);
  tvk_tensor *v = tvk_cast(x, f);
  if (onnx_has_in(c, 2)) v = tvk_sub(v, tvk_cast(along(c, IN(2), nd), f));
  return onnx_set_out(c, 0, tvk_mul(v, scale));
}

/* y_scale = (max(0, max x) - min(0, min x)) / 255, y_zero_point =
 * saturate(round(-min / scale)), y = saturate(round(x / scale) + zp). */
static tvk_status op_dynamic_quantize(onnx_run_ctx *c) {
  tvk_tensor *x = IN(0);
  tvk_dtype f = tvk_dtype_of(x);
  tvk_tensor *zero = onnx_scalar(c, f, 0);
  tvk_tensor *lo = tvk_minimum(tvk_min(x, 0, NULL, false), zero);
  tvk_tensor *hi = tvk_maximum(tvk_max(x, 0, NULL, false), zero);
  tvk_tensor *scale = tvk_div(tvk_sub(hi, lo), onnx_scalar(c, f, 255));
  tvk_tensor *zp = saturate_round(c, tvk_neg(tvk_div(lo, scale)), TVK_UINT8);
  tvk_tensor *y = tvk_add(tvk_round(tvk_div(x, scale)), tvk_cast(zp, f));
  tvk_status s = onnx_set_out(c, 0, saturate_round(c, y, TVK_UINT8));
  if (s == TVK_OK) s = onnx_set_out(c, 1, scale);
  if (s == TVK_OK) s = onnx_set_out(c, 2, zp);
  return s;
}

/* x - zero_point in int32 (the zero point absent: x). A 1-D zero point
 * applies along `axis` of x's ndim dims (MatMulInteger: A's rows, B's
 * columns). */
static tvk_tensor *on_axis(tvk_tensor *z, int nd, int axis) {
  if (tvk_ndim(z) != 1 || tvk_shape(z)[0] == 1 || nd < 1) return z;
  int64_t shape[TVK_MAX_DIMS];
  int a = axis < 0 ? axis + nd : axis;
  for (int i = 0; i < nd; i++) shape[i] = i == a ? tvk_shape(z)[0] : 1;
  return tvk_reshape(z, nd, shape);
}

static tvk_tensor *centred(onnx_run_ctx *c, int in, int zp, int axis) {
  tvk_tensor *x = tvk_cast(IN(in), TVK_INT32);
  if (!onnx_has_in(c, zp)) return x;
  return tvk_sub(x, on_axis(tvk_cast(IN(zp), TVK_INT32), tvk_ndim(x), axis));
}

/* (A - a_zero) @ (B - b_zero) in int32. */
static tvk_status op_matmul_integer(onnx_run_ctx *c) {
  tvk_tensor *a = centred(c, 0, 2, -2), *b = centred(c, 1, 3, -1);
  return onnx_set_out(c, 0, tvk_matmul(a, b));
}

/* y = saturate(round((a - a_zero)(b - b_zero) a_scale b_scale / y_scale) +
 * y_zero): the product exact in int32, then scaled once. */
static tvk_status op_qlinear_matmul(onnx_run_ctx *c) {
  tvk_tensor *a = centred(c, 0, 2, -2), *b = centred(c, 3, 5, -1);
  tvk_tensor *acc = tvk_cast(tvk_matmul(a, b), TVK_FLOAT32);
  int nd = tvk_ndim(acc);
  tvk_tensor *scale = tvk_div(tvk_mul(on_axis(IN(1), nd, -2), on_axis(IN(4), nd, -1)), IN(6));
  tvk_dtype zdt = onnx_in_dtype(c, 7);
  tvk_tensor *v =
      tvk_add(tvk_round(tvk_mul(acc, tvk_cast(scale, TVK_FLOAT32))), tvk_cast(IN(7), TVK_FLOAT32));
  return onnx_set_out(c, 0, saturate_round(c, v, zdt));
}

const onnx_op onnx_ops_quant[] = {
    {"DequantizeLinear", "axis", 2, 3, 1, 1, op_dequantize},
    {"DynamicQuantizeLinear", "", 1, 1, 3, 3, op_dynamic_quantize},
    {"MatMulInteger", "", 2, 4, 1, 1, op_matmul_integer},
    {"QLinearMatMul", "", 8, 8, 1, 1, op_qlinear_matmul},
    {"QuantizeLinear", "axis", 2, 3, 1, 1, op_quantize},
    {NULL, NULL, 0, 0, 0, 0, NULL},
};
