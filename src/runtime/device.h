/* The device interface: the only way the core talks to a backend.
 *
 * A backend fills a DeviceOps table; src/ never sees Vulkan or dlopen. Every
 * fallible entry returns a tvk_status and, on error, records a message (naming
 * what failed and the values involved) in the device's error record,
 * Device.err. No entry aborts on a failure of the outside world (a missing
 * compiler, out of memory, a driver error).
 */
#ifndef TVK_RUNTIME_DEVICE_H
#define TVK_RUNTIME_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/error.h"
#include "ir/log.h"
#include "tvk.h"

typedef struct Device Device;
typedef struct DevBuffer DevBuffer;   /* backend-defined */
typedef struct DevProgram DevProgram; /* backend-defined */
typedef struct DevGraph DevGraph;     /* backend-defined */

/* Launch geometry: global (work-group count) and local (work-group size) per
 * axis. For a kernel of cores mode (the CPU backend's) global[0] is how many
 * cores can have work and global[1] the loop iterations per one of them (a
 * size, for running a small kernel on one core); the kernel splits its
 * outermost loop by the n_cores it is called with. */
typedef struct {
  int64_t global[3];
  int64_t local[3];
} LaunchDims;

/* The most parts DeviceOps.launch_parts cuts a launch into: the largest
 * n_cores a kernel takes (codegen's CG_MAX_CORES). */
#define DEV_MAX_PARTS 4096

/* One launch of a graph (DeviceOps.graph_create) or of launch_parts:
 * launch()'s arguments. */
typedef struct {
  DevProgram *prog;
  DevBuffer *const *bufs;
  int nbufs;
  const int32_t *vals;
  int nvals;
  const LaunchDims *dims;
} DevLaunch;

/* One launch as the device timed it (Device.on_time). */
typedef struct {
  const char *kernel;     /* the program's name */
  const DevProgram *prog; /* the program launched: alive while on_time runs */
  double ms;              /* how long it ran, by the device's own clock */
  /* When it ran, on the host's CLOCK_MONOTONIC in ns: exact on the CPU; on
   * Vulkan the device's timestamps mapped to it (VK_EXT_calibrated_timestamps
   * where the device has it, else the batch's start placed at its submission,
   * so a span may sit a little early). 0 and 0: unknown. */
  int64_t start_ns, end_ns;
} LaunchTime;

typedef struct {
  size_t max_buffer_bytes;   /* largest single buffer (Vulkan: that one binding addresses whole) */
  int64_t max_global[3];     /* max work-group count per dimension */
  int64_t max_local_threads; /* max invocations per work group */
  size_t shared_mem_bytes;   /* per work group; 0 if none */
  int cores;                 /* CPU: threads used per launch */
  int max_kernel_buffers;    /* most buffers one kernel may bind; 0: no limit */
  int vector_bytes;          /* CPU: the widest SIMD register its kernels may use; 0: unknown */
  int vector_regs;           /* CPU: how many SIMD registers of that width; 0: unknown (16) */
  size_t cache_bytes;        /* CPU: one core's L2 cache; 0: unknown */
  /* Its kernels may fuse a reduce's acc + a * b into one multiply-add (one
   * rounding): the device does that at full speed (codegen's MULACC). */
  bool fma;
  /* A GPU API device that runs on the CPU (Vulkan's CPU type: lavapipe,
   * SwiftShader): kernels get the plans measured to suit such devices, not
   * the GPU rules (CodegenOpts.emulated). */
  bool emulated;
  int subgroup_size; /* invocations that run in lockstep (a warp); 0: unknown or none */
  /* Compute kernels may reduce across a subgroup (Vulkan 1.1's arithmetic
   * subgroup operations; the subgroup size is then fixed: subgroup_size). */
  bool subgroup_reduce;
} DeviceLimits;

/* Memory the app owns, for DeviceOps.wrap: host memory (host not NULL), or a
 * Vulkan buffer (handle: a VkBuffer as tvk_vulkan.h turns it into 64 bits,
 * with offset and size). A device refuses the kind it cannot use, with a
 * message saying what to use instead, and checks the values it needs. */
typedef struct {
  void *host;             /* host memory: the first byte (must be elem_bytes-aligned) */
  uint64_t handle;        /* Vulkan: the VkBuffer */
  uint64_t offset;        /* Vulkan: where the elements start in it */
  uint64_t size;          /* Vulkan: the buffer's size as created (VkBufferCreateInfo.size) */
  size_t nbytes;          /* the bytes the tensor's elements take */
  size_t elem_bytes;      /* one element's */
  const char *dtype_name; /* the elements', for messages */
} DevForeign;

typedef struct {
  const char *(*name)(Device *d);
  tvk_status (*alloc)(Device *d, size_t nbytes, DevBuffer **out);
  void (*free)(Device *d, DevBuffer *b); /* NULL ok */
  /* A buffer over memory the app owns (the interop entries of tvk.h and
   * tvk_vulkan.h), without a copy; it reads and writes that memory in place.
   * free() of it frees only tvk's record: the memory stays the app's, and is
   * never given to another buffer. The caller syncs before telling the app
   * that tvk is done with it. NULL: the device cannot. */
  tvk_status (*wrap)(Device *d, const DevForeign *m, DevBuffer **out);
  tvk_status (*copy_in)(Device *d, DevBuffer *b, size_t offset, const void *src, size_t n);
  tvk_status (*copy_out)(Device *d, DevBuffer *b, size_t offset, void *dst, size_t n);
  /* Compile kernel `name` from source, through the on-disk cache. `*cache_hit`
   * tells whether a compiled result was reused. A failure is reported in err,
   * or in d->err when err is NULL. With an err of its own, each call may run
   * on another thread at the same time (the runtime compiles a schedule's
   * kernels in parallel); no other entry runs meanwhile. */
  tvk_status (*compile)(Device *d, const char *name, const char *src, DevProgram **out,
                        bool *cache_hit, Error *err);
  void (*program_free)(Device *d, DevProgram *p); /* NULL ok */
  /* Enqueue a launch; it may run before this returns or at the next sync. */
  tvk_status (*launch)(Device *d, DevProgram *p, DevBuffer *const *bufs, int nbufs,
                       const int32_t *vals, int nvals, const LaunchDims *dims);
  /* Runs l[0..n-1], kernels of cores mode (in that order), as one launch cut
   * into `parts` parts: each kernel is called with n_cores = parts, so part
   * p is the p-th of `parts` equal runs of its split axis's blocks (parts
   * divides every launch's dims->global[0]); a core takes a part and runs it
   * for l[0], then l[1], ..., then takes the next part. What the first
   * kernel reads of a part is then still in that core's cache when the
   * next one reads it. The caller has checked that no kernel touches what
   * another writes in another part (the runtime's chain.c). With timing on,
   * each kernel is reported with its share of the time (its calls' time
   * summed over the parts, over the cores that ran them). NULL: the device
   * launches one kernel at a time. */
  tvk_status (*launch_parts)(Device *d, const DevLaunch *l, int n, int parts);
  tvk_status (*sync)(Device *d); /* wait for everything enqueued */
  /* Starts what launch() enqueued without waiting for it (Vulkan: submits
   * the batch being recorded), so that the device works while the host goes
   * on to another device's work. NULL: a launch starts by itself (the CPU's
   * runs to completion). */
  tvk_status (*flush)(Device *d);
  /* Where the host reads and writes b's bytes in place (the CPU's memory),
   * or NULL (and a NULL entry) where it cannot: a copy between devices then
   * goes straight out of or into it, not through a buffer of its own. */
  void *(*host_ptr)(Device *d, DevBuffer *b);
  /* Graphs: launches recorded once and enqueued again as a unit, for a
   * replay that does no per-launch work on the host (Vulkan: one command
   * buffer, submitted as it is). graph_create checks and records l[0..n-1]
   * (their arrays are not kept); the programs and buffers must outlive the
   * graph, which always binds the same ones. graph_launch enqueues it as
   * launch() would, after what was enqueued before; sync waits for it.
   * graph_free waits for a pending run first; NULL ok. All three NULL: the
   * device has none, and the caller launches one by one. */
  tvk_status (*graph_create)(Device *d, const DevLaunch *l, int n, DevGraph **out);
  tvk_status (*graph_launch)(Device *d, DevGraph *g);
  void (*graph_free)(Device *d, DevGraph *g);
  /* Waits for the background builds that will replace programs compiled so
   * far (the CPU's optimised tier); NULL: a device with none. */
  tvk_status (*wait_compiles)(Device *d);
  void (*destroy)(Device *d); /* frees everything of the device */
} DeviceOps;

/* Common header of every device; backends embed it first in their struct. */
struct Device {
  const DeviceOps *ops;
  DeviceLimits limits;
  Error err; /* the last failure of an entry (ir/error.h) */
  /* How the runtime generates kernels for the device: the language table
   * (codegen/render.h; NULL: C) and the lowering, a CgMode of codegen/kernel.h
   * (0, CG_MODE_CORES: the CPU's core split; CG_MODE_GRID: a grid of work
   * groups, whose size LaunchDims carries). A zeroed header is the CPU's. */
  const struct Lang *lang;
  int codegen_mode;
  LogSink log; /* where the backend's messages go (DeviceOptions.log) */
  /* With DeviceOptions.debug >= 1 or .profile a device reports the time each launch took
   * on it (Vulkan: timestamps read when its batch completes, so nothing is
   * made synchronous; CPU: the launch's wall time) to on_time(time_user, t),
   * on a thread that called into the device. NULL: none. */
  void (*on_time)(void *user, const LaunchTime *t);
  void *time_user;
};

/* Options common to backends, filled from the context (environment or options). */
typedef struct {
  const char *cache_dir; /* NULL: $TVK_CACHE_DIR, else $XDG_CACHE_HOME/tvk, else ~/.cache/tvk */
  const char *cc;        /* CPU: C compiler; NULL: $CC, else "cc" */
  int threads;           /* CPU: 0 = one per core */
  int debug;             /* TVK_DEBUG level */
  int validate;   /* Vulkan: VK_LAYER_KHRONOS_validation + a counting messenger ($TVK_VALIDATE) */
  int cc_timeout; /* CPU: seconds one compiler run may take; 0: $TVK_CC_TIMEOUT, else 120 */
  /* > 0: serve hits from the cache and never write to it; 0: $TVK_CACHE_READONLY decides */
  int cache_readonly;
  int no_disk_cache; /* > 0: no cache directory at all (tvk_ctx_options.no_disk_cache) */
  LogSink log;       /* the context's: its log callback, or stderr */
  int cpu_tiers;     /* CPU: a tvk_cpu_tiers; 0: $TVK_CPU_TIERS, else fast then optimised */
  int profile;       /* > 0: time every launch for Device.on_time, as debug >= 1 does, silently */
} DeviceOptions;

/* The device called `name` (devices.c): "CPU", "VK" (the best Vulkan device),
 * "VK:n" (the n-th), or NULL for the best present (a Vulkan device, else the
 * CPU). On failure returns the status with the message in err; *out is NULL. */
tvk_status device_open(const char *name, const DeviceOptions *opt, Device **out, Error *err);

/* Backend constructors. On failure return the status with the message in
 * err; *out is NULL. */
tvk_status cpu_device_create(const DeviceOptions *opt, Device **out, Error *err);
/* index -1 ("VK"): the best device (discrete > integrated > virtual > CPU);
 * VK_BEST_GPU (the default device): the best that is not a CPU-type device
 * (lavapipe, SwiftShader), TVK_ERR_DEVICE if there is none; n >= 0: the n-th
 * Vulkan device (TVK_ERR_DEVICE naming how many exist when out of range). */
#define VK_BEST_GPU (-2)
tvk_status vk_device_create(const DeviceOptions *opt, int index, Device **out, Error *err);
/* Validation warnings and errors counted so far on a Vulkan device; 0 for any
 * other device and when validation is off. */
uint64_t vk_validation_messages(Device *d);
/* A device on the app's own Vulkan objects: `app` is a tvk_vulkan_device of
 * include/tvk_vulkan.h, app_size the size the app knows of it (only
 * backend_vk reads it). The device never destroys the app's instance, device
 * or queue. TVK_ERR_INVALID_ARG naming the value for bad handles or versions. */
tvk_status vk_device_create_app(const DeviceOptions *opt, const void *app, size_t app_size,
                                Device **out, Error *err);
/* The VkBuffer (as 64 bits) and byte offset that hold b on a Vulkan device
 * (b NULL: 0 and 0, to ask whether d is one); TVK_ERR_DEVICE in d->err for
 * any other device. */
tvk_status vk_buffer_export(Device *d, DevBuffer *b, uint64_t *handle, uint64_t *offset);

/* Every device, for tvk_device_get_info: the Vulkan ones (VK:0 ...), then the
 * CPU. *out is malloc'ed (free it); *n its length, at least 1 (the CPU):
 * a missing loader or driver only means no Vulkan entries. TVK_OK, or
 * TVK_ERR_OUT_OF_MEMORY. */
tvk_status device_list(tvk_device_info **out, int *n, Error *err);
/* The backends' parts of it. vk_list_devices: *out malloc'ed, *n >= 0 (0 and
 * TVK_OK without a loader or a driver); is_default set on the one VK picks. */
tvk_status vk_list_devices(tvk_device_info **out, int *n, Error *err);
void cpu_device_describe(tvk_device_info *out);

#endif
