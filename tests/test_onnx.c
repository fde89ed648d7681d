/* The ONNX importer as an app uses it (tvk.h, tvk_onnx.h): models built here
 * with protobuf-c from onnx.proto's own C types, loaded from memory and from
 * files, run against plain loops in double precision; the error paths (a
 * missing file, unsupported ops and attributes, wrong inputs) and a fuzz of
 * truncated and bit-flipped files, which must fail cleanly and never crash
 * (the sanitizer build runs it under ASan + UBSan). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "onnx.pb-c.h"
#include "tvk.h"
#include "tvk_onnx.h"

static const char *device = "CPU";

/* ---- building models: every allocation goes in one arena, freed at once ---- */

static void *arena[4096];
static int narena;

static void *alloc(size_t n) {
  void *p = calloc(1, n);
  assert_non_null(p);
  assert_true(narena < 4096);
  arena[narena++] = p;
  return p;
}

static void arena_free(void) {
  while (narena) free(arena[--narena]);
}

static char *str(const char *s) {
  char *p = alloc(strlen(s) + 1);
  memcpy(p, s, strlen(s) + 1);
  return p;
}

static Onnx__ValueInfoProto *vinfo(const char *name, int elem, int ndim, const int64_t *dims,
                                   const char *const *dim_names) {
  Onnx__ValueInfoProto *v = alloc(sizeof *v);
  onnx__value_info_proto__init(v);
  v->name = str(name);
  Onnx__TypeProto *t = alloc(sizeof *t);
  onnx__type_proto__init(t);
  Onnx__TypeProto__Tensor *tt = alloc(sizeof *tt);
  onnx__type_proto__tensor__init(tt);
  tt->has_elem_type = 1;
  tt->elem_type = elem;
  Onnx__TensorShapeProto *sh = alloc(sizeof *sh);
  onnx__tensor_shape_proto__init(sh);
  sh->n_dim = (size_t)ndim;
  sh->dim = alloc(sizeof *sh->dim * (size_t)(ndim + 1));
  for (int i = 0; i < ndim; i++) {
    Onnx__TensorShapeProto__Dimension *d = alloc(sizeof *d);
    onnx__tensor_shape_proto__dimension__init(d);
    if (dim_names && dim_names[i]) {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      d->dim_param = str(dim_names[i]);
    } else {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      d->dim_value = dims[i];
    }
    sh->dim[i] = d;
  }
  tt->shape = sh;
  t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  t->tensor_type = tt;
  v->type = t;
  return v;
}

static Onnx__TensorProto *tensor(const char *name, int elem, int ndim, const int64_t *dims,
                                 const void *data, size_t bytes) {
  Onnx__TensorProto *t = alloc(sizeof *t);
  onnx__tensor_proto__init(t);
  t->name = str(name);
  t->has_data_type = 1;
  t->data_type = elem;
  t->n_dims = (size_t)ndim;
  t->dims = alloc(sizeof(int64_t) * (size_t)(ndim + 1));
  memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ndim);
  t->has_raw_data = 1;
  t->raw_data.len = bytes;
  t->raw_data.data = alloc(bytes + 1);
  memcpy(t->raw_data.data, data, bytes);
  return t;
}

static Onnx__NodeProto *node(const char *op, const char *name, const char *ins, const char *outs) {
  Onnx__NodeProto *n = alloc(sizeof *n);
  onnx__node_proto__init(n);
  n->op_type = str(op);
  n->name = str(name);
  n->domain = str("");
  const char *lists[2] = {ins, outs};
  for (int k = 0; k < 2; k++) {
    char **v = alloc(sizeof(char *) * 16);
    size_t cnt = 0;
    char *copy = str(lists[k]);
    for (char *save, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
      v[cnt++] = strcmp(tok, "-") ? tok : str(""); /* "-": an omitted optional input */
    if (k == 0)
      n->input = v, n->n_input = cnt;
    else
      n->output = v, n->n_output = cnt;
  }
  n->attribute = alloc(sizeof *n->attribute * 8);
  return n;
}

static void attr_ints(Onnx__NodeProto *n, const char *name, int count, const int64_t *v) {
  Onnx__AttributeProto *a = alloc(sizeof *a);
  onnx__attribute_proto__init(a);
  a->name = str(name);
  a->has_type = 1;
  if (count == 1) {
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v[0];
  } else {
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a->n_ints = (size_t)count;
    a->ints = alloc(sizeof(int64_t) * (size_t)count);
    memcpy(a->ints, v, sizeof(int64_t) * (size_t)count);
  }
  n->attribute[n->n_attribute++] = a;
}

typedef struct {
  Onnx__NodeProto *nodes[16];
  int nnodes;
  Onnx__TensorProto *inits[16];
  int ninits;
  Onnx__ValueInfoProto *ins[8], *outs[8];
  int nins, nouts;
  int opset;
} graph_def;

/* Serialises the graph as a model; the bytes are the arena's. */
static uint8_t *pack(const graph_def *g, size_t *len) {
  Onnx__GraphProto *gp = alloc(sizeof *gp);
  onnx__graph_proto__init(gp);
  gp->name = str("test");
  gp->n_node = (size_t)g->nnodes;
  gp->node = (Onnx__NodeProto **)g->nodes;
  gp->n_initializer = (size_t)g->ninits;
  gp->initializer = (Onnx__TensorProto **)g->inits;
  gp->n_input = (size_t)g->nins;
  gp->input = (Onnx__ValueInfoProto **)g->ins;
  gp->n_output = (size_t)g->nouts;
  gp->output = (Onnx__ValueInfoProto **)g->outs;
  Onnx__OperatorSetIdProto *os = alloc(sizeof *os);
  onnx__operator_set_id_proto__init(os);
  os->domain = str("");
  os->has_version = 1;
  os->version = g->opset ? g->opset : 17;
  Onnx__OperatorSetIdProto **osv = alloc(sizeof *osv);
  osv[0] = os;
  Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
  m.has_ir_version = 1;
  m.ir_version = 8;
  m.n_opset_import = 1;
  m.opset_import = osv;
  m.graph = gp;
  *len = onnx__model_proto__get_packed_size(&m);
  uint8_t *buf = alloc(*len + 1);
  assert_int_equal(onnx__model_proto__pack(&m, buf), *len);
  return buf;
}

/* y = relu(x @ W + b) for x (batch, 4), W (4, 3), b (3), and y2 = y reshaped
 * to (Shape(x)[0], 3) through a shape subgraph that folds on the host. */
static const float W[12] = {0.5f, -1, 2, 1.5f, 0.25f, -0.5f, -2, 1, 0.75f, 1, -0.25f, 0.5f};
static const float B[3] = {0.1f, -0.2f, 0.3f};

static uint8_t *mlp_model(size_t *len) {
  graph_def g = {0};
  int64_t wd[2] = {4, 3}, bd[1] = {3}, one = 1, three = 3, zero = 0;
  g.inits[g.ninits++] = tensor("W", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, wd, W, sizeof W);
  g.inits[g.ninits++] = tensor("b", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, bd, B, sizeof B);
  g.inits[g.ninits++] = tensor("zero", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, &one, &zero, 8);
  g.inits[g.ninits++] = tensor("three", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, &one, &three, 8);
  g.inits[g.ninits++] = tensor("axes0", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, &one, &zero, 8);
  g.nodes[g.nnodes++] = node("MatMul", "mm", "x,W", "xw");
  g.nodes[g.nnodes++] = node("Add", "bias", "xw,b", "pre");
  g.nodes[g.nnodes++] = node("Relu", "act", "pre", "y");
  g.nodes[g.nnodes++] = node("Shape", "shape", "x", "xs");
  g.nodes[g.nnodes++] = node("Gather", "batch", "xs,zero", "n");
  g.nodes[g.nnodes++] = node("Unsqueeze", "n1", "n,axes0", "n_1");
  g.nodes[g.nnodes++] = node("Concat", "cat", "n_1,three", "shape2");
  attr_ints(g.nodes[g.nnodes - 1], "axis", 1, &zero);
  g.nodes[g.nnodes++] = node("Reshape", "again", "y,shape2", "y2");
  int64_t xd[2] = {0, 4};
  const char *xn[2] = {"batch", NULL};
  g.ins[g.nins++] = vinfo("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd, xn);
  int64_t yd[2] = {0, 3};
  g.outs[g.nouts++] = vinfo("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, yd, xn);
  g.outs[g.nouts++] = vinfo("y2", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, yd, xn);
  return pack(&g, len);
}

static void check_mlp(tvk_onnx_model *m, tvk_ctx *ctx, int batch) {
  float x[4 * 8], y[3 * 8];
  assert_true(batch <= 8);
  for (int i = 0; i < batch * 4; i++) x[i] = (float)((i * 7) % 11) * 0.25f - 1.2f;
  int64_t xs[2] = {batch, 4};
  tvk_tensor *in = tvk_from_data(ctx, TVK_FLOAT32, 2, xs, x), *out[2];
  assert_int_equal(tvk_onnx_run(m, 1, &in, 2, out), TVK_OK);
  assert_int_equal(tvk_realize(2, out), TVK_OK);
  for (int k = 0; k < 2; k++) {
    assert_int_equal(tvk_ndim(out[k]), 2);
    assert_int_equal(tvk_shape(out[k])[0], batch);
    assert_int_equal(tvk_shape(out[k])[1], 3);
    assert_int_equal(tvk_to_host(out[k], y, sizeof(float) * 3 * (size_t)batch), TVK_OK);
    for (int r = 0; r < batch; r++)
      for (int j = 0; j < 3; j++) {
        double acc = B[j];
        for (int i = 0; i < 4; i++) acc += (double)x[r * 4 + i] * W[i * 3 + j];
        assert_float_equal(y[r * 3 + j], acc > 0 ? acc : 0, 1e-5);
      }
    tvk_release(out[k]);
  }
  tvk_release(in);
}

static void test_run_from_memory(void **state) {
  (void)state;
  tvk_ctx *ctx;
  assert_int_equal(tvk_ctx_create(device, &ctx), TVK_OK);
  size_t len;
  uint8_t *buf = mlp_model(&len);
  tvk_onnx_model *m;
  assert_int_equal(tvk_onnx_load_memory(ctx, buf, len, &m), TVK_OK);
  assert_int_equal(tvk_onnx_input_count(m), 1);
  assert_int_equal(tvk_onnx_output_count(m), 2);
  tvk_onnx_value_info vi;
  assert_int_equal(tvk_onnx_input_info(m, 0, &vi), TVK_OK);
  assert_string_equal(vi.name, "x");
  assert_int_equal(vi.dtype, TVK_FLOAT32);
  assert_int_equal(vi.ndim, 2);
  assert_int_equal(vi.shape[0], -1);
  assert_string_equal(vi.dim_names[0], "batch");
  assert_int_equal(vi.shape[1], 4);
  assert_null(vi.dim_names[1]);
  assert_int_equal(tvk_onnx_output_info(m, 1, &vi), TVK_OK);
  assert_string_equal(vi.name, "y2");
  assert_int_equal(tvk_onnx_output_info(m, 2, &vi), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_onnx_last_error(), "2 outputs"));
  /* an open dim takes any size: two batch sizes on one model */
  check_mlp(m, ctx, 2);
  check_mlp(m, ctx, 5);
  /* the shape subgraph ran on the host: the whole model is one kernel */
  tvk_stats_reset(ctx);
  check_mlp(m, ctx, 3);
  tvk_stats st;
  tvk_stats_get(ctx, &st);
  assert_int_equal(st.kernels_run, 1);
  tvk_onnx_destroy(m);
  tvk_ctx_destroy(ctx);
  arena_free();
}

static void test_run_from_file_and_tensor_files(void **state) {
  (void)state;
  tvk_ctx *ctx;
  assert_int_equal(tvk_ctx_create(device, &ctx), TVK_OK);
  const char *tmp = getenv("TMPDIR");
  char tdir[512];
  snprintf(tdir, sizeof tdir, "%s/tvk_onnx_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  char *d = mkdtemp(tdir);
  assert_non_null(d);
  char path[600];
  size_t len;
  uint8_t *buf = mlp_model(&len);
  snprintf(path, sizeof path, "%s/model.onnx", d);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(buf, 1, len, f), len);
  fclose(f);
  tvk_onnx_model *m;
  assert_int_equal(tvk_onnx_load(ctx, path, &m), TVK_OK);
  check_mlp(m, ctx, 4);
  tvk_onnx_destroy(m);
  unlink(path);

  /* a TensorProto file, as the test suite's input_0.pb */
  int64_t dims[2] = {4, 3};
  Onnx__TensorProto *tp = tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, dims, W, sizeof W);
  size_t tlen = onnx__tensor_proto__get_packed_size(tp);
  uint8_t *tbuf = alloc(tlen);
  onnx__tensor_proto__pack(tp, tbuf);
  snprintf(path, sizeof path, "%s/w.pb", d);
  f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(tbuf, 1, tlen, f), tlen);
  fclose(f);
  tvk_tensor *t;
  assert_int_equal(tvk_onnx_load_tensor(ctx, path, &t), TVK_OK);
  float back[12];
  assert_int_equal(tvk_to_host(t, back, sizeof back), TVK_OK);
  assert_memory_equal(back, W, sizeof W);
  tvk_release(t);
  unlink(path);
  /* a truncated one is an error, not a crash */
  assert_int_equal(tvk_onnx_load_tensor_memory(ctx, tbuf, tlen - 5, &t), TVK_ERR_INVALID_ARG);
  assert_null(t);
  assert_true(strlen(tvk_onnx_last_error()) > 0);
  rmdir(d);
  tvk_ctx_destroy(ctx);
  arena_free();
}

/* A weight past the host-copy size: on the CPU the tensor uses the parsed
 * bytes in place (tvk_from_host_ptr, freed with the model), elsewhere a copy;
 * either way the product must be right and nothing leak (ASan build). */
static void test_big_weight(void **state) {
  (void)state;
  enum { K = 64, N = 100 };
  static float w[K * N], x[2 * K];
  for (int i = 0; i < K * N; i++) w[i] = (float)((i * 37) % 19) * 0.125f - 1;
  for (int i = 0; i < 2 * K; i++) x[i] = (float)((i * 11) % 7) * 0.5f - 1.5f;
  graph_def g = {0};
  int64_t wd[2] = {K, N}, xd[2] = {2, K}, yd[2] = {2, N};
  g.inits[g.ninits++] = tensor("W", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, wd, w, sizeof w);
  g.nodes[g.nnodes++] = node("MatMul", "mm", "x,W", "y");
  g.ins[g.nins++] = vinfo("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd, NULL);
  g.outs[g.nouts++] = vinfo("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, yd, NULL);
  size_t len;
  uint8_t *buf = pack(&g, &len);
  tvk_ctx *ctx;
  assert_int_equal(tvk_ctx_create(device, &ctx), TVK_OK);
  tvk_onnx_model *m;
  assert_int_equal(tvk_onnx_load_memory(ctx, buf, len, &m), TVK_OK);
  tvk_tensor *in = tvk_from_data(ctx, TVK_FLOAT32, 2, xd, x), *out;
  for (int rep = 0; rep < 2; rep++) { /* the weight is reused by a second run */
    assert_int_equal(tvk_onnx_run(m, 1, &in, 1, &out), TVK_OK);
    static float y[2 * N];
    assert_int_equal(tvk_to_host(out, y, sizeof y), TVK_OK);
    for (int r = 0; r < 2; r++)
      for (int j = 0; j < N; j++) {
        double acc = 0;
        for (int k = 0; k < K; k++) acc += (double)x[r * K + k] * w[k * N + j];
        assert_float_equal(y[r * N + j], acc, 1e-4);
      }
    tvk_release(out);
  }
  tvk_release(in);
  tvk_onnx_destroy(m);
  tvk_ctx_destroy(ctx);
  arena_free();
}

/* Conv -> BatchNormalization -> Relu, as exporters write a CNN block, is one
 * kernel (docs/onnx.md): the importer's ops fuse like hand-written ones. */
static void test_conv_bn_relu_fuses(void **state) {
  (void)state;
  enum { C = 3, O = 4, H = 6 };
  static float w[O * C * 9], x[C * H * H], bias[O], sc[O], sh[O], mu[O], var[O];
  for (int i = 0; i < O * C * 9; i++) w[i] = (float)((i * 13) % 9) * 0.25f - 1;
  for (int i = 0; i < C * H * H; i++) x[i] = (float)((i * 7) % 11) * 0.2f - 1;
  for (int o = 0; o < O; o++)
    bias[o] = 0.1f * (float)o, sc[o] = 1 + 0.5f * (float)o, sh[o] = -0.25f * (float)o,
    mu[o] = 0.3f - 0.2f * (float)o, var[o] = 0.5f + (float)o;
  graph_def g = {0};
  int64_t wd[4] = {O, C, 3, 3}, od[1] = {O}, xd[4] = {1, C, H, H}, yd[4] = {1, O, H - 2, H - 2};
  g.inits[g.ninits++] = tensor("W", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, wd, w, sizeof w);
  const char *names[5] = {"B", "scale", "shift", "mean", "var"};
  const float *vals[5] = {bias, sc, sh, mu, var};
  for (int k = 0; k < 5; k++)
    g.inits[g.ninits++] =
        tensor(names[k], ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, od, vals[k], sizeof bias);
  g.nodes[g.nnodes++] = node("Conv", "conv", "x,W,B", "c");
  g.nodes[g.nnodes++] = node("BatchNormalization", "bn", "c,scale,shift,mean,var", "n");
  g.nodes[g.nnodes++] = node("Relu", "relu", "n", "y");
  g.ins[g.nins++] = vinfo("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, xd, NULL);
  g.outs[g.nouts++] = vinfo("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, yd, NULL);
  size_t len;
  uint8_t *buf = pack(&g, &len);
  tvk_ctx *ctx;
  assert_int_equal(tvk_ctx_create(device, &ctx), TVK_OK);
  tvk_onnx_model *m;
  assert_int_equal(tvk_onnx_load_memory(ctx, buf, len, &m), TVK_OK);
  tvk_tensor *in = tvk_from_data(ctx, TVK_FLOAT32, 4, xd, x), *out;
  assert_int_equal(tvk_realize(1, &in), TVK_OK);
  assert_int_equal(tvk_onnx_run(m, 1, &in, 1, &out), TVK_OK);
  tvk_stats_reset(ctx);
  assert_int_equal(tvk_realize(1, &out), TVK_OK);
  tvk_stats st;
  tvk_stats_get(ctx, &st);
  assert_int_equal(st.kernels_run, 1);
  static float y[O * (H - 2) * (H - 2)];
  assert_int_equal(tvk_to_host(out, y, sizeof y), TVK_OK);
  for (int o = 0; o < O; o++)
    for (int p = 0; p < H - 2; p++)
      for (int q = 0; q < H - 2; q++) {
        double acc = bias[o];
        for (int c = 0; c < C; c++)
          for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
              acc += (double)x[(c * H + p + a) * H + q + b] * w[((o * C + c) * 3 + a) * 3 + b];
        double n = (acc - mu[o]) / sqrt(var[o] + 1e-5) * sc[o] + sh[o];
        assert_float_equal(y[(o * (H - 2) + p) * (H - 2) + q], n > 0 ? n : 0, 1e-4);
      }
  tvk_release(out);
  tvk_release(in);
  tvk_onnx_destroy(m);
  tvk_ctx_destroy(ctx);
  arena_free();
}

/* Einsum against brute force: every assignment of values to the labels,
 * products accumulated into the output's entry (equations written out in
 * full here; the model gets the short forms). */
static void attr_str(Onnx__NodeProto *n, const char *name, const char *v) {
  Onnx__AttributeProto *a = alloc(sizeof *a);
  onnx__attribute_proto__init(a);
  a->name = str(name);
  a->has_type = 1;
  a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
  a->has_s = 1;
  a->s.len = strlen(v);
  a->s.data = (uint8_t *)str(v);
  n->attribute[n->n_attribute++] = a;
}

static void check_einsum(tvk_ctx *ctx, const char *eq, const char *full, int n,
                         const char *const *terms, const char *outl) {
  /* label sizes: a=2 b=3 c=4 d=2 */
  int64_t lsize[26] = {['a' - 'a'] = 2, ['b' - 'a'] = 3, ['c' - 'a'] = 4, ['d' - 'a'] = 2};
  graph_def g = {0};
  static float data[3][64];
  tvk_tensor *ins[3];
  char names[3][4] = {"x0", "x1", "x2"}, list[16] = "";
  for (int i = 0; i < n; i++) {
    int64_t dims[8];
    int nd = (int)strlen(terms[i]);
    int64_t cnt = 1;
    for (int k = 0; k < nd; k++) cnt *= dims[k] = lsize[terms[i][k] - 'a'];
    for (int64_t k = 0; k < cnt; k++) data[i][k] = (float)((k * 7 + i * 3) % 5) - 2;
    g.ins[g.nins++] = vinfo(names[i], ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, nd, dims, NULL);
    ins[i] = tvk_from_data(ctx, TVK_FLOAT32, nd, dims, data[i]);
    strcat(list, i ? "," : ""), strcat(list, names[i]);
  }
  int no = (int)strlen(outl);
  int64_t od[8], ocnt = 1;
  for (int k = 0; k < no; k++) ocnt *= od[k] = lsize[outl[k] - 'a'];
  g.nodes[g.nnodes] = node("Einsum", "e", list, "y");
  attr_str(g.nodes[g.nnodes++], "equation", eq);
  g.outs[g.nouts++] = vinfo("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, no, od, NULL);
  size_t len;
  uint8_t *buf = pack(&g, &len);
  tvk_onnx_model *m;
  assert_int_equal(tvk_onnx_load_memory(ctx, buf, len, &m), TVK_OK);
  tvk_tensor *out;
  assert_int_equal(tvk_onnx_run(m, n, ins, 1, &out), TVK_OK);
  assert_int_equal(tvk_ndim(out), no);
  static float got[64];
  double want[64] = {0};
  assert_int_equal(tvk_to_host(out, got, sizeof(float) * (size_t)ocnt), TVK_OK);
  /* all labels of the full equation, each over its size */
  char labels[8] = "";
  int nl = 0;
  for (const char *p = full; *p; p++)
    if (*p >= 'a' && *p <= 'z' && !strchr(labels, *p) && nl < 7) labels[nl++] = *p, labels[nl] = 0;
  int v[26] = {0};
  for (;;) {
    double prod = 1;
    for (int i = 0; i < n; i++) {
      int64_t at = 0;
      for (const char *p = terms[i]; *p; p++) at = at * lsize[*p - 'a'] + v[*p - 'a'];
      prod *= data[i][at];
    }
    int64_t o = 0;
    for (const char *p = outl; *p; p++) o = o * lsize[*p - 'a'] + v[*p - 'a'];
    want[o] += prod;
    int k = nl - 1;
    while (k >= 0 && ++v[labels[k] - 'a'] == lsize[labels[k] - 'a']) v[labels[k--] - 'a'] = 0;
    if (k < 0) break;
  }
  for (int64_t k = 0; k < ocnt; k++) assert_float_equal(got[k], want[k], 1e-4);
  tvk_release(out);
  for (int i = 0; i < n; i++) tvk_release(ins[i]);
  tvk_onnx_destroy(m);
  arena_free();
}

static void test_einsum(void **state) {
  (void)state;
  tvk_ctx *ctx;
  assert_int_equal(tvk_ctx_create(device, &ctx), TVK_OK);
  check_einsum(ctx, "ab,bc->ac", "ab,bc->ac", 2, (const char *[]){"ab", "bc"}, "ac");
  check_einsum(ctx, "ab,bc", "ab,bc->ac", 2, (const char *[]){"ab", "bc"}, "ac"); /* implicit */
  check_einsum(ctx, "a,c->ca", "a,c->ca", 2, (const char *[]){"a", "c"}, "ca");   /* outer */
  check_einsum(ctx, "abc->", "abc->", 1, (const char *[]){"abc"}, "");            /* total */
  check_einsum(ctx, "ba,ca,da->bcd", "ba,ca,da->bcd", 3, (const char *[]){"ba", "ca", "da"},
               "bcd"); /* three operands */
  check_einsum(ctx, "...bc,...cb->...", "abc,acb->a", 2, (const char *[]){"abc", "acb"}, "a");
  check_einsum(ctx, "cbc->b", "cbc->b", 1, (const char *[]){"cbc"}, "b"); /* a diagonal: c twice */
  tvk_ctx_destroy(ctx);
}

/* Recurrent layers beyond the suite's cases: a bidirectional LSTM's reverse
 * half is the forward LSTM run on the time-reversed sequence (the forward
 * cell is what the suite checks), and a GRU with linear_before_reset against
 * its equations in double precision. */
enum { RS = 4, RB = 2, RI = 3, RH = 2 };

static tvk_tensor *run_rnn(tvk_ctx *ctx, const char *op, const char *dir, int ndir, int lbr,
                           const float *x, const float *w, const float *r, const float *b, int G) {
  graph_def g = {0};
  int64_t wd[3] = {ndir, G * RH, RI}, rd[3] = {ndir, G * RH, RH}, bd[2] = {ndir, 2 * G * RH};
  int64_t xd[3] = {RS, RB, RI}, yd[4] = {RS, ndir, RB, RH};
  g.inits[g.ninits++] = tensor("W", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, wd, w,
                               sizeof(float) * (size_t)(ndir * G * RH * RI));
  g.inits[g.ninits++] = tensor("R", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, rd, r,
                               sizeof(float) * (size_t)(ndir * G * RH * RH));
  g.inits[g.ninits++] = tensor("B", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, bd, b,
                               sizeof(float) * (size_t)(ndir * 2 * G * RH));
  Onnx__NodeProto *n = node(op, "cell", "x,W,R,B", "y");
  int64_t hs = RH, l = lbr;
  attr_ints(n, "hidden_size", 1, &hs);
  attr_str(n, "direction", dir);
  if (lbr) attr_ints(n, "linear_before_reset", 1, &l);
  g.nodes[g.nnodes++] = n;
  g.ins[g.nins++] = vinfo("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, xd, NULL);
  g.outs[g.nouts++] = vinfo("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, yd, NULL);
  size_t len;
  uint8_t *buf = pack(&g, &len);
  tvk_onnx_model *m;
  assert_int_equal(tvk_onnx_load_memory(ctx, buf, len, &m), TVK_OK);
  tvk_tensor *in = tvk_from_data(ctx, TVK_FLOAT32, 3, xd, x), *out;
  assert_int_equal(tvk_onnx_run(m, 1, &in, 1, &out), TVK_OK);
  assert_int_equal(tvk_realize(1, &out), TVK_OK);
  tvk_release(in);
  tvk_onnx_destroy(m);
  arena_free();
  return out;
}

static double sigm(double v) { return 1 / (1 + exp(-v)); }

static void test_rnn_directions(void **state) {
  (void)state;
  tvk_ctx *ctx;
  assert_int_equal(tvk_ctx_create(device, &ctx), TVK_OK);
  static float x[RS * RB * RI], xr[RS * RB * RI], w[2 * 4 * RH * RI], r[2 * 4 * RH * RH],
      b[2 * 8 * RH];
  for (int i = 0; i < RS * RB * RI; i++) x[i] = (float)((i * 5) % 9) * 0.25f - 1;
  for (int t = 0; t < RS; t++) /* time reversed */
    memcpy(xr + t * RB * RI, x + (RS - 1 - t) * RB * RI, sizeof(float) * RB * RI);
  for (int i = 0; i < 2 * 4 * RH * RI; i++) w[i] = (float)((i * 7) % 11) * 0.1f - 0.5f;
  for (int i = 0; i < 2 * 4 * RH * RH; i++) r[i] = (float)((i * 3) % 7) * 0.1f - 0.3f;
  for (int i = 0; i < 2 * 8 * RH; i++) b[i] = (float)(i % 5) * 0.05f - 0.1f;
  tvk_tensor *bi = run_rnn(ctx, "LSTM", "bidirectional", 2, 0, x, w, r, b, 4);
  /* direction 1 alone: its weights as a one-direction model on reversed x */
  tvk_tensor *rev =
      run_rnn(ctx, "LSTM", "forward", 1, 0, xr, w + 4 * RH * RI, r + 4 * RH * RH, b + 8 * RH, 4);
  tvk_tensor *fwd = run_rnn(ctx, "LSTM", "forward", 1, 0, x, w, r, b, 4);
  static float yb[RS * 2 * RB * RH], yr[RS * RB * RH], yf[RS * RB * RH];
  assert_int_equal(tvk_to_host(bi, yb, sizeof yb), TVK_OK);
  assert_int_equal(tvk_to_host(rev, yr, sizeof yr), TVK_OK);
  assert_int_equal(tvk_to_host(fwd, yf, sizeof yf), TVK_OK);
  for (int t = 0; t < RS; t++)
    for (int k = 0; k < RB * RH; k++) {
      assert_float_equal(yb[(t * 2 + 0) * RB * RH + k], yf[t * RB * RH + k], 1e-5);
      assert_float_equal(yb[(t * 2 + 1) * RB * RH + k], yr[(RS - 1 - t) * RB * RH + k], 1e-5);
    }
  tvk_release(bi), tvk_release(rev), tvk_release(fwd);

  /* GRU, linear_before_reset = 1, gates z r h:
   * z = s(x Wz + Wbz + h Rz + Rbz), r likewise,
   * n = tanh(x Wh + Wbh + r * (h Rh + Rbh)), h = (1 - z) n + z h */
  tvk_tensor *gru = run_rnn(ctx, "GRU", "forward", 1, 1, x, w, r, b, 3);
  static float yg[RS * RB * RH];
  assert_int_equal(tvk_to_host(gru, yg, sizeof yg), TVK_OK);
  double h[RB][RH] = {{0}};
  for (int t = 0; t < RS; t++) {
    double nh[RB][RH];
    for (int bb = 0; bb < RB; bb++)
      for (int j = 0; j < RH; j++) {
        double a[3], hr[3];
        for (int q = 0; q < 3; q++) {
          int row = q * RH + j;
          a[q] = b[row];
          hr[q] = b[3 * RH + row];
          for (int i = 0; i < RI; i++) a[q] += (double)x[(t * RB + bb) * RI + i] * w[row * RI + i];
          for (int i = 0; i < RH; i++) hr[q] += h[bb][i] * r[row * RH + i];
        }
        double z = sigm(a[0] + hr[0]), rr = sigm(a[1] + hr[1]), n = tanh(a[2] + rr * hr[2]);
        nh[bb][j] = (1 - z) * n + z * h[bb][j];
      }
    memcpy(h, nh, sizeof h);
    for (int bb = 0; bb < RB; bb++)
      for (int j = 0; j < RH; j++) assert_float_equal(yg[(t * RB + bb) * RH + j], h[bb][j], 1e-5);
  }
  tvk_release(gru);
  tvk_ctx_destroy(ctx);
}

/* A strided, padded, grouped 3-D ConvTranspose against the scatter that
 * defines it (the suite's one 3-D case has stride 1). */
static void test_conv_transpose_3d(void **state) {
  (void)state;
  enum { N = 1, C = 2, D = 2, H = 3, W = 2, G = 2, OG = 2, K = 2 };
  const int64_t st[3] = {2, 1, 3}, pads[6] = {1, 0, 0, 0, 1, 1}, op[3] = {1, 0, 2};
  static float x[N * C * D * H * W], w[C * OG * K * K * K];
  for (int i = 0; i < N * C * D * H * W; i++) x[i] = (float)((i * 5) % 7) - 3;
  for (int i = 0; i < C * OG * K * K * K; i++) w[i] = (float)((i * 3) % 5) * 0.5f - 1;
  int64_t od[3];
  const int64_t in[3] = {D, H, W};
  for (int i = 0; i < 3; i++) od[i] = (in[i] - 1) * st[i] - pads[i] - pads[i + 3] + K + op[i];
  graph_def g = {0};
  int64_t xd[5] = {N, C, D, H, W}, wd[5] = {C, OG, K, K, K};
  int64_t yd[5] = {N, G * OG, od[0], od[1], od[2]}, grp = G;
  g.inits[g.ninits++] = tensor("W", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 5, wd, w, sizeof w);
  Onnx__NodeProto *n = node("ConvTranspose", "ct", "x,W", "y");
  attr_ints(n, "strides", 3, st);
  attr_ints(n, "pads", 6, pads);
  attr_ints(n, "output_padding", 3, op);
  attr_ints(n, "group", 1, &grp);
  g.nodes[g.nnodes++] = n;
  g.ins[g.nins++] = vinfo("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 5, xd, NULL);
  g.outs[g.nouts++] = vinfo("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 5, yd, NULL);
  size_t len;
  uint8_t *buf = pack(&g, &len);
  tvk_ctx *ctx;
  assert_int_equal(tvk_ctx_create(device, &ctx), TVK_OK);
  tvk_onnx_model *m;
  assert_int_equal(tvk_onnx_load_memory(ctx, buf, len, &m), TVK_OK);
  tvk_tensor *tin = tvk_from_data(ctx, TVK_FLOAT32, 5, xd, x), *out;
  assert_int_equal(tvk_onnx_run(m, 1, &tin, 1, &out), TVK_OK);
  int64_t no = G * OG * od[0] * od[1] * od[2];
  float *got = malloc(sizeof(float) * (size_t)no);
  double *want = calloc((size_t)no, sizeof(double));
  assert_int_equal(tvk_to_host(out, got, sizeof(float) * (size_t)no), TVK_OK);
  for (int c = 0; c < C; c++)
    for (int z = 0; z < D; z++)
      for (int i = 0; i < H; i++)
        for (int j = 0; j < W; j++)
          for (int o = 0; o < OG; o++)
            for (int a = 0; a < K; a++)
              for (int b = 0; b < K; b++)
                for (int e = 0; e < K; e++) {
                  int64_t p0 = z * st[0] + a - pads[0], p1 = i * st[1] + b - pads[1],
                          p2 = j * st[2] + e - pads[2];
                  if (p0 < 0 || p0 >= od[0] || p1 < 0 || p1 >= od[1] || p2 < 0 || p2 >= od[2])
                    continue;
                  int oc = c / (C / G) * OG + o;
                  want[((oc * od[0] + p0) * od[1] + p1) * od[2] + p2] +=
                      (double)x[((c * D + z) * H + i) * W + j] *
                      w[(((c * OG + o) * K + a) * K + b) * K + e];
                }
  for (int64_t k = 0; k < no; k++) assert_float_equal(got[k], want[k], 1e-4);
  free(got), free(want);
  tvk_release(out), tvk_release(tin);
  tvk_onnx_destroy(m);
  tvk_ctx_destroy(ctx);
  arena_free();
}

static void test_load_errors(void **state) {
  (void)state;
  tvk_ctx *ctx;
  assert_int_equal(tvk_ctx_create(device, &ctx), TVK_OK);
  tvk_onnx_model *m = (tvk_onnx_model *)1;
  assert_int_equal(tvk_onnx_load(ctx, "/nonexistent/model.onnx", &m), TVK_ERR_INVALID_ARG);
  assert_null(m);
  assert_non_null(strstr(tvk_onnx_last_error(), "/nonexistent/model.onnx"));
  assert_int_equal(tvk_onnx_load(NULL, "x", &m), TVK_ERR_INVALID_ARG);
  assert_int_equal(tvk_onnx_load_memory(ctx, "garbage!", 8, &m), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_onnx_last_error(), "not a serialised ONNX ModelProto"));

  /* an op tvk does not have: the node, its op */
  graph_def g = {0};
  int64_t d2[2] = {2, 2}, one = 1;
  g.nodes[g.nnodes++] = node("FrobnicateV2", "the_node", "x", "y");
  g.ins[g.nins++] = vinfo("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, d2, NULL);
  g.outs[g.nouts++] = vinfo("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, d2, NULL);
  size_t len;
  uint8_t *buf = pack(&g, &len);
  assert_int_equal(tvk_onnx_load_memory(ctx, buf, len, &m), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_onnx_last_error(), "node 'the_node' (FrobnicateV2)"));
  assert_non_null(strstr(tvk_onnx_last_error(), "not supported"));

  /* an attribute the op does not read */
  g.nodes[0] = node("Relu", "r", "x", "y");
  attr_ints(g.nodes[0], "bogus", 1, &one);
  buf = pack(&g, &len);
  assert_int_equal(tvk_onnx_load_memory(ctx, buf, len, &m), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_onnx_last_error(), "attribute 'bogus'"));

  /* an input no node produces */
  g.nodes[0] = node("Add", "a", "x,nowhere", "y");
  buf = pack(&g, &len);
  assert_int_equal(tvk_onnx_load_memory(ctx, buf, len, &m), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_onnx_last_error(), "'nowhere'"));

  /* shape arithmetic on a fixed-shape input is folded at load, so its errors
   * are load errors: Shape(x)[5] of a 2-d x */
  int64_t five = 5;
  graph_def f = {0};
  f.inits[f.ninits++] = tensor("five", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, &one, &five, 8);
  f.nodes[f.nnodes++] = node("Shape", "shape", "x", "s");
  f.nodes[f.nnodes++] = node("Gather", "pick", "s,five", "y");
  f.ins[f.nins++] = vinfo("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, d2, NULL);
  f.outs[f.nouts++] = vinfo("y", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, d2, NULL);
  buf = pack(&f, &len);
  assert_int_equal(tvk_onnx_load_memory(ctx, buf, len, &m), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_onnx_last_error(), "node 'pick' (Gather)"));
  assert_non_null(strstr(tvk_onnx_last_error(), "index 5"));

  /* a string input */
  g.nodes[0] = node("Relu", "r", "x", "y");
  g.ins[0] = vinfo("x", ONNX__TENSOR_PROTO__DATA_TYPE__STRING, 2, d2, NULL);
  buf = pack(&g, &len);
  assert_int_equal(tvk_onnx_load_memory(ctx, buf, len, &m), TVK_ERR_DTYPE);
  assert_non_null(strstr(tvk_onnx_last_error(), "STRING"));

  /* an initializer whose data does not fill its dims */
  g.ins[0] = vinfo("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, d2, NULL);
  g.nodes[0] = node("Add", "a", "x,w", "y");
  g.inits[g.ninits++] = tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, d2, W, 12);
  buf = pack(&g, &len);
  assert_int_equal(tvk_onnx_load_memory(ctx, buf, len, &m), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_onnx_last_error(), "initializer 'w'"));
  tvk_ctx_destroy(ctx);
  arena_free();
}

static void test_run_errors(void **state) {
  (void)state;
  tvk_ctx *ctx;
  assert_int_equal(tvk_ctx_create(device, &ctx), TVK_OK);
  size_t len;
  uint8_t *buf = mlp_model(&len);
  tvk_onnx_model *m;
  assert_int_equal(tvk_onnx_load_memory(ctx, buf, len, &m), TVK_OK);
  tvk_tensor *out[2] = {NULL, NULL};
  int64_t bad[2] = {2, 5};
  tvk_tensor *x = tvk_full(ctx, TVK_FLOAT32, 2, bad, 1);
  assert_int_equal(tvk_onnx_run(m, 1, &x, 2, out), TVK_ERR_SHAPE);
  assert_non_null(strstr(tvk_onnx_last_error(), "(2, 5)"));
  assert_non_null(strstr(tvk_onnx_last_error(), "(batch, 4)"));
  assert_null(out[0]);
  tvk_release(x);
  int64_t ok[2] = {2, 4};
  x = tvk_full(ctx, TVK_INT32, 2, ok, 1);
  assert_int_equal(tvk_onnx_run(m, 1, &x, 2, out), TVK_ERR_DTYPE);
  assert_non_null(strstr(tvk_onnx_last_error(), "int32"));
  tvk_release(x);
  assert_int_equal(tvk_onnx_run(m, 0, NULL, 2, out), TVK_ERR_INVALID_ARG);
  x = tvk_full(ctx, TVK_FLOAT32, 2, ok, 1);
  assert_int_equal(tvk_onnx_run(m, 1, &x, 3, out), TVK_ERR_INVALID_ARG);
  /* fewer outputs than the model has is fine */
  assert_int_equal(tvk_onnx_run(m, 1, &x, 1, out), TVK_OK);
  tvk_release(out[0]);
  tvk_release(x);
  tvk_onnx_destroy(m);
  tvk_ctx_destroy(ctx);
  arena_free();
}

/* Loads (and, when it loads, runs) a damaged model: any status is fine, a
 * crash or a sanitizer report is not. */
static void try_model(tvk_ctx *ctx, const uint8_t *buf, size_t len) {
  tvk_onnx_model *m;
  tvk_status s = tvk_onnx_load_memory(ctx, buf, len, &m);
  if (s != TVK_OK) {
    assert_null(m);
    assert_true(strlen(tvk_onnx_last_error()) > 0);
    return;
  }
  size_t scope = tvk_scope_begin(ctx);
  tvk_tensor *in[8], *out[8];
  int nin = tvk_onnx_input_count(m), nout = tvk_onnx_output_count(m);
  bool ok = nin <= 8 && nout <= 8;
  for (int i = 0; ok && i < nin; i++) {
    tvk_onnx_value_info vi;
    assert_int_equal(tvk_onnx_input_info(m, i, &vi), TVK_OK);
    int64_t shape[TVK_MAX_DIMS];
    int64_t n = 1;
    for (int d = 0; d < vi.ndim; d++) n *= shape[d] = vi.shape[d] < 0 ? 2 : vi.shape[d];
    ok = n < 4096;
    in[i] = tvk_full(ctx, vi.dtype, vi.ndim, shape, 1);
  }
  if (ok && tvk_onnx_run(m, nin, in, nout, out) == TVK_OK) tvk_realize(nout, out);
  tvk_scope_end(ctx, scope, 0, NULL);
  tvk_ctx_clear_error(ctx);
  tvk_onnx_destroy(m);
}

static void test_fuzz(void **state) {
  (void)state;
  tvk_ctx *ctx;
  assert_int_equal(tvk_ctx_create(device, &ctx), TVK_OK);
  size_t len;
  uint8_t *good = mlp_model(&len);
  uint8_t *buf = malloc(len);
  assert_non_null(buf);
  for (size_t cut = 0; cut < len; cut++) try_model(ctx, good, cut);
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int round = 0; round < 1500; round++) {
    memcpy(buf, good, len);
    int flips = 1 + round % 4;
    for (int k = 0; k < flips; k++) {
      seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
      size_t at = (size_t)(seed % len);
      if (round % 3 == 0)
        buf[at] = (uint8_t)(seed >> 40); /* a whole byte */
      else
        buf[at] ^= (uint8_t)(1u << (seed >> 32) % 8);
    }
    try_model(ctx, buf, len);
  }
  free(buf);
  tvk_ctx_destroy(ctx);
  arena_free();
}

int main(int argc, char **argv) {
  if (argc > 1) device = argv[1];
  tvk_ctx *probe;
  if (tvk_ctx_create(device, &probe) != TVK_OK) {
    printf("skip: no device %s\n", device);
    return 77;
  }
  tvk_ctx_destroy(probe);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_run_from_memory),
      cmocka_unit_test(test_run_from_file_and_tensor_files),
      cmocka_unit_test(test_big_weight),
      cmocka_unit_test(test_conv_bn_relu_fuses),
      cmocka_unit_test(test_einsum),
      cmocka_unit_test(test_rnn_directions),
      cmocka_unit_test(test_conv_transpose_3d),
      cmocka_unit_test(test_load_errors),
      cmocka_unit_test(test_run_errors),
      cmocka_unit_test(test_fuzz),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
