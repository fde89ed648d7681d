/* tvk: a lazy tensor library in C11.
 *
 * A program builds tensor expressions with the functions below; nothing runs
 * until a result is needed (tvk_realize, tvk_to_host). Then tvk schedules the
 * whole graph into as few kernels as it can, generates source for each kernel,
 * compiles it (cached on disk) and runs it on the context's device.
 *
 * Conventions that hold for every function here:
 * - Ownership: every function returning a tvk_tensor* returns a new tensor the
 *   caller owns and releases with tvk_release (or leaves to tvk_ctx_destroy, or
 *   to a scope: tvk_scope_begin/end). Inputs are never consumed: releasing an
 *   input after using it is always safe, the result keeps what it needs.
 * - Errors: tensor functions never return NULL for a bad call. They return a
 *   tensor in an error state (tvk_status_of != TVK_OK) whose message names the
 *   op and the values that were wrong; ops on an error tensor return an error
 *   tensor with the same status and message. tvk_realize and tvk_to_host return
 *   the status and make the message tvk_ctx_error's. NULL is returned only when
 *   a tensor argument is NULL *and* no context can be found. When memory for
 *   a new tensor runs out, the result is the context's one out-of-memory
 *   tensor (TVK_ERR_OUT_OF_MEMORY; releasing it, even many times, is
 *   harmless), so that every later op and tvk_realize report it. A failed
 *   allocation anywhere else gives TVK_ERR_OUT_OF_MEMORY too, leaves the
 *   context usable and writes nothing to the kernel cache. Nothing aborts
 *   the process on bad input.
 * - Thread safety: a context and its tensors are used from one thread at a
 *   time. Different contexts are independent and may be used from different
 *   threads.
 * - Broadcasting and promotion follow numpy: shapes are aligned at the end, a
 *   size-1 dim stretches; mixed dtypes promote to the smallest type both fit
 *   (bool < int8 < int16 < int32 < int64, uint8 < uint16 ..., ints < floats,
 *   float16/bfloat16 < float32 < float64).
 */
#ifndef TVK_H
#define TVK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header. tvk_version() gives the library's, which is
 * the same unless an app runs with another libtvk.so than it was built with. */
#define TVK_VERSION_MAJOR 0
#define TVK_VERSION_MINOR 1
#define TVK_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, for comparisons: 100 is 0.1.0. */
#define TVK_VERSION (TVK_VERSION_MAJOR * 10000 + TVK_VERSION_MINOR * 100 + TVK_VERSION_PATCH)

/* What libtvk exports. The library is built with hidden visibility and
 * TVK_BUILDING, so a shared libtvk exports these functions and nothing else;
 * for an app including the header it is empty. */
#if defined(TVK_BUILDING) && (defined(__GNUC__) || defined(__clang__))
#define TVK_API __attribute__((visibility("default")))
#else
#define TVK_API
#endif

/* ------------------------------------------------------------------ basics */

/* Every fallible call returns one of these; the message of the last error is
 * kept by the context it happened in (tvk_ctx_error). */
typedef enum {
  TVK_OK = 0,
  TVK_ERR_INVALID_ARG,   /* a NULL where a value is needed, an out-of-range argument */
  TVK_ERR_SHAPE,         /* shapes that do not broadcast, a reshape that changes the size ... */
  TVK_ERR_DTYPE,         /* a dtype an op or a device does not take */
  TVK_ERR_DEVICE,        /* no such device, a compiler or driver that is missing or failed */
  TVK_ERR_OUT_OF_MEMORY, /* host or device memory ran out */
  TVK_ERR_COMPILE,       /* a generated kernel failed to compile */
  TVK_ERR_INTERNAL,      /* a bug in tvk: please report it with the message */
} tvk_status;

/* Element types of tensors. */
typedef enum {
  TVK_BOOL,
  TVK_INT8,
  TVK_UINT8,
  TVK_INT16,
  TVK_UINT16,
  TVK_INT32,
  TVK_UINT32,
  TVK_INT64,
  TVK_UINT64,
  TVK_FLOAT16, /* IEEE half, stored as 16 bits */
  TVK_BFLOAT16,
  TVK_FLOAT32,
  TVK_FLOAT64,
} tvk_dtype;

/* A short constant name of a status ("TVK_ERR_SHAPE"); never NULL. */
TVK_API const char *tvk_status_name(tvk_status s);
/* The library's version as MAJOR * 10000 + MINOR * 100 + PATCH (TVK_VERSION
 * is the header's), and as text ("0.1.0"; static storage). */
TVK_API int tvk_version(void);
TVK_API const char *tvk_version_string(void);
/* "float32", ...; "invalid" for a value out of the enum. Never NULL. */
TVK_API const char *tvk_dtype_name(tvk_dtype dt);
/* Bytes of one element (bool: 1); 0 for a value out of the enum. */
TVK_API size_t tvk_dtype_size(tvk_dtype dt);

/* The most dims a tensor has. */
#define TVK_MAX_DIMS 16

typedef struct tvk_ctx tvk_ctx;
typedef struct tvk_tensor tvk_tensor;

/* ------------------------------------------------------------------ context */

/* Options of a context. Zero-initialise, set what you need; every field has an
 * environment variable that is read when the field is left 0/NULL. */
/* What tvk says about its work (TVK_DEBUG output, warnings such as a cache it
 * cannot write). A log callback receives each message whole (it may span
 * lines; no trailing newline), from the thread that called into tvk; without
 * one, messages go to stderr. */
typedef enum {
  TVK_LOG_WARN = 1,  /* something did not work as asked, and tvk went on */
  TVK_LOG_INFO = 2,  /* TVK_DEBUG output: kernels, times, schedules, plans */
  TVK_LOG_DEBUG = 3, /* TVK_DEBUG >= 3: sources and UOps */
} tvk_log_level;
typedef void (*tvk_log_fn)(void *user, tvk_log_level level, const char *message);
/* (Messages come from the thread that called into tvk, except the warnings of
 * the CPU device's background builds (tvk_cpu_tiers), which come from its
 * builder threads.) */

/* How the CPU device compiles a kernel that is not in its cache (docs/cpu_backend.md).
 * FAST_THEN_OPTIMISED: TinyCC builds it in memory in about a millisecond and
 * it runs at once; the system compiler (-O2) builds it in the background and
 * takes over between launches when done (into the disk cache, so the next
 * process starts optimised). OPTIMISED: the system compiler only (the first
 * launch waits for it). FAST: TinyCC only (its kernels run 2-7x slower; a
 * kernel it rejects fails with TVK_ERR_COMPILE). In the default mode, without
 * libtcc in the build or when TinyCC rejects a kernel, the system compiler
 * serves; without a system compiler, TinyCC does. Either way a kernel found in
 * the disk cache is loaded, with no compiler at all. */
typedef enum {
  TVK_CPU_TIERS_DEFAULT = 0, /* $TVK_CPU_TIERS ("fast-then-optimised", "optimised", "fast"), else */
  TVK_CPU_TIERS_FAST_THEN_OPTIMISED = 1,
  TVK_CPU_TIERS_OPTIMISED = 2,
  TVK_CPU_TIERS_FAST = 3,
} tvk_cpu_tiers;

typedef struct {
  const char *device;    /* "CPU", "VK", "VK:1"; NULL: $TVK_DEVICE, else the best available */
  int debug;             /* $TVK_DEBUG: 1 kernels and timings, 2 + schedule, 3 + source, 4 + UOps */
  const char *cache_dir; /* $TVK_CACHE_DIR, else $XDG_CACHE_HOME/tvk, else ~/.cache/tvk */
  const char *cc;        /* CPU: the C compiler; $CC, else cc */
  int threads;           /* CPU: threads per kernel; 0 = one per core */
  int validate;          /* $TVK_VALIDATE: Vulkan validation layer on */
  int noopt;             /* $TVK_NOOPT: no kernel optimisations */
  /* $TVK_BEAM: > 0 times candidate optimisation plans of each new kernel on
   * the device (beam width n) and keeps the fastest, stored next to the
   * kernel cache so that later runs time nothing; 0: the heuristic's plan. */
  int beam;
  /* $TVK_CACHE_READONLY: use the kernel cache without writing to it (a prebuilt
   * cache shipped with an application). Hits are served from it; a kernel it
   * lacks is compiled into a private temporary place and not kept; the
   * directory must exist. A cache_dir / $TVK_CACHE_DIR that exists but cannot
   * be written is used this way without being asked. */
  int cache_readonly;
  /* $TVK_NO_DISK_CACHE: no kernel cache on disk at all: nothing is read from
   * or written to a cache directory, and compiled kernels live as long as the
   * context (the CPU's compiler still works in a private temporary
   * directory, removed at tvk_ctx_destroy). Without it, a cache directory
   * that cannot be used is no error for Vulkan either: its kernels are then
   * compiled in memory, with one TVK_LOG_WARN message. */
  int no_disk_cache;
  /* CPU: $TVK_CC_TIMEOUT, else 120: the seconds one run of the C compiler may
   * take; a compiler still running then is killed and the kernel fails with
   * TVK_ERR_COMPILE. A negative value, or a $TVK_CC_TIMEOUT that is not a whole
   * number of seconds, makes tvk_ctx_create fail with TVK_ERR_INVALID_ARG. */
  int cc_timeout;
  /* Where messages go (tvk_log_fn above): log(log_user, level, message);
   * NULL: stderr. */
  tvk_log_fn log;
  void *log_user;
  /* CPU: how kernels are compiled (tvk_cpu_tiers above). A value outside the
   * enum, or a $TVK_CPU_TIERS it does not name, makes tvk_ctx_create fail with
   * TVK_ERR_INVALID_ARG. */
  tvk_cpu_tiers cpu_tiers;
  /* $TVK_PROGRESS: 1 says how a realize's compiles go, as TVK_LOG_INFO
   * messages ("tvk: compiling 14/27 kernels (1.2 s)"), once they have taken
   * half a second or when there are 16 or more, and a last line when done.
   * Off by default (TVK_DEBUG >= 1 turns it on too); the samples turn it on. */
  int progress;
  /* $TVK_PROFILE: 1 times every kernel launch on the device (Vulkan:
   * timestamps, read when a batch completes, so nothing waits; CPU: each
   * launch's wall time) for tvk_profile_summary. TVK_DEBUG >= 1 does too, and
   * prints the summary at tvk_ctx_destroy. */
  int profile;
  /* $TVK_GRAPH: a path: each realize writes its schedule there as a
   * Graphviz digraph (`dot -Tsvg` renders it): every kernel a cluster with
   * the buffers it writes and why each is materialised, the inputs, and
   * which kernel reads what. A "%d" in the path becomes the schedule's
   * number in the context; without one, each realize overwrites the file. */
  const char *graph;
  /* $TVK_TRACE: a path: the context writes a Chrome trace-event JSON file
   * there (chrome://tracing and ui.perfetto.dev open it), finished at
   * tvk_ctx_destroy: every kernel launch on the device's track (its device
   * time, from Vulkan timestamps or the CPU's clock, with the kernel's
   * estimated FLOPs and bytes and its optimisation plan), and the host's
   * realize, schedule, codegen, compile, copy and wait spans on the tracks of
   * the threads that did them. Launches are timed as by `profile`; nothing
   * waits for the device because of it. A path that cannot be written is a
   * TVK_LOG_WARN message and no trace. */
  const char *trace;
  /* $TVK_GPU_RULES: 1 plans the kernels of a Vulkan device that runs on the
   * CPU (lavapipe, SwiftShader) by the rules for GPUs (work-group tiles,
   * staging through work-group memory, grouped reduces) instead of the ones
   * measured to suit it: for testing those plans without a GPU. */
  int gpu_rules;
  /* CPU: $TVK_NO_CHAINS: 1 runs every kernel by itself. By default
   * consecutive kernels over the same rows (a softmax's or a layernorm's
   * reduces and their elementwise kernel) whose shared data exceeds a core's
   * cache run as one launch, part by part, each core taking some rows
   * through all of them while the rows are in its cache (docs/runtime.md). */
  int no_chains;
} tvk_ctx_options;

/* ------------------------------------------------------------------ devices */

typedef enum {
  TVK_DEVICE_KIND_CPU = 0,        /* the CPU device: C kernels on the host's cores */
  TVK_DEVICE_KIND_DISCRETE_GPU,   /* Vulkan */
  TVK_DEVICE_KIND_INTEGRATED_GPU, /* Vulkan */
  TVK_DEVICE_KIND_VIRTUAL_GPU,    /* Vulkan */
  TVK_DEVICE_KIND_SOFTWARE,       /* a Vulkan device that runs on the CPU (lavapipe, SwiftShader) */
  TVK_DEVICE_KIND_OTHER,          /* Vulkan, of no type it names */
} tvk_device_kind;

/* What tvk_device_get_info says of one device. It grows at its end from
 * version to version (the macro passes the size the app knows). */
typedef struct {
  char name[32];         /* what tvk_ctx_create takes: "VK:0", "VK:1", ..., "CPU" */
  char description[256]; /* "llvmpipe (LLVM 15.0.6, 256 bits)", "AMD EPYC 7B13" */
  tvk_device_kind kind;
  bool usable; /* tvk can run on it; else unusable_reason says why */
  char unusable_reason[128];
  bool is_default;       /* the one tvk_ctx_create(NULL) picks when $TVK_DEVICE is unset */
  uint32_t vendor_id;    /* PCI vendor (0x10de NVIDIA, 0x1002 AMD, 0x8086 Intel); 0 CPU */
  uint32_t device_id;    /* PCI device; 0 for the CPU */
  char driver[128];      /* "llvmpipe, Mesa 22.3.6" (Vulkan 1.2+ drivers); "" otherwise */
  uint32_t api_version;  /* Vulkan version, VK_MAKE_API_VERSION's encoding; 0 for the CPU */
  uint64_t memory_bytes; /* the largest device-local heap; the host's RAM for the CPU */
  int subgroup_size;     /* Vulkan subgroup size; float32 SIMD lanes for the CPU */
  int cores;             /* CPU: hardware threads online; 0 on Vulkan */
  bool fp16, int8, fp64; /* native float16 / int8 / float64 arithmetic in kernels */
} tvk_device_info;

/* How many devices tvk can name: the Vulkan devices (in the loader's order,
 * as "VK:n"), then the CPU, always last. Listed once per process, at the
 * first call (creating a Vulkan instance: tens of ms), then from memory. */
TVK_API int tvk_device_count(void);
/* Fills *out for device i (0 <= i < tvk_device_count()): TVK_OK, or
 * TVK_ERR_INVALID_ARG for an i out of range or a NULL out (the message is
 * tvk_last_error's). Use the macro, which passes the size of the struct. */
TVK_API tvk_status tvk_device_info_sized(int i, tvk_device_info *out, size_t out_size);
#define tvk_device_get_info(i, out) tvk_device_info_sized((i), (out), sizeof(tvk_device_info))
/* "CPU", "discrete GPU", "integrated GPU", "virtual GPU", "software", "other". */
TVK_API const char *tvk_device_kind_name(tvk_device_kind kind);

/* Creates a context on a device: "CPU", "VK" (the best Vulkan device: discrete
 * before integrated before software) or "VK:n" (the n-th, as vulkaninfo lists them);
 * NULL picks $TVK_DEVICE, else the best available device: a Vulkan GPU, else the
 * CPU (a CPU-type Vulkan device, lavapipe or SwiftShader, runs on the same CPU
 * slower than the CPU backend, so it is used only by name). On success *out is the
 * context and TVK_OK is returned. On failure *out is NULL and the status says why
 * (TVK_ERR_DEVICE: no such device; the reason is printed by tvk_last_create_error).
 * out must not be NULL (TVK_ERR_INVALID_ARG). */
TVK_API tvk_status tvk_ctx_create(const char *device, tvk_ctx **out);
/* The same with options; opts may be NULL (all defaults).
 * tvk_ctx_options grows at its end from version to version. The macro passes
 * the size the app was compiled with, so a libtvk newer than the app reads
 * only the fields the app knows (the others are 0: their defaults), and an
 * older one ignores fields it does not know. Callers that cannot use the
 * macro (other languages' bindings) call tvk_ctx_create_sized with the size of
 * the struct they pass. */
TVK_API tvk_status tvk_ctx_create_sized(const tvk_ctx_options *opts, size_t opts_size,
                                        tvk_ctx **out);
#define tvk_ctx_create_opts(opts, out) tvk_ctx_create_sized((opts), sizeof(tvk_ctx_options), (out))
/* Message of the last failed tvk_ctx_create in this thread; "" if none. */
TVK_API const char *tvk_last_create_error(void);
/* Message of the last call in this thread that failed with no context to keep
 * its message: a failed tvk_ctx_create, or a call whose arguments name no
 * context (tvk_realize with n < 0, a NULL array, or only NULL tensors); "" if
 * none. Errors of calls that have a context go to tvk_ctx_error instead. */
TVK_API const char *tvk_last_error(void);
/* Frees the context, every tensor still alive in it and every buffer. NULL ok. */
TVK_API void tvk_ctx_destroy(tvk_ctx *ctx);
/* The device the context runs on, e.g. "CPU (AMD EPYC 7B13, 2 threads)". Owned by ctx. */
TVK_API const char *tvk_ctx_device(const tvk_ctx *ctx);

/* ---- several devices (docs/devices.md) ----
 * A context starts with one device, index 0: where tvk_from_data and the
 * other creation calls put data. tvk_ctx_add_device opens another (a name as
 * for tvk_ctx_create: "CPU", "VK", "VK:1"; the same name twice gives two
 * devices of their own) and returns its index in *index (1, 2, ...; at most
 * 8 devices). A tensor lives on one device; tvk_to_device makes a lazy copy
 * on another, and an op on tensors of two devices is an error naming both.
 * Constants (tvk_full, tvk_arange, tvk_scalar) have no device: they are
 * computed on the device of what they are used with. A realize that spans
 * devices runs each kernel on its device and copies between them. */
TVK_API tvk_status tvk_ctx_add_device(tvk_ctx *ctx, const char *device, int *index);
/* How many devices the context has (>= 1); 0 for NULL. */
TVK_API int tvk_ctx_device_count(const tvk_ctx *ctx);
/* Device `index`'s description, as tvk_ctx_device; "" out of range. Owned by ctx. */
TVK_API const char *tvk_ctx_device_name(const tvk_ctx *ctx, int index);
/* t on device `device` (an index of its context): lazy, a copy when it is
 * realized; t itself (a new handle) when it is there already. A view that is
 * not contiguous is made contiguous on its own device first. */
TVK_API tvk_tensor *tvk_to_device(tvk_tensor *t, int device);
/* The device t lives on, or -1 for a tensor of no device (a constant) or
 * one in an error state. */
TVK_API int tvk_device_of(const tvk_tensor *t);
/* One logical tensor over several devices (the seed's MULTI): t cut along
 * `axis` into n parts on devices[0..n) (indices of its context, each once),
 * ceil(size / n) rows each and the last ones shorter (or empty), or with
 * axis -1 a whole copy on each (replicated). Ops on sharded tensors run per
 * part, each on its device: elementwise ops of tensors sharded alike (or
 * with a replicated tensor or a constant), views that keep the sharded axis
 * whole (permutes, expands, reshapes and pads of the other axes), reduces
 * (over the sharded axis: partial reduces, then an all-reduce through copies
 * that leaves the result replicated); other views and ops cut otherwise
 * gather the parts onto the first device. tvk_to_device gathers a sharded
 * tensor onto one device, tvk_to_host assembles it. A sharded tensor with
 * one on a single device is an error. Not yet: gradients through parts,
 * sharding a tensor twice, symbolic sizes along the axis. */
TVK_API tvk_tensor *tvk_shard(tvk_tensor *t, int n, const int *devices, int axis);
/* How many parts t is made of (0: it lives on one device or none), and in
 * *axis (may be NULL) the axis they are cut along (-1: replicated), as a
 * realize would cut it. */
TVK_API int tvk_shard_info(const tvk_tensor *t, int *axis);
/* Part k of a sharded tensor, a tensor on that part's device (its rows of
 * the whole, or all of it when replicated). */
TVK_API tvk_tensor *tvk_shard_part(tvk_tensor *t, int k);
/* Message of the last error in this context, "" if none. Owned by ctx; valid
 * until the next call on the context. */
TVK_API const char *tvk_ctx_error(const tvk_ctx *ctx);
/* Forgets the last error (tvk_ctx_error returns "" after). */
TVK_API void tvk_ctx_clear_error(tvk_ctx *ctx);

/* Counters of a context, for tests and tuning. */
typedef struct {
  uint64_t schedules;           /* calls that ran at least one kernel */
  uint64_t kernels_run;         /* kernel launches */
  uint64_t kernels_compiled;    /* kernels for which the compiler ran */
  uint64_t cache_hits;          /* kernels whose compiled program was reused (memory or disk) */
  uint64_t bytes_now;           /* device bytes allocated now */
  uint64_t bytes_peak;          /* the most device bytes allocated at once */
  uint64_t validation_messages; /* Vulkan validation messages so far (TVK_VALIDATE); 0 elsewhere */
  uint64_t plans_searched;      /* kernels whose plan a TVK_BEAM search timed on the device */
  uint64_t plans_found;         /* kernels whose searched plan was found on disk */
  uint64_t kernels_generated;   /* kernels whose code was generated: each distinct one once */
  uint64_t kernels_stored;      /* kernels whose generated code was read from the disk cache */
  /* realizes whose graph had the structure of one scheduled before (new
   * buffers of the same dtype, new tvk_scalar values): its schedule
   * was reused, not made again */
  uint64_t schedules_reused;
  uint64_t jit_captures; /* tvk_jit_run calls that recorded their launches */
  uint64_t jit_replays;  /* tvk_jit_run calls that ran recorded launches */
  /* Replays that recorded the device's graph of the launches (Vulkan: one
   * command buffer): the first, and each one whose inputs are other buffers
   * than the last recorded one's. Other replays submit it as it is. */
  uint64_t jit_graphs_recorded;
  uint64_t copies_run; /* copies between two devices of the context (tvk_to_device) */
  /* CPU: launches that ran consecutive kernels part by part (no_chains);
   * their kernels count in kernels_run each */
  uint64_t chains_run;
} tvk_stats;

/* Copies the counters into *out (all zero for a NULL ctx). tvk_stats grows at
 * its end from version to version: the macro passes the size the app was
 * compiled with, and only that many bytes are written (the counters it
 * knows). */
TVK_API void tvk_stats_get_sized(const tvk_ctx *ctx, tvk_stats *out, size_t out_size);
#define tvk_stats_get(ctx, out) tvk_stats_get_sized((ctx), (out), sizeof(tvk_stats))
/* Zeroes the counters; bytes_peak restarts from bytes_now. */
TVK_API void tvk_stats_reset(tvk_ctx *ctx);

/* Where the device's time went, per kernel (one row per distinct compiled
 * kernel; two kernels of one shape share a name but not a row): calls, total
 * and mean time, the rates reached and the share of the total, the largest
 * first, as text:
 *   tvk profile: 7 kernels, 56 launches, 12.345 ms on the device
 *     kernel                          calls    total ms     mean ms   GFLOP/s     GB/s   share
 *     r_8u8_32u16_784                     8       6.201       0.775     10.12     4.05   50.2%
 * GFLOP/s and GB/s divide the kernel's estimated work by its device time:
 * every ALU op of the kernel's expression once per element it is computed
 * for, and the bytes its buffers' views can reach, read plus written (what
 * a cache that held everything would move; tvk_profile_entry has the
 * counts). Waits for the device first, so every launch so far is counted.
 * Empty ("") unless kernels are timed (tvk_ctx_options.profile or .trace,
 * TVK_DEBUG >= 1). Owned by ctx, valid until the next call on it; NULL ctx
 * gives "". */
TVK_API const char *tvk_profile_summary(tvk_ctx *ctx);

/* The summary's rows as data. */
typedef struct {
  const char *kernel;  /* the kernel's name */
  uint64_t calls;      /* launches timed */
  double total_ms;     /* device time of all of them */
  double mean_ms;      /* total_ms / calls */
  double flops, bytes; /* estimated per launch, as the summary counts them */
  double gflops;       /* flops * calls / total time, in 1e9 per second */
  double gbytes;       /* bytes * calls / total time, in 1e9 bytes per second */
  double share;        /* of the device time of every row, 0..1 */
} tvk_profile_entry;

/* The rows, largest total first: *out points at an array owned by ctx, valid
 * until the next profile call on it (or tvk_ctx_destroy); returns how many.
 * Waits for the device first, as tvk_profile_summary does. 0 (and *out NULL)
 * for a NULL ctx or out, or when nothing was timed. */
TVK_API int tvk_profile_entries(tvk_ctx *ctx, const tvk_profile_entry **out);
/* Forgets the times collected so far. */
TVK_API void tvk_profile_reset(tvk_ctx *ctx);

/* Scopes: every tensor created after tvk_scope_begin and still alive at
 * tvk_scope_end is released there, except those listed in keep (which then
 * belong to the enclosing scope; keep may be NULL, which keeps none). Scopes
 * nest; ending an outer scope ends the inner ones. */
TVK_API size_t tvk_scope_begin(tvk_ctx *ctx);
TVK_API void tvk_scope_end(tvk_ctx *ctx, size_t scope, int nkeep, tvk_tensor *const *keep);

/* ------------------------------------------------------------------ gradients */

/* Reverse-mode gradients (docs/autograd.md): grads[i] = d loss / d params[i],
 * new lazy tensors of params[i]'s shape and dtype that fuse like any other
 * (realize them with the loss, in one tvk_realize). loss is a float tensor of
 * one element. Any float tensor can be a parameter; one the loss does not
 * depend on gets zeros. A parameter that is a view of part of another tensor
 * (a slice, a transpose of a weight) is refused: take the gradient with
 * respect to the tensor it views. Gradients flow through every op, since
 * every op is built from the graph's primitives: comparisons and integer
 * ops pass none; max (elementwise and max-reduce) gives a tie's gradient to
 * all the tied inputs in equal parts; relu, abs and sign have gradient 0
 * at +-0 (the subgradient of torch, JAX and tinygrad); a product-reduce's
 * gradient is prod / x (not defined where x is 0). A realized tensor is
 * data, and the graph below it is gone: take gradients before realizing the
 * loss or what it is computed from. Errors: TVK_ERR_INVALID_ARG (NULL arguments, a loss
 * or parameter of another context, a realized loss, a pending tvk_assign in
 * the graph, a view whose positions overlap in a way no movement op makes),
 * TVK_ERR_DTYPE (a non-float loss or parameter), TVK_ERR_SHAPE (a loss of
 * more than one element: use tvk_grad_with). On an error every grads[i] is
 * NULL. */
TVK_API tvk_status tvk_grad(tvk_tensor *loss, int n, tvk_tensor *const *params, tvk_tensor **grads);
/* a's values, as a new tensor through which tvk_grad passes no gradient
 * (torch's detach): a loss built on tvk_detach(a) treats a as a constant.
 * Costs nothing: the kernels read a itself. softmax, log_softmax, logsumexp
 * and cross_entropy detach the max they subtract, whose gradient is zero. */
TVK_API tvk_tensor *tvk_detach(tvk_tensor *a);
/* The same for an output of any shape, with the gradient flowing into it
 * (`upstream`, of the output's dtype and shape): grads[i] = the vector-Jacobian
 * product upstream . d out / d params[i]. */
TVK_API tvk_status tvk_grad_with(tvk_tensor *out, tvk_tensor *upstream, int n,
                                 tvk_tensor *const *params, tvk_tensor **grads);

/* ------------------------------------------------------------------ optimisers */

/* Optimisers update their parameters in place (tvk_assign), in PyTorch's
 * formulation. tvk_optim_step only builds the update: realize the parameters
 * after it (with the loss, in one tvk_realize: forward, backward and update
 * then run together); the optimiser's state is written by the same realize.
 * The learning rate and Adam's bias corrections reach the kernels as launch
 * values (tvk_scalar), so later steps compile nothing. */
typedef enum {
  TVK_OPTIM_SGD = 1, /* p -= lr * g, with optional momentum, Nesterov, weight decay (L2) */
  TVK_OPTIM_ADAM,    /* Adam with bias correction; weight_decay is L2 into the gradient */
  TVK_OPTIM_ADAMW,   /* Adam with decoupled weight decay: p -= lr * weight_decay * p */
} tvk_optim_kind;

/* It grows at its end from version to version (the macro passes its size). */
typedef struct {
  tvk_optim_kind kind;
  double lr;           /* >= 0 */
  double momentum;     /* SGD: in [0, 1); 0: none (buf = momentum * buf + g) */
  bool nesterov;       /* SGD: g + momentum * buf instead of buf (needs momentum) */
  double weight_decay; /* >= 0 */
  double beta1, beta2; /* Adam(W): in [0, 1); 0 means 0.9 and 0.999 */
  double eps;          /* Adam(W): 0 means 1e-8 */
} tvk_optim_options;

typedef struct tvk_optim tvk_optim;
/* An optimiser of the n float tensors params (the app keeps them; they must
 * outlive it), with its state (momentum, moments: zeros, one buffer per
 * parameter each) owned by it. NULL, with the message in tvk_ctx_error, for a
 * bad option (named with its value), a NULL, error, non-float or foreign
 * parameter, or out of memory. */
TVK_API tvk_optim *tvk_optim_create_sized(tvk_ctx *ctx, int n, tvk_tensor *const *params,
                                          const tvk_optim_options *opts, size_t opts_size);
#define tvk_optim_create(ctx, n, params, opts)                                                     \
  tvk_optim_create_sized((ctx), (n), (params), (opts), sizeof(tvk_optim_options))
/* One step with grads[i] the gradient of params[i] (tvk_grad's): assigns the
 * parameters and the state, lazily. TVK_ERR_INVALID_ARG / TVK_ERR_SHAPE for
 * missing or mis-shaped gradients (nothing is assigned then). */
TVK_API tvk_status tvk_optim_step(tvk_optim *opt, tvk_tensor *const *grads);
/* A new learning rate from the next step on (a schedule): compiles nothing. */
TVK_API tvk_status tvk_optim_set_lr(tvk_optim *opt, double lr);
/* Frees the state; NULL ok. tvk_ctx_destroy frees the optimisers still alive. */
TVK_API void tvk_optim_destroy(tvk_optim *opt);

/* ------------------------------------------------------------------ capture */

/* A captured computation (in the spirit of tinygrad's TinyJit): the app's
 * function runs on its first two calls; the second time every kernel launch
 * it leads to is recorded, and from the third call on tvk runs the recorded
 * launches on the new inputs' memory without calling the function: no graph
 * is built, nothing is scheduled or looked up (samples/overhead measures it).
 * - fn(user, ctx, nin, in, nout, out) builds out[0..nout-1] from in[] and
 *   from tensors that outlive the jit (weights, optimiser state); tvk_assign
 *   to those is replayed too (a training step updates its weights in place).
 *   It returns TVK_OK or an error, which tvk_jit_run returns. Tensors it makes
 *   besides out[] are released after it; it must not read results to the
 *   host (tvk_to_host: not recorded) and must build the same graph whenever
 *   the inputs have the same dtypes and shapes.
 * - The inputs are made row-major buffers first (a view is copied). When their
 *   dtypes or shapes differ from the last call's, the capture is dropped and
 *   the next two calls run the function again (compiling only what is new).
 * - Values are those of the captured call: a tvk_scalar made inside fn is
 *   replayed with the value it had then. Pass what changes as an input (a 0-d
 *   tensor) instead. Size variables (tvk_size_var) are the exception: each
 *   replay runs with the values bound at the time (its buffers grow as they
 *   need); an input made for other values is TVK_ERR_SHAPE.
 * - A replay's out[] are new tensors over the same buffers every call: a
 *   replay overwrites what the previous call's outputs hold (copy them first
 *   if they must survive). An output that is an input (or a view of one)
 *   makes the function run on every call instead.
 * - On Vulkan the first replay records the launches as one command buffer,
 *   and later replays submit it as it is while every input is the same
 *   buffer as last time (the same tensor, its contents changed in place with
 *   tvk_assign); a new input tensor records it again. The jit keeps the
 *   recorded inputs' memory alive until it records again or is destroyed.
 * - Across devices (tvk_ctx_add_device): the launches and the copies between
 *   devices are recorded and replayed, each on its device, one by one. fn may
 *   shard (tvk_shard) and its outputs may be in parts; each input must live
 *   on one device (a sharded input is TVK_ERR_INVALID_ARG).
 * tvk_stats counts captures, replays and recordings; TVK_DEBUG >= 1 logs
 * each. */
typedef struct tvk_jit tvk_jit;
typedef tvk_status (*tvk_jit_fn)(void *user, tvk_ctx *ctx, int nin, tvk_tensor *const *in, int nout,
                                 tvk_tensor **out);
/* NULL (the message in tvk_ctx_error) for a NULL fn or out of memory. */
TVK_API tvk_jit *tvk_jit_create(tvk_ctx *ctx, tvk_jit_fn fn, void *user);
/* One call: in[0..nin-1] are its inputs (of the jit's context, not errors),
 * out[0..nout-1] receive its outputs (nout >= 1; both counts as on the first
 * call: TVK_ERR_INVALID_ARG otherwise). The outputs are realized when it
 * returns TVK_OK, each a new tensor the caller releases (also when fn
 * returned an input or a weight); on an error out[] are NULL. */
TVK_API tvk_status tvk_jit_run(tvk_jit *jit, int nin, tvk_tensor *const *in, int nout,
                               tvk_tensor **out);
/* Frees the capture and the buffers it holds; NULL ok. tvk_ctx_destroy frees
 * the jits still alive. */
TVK_API void tvk_jit_destroy(tvk_jit *jit);

/* ------------------------------------------------------------------ symbolic sizes */

/* A size variable stands for a dimension that changes from run to run (the
 * length of a growing sequence, a batch): kernels built over it compile once
 * and run for every value it takes, and so does the schedule.
 *
 *   int64_t n = tvk_size_var(ctx, "seq", 1, 256);
 *   tvk_bind(ctx, n, 17);                          // the value for what runs next
 *   tvk_tensor *k = tvk_shrink(cache, (int64_t[][2]){{0, n}, {0, 64}});
 *
 * A size (the result of tvk_size_var, tvk_size_add, tvk_size_mul) is an
 * int64_t far below zero that goes in a shape array or a range where a
 * number would: tvk_shape gives it back, and tvk_size_value turns it into
 * the number it is under the bound values. Ops that do not take symbolic
 * sizes yet say so, naming the variable (docs/capture.md lists which do).
 *
 * A realize (tvk_realize, tvk_to_host, ...) runs with the values bound then;
 * every variable its graph uses must have one. A tensor computed under one
 * value, or made from data of that length, is data for that value: a realize
 * that reads it under another value is refused (TVK_ERR_SHAPE). */

/* A variable named `name` (letters, digits and '_', not starting with a
 * digit, under 32 bytes, not of the form s<digits>, which tvk's own launch
 * values use) taking values in [min, max], 1 <= min <= max <= 2^31 - 1.
 * Asking again for a name with the same range gives the same variable;
 * another range for a name the context already has is an error. On error
 * returns -1 (a negative size every op refuses) with the message in
 * tvk_ctx_error. */
TVK_API int64_t tvk_size_var(tvk_ctx *ctx, const char *name, int64_t min, int64_t max);
/* The size a + b, a * b (sizes or numbers >= 0; the b of an add may be a
 * negative number: tvk_size_add(n, -1) is n - 1); -1 for a negative a (a
 * failed size stays one), a result that can be negative, or one that cannot
 * be made (out of memory). A sum or product of numbers is the number. */
TVK_API int64_t tvk_size_add(int64_t a, int64_t b);
TVK_API int64_t tvk_size_mul(int64_t a, int64_t b);
/* Whether a size holds a variable. */
TVK_API bool tvk_size_is_symbolic(int64_t size);
/* Binds variable var (tvk_size_var of this context) to value for the
 * realizes that follow, until bound again. TVK_ERR_INVALID_ARG for a var that
 * is not a variable of ctx, TVK_ERR_SHAPE for a value outside [min, max]
 * (the message names the variable, the value and the range). */
TVK_API tvk_status tvk_bind(tvk_ctx *ctx, int64_t var, int64_t value);
/* The number a size is with the context's bound values (a number is
 * itself); -1 when one of its variables is not bound. */
TVK_API int64_t tvk_size_value(const tvk_ctx *ctx, int64_t size);
/* The size as text into buf ("seq", "seq+1", "12"), snprintf-style: returns
 * the length the whole text needs. */
TVK_API int tvk_size_str(int64_t size, char *buf, size_t n);

/* ------------------------------------------------------------------ creation */

/* A tensor holding a copy of data (ndim dims of shape, row-major, elements of
 * dt; bool is one byte 0/1, float16/bfloat16 are 16-bit patterns). ndim 0 is a
 * scalar. shape may be NULL when ndim is 0; data must not be NULL unless the
 * tensor has no elements. Errors: TVK_ERR_INVALID_ARG (NULL ctx/data, ndim out of
 * 0..TVK_MAX_DIMS), TVK_ERR_SHAPE (a negative dim), TVK_ERR_DEVICE (more bytes
 * than the device's kernels can address in one buffer: on Vulkan one binding,
 * maxStorageBufferRange; the CPU takes any size memory allows, 2^31 elements
 * and more included). */
TVK_API tvk_tensor *tvk_from_data(tvk_ctx *ctx, tvk_dtype dt, int ndim, const int64_t *shape,
                                  const void *data);
/* A tensor whose elements are the app's memory at data (row-major, as
 * tvk_from_data's), used in place without a copy: on the CPU device only.
 * - tvk reads data when a kernel that reads the tensor runs, during a tvk call
 *   on the context (tvk_realize, tvk_to_host, ... of something computed from
 *   it), and tvk_assign to the tensor writes it. Between tvk calls the app may
 *   read and change it: a later realize sees the new contents (results
 *   realized before keep theirs). It must not change it during a tvk call on
 *   the context (from another thread).
 * - data must stay valid until release(user) is called (when release is not
 *   NULL): once, when tvk no longer uses the memory, i.e. the tensor and every
 *   tensor computed lazily from it are gone (tvk_ctx_destroy at the latest).
 *   tvk never frees data nor gives it to other data. On failure release is
 *   not called.
 * - data must be aligned to the element size (the kernels load whole
 *   elements): TVK_ERR_INVALID_ARG naming the address and the alignment
 *   otherwise, as for a NULL data (even with no elements).
 * - On a Vulkan context: TVK_ERR_DEVICE (use tvk_from_data, which copies, or
 *   tvk_from_vulkan_buffer of tvk_vulkan.h). Other errors as tvk_from_data's. */
TVK_API tvk_tensor *tvk_from_host_ptr(tvk_ctx *ctx, tvk_dtype dt, int ndim, const int64_t *shape,
                                      void *data, void (*release)(void *user), void *user);
/* A tensor of the given shape with every element `value` (converted to dt as by
 * tvk_cast). Costs no memory until used: it is a broadcast constant. */
TVK_API tvk_tensor *tvk_full(tvk_ctx *ctx, tvk_dtype dt, int ndim, const int64_t *shape,
                             double value);
/* A 0-d tensor of `value` (converted to dt as by tvk_cast), costing no memory.
 * For float32 it is a value the kernels that use it receive when they are
 * launched (push constants on Vulkan, vals[] on the CPU), not a constant of
 * their source: a learning rate, a bias correction or a time step that
 * changes from call to call compiles nothing new (x * s for 100 values of s
 * is one kernel). A kernel takes up to 16 such values; any more in one kernel
 * are compiled in as constants. Other dtypes, and tvk_full of any shape
 * (ndim 0 too), are constants of the source, which the compiler can fold
 * (x * 1, shift amounts): use those for values that shape the code. */
TVK_API tvk_tensor *tvk_scalar(tvk_ctx *ctx, tvk_dtype dt, double value);

/* ------------------------------------------------------------------ elementwise */

/* Floats are IEEE 754 values and keep IEEE's (and C's) answers for inf, NaN
 * and signed zeros through every op: x - x and x * 0 are NaN for x = inf or
 * NaN, 0 - 0 = +0, abs(-0.0) = +0.0, floor(-0.0) = ceil(-0.5) = -0.0. On
 * Vulkan this needs the device property shaderSignedZeroInfNanPreserveFloat32
 * (...Float64 for float64; VkPhysicalDeviceFloatControlsProperties, Vulkan 1.2
 * or VK_KHR_shader_float_controls), which tvk then asks for in every kernel;
 * on a device without it the shader compiler may fold x - x to 0 or 0 - x to
 * -x, so inf, NaN and the sign of zero results are not promised there. The
 * CPU and lavapipe have it. */

/* Binary ops broadcast their operands and promote them to a common dtype.
 * - add sub mul maximum minimum: the promoted dtype. maximum/minimum of floats
 *   give NaN when either input is NaN. sub of bools is a != b (the difference
 *   truncated to bool).
 * - div: true division; integer operands give float32 (float64 stays).
 * - pow: a**b in floating point, with C's (IEEE 754's) special cases: a
 *   negative base or a zero keeps its sign under an odd integer exponent
 *   ((-0)**-1 = -inf, (-2)**3 = -8), 0**(negative) = +inf otherwise,
 *   x**0 = 1**y = 1 (NaN too), (-1)**(+-inf) = 1, a negative base with a
 *   non-integer exponent gives NaN; integer operands give float32.
 * - lt le gt ge eq ne: bool. NaN compares unequal to everything.
 * - logical_and logical_or: bool, operands tested != 0.
 * - bitwise_and bitwise_or bitwise_xor: integer and bool dtypes only.
 * - shl shr: integer dtypes only; shr is arithmetic for signed types. A shift
 *   amount that is negative or >= the bit width gives an unspecified value
 *   (the same value on every device is not promised).
 * - idiv mod: integer dtypes only, as in C: idiv truncates toward zero and mod
 *   takes the dividend's sign (-7 idiv 2 = -3, -7 mod 2 = -1). Dividing by 0
 *   gives 0 for both, rather than a trap.
 * Integer arithmetic wraps around at the dtype's width. */
TVK_API tvk_tensor *tvk_add(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_sub(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_mul(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_div(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_pow(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_maximum(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_minimum(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_lt(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_le(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_gt(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_ge(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_eq(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_ne(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_logical_and(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_logical_or(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_bitwise_and(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_bitwise_or(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_bitwise_xor(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_shl(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_shr(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_idiv(tvk_tensor *a, tvk_tensor *b);
TVK_API tvk_tensor *tvk_mod(tvk_tensor *a, tvk_tensor *b);

/* min(max(a, lo), hi) in a's dtype (the bounds converted to it): lo and hi
 * broadcast to a's shape, either may be NULL (no bound). A NaN in a stays
 * NaN. Errors: a bound that does not broadcast to a's shape
 * (TVK_ERR_SHAPE). */
TVK_API tvk_tensor *tvk_clip(tvk_tensor *a, tvk_tensor *lo, tvk_tensor *hi);
/* cond ? a : b elementwise; cond is tested != 0, a and b promote together, all
 * three broadcast. */
TVK_API tvk_tensor *tvk_where(tvk_tensor *cond, tvk_tensor *a, tvk_tensor *b);

/* Unary ops.
 * - neg abs sign relu: keep the dtype (integers too; neg of bool is an error,
 *   use logical_not). sign gives -1, 0 or 1 (NaN for NaN). relu is max(x, 0)
 *   and keeps NaN as NaN.
 * - exp exp2 log log2 sqrt rsqrt recip sin cos sigmoid tanh gelu silu: floating
 *   point; integer and bool inputs give float32. log(0) = -inf, log(<0) = NaN,
 *   sqrt(<0) = NaN, recip(0) = inf. gelu is the tanh approximation; sigmoid
 *   is 0 below x = -88.7. Accuracy in float32, the same on the CPU and on
 *   Vulkan (float16/bfloat16 compute in float32 and round once): exp2 within
 *   1e-7 relative; exp within 1e-7 + 7.5e-8 |x| relative (the second term is
 *   the rounding of x log2(e) before the exp2), sigmoid within 2.2e-7 +
 *   7.5e-8 |x|; log and log2 within 2e-7 relative for every x > 0, also near
 *   1; cos within 2.4e-7 relative for |x| < 6433, also near its zeros, and 4e-7
 *   absolute beyond. float64 log, log2 and cos (for |x| < 1.6e6) within 1e-14
 *   relative. (A Vulkan device whose
 *   division is not correctly rounded, which Vulkan allows, adds up to 2.5
 *   ulps to recip, rsqrt and sigmoid; lavapipe's is.)
 * - floor ceil round trunc: floats round (round: halves to even); integers are
 *   returned unchanged.
 * - logical_not: bool, x == 0. */
TVK_API tvk_tensor *tvk_neg(tvk_tensor *a);
TVK_API tvk_tensor *tvk_exp(tvk_tensor *a);
TVK_API tvk_tensor *tvk_exp2(tvk_tensor *a);
TVK_API tvk_tensor *tvk_log(tvk_tensor *a);
TVK_API tvk_tensor *tvk_log2(tvk_tensor *a);
TVK_API tvk_tensor *tvk_sqrt(tvk_tensor *a);
TVK_API tvk_tensor *tvk_rsqrt(tvk_tensor *a);
TVK_API tvk_tensor *tvk_recip(tvk_tensor *a);
TVK_API tvk_tensor *tvk_sin(tvk_tensor *a);
TVK_API tvk_tensor *tvk_cos(tvk_tensor *a);
TVK_API tvk_tensor *tvk_abs(tvk_tensor *a);
TVK_API tvk_tensor *tvk_sign(tvk_tensor *a);
TVK_API tvk_tensor *tvk_relu(tvk_tensor *a);
TVK_API tvk_tensor *tvk_sigmoid(tvk_tensor *a);
TVK_API tvk_tensor *tvk_tanh(tvk_tensor *a);
TVK_API tvk_tensor *tvk_gelu(tvk_tensor *a);
TVK_API tvk_tensor *tvk_silu(tvk_tensor *a);
/* The error function, 2/sqrt(pi) times the integral of exp(-t^2) from 0 to x
 * (the exact GELU is x (1 + erf(x / sqrt 2)) / 2). Floating point (integers
 * give float32); within 1.2e-7 relative of erf(x) for every x, float64
 * included (a polynomial fit, not a float64 one); erf(+-inf) = +-1. */
TVK_API tvk_tensor *tvk_erf(tvk_tensor *a);
/* Inverse trigonometric functions, floating point (integers give float32):
 * atan in (-pi/2, pi/2) (+-inf give +-pi/2), asin in [-pi/2, pi/2] and acos in
 * [0, pi] for x in [-1, 1], NaN outside. Within a few float32 ulps of libm's
 * (acos keeps relative accuracy near 1, asin near +-1); float64 inputs get
 * float32's accuracy. */
TVK_API tvk_tensor *tvk_atan(tvk_tensor *a);
TVK_API tvk_tensor *tvk_asin(tvk_tensor *a);
TVK_API tvk_tensor *tvk_acos(tvk_tensor *a);
TVK_API tvk_tensor *tvk_floor(tvk_tensor *a);
TVK_API tvk_tensor *tvk_ceil(tvk_tensor *a);
TVK_API tvk_tensor *tvk_round(tvk_tensor *a);
TVK_API tvk_tensor *tvk_trunc(tvk_tensor *a);
TVK_API tvk_tensor *tvk_logical_not(tvk_tensor *a);

/* Converts to dt. float -> int truncates toward zero (a value out of the target's
 * range, NaN or inf gives an unspecified value); int -> narrower int wraps; any
 * -> bool is x != 0; float -> float16/bfloat16 rounds to nearest even. A dt
 * that is not a tvk_dtype gives TVK_ERR_DTYPE. */
TVK_API tvk_tensor *tvk_cast(tvk_tensor *a, tvk_dtype dt);

/* ------------------------------------------------------------------ reductions */

/* Reduce over axes (naxes == 0 or axes == NULL: all axes; negative axes count
 * from the end; an axis listed twice is an error). keepdim keeps reduced axes
 * as size 1. A reduction over zero elements gives the identity: sum 0, prod 1,
 * max -inf (integers: the dtype's minimum), min +inf (the maximum), mean NaN.
 * - sum prod: bool and signed ints narrower than 32 bits give int32, unsigned
 *   narrower ones uint32; 64-bit ints and floats keep their dtype (float16 and
 *   bfloat16 accumulate in float32).
 * - max min: keep the dtype; a NaN in the input gives NaN.
 * - mean: floats keep the dtype, others give float32 (summed in float32, so
 *   integer means are approximate past 2^24 elements).
 * - Accuracy: float sums (and means, var, std, matmul's inner dimension)
 *   accumulate in blocks of at most 16 and then in levels, never in one long
 *   running sum, so same-sign float32 data keeps a few 1e-7 relative error at
 *   any length (2^25 ones sum to 2^25 exactly); the CPU and Vulkan add in the
 *   same order and give the same bits. A long reduce with few outputs runs as
 *   two kernels (partial sums, then their sum), which spreads it over cores and
 *   work groups. */
TVK_API tvk_tensor *tvk_sum(tvk_tensor *a, int naxes, const int *axes, bool keepdim);
TVK_API tvk_tensor *tvk_prod(tvk_tensor *a, int naxes, const int *axes, bool keepdim);
TVK_API tvk_tensor *tvk_max(tvk_tensor *a, int naxes, const int *axes, bool keepdim);
TVK_API tvk_tensor *tvk_min(tvk_tensor *a, int naxes, const int *axes, bool keepdim);
TVK_API tvk_tensor *tvk_mean(tvk_tensor *a, int naxes, const int *axes, bool keepdim);

/* ------------------------------------------------------------------ movement */

/* Movement ops cost nothing at run time: they change how kernels index memory.
 * - reshape: same number of elements; one dim may be -1 (inferred; an error
 *   when the other dims multiply to 0).
 * - permute: order is a permutation of 0..ndim-1 (result dim i = input dim
 *   order[i]); negative entries count from the end.
 * - expand: to a shape of ndim >= the input's; new dims are prepended, size-1
 *   dims stretch, other dims must match (-1 keeps the input's size).
 * - pad: pads[i] = {before, after} elements of `value` around dim i (>= 0;
 *   a size, tvk_size_var, pads by its value: a row placed at row n).
 * - shrink: ranges[i] = {start, end}, 0 <= start <= end <= dim: keeps [start, end).
 * - flip: reverses the listed axes (negative count from the end); naxes 0
 *   flips nothing.
 * - transpose: swaps two dims (negative count from the end).
 * - contiguous: a copy in row-major order, materialised when realized. */
TVK_API tvk_tensor *tvk_reshape(tvk_tensor *a, int ndim, const int64_t *shape);
TVK_API tvk_tensor *tvk_permute(tvk_tensor *a, const int *order);
TVK_API tvk_tensor *tvk_expand(tvk_tensor *a, int ndim, const int64_t *shape);
TVK_API tvk_tensor *tvk_pad(tvk_tensor *a, const int64_t (*pads)[2], double value);
TVK_API tvk_tensor *tvk_shrink(tvk_tensor *a, const int64_t (*ranges)[2]);
TVK_API tvk_tensor *tvk_flip(tvk_tensor *a, int naxes, const int *axes);
TVK_API tvk_tensor *tvk_transpose(tvk_tensor *a, int dim0, int dim1);
TVK_API tvk_tensor *tvk_contiguous(tvk_tensor *a);

/* ------------------------------------------------------------------ more creation */

/* 1-D tensor start, start + step, ... up to (not including) stop: ceil((stop -
 * start) / step) elements (0 when that is negative). Element i is start + i * step
 * computed in dt (ints: exactly; floats: in the dtype, so float32 rounds). Costs
 * no memory: it is computed inside the kernels that read it. Errors: step 0 or
 * a non-finite argument (TVK_ERR_INVALID_ARG), a non-numeric dt (TVK_ERR_DTYPE). */
TVK_API tvk_tensor *tvk_arange(tvk_ctx *ctx, tvk_dtype dt, double start, double stop, double step);
/* The n x m identity (1 on the diagonal, 0 elsewhere); m < 0 means m = n. */
TVK_API tvk_tensor *tvk_eye(tvk_ctx *ctx, tvk_dtype dt, int64_t n, int64_t m);
/* Random tensors from a counter-based generator (threefry-2x32, 20 rounds) run
 * on the device: the same seed and shape give the same bits on every device
 * (and so do tvk_dropout's masks). rand: uniform in [0, 1); randn: standard
 * normal (Box-Muller, computed with + - * and sqrt only, so that it needs no
 * device math: bit-identical where those are IEEE-correctly rounded, as on the
 * CPU and lavapipe; Vulkan requires it of + - * but may approximate sqrt, by
 * which randn could then differ in its last bits). dt must be a float dtype
 * (TVK_ERR_DTYPE otherwise). */
TVK_API tvk_tensor *tvk_rand(tvk_ctx *ctx, tvk_dtype dt, int ndim, const int64_t *shape,
                             uint64_t seed);
TVK_API tvk_tensor *tvk_randn(tvk_ctx *ctx, tvk_dtype dt, int ndim, const int64_t *shape,
                              uint64_t seed);

/* ------------------------------------------------------------------ shape and indexing */

/* squeeze: removes the listed dims, which must have size 1 (naxes 0: every
 * size-1 dim). unsqueeze: inserts a size-1 dim at position axis (-1: at the end;
 * axis in [-ndim-1, ndim]). */
TVK_API tvk_tensor *tvk_squeeze(tvk_tensor *a, int naxes, const int *axes);
TVK_API tvk_tensor *tvk_unsqueeze(tvk_tensor *a, int axis);
/* cat: joins n >= 1 tensors along an existing axis (other dims equal; dtypes
 * promote). stack: joins along a new axis (all shapes equal). */
TVK_API tvk_tensor *tvk_cat(int n, tvk_tensor *const *ts, int axis);
TVK_API tvk_tensor *tvk_stack(int n, tvk_tensor *const *ts, int axis);
/* Tiles a: nrep >= ndim repeat counts (>= 0), as numpy.tile / torch.repeat. */
TVK_API tvk_tensor *tvk_repeat(tvk_tensor *a, int nrep, const int64_t *repeats);
/* out[i][j][k] = t[index[i][j][k]][j][k] for axis 0 (likewise for others), as
 * torch.gather: index is an integer tensor of t's ndim whose dims other than
 * axis are <= t's; the result has index's shape. An index out of [0, dim) gives
 * 0 (it selects nothing). */
TVK_API tvk_tensor *tvk_gather(tvk_tensor *t, int axis, tvk_tensor *index);
/* How tvk_scatter combines what lands on one element. */
typedef enum {
  TVK_SCATTER_NONE =
      0,           /* replaces it; of several writes to one element the last (in index order) */
  TVK_SCATTER_ADD, /* t + the sum of what lands */
  TVK_SCATTER_MUL, /* t times the product */
  TVK_SCATTER_MAX, /* max(t, the largest that lands) */
  TVK_SCATTER_MIN,
} tvk_scatter_reduce;
/* The inverse of gather, as torch.scatter(_reduce) and ONNX ScatterElements: a
 * copy of t where, for axis 1, out[i][index[i][j][k]][k] is src[i][j][k]
 * combined by reduce; elements nothing lands on keep t's value. index
 * (integer) and src have one shape, t's number of dims, no dim larger than
 * t's except along axis; an index outside [0, t's dim) writes nothing. The
 * result has t's dtype (src is converted). Like gather, it compares
 * positions instead of addressing memory, so it costs index's size times t's
 * axis length. */
TVK_API tvk_tensor *tvk_scatter(tvk_tensor *t, int axis, tvk_tensor *index, tvk_tensor *src,
                                tvk_scatter_reduce reduce);
/* Rows of weight (V, D) picked by an integer index tensor of any shape: the
 * result has shape index.shape + (D,). An index out of [0, V) gives zeros. */
TVK_API tvk_tensor *tvk_embedding(tvk_tensor *weight, tvk_tensor *index);
/* index.shape + (num_classes,), int32: 1 where the last coordinate equals the
 * index, 0 elsewhere. */
TVK_API tvk_tensor *tvk_one_hot(tvk_tensor *index, int64_t num_classes);

/* ------------------------------------------------------------------ neural-network ops */

/* Matrix product with numpy's rules: 1-D operands are vectors (a dim is added
 * and removed again), N-D operands are stacks of matrices whose batch dims
 * broadcast. Inner dims must agree (TVK_ERR_SHAPE naming both shapes). Operands
 * promote; sums accumulate in the promoted dtype (float16: in float32). */
TVK_API tvk_tensor *tvk_matmul(tvk_tensor *a, tvk_tensor *b);
/* x @ w^T + bias, as torch's linear: x (..., in), w (out, in), bias (out,) or NULL. */
TVK_API tvk_tensor *tvk_linear(tvk_tensor *x, tvk_tensor *w, tvk_tensor *bias);
/* 2-D convolution (cross-correlation, as torch): x (N, Cin, H, W), w (Cout,
 * Cin / groups, kh, kw), bias (Cout,) or NULL. stride {sh, sw}, padding {top,
 * bottom, left, right} (zeros), dilation {dh, dw}; NULL means 1s / 0s / 1s.
 * Result (N, Cout, Ho, Wo) with Ho = (H + top + bottom - dh * (kh - 1) - 1) / sh + 1. */
TVK_API tvk_tensor *tvk_conv2d(tvk_tensor *x, tvk_tensor *w, tvk_tensor *bias,
                               const int64_t stride[2], const int64_t padding[4],
                               const int64_t dilation[2], int64_t groups);
/* The transpose of tvk_conv2d (its gradient with respect to x; "deconvolution"),
 * as torch's conv_transpose2d: x (N, Cin, H, W), w (Cin, Cout / groups, kh,
 * kw), bias (Cout,) or NULL. stride, padding {top, bottom, left, right},
 * output_padding {oh, ow} (extra rows and columns at the bottom and right,
 * each below the stride or the dilation) and dilation; NULL means 1s / 0s /
 * 0s / 1s. Result (N, Cout, Ho, Wo) with Ho = (H - 1) * sh - top - bottom +
 * dh * (kh - 1) + oh + 1. It runs as a conv2d over x with stride - 1 zeros
 * between its elements (free views), so a stride-s layer does s^2 times the
 * multiplies it needs. */
TVK_API tvk_tensor *tvk_conv_transpose2d(tvk_tensor *x, tvk_tensor *w, tvk_tensor *bias,
                                         const int64_t stride[2], const int64_t padding[4],
                                         const int64_t output_padding[2], const int64_t dilation[2],
                                         int64_t groups);
/* Pools over the last two dims of x (..., H, W) with a kernel {kh, kw}; stride
 * NULL means the kernel size, padding NULL means 0 ({top, bottom, left, right}).
 * max_pool2d pads with -inf; avg_pool2d counts padded elements (torch's
 * count_include_pad = true). */
TVK_API tvk_tensor *tvk_max_pool2d(tvk_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                                   const int64_t padding[4]);
TVK_API tvk_tensor *tvk_avg_pool2d(tvk_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                                   const int64_t padding[4]);
/* max_pool2d whose window taps are dilation {dh, dw} apart (NULL: 1s), as
 * torch's MaxPool2d(dilation=...): the window spans dh * (kh - 1) + 1 rows. */
TVK_API tvk_tensor *tvk_max_pool2d_dilated(tvk_tensor *x, const int64_t kernel[2],
                                           const int64_t stride[2], const int64_t padding[4],
                                           const int64_t dilation[2]);

/* Resampling (tvk_resize): how an output position maps to the input and which
 * input elements it combines, as ONNX's Resize (and torch's interpolate). */
typedef enum {
  TVK_RESIZE_NEAREST = 0, /* one element, chosen by the nearest rule */
  TVK_RESIZE_LINEAR,      /* the two around it (bilinear over two axes, ...) */
  TVK_RESIZE_CUBIC,       /* the four around it, Keys' cubic with parameter cubic_a */
} tvk_resize_mode;
/* Output index o -> input coordinate x, for an axis of in -> out elements
 * with scale s (out / in unless given; align_corners and the out == 1 test
 * use in * s for out when a scale is given, as ONNX does): */
typedef enum {
  TVK_RESIZE_HALF_PIXEL = 0,       /* (o + 0.5) / s - 0.5: pixel centres line up */
  TVK_RESIZE_ALIGN_CORNERS,        /* o (in - 1) / (out - 1): first and last line up */
  TVK_RESIZE_ASYMMETRIC,           /* o / s */
  TVK_RESIZE_PYTORCH_HALF_PIXEL,   /* half_pixel, but -0.5 when out is 1 */
  TVK_RESIZE_TF_HALF_PIXEL_FOR_NN, /* (o + 0.5) / s: TensorFlow 1's nearest */
} tvk_resize_coord;
/* Nearest: which neighbour a coordinate halfway between two takes, or always. */
typedef enum {
  TVK_RESIZE_ROUND_PREFER_FLOOR = 0,
  TVK_RESIZE_ROUND_PREFER_CEIL,
  TVK_RESIZE_FLOOR,
  TVK_RESIZE_CEIL,
} tvk_resize_nearest;
typedef struct {
  tvk_resize_mode mode;
  tvk_resize_coord coord;
  tvk_resize_nearest nearest;
  double cubic_a;       /* cubic's parameter; 0 means -0.75 (ONNX's; torch uses -0.75 too) */
  bool exclude_outside; /* taps outside the input get weight 0, the rest renormalised */
  /* per resized axis, the scale s the coordinates use; NULL: sizes / input dims */
  const double *scales;
  /* TensorFlow's crop_and_resize: NULL, or 2 * naxes values, the starts then
   * the ends of a window of the input in [0, 1] that the output spans
   * (first and last line up, as align_corners); outputs outside the input
   * are `extrapolation` */
  const double *roi;
  double extrapolation;
} tvk_resize_options;
/* Resamples x along naxes axes (negative count from the end) to sizes[i]
 * elements each; opts NULL means nearest, half_pixel, round_prefer_floor.
 * Inputs outside the input repeat its edge. Linear and cubic take float
 * dtypes (TVK_ERR_DTYPE otherwise); nearest any dtype, exactly. An integer
 * nearest upsampling (out = k in, o -> o / k) or a stride is a view and
 * costs nothing; other resizes multiply by an (in, out) weight matrix per
 * axis (in * out at most 2^28), one matmul kernel each. Errors: an axis out
 * of range or twice (TVK_ERR_INVALID_ARG), a size or scale not > 0
 * (TVK_ERR_SHAPE). */
TVK_API tvk_tensor *tvk_resize(tvk_tensor *x, int naxes, const int *axes, const int64_t *sizes,
                               const tvk_resize_options *opts);

/* Along one axis (negative counts from the end); float results (integer inputs
 * give float32). Numerically stable: the max along the axis is subtracted first. */
TVK_API tvk_tensor *tvk_softmax(tvk_tensor *a, int axis);
TVK_API tvk_tensor *tvk_log_softmax(tvk_tensor *a, int axis);
TVK_API tvk_tensor *tvk_logsumexp(tvk_tensor *a, int axis, bool keepdim);
/* Index (int32) of the first largest / smallest element along axis. */
TVK_API tvk_tensor *tvk_argmax(tvk_tensor *a, int axis, bool keepdim);
TVK_API tvk_tensor *tvk_argmin(tvk_tensor *a, int axis, bool keepdim);
/* The k largest (largest) or smallest elements along axis, in that order:
 * values of a's dtype, and when indices is not NULL their positions (int64)
 * in *indices (a new tensor). Equal values come lower index first; a NaN
 * counts as larger than every number. tvk_sort is topk of the whole axis
 * (descending: largest first). Ranks are counted by comparing every pair
 * along the axis, so a row of n costs n^2 compares: meant for rows up to a
 * few thousand (the top-5 of a classifier, boxes to keep). Errors: axis out
 * of range, k outside [0, n] (TVK_ERR_INVALID_ARG). */
TVK_API tvk_tensor *tvk_topk(tvk_tensor *a, int64_t k, int axis, bool largest,
                             tvk_tensor **indices);
TVK_API tvk_tensor *tvk_sort(tvk_tensor *a, int axis, bool descending, tvk_tensor **indices);
/* Running sum along axis (same shape; dtype as tvk_sum's). */
TVK_API tvk_tensor *tvk_cumsum(tvk_tensor *a, int axis);
/* Variance and standard deviation over axes (as tvk_sum's axes) with
 * `correction` subtracted from the count (1: unbiased, 0: population). */
TVK_API tvk_tensor *tvk_var(tvk_tensor *a, int naxes, const int *axes, bool keepdim,
                            double correction);
TVK_API tvk_tensor *tvk_std(tvk_tensor *a, int naxes, const int *axes, bool keepdim,
                            double correction);
/* Normalises over the last `nlast` dims: (x - mean) / sqrt(var + eps) (population
 * variance), then * weight + bias, each of the normalised shape or NULL. */
TVK_API tvk_tensor *tvk_layernorm(tvk_tensor *x, int nlast, tvk_tensor *weight, tvk_tensor *bias,
                                  double eps);
/* Group norm (Wu and He), channels on axis 1 of x (N, C, ...): the C
 * channels split into `groups` groups of C / groups, each sample's group
 * normalised over its channels and every other dim, (x - mean) / sqrt(var +
 * eps) (population variance), then * weight + bias per channel ((C,) each,
 * or NULL). instance_norm is groups = C; layernorm over (C, ...) is groups =
 * 1 with per-channel parameters. groups must divide C (TVK_ERR_INVALID_ARG). */
TVK_API tvk_tensor *tvk_group_norm(tvk_tensor *x, int64_t groups, tvk_tensor *weight,
                                   tvk_tensor *bias, double eps);
TVK_API tvk_tensor *tvk_instance_norm(tvk_tensor *x, tvk_tensor *weight, tvk_tensor *bias,
                                      double eps);
/* Batch norm, inference form, channels on axis 1 of x (N, C, ...): (x - mean) /
 * sqrt(var + eps) * weight + bias; mean and var (C,) are required, weight and
 * bias (C,) may be NULL. */
TVK_API tvk_tensor *tvk_batchnorm(tvk_tensor *x, tvk_tensor *weight, tvk_tensor *bias,
                                  tvk_tensor *mean, tvk_tensor *var, double eps);
/* Batch norm, training form, channels on axis 1 of x (N, C, ...): normalises
 * with the batch's own statistics over every axis but 1, the mean and the
 * biased (population) variance as PyTorch: (x - mean) / sqrt(var + eps) *
 * weight + bias; weight and bias (C,) may be NULL. The result's dtype is
 * tvk_batchnorm's (x's float dtype promoted with weight's and bias's), and it
 * reads neither running tensor. Gradients (tvk_grad) flow through the batch
 * statistics, as in PyTorch's training mode.
 * running_mean and running_var (C,), float tensors, may be NULL; each one
 * given is updated as PyTorch updates it, with n the elements per channel
 * (N * H * W ...), the variance taken unbiased:
 *   running_mean = (1 - momentum) * running_mean + momentum * mean
 *   running_var  = (1 - momentum) * running_var + momentum * var * n / (n - 1)
 * The updates are tvk_assigns: lazy, written when running_mean / running_var
 * are realized. Realize them with the loss after tvk_grad, as an optimiser's
 * parameters (one tvk_realize runs forward, backward, the update and the
 * running statistics). Realizing them before tvk_grad computes the batch
 * statistics, which then are data in the loss's graph too, so that no
 * gradient would flow through them. A running tensor that is not data of its
 * own when the call is made (an earlier call's update still pending, a
 * tvk_full) is realized by the call first, as tvk_assign does; the call
 * launches nothing otherwise. momentum (in [0, 1]) and eps are constants of
 * the kernels' source.
 * Errors: TVK_ERR_INVALID_ARG (x NULL, momentum outside [0, 1], eps not finite
 * or < 0, a running tensor that views another tensor's memory (a slice, a
 * transpose), running_mean and running_var one buffer), TVK_ERR_SHAPE (x of
 * fewer than 2 dims, a parameter not (C,), running_var with fewer than 2
 * values per channel or running_mean with none), TVK_ERR_DTYPE (a running
 * tensor of an integer dtype). On an error neither running tensor is assigned. */
TVK_API tvk_tensor *tvk_batchnorm_train(tvk_tensor *x, tvk_tensor *weight, tvk_tensor *bias,
                                        tvk_tensor *running_mean, tvk_tensor *running_var,
                                        double momentum, double eps);
/* Dropout: with training false (inference) returns x unchanged; in training,
 * each element is zeroed with probability p (tvk_rand with seed) and the rest
 * scaled by 1 / (1 - p). p in [0, 1]. */
TVK_API tvk_tensor *tvk_dropout(tvk_tensor *x, double p, bool training, uint64_t seed);
/* softmax(q @ k^T / sqrt(E) + mask) @ v: q (..., L, E), k (..., S, E), v (..., S,
 * Ev), batch dims broadcast. mask (NULL: none) broadcasts to (..., L, S): a bool
 * mask keeps the positions that are true, a float mask is added. is_causal
 * keeps position j <= i only (with a mask too, both apply). */
TVK_API tvk_tensor *tvk_scaled_dot_product_attention(tvk_tensor *q, tvk_tensor *k, tvk_tensor *v,
                                                     tvk_tensor *mask, bool is_causal);
/* Mean over the batch of -log softmax(logits)[label]: logits (N, C) float,
 * labels (N,) integer in [0, C). A 0-d result. */
TVK_API tvk_tensor *tvk_cross_entropy(tvk_tensor *logits, tvk_tensor *labels);

/* ------------------------------------------------------------------ in-place update */

/* Makes target hold value (broadcast to target's shape and cast to its dtype)
 * by writing target's buffer in place when realized: for weights and running
 * statistics. Lazy like everything else: the write happens when target, or a
 * tensor computed from it after this call, is realized.
 * - Tensors computed from target before this call keep the old value: if one
 *   is still pending when the write runs, tvk first copies the old value for it
 *   (one copy of target's bytes, in the same schedule). Views of target
 *   (reshape, transpose, ... of it) share its memory and see the new value.
 * - Two assigns realized together that each read the other's old value (a, b =
 *   b, a) cannot be ordered: tvk_realize returns TVK_ERR_INVALID_ARG. Realized
 *   one after the other they swap correctly.
 * - target must be realized or realizable into its own contiguous buffer; a
 *   view of another tensor (a transpose, a slice) is refused (TVK_ERR_INVALID_ARG),
 *   and so is a value that reads target through another view than its own
 *   (a += a^T: each element would read others already written).
 * Returns TVK_OK, or the error (the message is tvk_ctx_error's); on error target
 * is unchanged. */
TVK_API tvk_status tvk_assign(tvk_tensor *target, tvk_tensor *value);

/* ------------------------------------------------------------------ running */

/* Computes all n tensors in one schedule (shared work is done once). Tensors
 * already realized cost nothing. Returns TVK_OK, or the status of the first
 * tensor in an error state, or of a failure to compile or run (the message is
 * then tvk_ctx_error's). n == 0 is TVK_OK. n < 0, a NULL ts or only NULL
 * tensors give TVK_ERR_INVALID_ARG with the message in tvk_last_error (there is
 * no context to hold it). */
TVK_API tvk_status tvk_realize(int n, tvk_tensor *const *ts);
/* Waits until every kernel the context has submitted has finished. tvk_realize
 * may return before the device is done (on Vulkan); tvk_to_host waits by itself.
 * Use this to time work. */
TVK_API tvk_status tvk_sync(tvk_ctx *ctx);
/* Waits until the kernels compiled so far run their final, optimised code. A
 * kernel may first run from a quickly built version while its optimised build
 * proceeds in the background (the CPU's compile tiers, tvk_ctx_options.tiers);
 * results are the same either way. Returns at once when nothing is pending.
 * For benchmarks and tests; an application need not call it. */
TVK_API tvk_status tvk_ctx_wait_compiles(tvk_ctx *ctx);
/* Realizes t if needed and copies its elements, row-major, into dst. nbytes must
 * be at least numel * element size (TVK_ERR_INVALID_ARG otherwise, naming both);
 * exactly that many bytes are written. */
TVK_API tvk_status tvk_to_host(tvk_tensor *t, void *dst, size_t nbytes);

/* ------------------------------------------------------------------ inspection */

/* Shape of t; on an error tensor, the shape is empty (ndim 0). The shape
 * pointer is owned by t. NULL t: 0 / NULL. A symbolic dim is given as its size
 * (tvk_size_value makes it a number); tvk_numel counts with the bound values
 * (-1 when a variable of the shape is not bound). */
TVK_API int tvk_ndim(const tvk_tensor *t);
TVK_API const int64_t *tvk_shape(const tvk_tensor *t);
TVK_API int64_t tvk_numel(const tvk_tensor *t);
TVK_API tvk_dtype tvk_dtype_of(const tvk_tensor *t);
/* TVK_OK, or the error state of t (TVK_ERR_INVALID_ARG for NULL). */
TVK_API tvk_status tvk_status_of(const tvk_tensor *t);
/* The error message of t, "" if none. Owned by t. */
TVK_API const char *tvk_error_of(const tvk_tensor *t);
/* The context of t (NULL for NULL). */
TVK_API tvk_ctx *tvk_ctx_of(const tvk_tensor *t);

/* Releases t: its memory is freed once nothing computed from it still needs
 * it. NULL ok. */
TVK_API void tvk_release(tvk_tensor *t);

#ifdef __cplusplus
}
#endif

#endif
