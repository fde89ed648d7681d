/* Internals of the Vulkan backend, shared by its files only (src/ never sees them).
 *
 *   vk_device.c    loading (volk), instance, validation messenger, device choice,
 *                  features and limits, the DeviceOps table, errors, destroy
 *   vk_memory.c    the sub-allocator: blocks of VkDeviceMemory, buffers, copies
 *   vk_compile.c   GLSL -> SPIR-V with shaderc, the on-disk SPIR-V cache
 *   vk_pipeline.c  pipelines, layouts, the VkPipelineCache
 *   vk_dispatch.c  command buffers, batching, barriers, submission, completion
 *
 * docs/vulkan.md describes the backend.
 *
 * Threading: a device is used by one thread at a time (a tvk context is), so
 * nothing here locks, except the validation counter, which the driver may bump
 * from its own threads.
 *
 * Errors: every fallible function returns a tvk_status and writes its message
 * with err_set(&v->base.err, ...). A VkResult that is not VK_SUCCESS goes through
 * vk_check(), which names the call and the result, maps out-of-memory results to
 * TVK_ERR_OUT_OF_MEMORY and marks the device lost on VK_ERROR_DEVICE_LOST; every
 * entry of the ops table starts with vk_alive(), so a lost device answers
 * TVK_ERR_DEVICE "device lost" from then on.
 */
#ifndef TVK_BACKEND_VK_INTERNAL_H
#define TVK_BACKEND_VK_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <volk.h> /* defines VK_NO_PROTOTYPES and includes vulkan.h */

#include "runtime/device.h"

/* ---- features (VkDev.features): what the device has and we enabled ---- */

enum {
  VKFEAT_FLOAT16 = 1u << 0,          /* shaderFloat16: float16_t arithmetic */
  VKFEAT_INT8 = 1u << 1,             /* shaderInt8: int8_t arithmetic */
  VKFEAT_INT16 = 1u << 2,            /* shaderInt16 */
  VKFEAT_INT64 = 1u << 3,            /* shaderInt64 */
  VKFEAT_FLOAT64 = 1u << 4,          /* shaderFloat64 */
  VKFEAT_STORAGE8 = 1u << 5,         /* storageBuffer8BitAccess: 8-bit types in SSBOs */
  VKFEAT_STORAGE16 = 1u << 6,        /* storageBuffer16BitAccess: 16-bit types in SSBOs */
  VKFEAT_TIMELINE = 1u << 7,         /* timelineSemaphore */
  VKFEAT_PUSH_DESCRIPTOR = 1u << 8,  /* VK_KHR_push_descriptor enabled */
  VKFEAT_TIMESTAMPS = 1u << 9,       /* the compute queue has timestampValidBits > 0 */
};

/* The device's limits, as the backend needs them (DeviceLimits holds the subset
 * the core reads). */
typedef struct {
  VkDeviceSize max_storage_range;  /* maxStorageBufferRange: the most one binding addresses */
  VkDeviceSize max_alloc;          /* maxMemoryAllocationSize (1.1), else the largest heap */
  VkDeviceSize max_buffer;         /* maxBufferSize (1.3/maintenance4), else max_alloc */
  VkDeviceSize storage_align;      /* minStorageBufferOffsetAlignment */
  VkDeviceSize atom;               /* nonCoherentAtomSize */
  uint32_t max_wg_count[3];        /* maxComputeWorkGroupCount */
  uint32_t max_wg_size[3];         /* maxComputeWorkGroupSize */
  uint32_t max_wg_invocations;     /* maxComputeWorkGroupInvocations */
  uint32_t max_shared;             /* maxComputeSharedMemorySize */
  uint32_t max_push_constants;     /* maxPushConstantsSize, bytes */
  uint32_t max_storage_buffers;    /* maxPerStageDescriptorStorageBuffers */
  uint32_t max_bound_sets;         /* maxBoundDescriptorSets */
  uint32_t max_push_descriptors;   /* maxPushDescriptors (0 without the extension) */
  uint32_t subgroup_size;          /* VkPhysicalDeviceSubgroupProperties.subgroupSize */
  uint32_t timestamp_bits;         /* timestampValidBits of the compute queue family */
  float timestamp_period;          /* nanoseconds per timestamp tick */
} VkDevLimits;

/* Instance-level functions, loaded per instance with vkGetInstanceProcAddr
 * (no global table: two contexts may have two instances, one with validation). */
typedef struct {
  PFN_vkDestroyInstance vkDestroyInstance;
  PFN_vkEnumeratePhysicalDevices vkEnumeratePhysicalDevices;
  PFN_vkGetPhysicalDeviceProperties vkGetPhysicalDeviceProperties;
  PFN_vkGetPhysicalDeviceProperties2 vkGetPhysicalDeviceProperties2;
  PFN_vkGetPhysicalDeviceFeatures2 vkGetPhysicalDeviceFeatures2;
  PFN_vkGetPhysicalDeviceQueueFamilyProperties vkGetPhysicalDeviceQueueFamilyProperties;
  PFN_vkGetPhysicalDeviceMemoryProperties vkGetPhysicalDeviceMemoryProperties;
  PFN_vkEnumerateDeviceExtensionProperties vkEnumerateDeviceExtensionProperties;
  PFN_vkCreateDevice vkCreateDevice;
  PFN_vkGetDeviceProcAddr vkGetDeviceProcAddr;
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;   /* NULL unless validating */
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT; /* NULL unless validating */
} VkInstanceFns;

/* State owned by the other files; each defines its struct. */
typedef struct VkMem VkMem;                     /* vk_memory.c */
typedef struct VkPipelineState VkPipelineState; /* vk_pipeline.c / vk_compile.c */
typedef struct VkDispatchState VkDispatchState; /* vk_dispatch.c */

/* Memory modes (VkDev.mem_mode), from $TVK_VK_MEMORY ("staging", "noncoherent",
 * comma-separated) so tests can run the discrete-GPU paths on any device. */
enum {
  VKMEM_FORCE_STAGING = 1u << 0,     /* never map buffers: copy through a staging buffer */
  VKMEM_FORCE_NONCOHERENT = 1u << 1, /* flush/invalidate even coherent mapped memory */
};

typedef struct VkDev {
  Device base; /* first, so a Device * is a VkDev * */
  char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE + 16]; /* "Vulkan: <deviceName>" */
  int debug;        /* TVK_DEBUG level */
  bool validate;    /* VK_LAYER_KHRONOS_validation is on */
  bool sync_validation; /* and synchronization validation (TVK_VALIDATE=2) */
  char *cache_dir;  /* opt->cache_dir (malloc'ed); NULL: the default places */

  VkInstance instance;
  VkInstanceFns vki;
  uint32_t api_version; /* what we use: min(instance, device, 1.3) */
  VkDebugUtilsMessengerEXT messenger;
  atomic_uint_fast64_t validation_messages; /* warnings + errors of the messenger */

  VkPhysicalDevice phys;
  VkPhysicalDeviceProperties props;
  VkPhysicalDeviceMemoryProperties mem_props;
  uint32_t queue_family;
  uint32_t features; /* VKFEAT_* */
  VkDevLimits lim;

  VkDevice device;
  struct VolkDeviceTable vk; /* device functions of this device: v->vk.vkCreateBuffer(...) */
  VkQueue queue;

  bool lost; /* VK_ERROR_DEVICE_LOST was seen: every entry fails from now on */

  /* Memory (vk_memory.c). block_bytes and mem_mode may be changed before the
   * first alloc (tests use small blocks); later changes are ignored. */
  VkMem *mem;
  VkDeviceSize block_bytes; /* default 64 MiB, capped by lim.max_alloc */
  unsigned mem_mode;        /* VKMEM_* */
  bool mem_fail;            /* tests: block allocations report VK_ERROR_OUT_OF_DEVICE_MEMORY */

  /* Batch serials, kept by vk_dispatch.c. A batch gets the next serial when its
   * first command is recorded; serial_used is the serial of the newest batch
   * holding commands (recorded or submitted), serial_done the newest batch known
   * complete (batches complete in order; vk_wait sets serial_done = serial_used).
   * Both start at 0. vk_buffer_free keeps a buffer's memory until serial_done
   * reaches the serial_used of the moment it was freed, so the memory of two
   * DevBuffers never overlaps while commands that use either may still run, and
   * no block is destroyed under a pending command. Hazard tracking may thus key
   * on the DevBuffer. */
  uint64_t serial_used;
  uint64_t serial_done;

  struct Lang *glsl; /* the GLSL language table for these features (vk_glsl.c); base.lang */
  VkPipelineState *pipelines; /* owned by vk_pipeline.c / vk_compile.c; NULL until they set it */
  VkDispatchState *dispatch;  /* owned by vk_dispatch.c; NULL until vk_dispatch_init */
  bool dispatch_started;      /* vk_dispatch_init was called (destroy then calls its cleanups) */
} VkDev;

static inline VkDev *vk_of(Device *d) { return (VkDev *)d; }

/* A buffer: a range of one block's VkBuffer. Bind it as (buffer, offset, range). */
struct DevBuffer {
  VkBuffer buffer;     /* the block's buffer (shared by every allocation of the block) */
  VkDeviceSize offset; /* in buffer; a multiple of minStorageBufferOffsetAlignment */
  VkDeviceSize range;  /* bytes a descriptor binds: size rounded up to 4, at least 4 */
  size_t size;         /* bytes asked for (may be 0) */
  VkDeviceSize reserved; /* bytes taken from the block: range rounded up to the alignment */
  uint8_t *host;       /* mapped address of offset; NULL: copies go through staging */
  struct VkBlock *block;
  /* vk_memory.c's bookkeeping: the list of live buffers (destroy frees those the
   * caller did not), and the list of freed ones waiting for serial_done >= freed_serial. */
  DevBuffer *prev, *next;
  uint64_t freed_serial;
};

/* ---- vk_device.c ---- */

/* The name of a VkResult ("VK_ERROR_DEVICE_LOST"); never NULL. */
const char *vk_result_name(VkResult r);
/* TVK_OK for VK_SUCCESS; otherwise a message "<call> failed: <VK_ERROR_...>" in
 * v->base.error and TVK_ERR_OUT_OF_MEMORY (out of host/device memory, too many
 * objects) or TVK_ERR_DEVICE (anything else; VK_ERROR_DEVICE_LOST also marks the
 * device lost). Callers handle the non-error codes they expect (VK_TIMEOUT,
 * VK_NOT_READY, VK_INCOMPLETE) before calling. */
tvk_status vk_check(VkDev *v, VkResult r, const char *call);
/* TVK_ERR_DEVICE with "device lost ..." once the device is lost, else TVK_OK. */
tvk_status vk_alive(VkDev *v);

/* ---- vk_memory.c ---- */

/* Creates the allocator (no memory is allocated until the first alloc). */
tvk_status vk_mem_init(VkDev *v);
/* Frees every block, the staging buffer and the copy command pool. The device
 * must be idle. NULL-safe on v->mem. */
void vk_mem_destroy(VkDev *v);
/* The DeviceOps entries. copy_in/copy_out first call vk_wait (so pending
 * dispatches that use the buffer are done), then copy directly through the
 * mapping, or through the staging buffer with vkCmdCopyBuffer on the queue,
 * waiting for the copy. */
tvk_status vk_buffer_alloc(Device *d, size_t nbytes, DevBuffer **out);
void vk_buffer_free(Device *d, DevBuffer *b);
tvk_status vk_copy_in(Device *d, DevBuffer *b, size_t offset, const void *src, size_t n);
tvk_status vk_copy_out(Device *d, DevBuffer *b, size_t offset, void *dst, size_t n);
/* For launch: TVK_OK when b can be bound as a storage buffer; otherwise
 * TVK_ERR_DEVICE with a message naming the buffer's index in the launch, its
 * size and maxStorageBufferRange. A buffer larger than one binding can address
 * is allocated (memory allows it) but refused here, never bound truncated. */
tvk_status vk_buffer_check_bind(VkDev *v, const DevBuffer *b, int index);

typedef struct {
  uint64_t blocks;      /* VkDeviceMemory blocks held (kept empty ones included) */
  uint64_t block_bytes; /* their total size */
  uint64_t live;        /* live buffers */
  uint64_t live_bytes;  /* bytes reserved by live buffers */
  uint64_t staging_bytes; /* size of the staging buffer (0 until a staging copy) */
} VkMemStats;
void vk_mem_stats(const VkDev *v, VkMemStats *out);

/* ---- vk_glsl.c ---- */

/* Builds v->glsl for v->features and makes it the device's codegen: base.lang
 * and grid lowering (CG_MODE_GRID). vk_glsl_lang_free(v->glsl) frees it. */
tvk_status vk_glsl_attach(VkDev *v);

/* ---- vk_compile.c / vk_pipeline.c / vk_dispatch.c (the dispatch engineer) ----
 *
 * vk_device_create calls vk_dispatch_init last; destroy calls, in order,
 * vk_wait (errors ignored), vk_pipeline_cleanup, vk_dispatch_destroy,
 * vk_mem_destroy, then destroys the device and the instance. */

/* Command pools, fences/timeline semaphore, pipeline cache ...; may set
 * v->dispatch and v->pipelines. On failure leaves what it made for
 * vk_dispatch_destroy / vk_pipeline_cleanup to free. */
tvk_status vk_dispatch_init(VkDev *v);
tvk_status vk_compile(Device *d, const char *name, const char *src, DevProgram **out,
                      bool *cache_hit);
void vk_program_free(Device *d, DevProgram *p); /* NULL ok */
tvk_status vk_launch(Device *d, DevProgram *p, DevBuffer *const *bufs, int nbufs,
                     const int32_t *vals, int nvals, const LaunchDims *dims);
/* Submits the recorded batch, if any; does not wait. */
tvk_status vk_flush(VkDev *v);
/* Submits and waits until all submitted work is complete and its writes are
 * visible to the host (the batch ends with a barrier to HOST_READ) and to later
 * transfers. The sync entry of the ops table. */
tvk_status vk_wait(VkDev *v);
/* Frees every program, pipeline and layout; saves the pipeline cache. Device idle. */
void vk_pipeline_cleanup(VkDev *v);
/* Frees command pools, fences, semaphores, query pools, descriptor pools. */
void vk_dispatch_destroy(VkDev *v);

/* ---- the kernel ABI on Vulkan (what the GLSL renderer emits, vk_launch feeds) ----
 *
 * Buffers: launch buffer i is the storage buffer at (set 0, binding i), bound as
 * (DevBuffer.buffer, .offset, .range). Declare inputs `readonly`: bindings the
 * SPIR-V marks NonWritable are treated as read-only, which spares barriers
 * between kernels that only read the same buffer. Bindings the shader does not
 * declare (or the optimiser removed) are neither bound nor tracked.
 *
 * Push constants: one block, std430, in this order:
 *
 *   layout(push_constant) uniform TvkPush {
 *     uint grid_x, grid_y, grid_z;   // offset 0: the launch's dims->global
 *     int v0, v1, ...;               // offset VK_PUSH_VALS_OFFSET + 4*i: vals[i]
 *   } pc;
 *
 * vk_launch pushes exactly the block the SPIR-V declares: values past its end
 * are not pushed (the kernel does not read them), a block longer than the grid
 * plus the launch's values is refused, and a kernel with no block gets nothing.
 * 12 + 4*nvals bytes must fit in maxPushConstantsSize (128 on most devices: 29
 * values).
 *
 * Work groups: dims->global is the logical grid; dims->local must equal the
 * shader's local_size. When a grid dimension exceeds maxComputeWorkGroupCount,
 * vk_launch dispatches the total number of groups T = grid_x*grid_y*grid_z
 * (T < 2^32) spread over x, y, z instead, so every kernel reconstructs its
 * logical group id from the linear one, and groups past T exit at once (a whole
 * group returns, so a later barrier() stays in uniform control flow):
 *
 *   uint lin = gl_WorkGroupID.x + gl_NumWorkGroups.x *
 *              (gl_WorkGroupID.y + gl_NumWorkGroups.y * gl_WorkGroupID.z);
 *   if (lin >= pc.grid_x * pc.grid_y * pc.grid_z) return;
 *   uvec3 gid = uvec3(lin % pc.grid_x, (lin / pc.grid_x) % pc.grid_y,
 *                     lin / (pc.grid_x * pc.grid_y));
 *
 * When the grid fits, the dispatch is exactly (grid_x, grid_y, grid_z) and gid
 * equals gl_WorkGroupID. */
enum { VK_PUSH_VALS_OFFSET = 12 };

/* Access of one binding, from the SPIR-V (NonWritable / NonReadable). */
enum { VKACC_READ = 1u << 0, VKACC_WRITE = 1u << 1 };

/* A compiled kernel (vk_compile.c builds it, vk_pipeline.c makes its objects). */
struct DevProgram {
  VkDev *owner;
  DevProgram *prev, *next; /* the device's live programs (VkPipelineState.programs) */
  char *name;
  int nbindings;          /* highest storage-buffer binding of set 0, plus 1 */
  uint8_t *access;        /* per binding: VKACC_* (0: the shader does not declare it) */
  uint32_t push_bytes;    /* size of the push-constant block the shader declares (0: none) */
  uint32_t local[3];      /* the shader's local_size */
  bool push_descriptors;  /* bound with vkCmdPushDescriptorSetKHR, not a pool's set */
  VkShaderModule module;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  uint64_t serial;        /* the newest batch that uses it (program_free waits for it) */
};

/* The shaderc compiler, the cache directory and the VkPipelineCache of a device
 * (v->pipelines), made by vk_dispatch_init through vk_pipeline_init. */
struct shaderc_compiler;
struct VkPipelineState {
  struct shaderc_compiler *shaderc; /* made at the first cache miss (~200 ms), then kept */
  char *cache_dir;        /* resolved at the first compile; NULL until then */
  VkPipelineCache cache;
  char *cache_path;       /* the pipeline cache's file; NULL: not saved */
  bool cache_dirty;       /* pipelines were created since it was loaded */
  char loaded_key[33];    /* content hash of the data loaded ("" if none): unchanged data is
                             not written back */
  DevProgram *programs;
  uint64_t shaderc_calls; /* compiles that ran shaderc (tests count cache hits) */
};

/* vk_pipeline.c: creates v->pipelines and loads the VkPipelineCache. */
tvk_status vk_pipeline_init(VkDev *v);
/* vk_pipeline.c: reads the interface of the SPIR-V (bindings, their access, the
 * push-constant block, local_size), checks it against the device's limits and
 * makes the shader module, layouts and the pipeline into p (p->name set). */
tvk_status vk_pipeline_build(VkDev *v, DevProgram *p, const uint32_t *spirv, size_t nwords);
/* vk_pipeline.c: destroys p's Vulkan objects and frees p (not the list links). */
void vk_pipeline_release(VkDev *v, DevProgram *p);
/* vk_pipeline.c: the cache directory, opened at the first call. */
tvk_status vk_cache_dir(VkDev *v, const char **dir);
/* vk_dispatch.c: waits until the batch of `serial` is complete (submitting it
 * first if it is still being recorded). */
tvk_status vk_wait_serial(VkDev *v, uint64_t serial);
/* vk_dispatch.c: counters since the device was made (tests check barriers). */
typedef struct {
  uint64_t dispatches; /* vkCmdDispatch recorded */
  uint64_t barriers;   /* pipeline barriers between dispatches (not the batch's first/last) */
  uint64_t submits;    /* batches submitted */
} VkDispatchStats;
void vk_dispatch_stats(const VkDev *v, VkDispatchStats *out);

#endif
