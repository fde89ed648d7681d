/* Host tensors, ONNX's dtypes, TensorProto decoding (initializers, Constant
 * nodes, .pb files) and the thread's error message. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

/* ---- errors ---- */

static _Thread_local char last_error[1024];

tvk_status onnx_fail(tvk_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return s;
}

void onnx_error_prefix(const char *fmt, ...) {
  char prefix[512], old[sizeof last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, last_error, sizeof old);
  /* prefix, then as much of the old message as fits */
  size_t np = strlen(prefix), no = strlen(old);
  if (np > sizeof last_error - 1) np = sizeof last_error - 1;
  if (no > sizeof last_error - 1 - np) no = sizeof last_error - 1 - np;
  memcpy(last_error, prefix, np);
  memcpy(last_error + np, old, no);
  last_error[np + no] = 0;
}

void onnx_error_clear(void) { last_error[0] = 0; }

const char *tvk_onnx_last_error(void) { return last_error; }

/* ---- host tensors ---- */

void onnx_host_free(onnx_host *h) {
  free(h->data);
  memset(h, 0, sizeof *h);
}

tvk_status onnx_host_alloc(onnx_host *h, tvk_dtype dt, int ndim, const int64_t *shape) {
  memset(h, 0, sizeof *h);
  if (ndim < 0 || ndim > TVK_MAX_DIMS)
    return onnx_fail(TVK_ERR_SHAPE, "%d dims (tvk takes at most %d)", ndim, TVK_MAX_DIMS);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return onnx_fail(TVK_ERR_SHAPE, "dim %d is %lld", i, (long long)shape[i]);
    if (shape[i] && n > INT64_MAX / 16 / shape[i])
      return onnx_fail(TVK_ERR_SHAPE, "a tensor of more than 2^59 elements");
    n *= shape[i];
    h->shape[i] = shape[i];
  }
  h->dt = dt;
  h->ndim = ndim;
  h->numel = n;
  size_t bytes = (size_t)n * tvk_dtype_size(dt);
  if (bytes) {
    h->data = calloc(1, bytes);
    if (!h->data) return onnx_fail(TVK_ERR_OUT_OF_MEMORY, "out of memory for %zu bytes", bytes);
  }
  return TVK_OK;
}

static float half_to_float(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0    ? ldexpf((float)m, -24)
            : e == 31 ? (m ? NAN : INFINITY)
                      : ldexpf((float)(m | 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

static uint16_t float_to_half(float f) {
  /* Round to nearest even through the float's bits. */
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int e = (int)((x >> 23) & 255) - 127 + 15;
  uint32_t m = x & 0x7fffff;
  if (((x >> 23) & 255) == 255) return (uint16_t)(sign | 0x7c00 | (m ? 0x200 : 0));
  if (e >= 31) return (uint16_t)(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    m |= 0x800000;
    int shift = 14 - e;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return (uint16_t)(sign | r);
  }
  uint32_t r = (uint32_t)e << 10 | m >> 13, rem = m & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
  return (uint16_t)(sign | r);
}

double onnx_host_get(const onnx_host *h, int64_t i) {
  const char *p = (const char *)h->data;
  switch (h->dt) {
  case TVK_BOOL: return ((const uint8_t *)p)[i] != 0;
  case TVK_INT8: return ((const int8_t *)p)[i];
  case TVK_UINT8: return ((const uint8_t *)p)[i];
  case TVK_INT16: return ((const int16_t *)p)[i];
  case TVK_UINT16: return ((const uint16_t *)p)[i];
  case TVK_INT32: return ((const int32_t *)p)[i];
  case TVK_UINT32: return ((const uint32_t *)p)[i];
  case TVK_INT64: return (double)((const int64_t *)p)[i];
  case TVK_UINT64: return (double)((const uint64_t *)p)[i];
  case TVK_FLOAT16: return half_to_float(((const uint16_t *)p)[i]);
  case TVK_BFLOAT16: {
    uint32_t x = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
  }
  case TVK_FLOAT32: return ((const float *)p)[i];
  case TVK_FLOAT64: return ((const double *)p)[i];
  }
  return 0;
}

int64_t onnx_host_get_int(const onnx_host *h, int64_t i) {
  if (h->dt == TVK_INT64) return ((const int64_t *)h->data)[i];
  if (h->dt == TVK_UINT64) return (int64_t)((const uint64_t *)h->data)[i];
  double v = onnx_host_get(h, i);
  if (!(v > -9.2e18 && v < 9.2e18)) return v > 0 ? INT64_MAX : INT64_MIN;
  return (int64_t)v;
}

void onnx_host_set(onnx_host *h, int64_t i, double v) {
  char *p = (char *)h->data;
  switch (h->dt) {
  case TVK_BOOL: ((uint8_t *)p)[i] = v != 0; break;
  case TVK_INT8: ((int8_t *)p)[i] = (int8_t)(int64_t)v; break;
  case TVK_UINT8: ((uint8_t *)p)[i] = (uint8_t)(int64_t)v; break;
  case TVK_INT16: ((int16_t *)p)[i] = (int16_t)(int64_t)v; break;
  case TVK_UINT16: ((uint16_t *)p)[i] = (uint16_t)(int64_t)v; break;
  case TVK_INT32: ((int32_t *)p)[i] = (int32_t)(int64_t)v; break;
  case TVK_UINT32: ((uint32_t *)p)[i] = (uint32_t)(int64_t)v; break;
  case TVK_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
  case TVK_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
  case TVK_FLOAT16: ((uint16_t *)p)[i] = float_to_half((float)v); break;
  case TVK_BFLOAT16: {
    float f = (float)v;
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fff + ((x >> 16) & 1); /* round to nearest even */
    ((uint16_t *)p)[i] = (uint16_t)(x >> 16);
    break;
  }
  case TVK_FLOAT32: ((float *)p)[i] = (float)v; break;
  case TVK_FLOAT64: ((double *)p)[i] = v; break;
  }
}

/* ---- dtypes ---- */

bool onnx_dtype_to_tvk(int32_t d, tvk_dtype *out) {
  static const int map[] = {
      [ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT] = TVK_FLOAT32 + 1,
      [ONNX__TENSOR_PROTO__DATA_TYPE__UINT8] = TVK_UINT8 + 1,
      [ONNX__TENSOR_PROTO__DATA_TYPE__INT8] = TVK_INT8 + 1,
      [ONNX__TENSOR_PROTO__DATA_TYPE__UINT16] = TVK_UINT16 + 1,
      [ONNX__TENSOR_PROTO__DATA_TYPE__INT16] = TVK_INT16 + 1,
      [ONNX__TENSOR_PROTO__DATA_TYPE__INT32] = TVK_INT32 + 1,
      [ONNX__TENSOR_PROTO__DATA_TYPE__INT64] = TVK_INT64 + 1,
      [ONNX__TENSOR_PROTO__DATA_TYPE__BOOL] = TVK_BOOL + 1,
      [ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16] = TVK_FLOAT16 + 1,
      [ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE] = TVK_FLOAT64 + 1,
      [ONNX__TENSOR_PROTO__DATA_TYPE__UINT32] = TVK_UINT32 + 1,
      [ONNX__TENSOR_PROTO__DATA_TYPE__UINT64] = TVK_UINT64 + 1,
      [ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16] = TVK_BFLOAT16 + 1,
  };
  if (d < 0 || d >= (int32_t)(sizeof map / sizeof map[0]) || !map[d]) return false;
  *out = (tvk_dtype)(map[d] - 1);
  return true;
}

const char *onnx_dtype_name(int32_t d) {
  static const char *names[] = {"UNDEFINED",  "FLOAT",   "UINT8",  "INT8",   "UINT16",
                                "INT16",      "INT32",   "INT64",  "STRING", "BOOL",
                                "FLOAT16",    "DOUBLE",  "UINT32", "UINT64", "COMPLEX64",
                                "COMPLEX128", "BFLOAT16"};
  if (d < 0 || d >= (int32_t)(sizeof names / sizeof names[0])) return "an unknown dtype";
  return names[d];
}

/* ---- TensorProto ---- */

/* Reads [offset, offset + len) of dir/location (ONNX external data) into dst. */
static tvk_status read_external(const Onnx__TensorProto *tp, const char *dir, const char *what,
                                void *dst, size_t bytes) {
  const char *location = NULL;
  long long offset = 0, length = -1;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const char *k = tp->external_data[i]->key, *v = tp->external_data[i]->value;
    if (!k || !v) continue;
    if (!strcmp(k, "location"))
      location = v;
    else if (!strcmp(k, "offset"))
      offset = strtoll(v, NULL, 10);
    else if (!strcmp(k, "length"))
      length = strtoll(v, NULL, 10);
  }
  if (!dir)
    return onnx_fail(TVK_ERR_INVALID_ARG,
                     "%s: its data is in an external file, and a model loaded from memory has "
                     "no folder to find it in (load it with tvk_onnx_load)",
                     what);
  if (!location || !*location || location[0] == '/' || strstr(location, ".."))
    return onnx_fail(TVK_ERR_INVALID_ARG,
                     "%s: external data location '%s' is not a file name inside the model's folder",
                     what, location ? location : "(none)");
  if (offset < 0 || (length >= 0 && (size_t)length != bytes))
    return onnx_fail(TVK_ERR_INVALID_ARG,
                     "%s: external data offset %lld, length %lld; the tensor needs %zu bytes", what,
                     offset, length, bytes);
  size_t n = strlen(dir) + strlen(location) + 2;
  char *path = malloc(n);
  if (!path) return onnx_fail(TVK_ERR_OUT_OF_MEMORY, "out of memory");
  snprintf(path, n, "%s/%s", dir, location);
  FILE *f = fopen(path, "rb");
  tvk_status s = TVK_OK;
  if (!f) {
    s = onnx_fail(TVK_ERR_INVALID_ARG, "%s: cannot open its external data '%s': %s", what, path,
                  strerror(errno));
  } else if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(dst, 1, bytes, f) != bytes) {
    s = onnx_fail(TVK_ERR_INVALID_ARG, "%s: '%s' holds fewer than %lld + %zu bytes", what, path,
                  offset, bytes);
  }
  if (f) fclose(f);
  free(path);
  return s;
}

tvk_status onnx_tensor_decode(Onnx__TensorProto *tp, const char *dir, const char *what, bool take,
                              onnx_host *h) {
  memset(h, 0, sizeof *h);
  tvk_dtype dt;
  int32_t odt = tp->has_data_type ? tp->data_type : 0;
  if (!onnx_dtype_to_tvk(odt, &dt))
    return onnx_fail(TVK_ERR_DTYPE, "%s: dtype %s is not supported", what, onnx_dtype_name(odt));
  if (tp->n_dims > TVK_MAX_DIMS)
    return onnx_fail(TVK_ERR_SHAPE, "%s: %zu dims (tvk takes at most %d)", what, tp->n_dims,
                     TVK_MAX_DIMS);
  if (tp->segment)
    return onnx_fail(TVK_ERR_INVALID_ARG, "%s: segmented tensors are not supported", what);
  tvk_status s = onnx_host_alloc(h, dt, (int)tp->n_dims, tp->dims);
  if (s != TVK_OK) {
    onnx_error_prefix("%s: ", what);
    return s;
  }
  size_t esize = tvk_dtype_size(dt), bytes = (size_t)h->numel * esize;
  size_t count = 0; /* elements in the typed field used */
  if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    s = read_external(tp, dir, what, h->data, bytes);
    if (s != TVK_OK) onnx_host_free(h);
    return s;
  }
  if (tp->has_raw_data) {
    if (tp->raw_data.len != bytes) {
      onnx_host_free(h);
      return onnx_fail(TVK_ERR_INVALID_ARG,
                       "%s: raw_data holds %zu bytes; %lld %s elements need %zu", what,
                       tp->raw_data.len, (long long)h->numel, tvk_dtype_name(dt), bytes);
    }
    if (take && bytes) { /* the parsed bytes become h's: no second copy of a weight */
      free(h->data);
      h->data = tp->raw_data.data;
      tp->raw_data.data = NULL;
      tp->raw_data.len = 0;
      tp->has_raw_data = 0;
    } else if (bytes) {
      memcpy(h->data, tp->raw_data.data, bytes); /* little-endian, as ONNX stores it */
    }
    return TVK_OK;
  }
  switch (odt) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    count = tp->n_float_data;
    if (count == (size_t)h->numel && bytes) memcpy(h->data, tp->float_data, bytes);
    break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    count = tp->n_double_data;
    if (count == (size_t)h->numel && bytes) memcpy(h->data, tp->double_data, bytes);
    break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    count = tp->n_int64_data;
    if (count == (size_t)h->numel && bytes) memcpy(h->data, tp->int64_data, bytes);
    break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
    count = tp->n_uint64_data;
    if (count == (size_t)h->numel)
      for (size_t i = 0; i < count; i++) {
        if (dt == TVK_UINT32)
          ((uint32_t *)h->data)[i] = (uint32_t)tp->uint64_data[i];
        else
          ((uint64_t *)h->data)[i] = tp->uint64_data[i];
      }
    break;
  default: /* the narrow ints, bool, float16 and bfloat16 live in int32_data */
    count = tp->n_int32_data;
    if (count == (size_t)h->numel)
      for (size_t i = 0; i < count; i++) {
        uint32_t v = (uint32_t)tp->int32_data[i];
        if (esize == 1)
          ((uint8_t *)h->data)[i] = (uint8_t)(dt == TVK_BOOL ? v != 0 : v);
        else if (esize == 2)
          ((uint16_t *)h->data)[i] = (uint16_t)v;
        else
          ((uint32_t *)h->data)[i] = v;
      }
    break;
  }
  if (count != (size_t)h->numel) {
    long long numel = (long long)h->numel;
    onnx_host_free(h);
    return onnx_fail(TVK_ERR_INVALID_ARG, "%s: holds %zu values; its dims give %lld", what, count,
                     numel);
  }
  return TVK_OK;
}

/* ---- .pb files ---- */

tvk_status tvk_onnx_load_tensor_memory(tvk_ctx *ctx, const void *data, size_t size,
                                       tvk_tensor **out) {
  if (!out) return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_load_tensor: out is NULL");
  *out = NULL;
  if (!ctx || (!data && size))
    return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_load_tensor: %s is NULL",
                     !ctx ? "ctx" : "data");
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, size, data);
  if (!tp)
    return onnx_fail(TVK_ERR_INVALID_ARG,
                     "tvk_onnx_load_tensor: %zu bytes that are not a serialised TensorProto "
                     "(truncated or corrupt)",
                     size);
  onnx_host h;
  tvk_status s =
      onnx_tensor_decode(tp, NULL, tp->name && *tp->name ? tp->name : "tensor", false, &h);
  onnx__tensor_proto__free_unpacked(tp, NULL);
  if (s != TVK_OK) {
    onnx_error_prefix("tvk_onnx_load_tensor: ");
    return s;
  }
  tvk_tensor *t = tvk_from_data(ctx, h.dt, h.ndim, h.shape, h.data);
  onnx_host_free(&h);
  s = tvk_status_of(t);
  if (s != TVK_OK) {
    onnx_fail(s, "tvk_onnx_load_tensor: %s", tvk_error_of(t));
    tvk_release(t);
    return s;
  }
  *out = t;
  return TVK_OK;
}

tvk_status tvk_onnx_load_tensor(tvk_ctx *ctx, const char *path, tvk_tensor **out) {
  if (!out) return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_load_tensor: out is NULL");
  *out = NULL;
  if (!path) return onnx_fail(TVK_ERR_INVALID_ARG, "tvk_onnx_load_tensor: path is NULL");
  void *data;
  size_t size;
  tvk_status s = onnx_read_file(path, &data, &size);
  if (s != TVK_OK) return s;
  s = tvk_onnx_load_tensor_memory(ctx, data, size, out);
  free(data);
  if (s != TVK_OK) onnx_error_prefix("%s: ", path);
  return s;
}

tvk_status onnx_read_file(const char *path, void **data, size_t *size) {
  *data = NULL;
  *size = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return onnx_fail(TVK_ERR_INVALID_ARG, "cannot open '%s': %s", path, strerror(errno));
  tvk_status s = TVK_OK;
  if (fseeko(f, 0, SEEK_END) != 0) {
    s = onnx_fail(TVK_ERR_INVALID_ARG, "cannot read '%s': %s", path, strerror(errno));
  } else {
    off_t n = ftello(f);
    rewind(f);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf)
      s = onnx_fail(TVK_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", path);
    else if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
      s = onnx_fail(TVK_ERR_INVALID_ARG, "cannot read '%s'", path);
      free(buf);
    } else {
      *data = buf;
      *size = (size_t)n;
    }
  }
  fclose(f);
  return s;
}
