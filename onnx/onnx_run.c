/* Running a model: the values of one run, walked node by node in the file's
 * (topological) order, each node mapped onto tvk ops by its op table entry.
 * Nothing is computed here: the outputs are lazy tensors of one tvk graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

/* ---- inputs and outputs of a node ---- */

static onnx_value *in_value(const onnx_run_ctx *c, int i) {
  if (i < 0 || i >= c->node->nin || c->node->in[i] < 0) return NULL;
  return &c->values[c->node->in[i]];
}

bool onnx_has_in(const onnx_run_ctx *c, int i) { return in_value(c, i) != NULL; }

tvk_tensor *onnx_in(onnx_run_ctx *c, int i) {
  onnx_value *v = in_value(c, i);
  if (!v) return NULL;
  if (!v->t && v->host) {
    v->t = tvk_from_data(c->m->ctx, v->host->dt, v->host->ndim, v->host->shape, v->host->data);
    v->borrowed = false;
  }
  return v->t;
}

const onnx_host *onnx_in_host(onnx_run_ctx *c, int i) {
  onnx_value *v = in_value(c, i);
  if (!v) {
    onnx_node_fail(c, TVK_ERR_INVALID_ARG, "input %d is required here", i);
    return NULL;
  }
  if (v->host) return v->host;
  /* Computed on the device: realize it and read it back (a shape that depends
   * on data, which ONNX allows). */
  tvk_tensor *t = v->t;
  tvk_status s = onnx_host_alloc(&v->own, tvk_dtype_of(t), tvk_ndim(t), tvk_shape(t));
  if (s == TVK_OK)
    s = tvk_to_host(t, v->own.data, (size_t)v->own.numel * tvk_dtype_size(v->own.dt));
  if (s != TVK_OK) {
    onnx_host_free(&v->own);
    onnx_node_fail(c, s, "reading input %d back to the host: %s", i,
                   tvk_status_of(t) != TVK_OK ? tvk_error_of(t) : tvk_ctx_error(c->m->ctx));
    return NULL;
  }
  v->host = &v->own;
  return v->host;
}

int onnx_in_ndim(onnx_run_ctx *c, int i) {
  onnx_value *v = in_value(c, i);
  return !v ? 0 : v->t ? tvk_ndim(v->t) : v->host->ndim;
}

const int64_t *onnx_in_shape(onnx_run_ctx *c, int i) {
  onnx_value *v = in_value(c, i);
  return !v ? NULL : v->t ? tvk_shape(v->t) : v->host->shape;
}

tvk_dtype onnx_in_dtype(onnx_run_ctx *c, int i) {
  onnx_value *v = in_value(c, i);
  return !v ? TVK_FLOAT32 : v->t ? tvk_dtype_of(v->t) : v->host->dt;
}

bool onnx_all_host(const onnx_run_ctx *c) {
  for (int i = 0; i < c->node->nin; i++) {
    onnx_value *v = in_value(c, i);
    if (v && !v->host) return false;
  }
  return true;
}

static onnx_value *out_value(onnx_run_ctx *c, int i) {
  if (i < 0 || i >= c->node->nout || c->node->out[i] < 0) return NULL;
  return &c->values[c->node->out[i]];
}

tvk_status onnx_set_out(onnx_run_ctx *c, int i, tvk_tensor *t) {
  /* An op that returns one of its inputs as it is gets a view of it: the
   * value must be the run's own to release. */
  for (int k = 0; t && k < c->node->nin; k++) {
    onnx_value *v = in_value(c, k);
    if (v && v->t == t) {
      t = tvk_reshape(t, tvk_ndim(t), tvk_shape(t));
      break;
    }
  }
  tvk_status s = onnx_check(c, t);
  onnx_value *v = out_value(c, i);
  if (s != TVK_OK || !v) {
    tvk_release(t);
    return s;
  }
  v->t = t;
  v->borrowed = false;
  return TVK_OK;
}

tvk_status onnx_set_out_host(onnx_run_ctx *c, int i, onnx_host *h) {
  onnx_value *v = out_value(c, i);
  if (!v) {
    onnx_host_free(h);
    return TVK_OK;
  }
  v->own = *h;
  v->host = &v->own;
  memset(h, 0, sizeof *h);
  return TVK_OK;
}

/* ---- attributes ---- */

const Onnx__AttributeProto *onnx_attr(const onnx_run_ctx *c, const char *name) {
  const Onnx__NodeProto *n = c->node->proto;
  for (size_t i = 0; i < n->n_attribute; i++)
    if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
  return NULL;
}

int64_t onnx_attr_int(const onnx_run_ctx *c, const char *name, int64_t dflt) {
  const Onnx__AttributeProto *a = onnx_attr(c, name);
  return a ? a->i : dflt;
}

double onnx_attr_float(const onnx_run_ctx *c, const char *name, double dflt) {
  const Onnx__AttributeProto *a = onnx_attr(c, name);
  return a ? (double)a->f : dflt;
}

const char *onnx_attr_string(const onnx_run_ctx *c, const char *name, const char *dflt, char *buf,
                             size_t size) {
  const Onnx__AttributeProto *a = onnx_attr(c, name);
  if (!a) return dflt;
  size_t n = a->s.len < size - 1 ? a->s.len : size - 1;
  if (n) memcpy(buf, a->s.data, n);
  buf[n] = 0;
  return buf;
}

int onnx_attr_ints(const onnx_run_ctx *c, const char *name, int64_t *out, int max) {
  const Onnx__AttributeProto *a = onnx_attr(c, name);
  if (!a) return -1;
  for (size_t i = 0; i < a->n_ints && (int)i < max; i++) out[i] = a->ints[i];
  return (int)a->n_ints;
}

int onnx_attr_floats(const onnx_run_ctx *c, const char *name, float *out, int max) {
  const Onnx__AttributeProto *a = onnx_attr(c, name);
  if (!a) return -1;
  for (size_t i = 0; i < a->n_floats && (int)i < max; i++) out[i] = a->floats[i];
  return (int)a->n_floats;
}

/* ---- errors and small helpers ---- */

static void label_prefix(const onnx_run_ctx *c) {
  const Onnx__NodeProto *n = c->node->proto;
  if (n->name && *n->name)
    onnx_error_prefix("node '%s' (%s): ", n->name, n->op_type);
  else
    onnx_error_prefix("node %d (%s): ", (int)(c->node - c->m->nodes), n->op_type);
}

tvk_status onnx_node_fail(onnx_run_ctx *c, tvk_status s, const char *fmt, ...) {
  char msg[800];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  onnx_fail(s, "%s", msg);
  label_prefix(c);
  return s;
}

tvk_status onnx_check(onnx_run_ctx *c, tvk_tensor *t) {
  if (!t) return onnx_node_fail(c, TVK_ERR_INTERNAL, "an op returned NULL");
  tvk_status s = tvk_status_of(t);
  if (s != TVK_OK) onnx_node_fail(c, s, "%s", tvk_error_of(t));
  return s;
}

tvk_tensor *onnx_scalar(onnx_run_ctx *c, tvk_dtype dt, double v) {
  return tvk_full(c->m->ctx, dt, 0, NULL, v);
}

int onnx_in_ints(onnx_run_ctx *c, int i, int64_t *out, int max, const char *what) {
  const onnx_host *h = onnx_in_host(c, i);
  if (!h) return -1;
  if (h->numel > max) {
    onnx_node_fail(c, TVK_ERR_SHAPE, "%s has %lld values (at most %d)", what, (long long)h->numel,
                   max);
    return -1;
  }
  for (int64_t k = 0; k < h->numel; k++) out[k] = onnx_host_get_int(h, k);
  return (int)h->numel;
}

bool onnx_in_int(onnx_run_ctx *c, int i, int64_t dflt, int64_t *out) {
  *out = dflt;
  if (!onnx_has_in(c, i)) return true;
  const onnx_host *h = onnx_in_host(c, i);
  if (!h) return false;
  if (h->numel != 1) {
    onnx_node_fail(c, TVK_ERR_SHAPE, "input %d has %lld values (one)", i, (long long)h->numel);
    return false;
  }
  *out = onnx_host_get_int(h, 0);
  return true;
}

tvk_tensor *onnx_iota(onnx_run_ctx *c, int64_t n, int ndim, int axis) {
  int64_t shape[TVK_MAX_DIMS];
  for (int i = 0; i < ndim; i++) shape[i] = i == axis ? n : 1;
  return tvk_reshape(tvk_arange(c->m->ctx, TVK_INT64, 0, (double)n, 1), ndim, shape);
}

bool onnx_is_float(tvk_dtype dt) {
  return dt == TVK_FLOAT16 || dt == TVK_BFLOAT16 || dt == TVK_FLOAT32 || dt == TVK_FLOAT64;
}

tvk_tensor *onnx_fconst(onnx_run_ctx *c, tvk_tensor *like, double v) {
  tvk_dtype dt = tvk_dtype_of(like);
  return onnx_scalar(c, onnx_is_float(dt) ? dt : TVK_FLOAT32, v);
}

int onnx_axis(int64_t axis, int ndim) {
  if (axis < -ndim || axis >= (ndim ? ndim : 1)) return -1;
  return (int)(axis < 0 ? axis + ndim : axis);
}

/* x's elements along axis from start by step (may be negative), n of them. */
tvk_tensor *onnx_slice_axis(tvk_tensor *x, int axis, int64_t start, int64_t step, int64_t n) {
  int nd = tvk_ndim(x);
  int64_t ranges[TVK_MAX_DIMS][2], dim = tvk_shape(x)[axis];
  for (int d = 0; d < nd; d++) ranges[d][0] = 0, ranges[d][1] = tvk_shape(x)[d];
  if (step < 0) { /* walk the flipped axis forward */
    int ax = axis;
    x = tvk_flip(x, 1, &ax);
    start = dim - 1 - start;
    step = -step;
  }
  if (n == 0) {
    ranges[axis][0] = ranges[axis][1] = 0;
    return tvk_shrink(x, ranges);
  }
  int64_t end = start + (n - 1) * step + 1;
  ranges[axis][0] = start;
  ranges[axis][1] = end;
  x = tvk_shrink(x, ranges);
  if (step == 1) return x;
  /* Every step-th element: pad to n * step, view as (n, step), keep column 0. */
  int64_t pads[TVK_MAX_DIMS][2] = {{0}};
  pads[axis][1] = n * step - (end - start);
  x = tvk_pad(x, pads, 0);
  int64_t shape[TVK_MAX_DIMS + 1];
  for (int d = 0, k = 0; d < nd; d++) {
    if (d == axis) {
      shape[k++] = n;
      shape[k++] = step;
    } else {
      shape[k++] = tvk_shape(x)[d];
    }
  }
  x = tvk_reshape(x, nd + 1, shape);
  int64_t r2[TVK_MAX_DIMS + 1][2];
  for (int d = 0; d < nd + 1; d++) r2[d][0] = 0, r2[d][1] = shape[d];
  r2[axis + 1][1] = 1;
  x = tvk_shrink(x, r2);
  memmove(shape + axis + 1, shape + axis + 2, sizeof(int64_t) * (size_t)(nd - axis - 1));
  return tvk_reshape(x, nd, shape);
}

/* ---- folding at load ---- */

/* Whether the graph input in slot is declared with every dim fixed. */
static const tvk_onnx_value_info *static_input(const tvk_onnx_model *m, int slot) {
  for (int i = 0; i < m->ninputs; i++) {
    if (m->inputs[i] != slot) continue;
    const tvk_onnx_value_info *vi = &m->input_info[i];
    for (int d = 0; d < vi->ndim; d++)
      if (vi->shape[d] < 0) return NULL;
    return vi;
  }
  return NULL;
}

tvk_status onnx_fold_constants(tvk_onnx_model *m) {
  onnx_value *values = calloc((size_t)m->nslots + 1, sizeof *values);
  onnx_host *shapes = calloc((size_t)m->ninputs + 1, sizeof *shapes);
  if (!values || !shapes) {
    free(values), free(shapes);
    return onnx_fail(TVK_ERR_OUT_OF_MEMORY, "out of memory loading the model");
  }
  for (int i = 0; i < m->nslots; i++)
    if (m->slots[i].is_const && m->slots[i].has_host) values[i].host = &m->slots[i].host;
  /* A fixed-shape input is known by its shape alone: a host value without
   * data, which only Shape and Size may read. */
  for (int i = 0; i < m->ninputs; i++) {
    const tvk_onnx_value_info *vi = static_input(m, m->inputs[i]);
    if (!vi) continue;
    shapes[i].dt = vi->dtype;
    shapes[i].ndim = vi->ndim;
    memcpy(shapes[i].shape, vi->shape, sizeof(int64_t) * (size_t)vi->ndim);
  }
  onnx_run_ctx c = {.m = m, .values = values};
  tvk_status s = TVK_OK;
  size_t scope = tvk_scope_begin(m->ctx);
  for (int i = 0; i < m->nnodes && s == TVK_OK; i++) {
    onnx_node *n = &m->nodes[i];
    bool shape_op = !strcmp(n->op->name, "Shape") || !strcmp(n->op->name, "Size");
    bool known = true;
    for (int k = 0; k < n->nin && known; k++) {
      int slot = n->in[k];
      if (slot < 0 || values[slot].host) continue;
      int j = 0;
      while (j < m->ninputs && m->inputs[j] != slot) j++;
      known = shape_op && j < m->ninputs && static_input(m, slot);
      if (known) values[slot].host = &shapes[j];
    }
    if (known) {
      c.node = n;
      s = n->op->run(&c);
      bool host = s == TVK_OK;
      for (int k = 0; k < n->nout && host; k++)
        host = n->out[k] < 0 || (values[n->out[k]].host && !values[n->out[k]].t);
      if (host) {
        n->folded = true;
        for (int k = 0; k < n->nout; k++) {
          if (n->out[k] < 0) continue;
          onnx_slot *sl = &m->slots[n->out[k]];
          sl->is_const = true;
          sl->has_host = true;
          sl->host = values[n->out[k]].own; /* the slot takes the data */
          memset(&values[n->out[k]].own, 0, sizeof(onnx_host));
          values[n->out[k]].host = &sl->host;
        }
      }
      for (int k = 0; k < n->nout; k++) /* results that went to a device are not kept */
        if (n->out[k] >= 0 && values[n->out[k]].t && !n->folded) {
          values[n->out[k]].t = NULL; /* released with the scope */
          onnx_host_free(&values[n->out[k]].own);
          values[n->out[k]].host = NULL;
        }
    }
    for (int k = 0; k < n->nin; k++) /* the shape stand-ins only serve Shape and Size */
      if (n->in[k] >= 0 && values[n->in[k]].host && !m->slots[n->in[k]].is_const)
        values[n->in[k]].host = NULL;
  }
  /* every tensor made here (device results, uploads of host values) goes */
  tvk_scope_end(m->ctx, scope, 0, NULL);
  for (int i = 0; i < m->nslots; i++) onnx_host_free(&values[i].own);
  free(values);
  free(shapes);
  return s;
}

/* ---- the run ---- */

static tvk_status check_input(const tvk_onnx_model *m, int i, const tvk_tensor *t) {
  const tvk_onnx_value_info *vi = &m->input_info[i];
  if (!t)
    return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_run: input %d ('%s') is NULL", i, vi->name);
  if (tvk_status_of(t) != TVK_OK)
    return onnx_fail(tvk_status_of(t), "tvk_onnx_run: input %d ('%s') is an error tensor: %s", i,
                     vi->name, tvk_error_of(t));
  if (tvk_ctx_of(t) != m->ctx)
    return onnx_fail(TVK_ERR_INVALID_ARG,
                     "tvk_onnx_run: input %d ('%s') belongs to another context than the model", i,
                     vi->name);
  if (tvk_dtype_of(t) != vi->dtype)
    return onnx_fail(TVK_ERR_DTYPE, "tvk_onnx_run: input %d ('%s') is %s; the model takes %s", i,
                     vi->name, tvk_dtype_name(tvk_dtype_of(t)), tvk_dtype_name(vi->dtype));
  bool ok = tvk_ndim(t) == vi->ndim;
  for (int d = 0; ok && d < vi->ndim; d++) ok = vi->shape[d] < 0 || vi->shape[d] == tvk_shape(t)[d];
  if (!ok) {
    char want[256] = "", got[256] = "";
    /* the fixed dims are numbers, the open ones their names */
    size_t n = 0;
    for (int d = 0; d < vi->ndim && n < sizeof want; d++) {
      if (vi->shape[d] >= 0)
        n += (size_t)snprintf(want + n, sizeof want - n, d ? ", %lld" : "%lld",
                              (long long)vi->shape[d]);
      else
        n += (size_t)snprintf(want + n, sizeof want - n, d ? ", %s" : "%s",
                              vi->dim_names[d] ? vi->dim_names[d] : "?");
    }
    n = 0;
    for (int d = 0; d < tvk_ndim(t) && n < sizeof got; d++)
      n += (size_t)snprintf(got + n, sizeof got - n, d ? ", %lld" : "%lld",
                            (long long)tvk_shape(t)[d]);
    return onnx_fail(TVK_ERR_SHAPE,
                     "tvk_onnx_run: input %d ('%s') has shape (%s); the model takes (%s)", i,
                     vi->name, got, want);
  }
  return TVK_OK;
}

static void free_values(const tvk_onnx_model *m, onnx_value *values) {
  for (int i = 0; i < m->nslots; i++) {
    if (!values[i].borrowed) tvk_release(values[i].t);
    onnx_host_free(&values[i].own);
  }
  free(values);
}

tvk_status tvk_onnx_run(tvk_onnx_model *m, int nin, tvk_tensor *const *in, int nout,
                        tvk_tensor **out) {
  if (!m || (nin && !in) || (nout && !out))
    return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_run: a NULL argument");
  if (nin != m->ninputs)
    return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_run: %d inputs given; the model takes %d", nin,
                     m->ninputs);
  if (nout < 0 || nout > m->noutputs)
    return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_run: %d outputs asked for; the model has %d",
                     nout, m->noutputs);
  for (int i = 0; i < nin; i++) {
    tvk_status s = check_input(m, i, in[i]);
    if (s != TVK_OK) return s;
  }
  onnx_value *values = calloc((size_t)m->nslots + 1, sizeof *values);
  if (!values) return onnx_fail(TVK_ERR_OUT_OF_MEMORY, "tvk_onnx_run: out of memory");
  for (int i = 0; i < m->nslots; i++) {
    const onnx_slot *sl = &m->slots[i];
    if (!sl->is_const) continue;
    values[i].t = sl->tensor;
    values[i].borrowed = true;
    values[i].host = sl->has_host ? &sl->host : NULL;
  }
  for (int i = 0; i < nin; i++) {
    values[m->inputs[i]].t = in[i];
    values[m->inputs[i]].borrowed = true;
  }
  onnx_run_ctx c = {.m = m, .values = values};
  tvk_status s = TVK_OK;
  for (int i = 0; i < m->nnodes && s == TVK_OK; i++) {
    c.node = &m->nodes[i];
    if (c.node->folded) continue; /* its outputs are constants */
    /* The op's temporaries go with the scope; what the node's values hold
     * (its results, inputs it uploaded from the host) stays. */
    size_t scope = tvk_scope_begin(m->ctx);
    s = c.node->op->run(&c);
    tvk_tensor *keep_small[64];
    int nk = c.node->nin + c.node->nout, nkeep = 0;
    tvk_tensor **keep = nk <= 64 ? keep_small : malloc(sizeof *keep * (size_t)nk);
    if (!keep) {
      /* cannot say what to keep: leave the temporaries to the caller's scope */
      s = s == TVK_OK ? onnx_fail(TVK_ERR_OUT_OF_MEMORY, "tvk_onnx_run: out of memory") : s;
      break;
    }
    for (int k = 0; k < nk; k++) {
      int slot = k < c.node->nin ? c.node->in[k] : c.node->out[k - c.node->nin];
      if (slot >= 0 && values[slot].t && !values[slot].borrowed) keep[nkeep++] = values[slot].t;
    }
    tvk_scope_end(m->ctx, scope, nkeep, keep);
    if (keep != keep_small) free(keep);
    for (int k = 0; s == TVK_OK && k < c.node->nout; k++) {
      const onnx_value *v = out_value(&c, k);
      if (v && !v->t && !v->host)
        s = onnx_node_fail(&c, TVK_ERR_INTERNAL, "output %d was not produced", k);
    }
  }
  tvk_tensor *res[64] = {0};
  tvk_tensor **results = nout <= 64 ? res : calloc((size_t)nout, sizeof *results);
  if (!results) s = onnx_fail(TVK_ERR_OUT_OF_MEMORY, "tvk_onnx_run: out of memory");
  for (int i = 0; i < nout && s == TVK_OK; i++) {
    onnx_value *v = &values[m->outputs[i]];
    tvk_tensor *t = v->t;
    if (!t)
      t = v->t = tvk_from_data(m->ctx, v->host->dt, v->host->ndim, v->host->shape, v->host->data);
    /* A new handle on the same value (a view costs nothing), so that the
     * caller owns each output whatever the run does with its values. */
    results[i] = tvk_reshape(t, tvk_ndim(t), tvk_shape(t));
    s = tvk_status_of(results[i]);
    if (s != TVK_OK)
      onnx_fail(s, "tvk_onnx_run: output '%s': %s", m->output_info[i].name,
                tvk_error_of(results[i]));
  }
  if (s == TVK_OK)
    memcpy(out, results, sizeof *out * (size_t)nout);
  else
    for (int i = 0; results && i < nout; i++) tvk_release(results[i]);
  if (results != res) free(results);
  free_values(m, values);
  return s;
}
