/* The tensor frontend: contexts, tensors, buffers, and realizing. The graph
 * the tensors hold is the tensor graph of ir/graph.h.
 *
 * ---- Ownership ----
 * Public functions mark the UCtx pool on entry and drain it before returning
 * (FRONT_BEGIN / FRONT_END below), so temporaries die with the call and only what
 * tensors retain lives on. A BUFFER UOp owns its device buffer: when the last
 * reference to it goes, the buffer is freed (the UCtx free hook).
 */
#ifndef TVK_FRONTEND_FRONTEND_H
#define TVK_FRONTEND_FRONTEND_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/kernel.h"
#include "ir/dtype.h"
#include "ir/graph.h"
#include "ir/uop.h"
#include "ir/view.h"
#include "runtime/device.h"
#include "schedule/schedule.h"
#include "tvk.h"

_Static_assert(TVK_MAX_DIMS == 16, "tvk.h and view.h agree on the most dims");

enum { BUFFER_SIZES_MAX = 8 };

typedef struct {
  DevBuffer *dev; /* NULL for a zero-byte buffer */
  int device;     /* the context's device it is on: ctx->devs[device] */
  size_t nbytes;
  ScalarType dtype;
  int64_t numel;
  /* Memory the app owns (ctx_buffer_wrap): the device is synced and then
   * release(release_user) called (when not NULL) as the buffer goes. */
  bool foreign;
  void (*release)(void *user);
  void *release_user;
  /* The size variables its contents were made for (data of a symbolic
   * shape, a kernel's output over one) and their values then: a realize
   * that reads it under other values is refused (realize.c). */
  int nsizes;
  sint size_vars[BUFFER_SIZES_MAX];
  int64_t size_vals[BUFFER_SIZES_MAX];
} Buffer;

struct tvk_tensor {
  tvk_ctx *ctx;
  UOp *uop;          /* retained; NULL in an error tensor */
  tvk_status status; /* TVK_OK or the error */
  char *msg;         /* the error message (malloc'd) or NULL */
  tvk_dtype dtype;
  int ndim;
  int64_t shape[TVK_MAX_DIMS];
  uint64_t seq; /* creation order, for scopes */
  tvk_tensor *prev, *next;
};

/* A size variable the context made (sizes.c) and its bound value. */
typedef struct {
  sint var;         /* the sint_var handle */
  const char *name; /* sint_var_info's: lives as long as the process */
  int64_t lo, hi;
  int64_t value;
  bool bound;
} SizeVar;

/* The most variables one size expression, or one realize, may use. */
enum { SIZE_VARS_MAX = 16 };

/* The most devices one context may use (tvk_ctx_add_device). */
enum { CTX_MAX_DEVICES = 8 };

struct tvk_ctx {
  UCtx *u;
  Device *dev; /* devs[0]: where data is made, what tvk_ctx_device names */
  /* Every device of the context, its first one first; a tensor's device is
   * an index of it (UOp.device). */
  Device *devs[CTX_MAX_DEVICES];
  int ndevs;
  tvk_ctx_options opt;                       /* resolved: env read once at create */
  char *cache_dir, *cc, *graph, *trace_path; /* owned copies of the resolved strings */
  Error err;                                 /* tvk_ctx_error: the last failure (ir/error.h) */
  tvk_stats stats;
  LogSink log; /* opt.log and opt.log_user: where messages go */
  /* buffers by id (the BUFFER UOp's arg); NULL slots are free */
  Buffer **bufs;
  int64_t nbufs;
  size_t capbufs;
  /* live tensors in creation order, for scopes, realize and destroy */
  tvk_tensor *head, *tail;
  /* What a tensor function returns when memory for a new tensor runs out:
   * an error tensor (TVK_ERR_OUT_OF_MEMORY) that needs no memory of its
   * own, so ops on it and checks of it report the real cause. Not in the
   * list above; tvk_release ignores it. */
  tvk_tensor oom_tensor;
  uint64_t next_seq;
  uint64_t next_value; /* the serial of the next VALUE (tvk_scalar) */
  /* compiled programs of each device (runtime/run.h); NULL until its first */
  struct ProgCache *programs[CTX_MAX_DEVICES];
  struct SchedCache
      *sched_cache;  /* schedules by graph structure (schedule.h); NULL until the first */
  tvk_jit *jits;     /* live jits (jit.c), freed at destroy */
  tvk_optim *optims; /* live optimisers (optim.c), freed at destroy */
  tvk_jit *capture;  /* the jit whose call is being captured: realizes record their launches */
  /* kernel times by program (profile.c), when timed */
  struct ProfRow *prof;
  size_t nprof, capprof;
  tvk_profile_entry *prof_entries; /* tvk_profile_entries' last answer */
  char *prof_text;                 /* tvk_profile_summary's last text */
  struct Trace *trace;             /* TVK_TRACE's file (runtime/trace.h); NULL: none */
  SizeVar *sizes;                  /* the size variables made in this context (tvk_size_var) */
  int nsizes, capsizes;
};

/* The device t's kernels run on, for an op that builds its graph by the
 * device's kind: its own, else (a constant, a graph over several devices)
 * the first. */
static inline const Device *front_device(const tvk_tensor *t) {
  return t->ctx->devs[t->uop->device > 0 ? t->uop->device : 0];
}

/* Whether t lies on more than one device (sharded, or mixed): its parts are
 * computed where they are (shard.c); a copy of the whole gathers them. */
static inline bool front_on_devices(const tvk_tensor *t) {
  return t->uop->device == UOP_DEVICE_MULTI || t->uop->device == UOP_DEVICE_MIXED;
}

/* A 0-d constant folded into the kernels' source, for the constants of the
 * ops' own formulas (tvk_scalar makes a float32 one a launch value instead,
 * for the app's scalars that change from call to call). */
static inline tvk_tensor *front_const(tvk_ctx *ctx, tvk_dtype dt, double v) {
  return tvk_full(ctx, dt, 0, NULL, v);
}

/* ---- assign (ops_assign.c) ---- */
/* Makes t's node its own contiguous buffer, as tvk_assign needs its target:
 * VIEW(BUFFER) reading all of it in row-major order. A t that is not data yet
 * is realized first (a pending assign runs); a constant or an arange (no
 * memory of their own) is copied into a buffer. TVK_ERR_INVALID_ARG, with the
 * message in ctx->err, for a view of another tensor's memory (a transpose, a
 * slice); the realize's error when that fails. */
tvk_status front_own_buffer(tvk_tensor *t);

/* ---- arange (ops_arange.c) ---- */
/* 0, 1, ..., n-1 in int32, shape (n,), n a number or a symbolic size: what
 * an op needs to compare indices (a causal mask over seq). */
tvk_tensor *front_arange(tvk_ctx *ctx, sint n);

/* ---- jit (jit.c) ---- */
/* Runner.on_launch of a realize while ctx->capture is set. */
void jit_on_launch(void *jit, const Schedule *s, int item, const KernelSource *ks, DevProgram *prog,
                   const int32_t *vals, int nvals, const LaunchDims *dims);
/* Runner.on_copy of a realize while ctx->capture is set. */
void jit_on_copy(void *jit, const Schedule *s, int item);
/* Runner.on_chain of a realize while ctx->capture is set: the last n
 * launches recorded ran as one chain, and are replayed as one. */
void jit_on_chain(void *jit, const Schedule *s, int first, int n, int parts);
/* Destroys every jit of the context. */
void jit_free_all(tvk_ctx *ctx);
/* Destroys every optimiser of the context (optim.c). */
void optim_free_all(tvk_ctx *ctx);

/* ---- profile (profile.c) ---- */
/* Device.on_time of a context's device: adds the launch to its program's row,
 * and to the trace. */
void profile_on_time(void *ctx, const LaunchTime *t);
/* Frees the rows and the text. */
void profile_free(tvk_ctx *ctx);

/* ---- symbolic sizes (sizes.c) ---- */
/* The bound variables' names and values, up to max of them; their count. */
int ctx_size_bindings(const tvk_ctx *ctx, const char **names, int64_t *vals, int max);
/* *out = s with the context's bound values (s itself for a number). An
 * unbound variable is TVK_ERR_INVALID_ARG, with "<op>: size variable 'n' has
 * no value ..." in err when err is not NULL. */
tvk_status ctx_size_eval(const tvk_ctx *ctx, Error *err, const char *op, sint s, int64_t *out);
/* *out = the count of shape with the bound values (ctx_size_eval per dim,
 * its errors). */
tvk_status ctx_bound_numel(const tvk_ctx *ctx, Error *err, const char *op, int ndim,
                           const int64_t *shape, int64_t *out);
/* NULL when s is a size of the context: a number >= 0, or an expression
 * over its variables that is never negative; else the error tensor naming op
 * and `what` ("dim 2"). */
tvk_tensor *front_check_size(tvk_ctx *ctx, const char *op, const char *what, sint s);
/* front_check_size as a status, the message in ctx->err. */
tvk_status ctx_check_size(tvk_ctx *ctx, const char *op, const char *what, sint s);
/* Records in b the size variables of shape with their bound values (all
 * bound: the caller evaluated the shape). TVK_ERR_SHAPE, in ctx->err, for a
 * shape of more than BUFFER_SIZES_MAX variables. */
tvk_status ctx_buffer_record_sizes(tvk_ctx *ctx, Buffer *b, int ndim, const int64_t *shape);
/* TVK_OK when the values b was made for (ctx_buffer_record_sizes) are the
 * ones bound now; else TVK_ERR_SHAPE naming op, the variable and both values. */
tvk_status ctx_buffer_check_sizes(tvk_ctx *ctx, const char *op, const Buffer *b);
/* The first dim of shape that is symbolic, or -1. */
int shape_first_sym(int ndim, const int64_t *shape);
/* The error tensor for the first of ts[0..n) (NULL entries skipped) with a
 * symbolic dim, naming op, the dim and its size; NULL when none has one.
 * What an op that does not take symbolic sizes yet answers. */
tvk_tensor *front_refuse_symbolic(const char *op, int n, tvk_tensor *const *ts);

/* Opens device `name` (or the app's Vulkan device vk_app of vk_size bytes)
 * with the context's options, its launch times going to the profile when
 * the context times them (ctx.c). */
tvk_status ctx_open_device(tvk_ctx *ctx, const char *name, const void *vk_app, size_t vk_size,
                           Device **out, Error *err);
/* Waits for every device of the context: TVK_OK, or the first failure's
 * status with "<what>: <the device's message>" in ctx->err (what NULL:
 * the status only, ctx->err untouched). */
tvk_status ctx_sync_devices(tvk_ctx *ctx, const char *what);
/* COPY(x) to device `device` (autoreleased), with a view of x that is not
 * plain memory made contiguous on its own device first (tvk_to_device's). */
UOp *front_copy(UOp *x, int device);

/* ---- sharded tensors (shard.c) ---- */
/* root, a graph over MULTIs (UOP_DEVICE_MULTI), as per-device graphs: a
 * MULTI of them, or a node of one device where the graph gathers or
 * all-reduces (autoreleased, in *out). TVK_ERR_INVALID_ARG naming the op
 * that does not run on parts yet; out of memory. */
tvk_status shard_split(tvk_ctx *ctx, UOp *root, UOp **out);
/* A MULTI's parts copied to device `to` and put in place: the whole tensor
 * there (autoreleased; NULL on out of memory). */
UOp *shard_gather(UOp *multi, int to);
/* Part k of `multi` (cut along axis, or -1: all of it) taken from g, a node
 * of the whole tensor's shape (split already: a MULTI or a node of one
 * device): g gathered on the part's device, then the part's rows
 * (autoreleased; NULL on out of memory). */
UOp *shard_rows_on(UOp *g, int axis, UOp *multi, int k);
/* t (of no device, or on one) placed as `like` is: on its device, or cut
 * and on the devices of its parts (a new tensor; errors as tensors). */
tvk_tensor *front_shard_like(tvk_tensor *t, tvk_tensor *like);
/* tvk_assign into a sharded target: each part assigned its part of the
 * value (cut alike, replicated on the same devices, or a constant). */
tvk_status shard_assign(tvk_tensor *target, tvk_tensor *value);

/* ---- dtypes ---- */
ScalarType dt_from_tvk(tvk_dtype dt);
tvk_dtype dt_to_tvk(ScalarType s);
bool tvk_dtype_valid(tvk_dtype dt);

/* ---- errors ---- */
/* Records a failure of a call that names no context (tvk_last_error's
 * message) and returns st. */
tvk_status front_no_ctx_error(tvk_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A new tensor in an error state with the message; also sets ctx->error.
 * Returns NULL only when memory for the tensor itself ran out. */
tvk_tensor *tensor_error(tvk_ctx *ctx, tvk_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A new error tensor with status st and the message ctx->err holds (the
 * failure a ctx-level check just recorded). */
tvk_tensor *tensor_error_ctx(tvk_ctx *ctx, tvk_status st);
/* A new error tensor carrying src's status and message (for ops on error tensors). */
tvk_tensor *tensor_error_from(const tvk_tensor *src);
/* The first input that is NULL or in an error state, turned into the result
 * error tensor; NULL when all inputs are fine. `op` names the op for the NULL
 * case. ctx is taken from the first non-NULL input. */
tvk_tensor *tensor_check_inputs(const char *op, int n, tvk_tensor *const *ts);
/* The error tensor naming op, both devices and both arguments when two of
 * ts[0..n) (non-NULL, of one context, not errors) live on different devices
 * (constants, of none, go anywhere); NULL when they agree. */
tvk_tensor *front_check_devices(const char *op, int n, tvk_tensor *const *ts);

/* A user-given shape for creating a tensor: ndim in 0..TVK_MAX_DIMS, shape
 * non-NULL when ndim > 0, no negative dim, the count fitting in int64. NULL
 * (and *numel) when fine, else the error tensor naming op. */
tvk_tensor *ctx_check_shape(tvk_ctx *ctx, const char *op, int ndim, const int64_t *shape,
                            int64_t *numel);

/* ---- tensors ---- */
/* A new tensor for graph node u (retained) with the given dtype and shape.
 * NULL on out of memory. */
tvk_tensor *tensor_new(tvk_ctx *ctx, UOp *u, tvk_dtype dt, int ndim, const int64_t *shape);
/* A new tensor for u, its shape from graph_shape and dtype from u. */
tvk_tensor *tensor_from_uop(tvk_ctx *ctx, UOp *u);
/* Replaces t's node (after realize): retains nu, releases the old one. */
void tensor_set_uop(tvk_tensor *t, UOp *nu);

/* Every public tensor function brackets its work so temporaries are freed:
 *   size_t m = FRONT_BEGIN(ctx); ... ; return FRONT_END(ctx, m, result);   */
#define FRONT_BEGIN(ctx) uop_pool_mark((ctx)->u)
static inline tvk_tensor *FRONT_END(tvk_ctx *ctx, size_t mark, tvk_tensor *t) {
  uop_pool_drain(ctx->u, mark);
  return t;
}

/* ---- buffers ---- */
/* Allocates a device buffer of numel elements of s; returns its id (>= 0) or -1
 * with ctx->error set. Counts bytes in the stats. */
int64_t ctx_buffer_new(tvk_ctx *ctx, ScalarType s, int64_t numel, tvk_status *st);
/* ... on the context's device `device` (an index of ctx->devs). */
int64_t ctx_buffer_new_on(tvk_ctx *ctx, int device, ScalarType s, int64_t numel, tvk_status *st);
/* The name of the context's device i, for messages: "CPU (...)" or "VK:1 (...)". */
const char *ctx_device_name(const tvk_ctx *ctx, int i);
Buffer *ctx_buffer(const tvk_ctx *ctx, int64_t id);
/* A buffer over memory the app owns (DeviceOps.wrap), with the callback the
 * app gets when tvk is done with it; its id, or -1 with ctx->error set (and
 * release not called). Not counted in bytes_now: tvk allocated nothing. */
int64_t ctx_buffer_wrap(tvk_ctx *ctx, ScalarType s, int64_t numel, const DevForeign *m,
                        void (*release)(void *), void *user, tvk_status *st);
/* Frees buffer id before any UOp owns it (a creation that failed half way):
 * a wrapped buffer's release is not called, the memory stays the app's. */
void ctx_buffer_discard(tvk_ctx *ctx, int64_t id);
/* VIEW(BUFFER(id)) with a contiguous tracker of shape (autoreleased). */
UOp *graph_buffer_view(tvk_ctx *ctx, int64_t id, int ndim, const int64_t *shape);

/* ---- graph helpers (the rest are ir/graph.h's) ---- */
/* A constant of dtype s broadcast to shape (autoreleased). */
UOp *graph_const(tvk_ctx *ctx, ScalarType s, double value, int ndim, const int64_t *shape);

/* ---- realizing (realize.c) ---- */
/* Realizes the tensors: schedules the graphs, compiles and runs the kernels, and
 * replaces every realized node in every live tensor with VIEW(BUFFER). */
tvk_status ctx_realize(tvk_ctx *ctx, int n, tvk_tensor *const *ts);
/* Realizes t into a contiguous row-major buffer of its own shape (a view or a
 * constant is copied into one, and t then reads it) and returns that buffer's
 * record, or NULL with the error in ctx->err and *st. `op` names the caller
 * in the messages. */
Buffer *ctx_materialize(tvk_tensor *t, const char *op, tvk_status *st);

#endif
