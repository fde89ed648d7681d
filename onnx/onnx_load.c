/* Loading a model: parsing (protobuf-c, from onnx.proto), resolving value
 * names to slots, checking every node against the op table, and putting the
 * weights on the device once. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_internal.h"

/* Host copies of constants are kept up to this many elements: enough for
 * every shape, axes or pads input; weights live only on the device. */
enum { HOST_COPY_MAX = 4096 };

/* ---- names -> slots: open addressing over the model's strings ---- */

typedef struct {
  int cap;
  int *idx; /* slot + 1; 0 empty */
  const onnx_slot *slots;
} name_map;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static int map_find(const name_map *m, const char *name) {
  for (uint64_t i = hash_str(name) & (uint64_t)(m->cap - 1);;
       i = (i + 1) & (uint64_t)(m->cap - 1)) {
    if (!m->idx[i]) return -1;
    if (!strcmp(m->slots[m->idx[i] - 1].name, name)) return m->idx[i] - 1;
  }
}

static void map_put(name_map *m, const char *name, int slot) {
  uint64_t i = hash_str(name) & (uint64_t)(m->cap - 1);
  while (m->idx[i]) i = (i + 1) & (uint64_t)(m->cap - 1);
  m->idx[i] = slot + 1;
}

/* ---- the model ---- */

void tvk_onnx_destroy(tvk_onnx_model *m) {
  if (!m) return;
  for (int i = 0; i < m->nslots; i++) {
    onnx_host_free(&m->slots[i].host);
    tvk_release(m->slots[i].tensor);
  }
  for (int i = 0; i < m->nnodes; i++) {
    free(m->nodes[i].in);
    free(m->nodes[i].out);
  }
  free(m->slots);
  free(m->nodes);
  free(m->inputs);
  free(m->outputs);
  free(m->input_info);
  free(m->output_info);
  free(m->dir);
  if (m->proto) onnx__model_proto__free_unpacked(m->proto, NULL);
  free(m);
}

static bool listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && !strncmp(p, name, n)) return true;
    p = e ? e + 1 : NULL;
  }
  return false;
}

static const char *node_label(const Onnx__NodeProto *n, int i, char *buf, size_t size) {
  if (n->name && *n->name)
    snprintf(buf, size, "node '%s' (%s)", n->name, n->op_type);
  else
    snprintf(buf, size, "node %d (%s)", i, n->op_type ? n->op_type : "?");
  return buf;
}

/* A slot for name: the existing one, or a new one when create. */
static int slot_of(tvk_onnx_model *m, name_map *map, const char *name, bool create) {
  int s = map_find(map, name);
  if (s >= 0 || !create) return s;
  s = m->nslots++;
  m->slots[s].name = name;
  map->slots = m->slots;
  map_put(map, name, s);
  return s;
}

static tvk_status value_info(const Onnx__ValueInfoProto *v, tvk_onnx_value_info *out) {
  memset(out, 0, sizeof *out);
  out->name = v->name ? v->name : "";
  const Onnx__TypeProto *t = v->type;
  if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type)
    return onnx_fail(
        TVK_ERR_DTYPE,
        "graph value '%s' is not a tensor (sequences, maps and optionals are not supported)",
        out->name);
  int32_t odt = t->tensor_type->has_elem_type ? t->tensor_type->elem_type : 0;
  if (!onnx_dtype_to_tvk(odt, &out->dtype))
    return onnx_fail(TVK_ERR_DTYPE, "graph value '%s' has dtype %s, which tvk does not support",
                     out->name, onnx_dtype_name(odt));
  const Onnx__TensorShapeProto *sh = t->tensor_type->shape;
  if (!sh) {
    out->ndim = -1; /* rank unknown */
    return TVK_OK;
  }
  if (sh->n_dim > TVK_MAX_DIMS)
    return onnx_fail(TVK_ERR_SHAPE, "graph value '%s' has %zu dims (tvk takes at most %d)",
                     out->name, sh->n_dim, TVK_MAX_DIMS);
  out->ndim = (int)sh->n_dim;
  for (size_t i = 0; i < sh->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
    out->shape[i] = -1;
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0)
      out->shape[i] = d->dim_value;
    else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
      out->dim_names[i] = d->dim_param;
  }
  return TVK_OK;
}

/* A constant's host value becomes the slot's: its tensor on the device, and
 * the host copy when it is small. Takes h. */
static tvk_status make_const(tvk_onnx_model *m, int slot, onnx_host *h) {
  onnx_slot *s = &m->slots[slot];
  s->is_const = true;
  s->tensor = NULL;
  if (h->numel > HOST_COPY_MAX) {
    /* A device that runs on host memory (the CPU) uses the weight where it
     * is, and frees it when done; others take a copy (below). */
    s->tensor = tvk_from_host_ptr(m->ctx, h->dt, h->ndim, h->shape, h->data, free, h->data);
    if (tvk_status_of(s->tensor) == TVK_OK) {
      memset(h, 0, sizeof *h); /* the tensor owns the memory now */
      return TVK_OK;
    }
    tvk_release(s->tensor);
    s->tensor = NULL;
  }
  s->tensor = tvk_from_data(m->ctx, h->dt, h->ndim, h->shape, h->data);
  tvk_status st = tvk_status_of(s->tensor);
  if (st != TVK_OK) {
    onnx_fail(st, "constant '%s': %s", s->name, tvk_error_of(s->tensor));
    onnx_host_free(h);
    return st;
  }
  if (h->numel <= HOST_COPY_MAX) {
    s->host = *h;
    s->has_host = true;
  } else {
    onnx_host_free(h);
  }
  return TVK_OK;
}

/* A Constant node's value attribute as a host tensor. */
static tvk_status constant_value(const Onnx__NodeProto *n, const char *label, onnx_host *h) {
  if (n->n_attribute != 1)
    return onnx_fail(TVK_ERR_INVALID_ARG, "%s: a Constant takes exactly one attribute; it has %zu",
                     label, n->n_attribute);
  const Onnx__AttributeProto *a = n->attribute[0];
  const char *name = a->name ? a->name : "";
  int64_t one = 1;
  if (!strcmp(name, "value") && a->t) return onnx_tensor_decode(a->t, NULL, label, true, h);
  if (!strcmp(name, "value_float") || !strcmp(name, "value_int")) {
    bool f = name[6] == 'f';
    tvk_status s = onnx_host_alloc(h, f ? TVK_FLOAT32 : TVK_INT64, 0, &one);
    if (s == TVK_OK) onnx_host_set(h, 0, f ? (double)a->f : (double)a->i);
    if (s == TVK_OK && !f) ((int64_t *)h->data)[0] = a->i;
    return s;
  }
  if (!strcmp(name, "value_floats") || !strcmp(name, "value_ints")) {
    bool f = name[6] == 'f';
    int64_t len = f ? (int64_t)a->n_floats : (int64_t)a->n_ints;
    tvk_status s = onnx_host_alloc(h, f ? TVK_FLOAT32 : TVK_INT64, 1, &len);
    for (int64_t i = 0; s == TVK_OK && i < len; i++) {
      if (f)
        ((float *)h->data)[i] = a->floats[i];
      else
        ((int64_t *)h->data)[i] = a->ints[i];
    }
    return s;
  }
  return onnx_fail(TVK_ERR_INVALID_ARG,
                   "%s: attribute '%s' is not supported (value, value_float(s) and value_int(s) "
                   "are)",
                   label, name);
}

/* Everything after parsing: m->proto is set. */
static tvk_status build(tvk_onnx_model *m) {
  const Onnx__ModelProto *mp = m->proto;
  const Onnx__GraphProto *g = mp->graph;
  if (!g) return onnx_fail(TVK_ERR_INVALID_ARG, "the model has no graph");
  m->opset = -1;
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const char *d = mp->opset_import[i]->domain;
    if ((!d || !*d || !strcmp(d, "ai.onnx")) && mp->opset_import[i]->has_version)
      m->opset = (int)mp->opset_import[i]->version;
  }
  if (m->opset < 0) m->opset = 1; /* IR version 1 models name no opset */

  /* Every name a graph can hold: inputs, initializers, node outputs. */
  size_t cap_names = g->n_input + g->n_initializer + 1;
  for (size_t i = 0; i < g->n_node; i++) cap_names += g->node[i]->n_output;
  if (cap_names > (size_t)(1 << 28))
    return onnx_fail(TVK_ERR_INVALID_ARG, "the graph is too large");
  m->slots = calloc(cap_names, sizeof *m->slots);
  m->nodes = calloc(g->n_node + 1, sizeof *m->nodes);
  m->inputs = calloc(g->n_input + 1, sizeof *m->inputs);
  m->outputs = calloc(g->n_output + 1, sizeof *m->outputs);
  m->input_info = calloc(g->n_input + 1, sizeof *m->input_info);
  m->output_info = calloc(g->n_output + 1, sizeof *m->output_info);
  name_map map = {0};
  map.cap = 16;
  while ((size_t)map.cap < cap_names * 2) map.cap *= 2;
  map.idx = calloc((size_t)map.cap, sizeof *map.idx);
  map.slots = m->slots;
  tvk_status s = TVK_OK;
  if (!m->slots || !m->nodes || !m->inputs || !m->outputs || !m->input_info || !m->output_info ||
      !map.idx) {
    free(map.idx);
    return onnx_fail(TVK_ERR_OUT_OF_MEMORY, "out of memory loading the model");
  }

  for (size_t i = 0; i < g->n_initializer && s == TVK_OK; i++) {
    Onnx__TensorProto *tp = g->initializer[i];
    const char *name = tp->name ? tp->name : "";
    if (slot_of(m, &map, name, false) >= 0) {
      s = onnx_fail(TVK_ERR_INVALID_ARG, "initializer '%s' is given twice", name);
      break;
    }
    char what[300];
    snprintf(what, sizeof what, "initializer '%s'", name);
    onnx_host h;
    s = onnx_tensor_decode(tp, m->dir, what, true, &h);
    if (s == TVK_OK) s = make_const(m, slot_of(m, &map, name, true), &h);
  }
  if (g->n_sparse_initializer && s == TVK_OK)
    s = onnx_fail(TVK_ERR_INVALID_ARG, "sparse initializers are not supported");

  for (size_t i = 0; i < g->n_input && s == TVK_OK; i++) {
    const char *name = g->input[i]->name ? g->input[i]->name : "";
    if (slot_of(m, &map, name, false) >= 0) continue; /* an initializer (a default value) */
    tvk_onnx_value_info *vi = &m->input_info[m->ninputs];
    s = value_info(g->input[i], vi);
    if (s == TVK_OK && vi->ndim < 0)
      s = onnx_fail(TVK_ERR_SHAPE, "input '%s' declares no shape", name);
    if (s == TVK_OK) m->inputs[m->ninputs++] = slot_of(m, &map, name, true);
  }

  for (size_t i = 0; i < g->n_node && s == TVK_OK; i++) {
    const Onnx__NodeProto *np = g->node[i];
    char label[300];
    node_label(np, (int)i, label, sizeof label);
    const char *dom = np->domain;
    if (dom && *dom && strcmp(dom, "ai.onnx")) {
      s = onnx_fail(TVK_ERR_INVALID_ARG, "%s: operator domain '%s' is not supported", label, dom);
      break;
    }
    if (np->op_type && !strcmp(np->op_type, "Constant") && np->n_output == 1) {
      onnx_host h;
      s = constant_value(np, label, &h);
      if (s != TVK_OK) break;
      if (slot_of(m, &map, np->output[0], false) >= 0) {
        onnx_host_free(&h);
        s = onnx_fail(TVK_ERR_INVALID_ARG, "%s: value '%s' is produced twice", label,
                      np->output[0]);
        break;
      }
      s = make_const(m, slot_of(m, &map, np->output[0], true), &h);
      continue;
    }
    const onnx_op *op = onnx_op_find(np->op_type ? np->op_type : "");
    if (!op) {
      s = onnx_fail(TVK_ERR_INVALID_ARG, "%s: operator %s is not supported", label, np->op_type);
      break;
    }
    if ((int)np->n_input < op->min_in || (int)np->n_input > op->max_in ||
        (int)np->n_output < op->min_out || (int)np->n_output > op->max_out) {
      s = onnx_fail(
          TVK_ERR_INVALID_ARG,
          "%s: %zu inputs and %zu outputs; tvk's %s takes %d..%d inputs and %d..%d outputs", label,
          np->n_input, np->n_output, op->name, op->min_in, op->max_in, op->min_out, op->max_out);
      break;
    }
    for (size_t a = 0; a < np->n_attribute; a++) {
      const char *an = np->attribute[a]->name ? np->attribute[a]->name : "";
      if (!listed(op->attrs, an)) {
        s = onnx_fail(TVK_ERR_INVALID_ARG, "%s: attribute '%s' is not supported (%s takes: %s)",
                      label, an, op->name, *op->attrs ? op->attrs : "none");
        break;
      }
    }
    if (s != TVK_OK) break;
    onnx_node *n = &m->nodes[m->nnodes++];
    n->proto = np;
    n->op = op;
    n->opset = m->opset;
    n->nin = (int)np->n_input;
    n->nout = (int)np->n_output;
    n->in = malloc(sizeof(int) * (np->n_input + 1));
    n->out = malloc(sizeof(int) * (np->n_output + 1));
    if (!n->in || !n->out) {
      s = onnx_fail(TVK_ERR_OUT_OF_MEMORY, "out of memory loading the model");
      break;
    }
    for (size_t k = 0; k < np->n_input && s == TVK_OK; k++) {
      const char *in = np->input[k];
      n->in[k] = -1;
      if (!in || !*in) continue; /* an omitted optional input */
      n->in[k] = slot_of(m, &map, in, false);
      if (n->in[k] < 0)
        s = onnx_fail(TVK_ERR_INVALID_ARG,
                      "%s: input '%s' is neither a graph input, a weight nor an earlier node's "
                      "output (nodes must come in topological order)",
                      label, in);
    }
    for (size_t k = 0; k < np->n_output && s == TVK_OK; k++) {
      const char *o = np->output[k];
      n->out[k] = -1;
      if (!o || !*o) continue;
      if (slot_of(m, &map, o, false) >= 0)
        s = onnx_fail(TVK_ERR_INVALID_ARG, "%s: value '%s' is produced twice", label, o);
      else
        n->out[k] = slot_of(m, &map, o, true);
    }
  }

  for (size_t i = 0; i < g->n_output && s == TVK_OK; i++) {
    const char *name = g->output[i]->name ? g->output[i]->name : "";
    int slot = slot_of(m, &map, name, false);
    if (slot < 0) {
      s = onnx_fail(TVK_ERR_INVALID_ARG, "output '%s' is produced by no node", name);
      break;
    }
    s = value_info(g->output[i], &m->output_info[m->noutputs]);
    if (s == TVK_ERR_SHAPE || s == TVK_OK) {
      s = TVK_OK; /* outputs may leave their shape to the nodes */
      m->output_info[m->noutputs].name = name;
    }
    m->outputs[m->noutputs++] = slot;
  }
  free(map.idx);
  return s;
}

static tvk_status load(tvk_ctx *ctx, const void *data, size_t size, char *dir,
                       tvk_onnx_model **out) {
  tvk_onnx_model *m = calloc(1, sizeof *m);
  if (!m) {
    free(dir);
    return onnx_fail(TVK_ERR_OUT_OF_MEMORY, "out of memory loading the model");
  }
  m->ctx = ctx;
  m->dir = dir;
  m->proto = onnx__model_proto__unpack(NULL, size, data);
  if (!m->proto) {
    tvk_onnx_destroy(m);
    return onnx_fail(TVK_ERR_INVALID_ARG,
                     "%zu bytes that are not a serialised ONNX ModelProto (truncated or corrupt)",
                     size);
  }
  tvk_status s = build(m);
  if (s == TVK_OK) s = onnx_fold_constants(m);
  if (s != TVK_OK) {
    tvk_onnx_destroy(m);
    return s;
  }
  *out = m;
  return TVK_OK;
}

tvk_status tvk_onnx_load_memory(tvk_ctx *ctx, const void *data, size_t size, tvk_onnx_model **out) {
  if (!out) return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_load_memory: out is NULL");
  *out = NULL;
  if (!ctx || (!data && size))
    return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_load_memory: %s is NULL",
                     !ctx ? "ctx" : "data");
  tvk_status s = load(ctx, data, size, NULL, out);
  if (s != TVK_OK) onnx_error_prefix("tvk_onnx_load_memory: ");
  return s;
}

tvk_status tvk_onnx_load(tvk_ctx *ctx, const char *path, tvk_onnx_model **out) {
  if (!out) return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_load: out is NULL");
  *out = NULL;
  if (!ctx || !path)
    return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_load: %s is NULL", !ctx ? "ctx" : "path");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    tvk_status s = onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_load: cannot open '%s': %s", path,
                             strerror(errno));
    if (fd >= 0) close(fd);
    return s;
  }
  size_t size = (size_t)st.st_size;
  void *data = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (size && data == MAP_FAILED)
    return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_load: cannot map '%s': %s", path,
                     strerror(errno));
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
  tvk_status s = dir ? load(ctx, data, size, dir, out)
                     : onnx_fail(TVK_ERR_OUT_OF_MEMORY, "out of memory loading the model");
  if (data) munmap(data, size);
  if (s != TVK_OK) onnx_error_prefix("tvk_onnx_load: %s: ", path);
  return s;
}

int tvk_onnx_input_count(const tvk_onnx_model *m) { return m ? m->ninputs : 0; }
int tvk_onnx_output_count(const tvk_onnx_model *m) { return m ? m->noutputs : 0; }

tvk_status tvk_onnx_input_info(const tvk_onnx_model *m, int i, tvk_onnx_value_info *out) {
  if (!m || !out) return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_input_info: a NULL argument");
  if (i < 0 || i >= m->ninputs)
    return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_input_info: index %d; the model has %d inputs",
                     i, m->ninputs);
  *out = m->input_info[i];
  return TVK_OK;
}

tvk_status tvk_onnx_output_info(const tvk_onnx_model *m, int i, tvk_onnx_value_info *out) {
  if (!m || !out) return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_output_info: a NULL argument");
  if (i < 0 || i >= m->noutputs)
    return onnx_fail(TVK_ERR_INVALID_ARG,
                     "tvk_onnx_output_info: index %d; the model has %d outputs", i, m->noutputs);
  *out = m->output_info[i];
  return TVK_OK;
}
