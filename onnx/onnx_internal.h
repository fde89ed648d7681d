/* The ONNX importer's shared types: the loaded model (nodes with their
 * inputs and outputs resolved to value slots), the values of one run, and
 * the op table's entry. Only tvk.h's API is used below this: the importer is
 * a client of the library, not part of it. */
#ifndef TVK_ONNX_INTERNAL_H
#define TVK_ONNX_INTERNAL_H

#include <stdarg.h>

#include "onnx.pb-c.h"
#include "tvk_onnx.h"

/* ---- errors: one message per thread (tvk_onnx_last_error) ---- */

/* Formats the message, keeps it for tvk_onnx_last_error and returns s. */
tvk_status onnx_fail(tvk_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current message with more context ("node 'conv1' (Conv): "). */
void onnx_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void onnx_error_clear(void);

/* ---- host tensors: small constants the importer computes with ---- */

/* A tensor in host memory, row-major, in tvk's element layout (bool one
 * byte, float16 as bits). Shape-computing subgraphs (Shape -> Gather ->
 * Concat -> Reshape) are evaluated on these, so they never reach a device. */
typedef struct {
  tvk_dtype dt;
  int ndim;
  int64_t shape[TVK_MAX_DIMS];
  int64_t numel;
  void *data; /* malloc'ed, numel * tvk_dtype_size(dt) bytes (NULL when 0) */
} onnx_host;

void onnx_host_free(onnx_host *h);
/* Element i as a double / an int64 (floats truncated toward zero). */
double onnx_host_get(const onnx_host *h, int64_t i);
int64_t onnx_host_get_int(const onnx_host *h, int64_t i);
void onnx_host_set(onnx_host *h, int64_t i, double v);
/* A new host tensor of dt and shape with zeroed data. */
tvk_status onnx_host_alloc(onnx_host *h, tvk_dtype dt, int ndim, const int64_t *shape);

/* ONNX's TensorProto.DataType -> tvk; false for string, complex and unknown
 * types. */
bool onnx_dtype_to_tvk(int32_t onnx_dt, tvk_dtype *out);
const char *onnx_dtype_name(int32_t onnx_dt);
/* Decodes a TensorProto (raw_data or the typed fields) into h. what names it
 * in errors. External data is read relative to dir (NULL: refused). take:
 * raw_data's buffer itself becomes h->data (tp no longer holds it), so that a
 * weight is not held twice. */
tvk_status onnx_tensor_decode(Onnx__TensorProto *tp, const char *dir, const char *what, bool take,
                              onnx_host *h);
/* Reads a whole file into malloc'ed memory. */
tvk_status onnx_read_file(const char *path, void **data, size_t *size);

/* ---- the loaded model ---- */

typedef struct {
  const Onnx__NodeProto *proto;
  const struct onnx_op *op;
  int nin, nout;
  int *in;     /* value slots; -1 for an omitted optional input ("") */
  int *out;    /* value slots; -1 for an omitted optional output */
  int opset;   /* the ai.onnx opset the model imports */
  bool folded; /* computed at load (onnx_fold_constants): its outputs are constants */
} onnx_node;

/* What a value slot holds before a run: nothing (computed by a node or fed
 * as an input), or a constant (an initializer, a Constant node). */
typedef struct {
  const char *name;
  bool is_const;
  onnx_host host; /* a constant's host copy (small ones, and ints) */
  bool has_host;
  tvk_tensor *tensor; /* a constant's tensor on the context's device */
} onnx_slot;

struct tvk_onnx_model {
  tvk_ctx *ctx;
  Onnx__ModelProto *proto;
  char *dir; /* the model file's folder, for external data; NULL from memory */
  int opset;
  int nslots;
  onnx_slot *slots;
  int nnodes;
  onnx_node *nodes;
  int ninputs, noutputs;
  int *inputs, *outputs; /* slots */
  tvk_onnx_value_info *input_info, *output_info;
};

/* ---- one run ---- */

/* A value during a run: a tensor on the device, its host copy, or both. */
typedef struct {
  tvk_tensor *t;         /* owned by the run unless borrowed */
  bool borrowed;         /* t belongs to the model (a constant) or the caller */
  const onnx_host *host; /* NULL, the model's copy of a constant, or &own */
  onnx_host own;         /* a host value the run computed */
} onnx_value;

typedef struct {
  tvk_onnx_model *m;
  const onnx_node *node;
  onnx_value *values; /* one per slot */
} onnx_run_ctx;

/* The op table's entry: the op's name, its attributes (a comma-separated list
 * of every attribute it reads: any other makes the model fail at load), how
 * many inputs and outputs it takes, and the function that maps it on tvk. */
typedef struct onnx_op {
  const char *name;
  const char *attrs;
  int min_in, max_in;
  int min_out, max_out;
  tvk_status (*run)(onnx_run_ctx *c);
} onnx_op;

const onnx_op *onnx_op_find(const char *name);

/* At load: runs every node whose inputs are all known on the host (constants
 * with a host copy, and the shape of an input whose dims are all fixed) and
 * whose results stay on the host (shape arithmetic), and makes its outputs
 * constants; a run then skips it. A node that fails here fails the load. */
tvk_status onnx_fold_constants(tvk_onnx_model *m);

/* ---- helpers for op functions (onnx_run.c) ---- */

/* The node's input i as a device tensor (uploading a host value on first
 * use); NULL when the input is omitted. Borrowed: do not release. */
tvk_tensor *onnx_in(onnx_run_ctx *c, int i);
/* Whether input i is given. */
bool onnx_has_in(const onnx_run_ctx *c, int i);
/* Input i's host copy, computed (realized and read back) when it is only on
 * the device; NULL with a message when that fails or the input is omitted. */
const onnx_host *onnx_in_host(onnx_run_ctx *c, int i);
/* Input i's shape without running anything. */
int onnx_in_ndim(onnx_run_ctx *c, int i);
const int64_t *onnx_in_shape(onnx_run_ctx *c, int i);
tvk_dtype onnx_in_dtype(onnx_run_ctx *c, int i);
/* Stores a result: takes ownership of t (which may be an error tensor: its
 * status and message become the node's). */
tvk_status onnx_set_out(onnx_run_ctx *c, int i, tvk_tensor *t);
/* Stores a host result (taking its data); it goes to the device only if a
 * later op needs it there. */
tvk_status onnx_set_out_host(onnx_run_ctx *c, int i, onnx_host *h);
/* Whether every given input is on the host (so a shape op can fold). */
bool onnx_all_host(const onnx_run_ctx *c);

/* Attributes of the node. */
const Onnx__AttributeProto *onnx_attr(const onnx_run_ctx *c, const char *name);
int64_t onnx_attr_int(const onnx_run_ctx *c, const char *name, int64_t dflt);
double onnx_attr_float(const onnx_run_ctx *c, const char *name, double dflt);
/* The string, NUL-terminated in buf (truncated to size), or dflt. */
const char *onnx_attr_string(const onnx_run_ctx *c, const char *name, const char *dflt, char *buf,
                             size_t size);
/* The ints of a list attribute: the count (-1 when absent), copied up to max. */
int onnx_attr_ints(const onnx_run_ctx *c, const char *name, int64_t *out, int max);
int onnx_attr_floats(const onnx_run_ctx *c, const char *name, float *out, int max);

/* A tensor's status as the node's error (its message prefixed with the node). */
tvk_status onnx_check(onnx_run_ctx *c, tvk_tensor *t);
/* A scalar constant of dt on the run's context. */
tvk_tensor *onnx_scalar(onnx_run_ctx *c, tvk_dtype dt, double v);
bool onnx_is_float(tvk_dtype dt);
/* A constant for math on like: of like's float dtype, float32 for integers. */
tvk_tensor *onnx_fconst(onnx_run_ctx *c, tvk_tensor *like, double v);
/* Fails the node with TVK_ERR_INVALID_ARG / SHAPE and a message. */
tvk_status onnx_node_fail(onnx_run_ctx *c, tvk_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* x's n elements along axis from start by step (negative steps walk back):
 * movement ops only (flip, shrink, and pad + reshape for steps past 1). */
tvk_tensor *onnx_slice_axis(tvk_tensor *x, int axis, int64_t start, int64_t step, int64_t n);

/* The ints of input i, which must be known to build the graph (a shape,
 * axes, pads): the count, or -1 with the node failed. */
int onnx_in_ints(onnx_run_ctx *c, int i, int64_t *out, int max, const char *what);
/* A one-value int input (k, depth, an axis): dflt when omitted; false with
 * the node failed. */
bool onnx_in_int(onnx_run_ctx *c, int i, int64_t dflt, int64_t *out);
/* 0 .. n-1 (int64) along axis of an ndim-dim tensor, size 1 elsewhere. */
tvk_tensor *onnx_iota(onnx_run_ctx *c, int64_t n, int ndim, int axis);

/* Normalises a possibly negative axis against ndim; -1 when out of range. */
int onnx_axis(int64_t axis, int ndim);

#endif
