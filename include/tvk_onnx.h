/* tvk_onnx: ONNX models on tvk.
 *
 * Loads an ONNX model (a .onnx file, or the same bytes in memory: an Android
 * asset) and turns each of its nodes into tvk's tensor ops, so that a run is
 * one lazy tvk graph that fuses like any other: on the context's device, CPU
 * or Vulkan. The importer is a client of tvk.h (it calls nothing else); it is
 * its own library, libtvk_onnx, built when protobuf-c is found (the CMake
 * option TVK_ONNX), so libtvk itself never depends on protobuf.
 *
 *   tvk_onnx_model *m;
 *   if (tvk_onnx_load(ctx, "model.onnx", &m) != TVK_OK)
 *     fprintf(stderr, "%s\n", tvk_onnx_last_error());
 *   tvk_tensor *in[1] = {x}, *out[1];
 *   tvk_onnx_run(m, 1, in, 1, out);  // lazy: nothing has run yet
 *   tvk_to_host(out[0], buf, size);   // schedules, compiles, runs
 *
 * Conventions:
 * - Errors: every function returning tvk_status leaves a message naming what
 *   was wrong (the node, its op, the attribute or the dims) that
 *   tvk_onnx_last_error gives, on the calling thread, until its next failing
 *   call. A truncated or corrupt file is TVK_ERR_INVALID_ARG, never a crash; a
 *   model with an op, dtype or attribute the importer does not support fails
 *   at load (TVK_ERR_INVALID_ARG naming the node, the op and what is missing).
 * - Weights (the graph's initializers) are loaded once, at tvk_onnx_load,
 *   onto the context's device; runs share them.
 * - The model belongs to its context: destroy it before tvk_ctx_destroy. Like
 *   the context, a model is used from one thread at a time.
 */
#ifndef TVK_ONNX_H
#define TVK_ONNX_H

#include "tvk.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tvk_onnx_model tvk_onnx_model;

/* One input or output of a model's graph, as the file declares it. */
typedef struct {
  const char *name; /* the graph's name for it; valid while the model lives */
  tvk_dtype dtype;
  int ndim;
  /* -1 for a dim the file leaves open (a named dim such as "batch", or none) */
  int64_t shape[TVK_MAX_DIMS];
  /* the name of an open dim ("N", "seq"), NULL where the file gives none */
  const char *dim_names[TVK_MAX_DIMS];
} tvk_onnx_value_info;

/* Loads a model from a file (memory-mapped while it is parsed) or from size
 * bytes at data (copied: data may be freed after the call). *out is NULL on
 * failure. */
TVK_API tvk_status tvk_onnx_load(tvk_ctx *ctx, const char *path, tvk_onnx_model **out);
TVK_API tvk_status tvk_onnx_load_memory(tvk_ctx *ctx, const void *data, size_t size,
                                        tvk_onnx_model **out);
/* Frees the model and its weights (tensors a run returned stay valid). NULL is
 * a no-op. */
TVK_API void tvk_onnx_destroy(tvk_onnx_model *m);

/* The graph's inputs (those the caller feeds: initializers listed as inputs
 * are not counted) and outputs, in the file's order. */
TVK_API int tvk_onnx_input_count(const tvk_onnx_model *m);
TVK_API int tvk_onnx_output_count(const tvk_onnx_model *m);
/* TVK_ERR_INVALID_ARG for an index out of range or a NULL. */
TVK_API tvk_status tvk_onnx_input_info(const tvk_onnx_model *m, int i, tvk_onnx_value_info *out);
TVK_API tvk_status tvk_onnx_output_info(const tvk_onnx_model *m, int i, tvk_onnx_value_info *out);

/* Runs the model on nin tensors (the inputs in tvk_onnx_input_info's order,
 * on the model's context) and stores nout new tensors in out (the first nout
 * outputs; the caller releases them). The outputs are lazy: realize them or
 * read them with tvk_to_host, alone or together with more ops of your own,
 * which then fuse with the model's last kernels. An input whose dtype or
 * shape disagrees with the declared one (open dims take any size) is
 * TVK_ERR_SHAPE / TVK_ERR_DTYPE; a node that fails gives the status of the tvk
 * op that failed, with a message naming the node. out is untouched on failure. */
TVK_API tvk_status tvk_onnx_run(tvk_onnx_model *m, int nin, tvk_tensor *const *in, int nout,
                                tvk_tensor **out);

/* Reads a serialised ONNX TensorProto (the test suite's input_0.pb, a weight
 * saved alone) from a file or memory into a new tensor on ctx. */
TVK_API tvk_status tvk_onnx_load_tensor(tvk_ctx *ctx, const char *path, tvk_tensor **out);
TVK_API tvk_status tvk_onnx_load_tensor_memory(tvk_ctx *ctx, const void *data, size_t size,
                                               tvk_tensor **out);

/* The message of the calling thread's last failed tvk_onnx_* call; "" when
 * none has failed. Never NULL. */
TVK_API const char *tvk_onnx_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
