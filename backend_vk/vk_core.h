/* The core of the Vulkan backend: the device state every file works on, and the
 * error helpers. src/ never sees any of backend_vk/.
 *
 * The files form layers. A file includes and calls only files of a lower rank
 * (and its own header); backend_vk/LAYERS lists the ranks for the include check,
 * docs/vulkan.md ("Structure") explains them.
 *
 *   rank file          holds                                          may use (backend files)
 *   0    vk_core       VkDev, features, limits, instance functions,   none (only volk,
 *                      DevBuffer, vk_check / vk_alive                 runtime/device.h, ir/)
 *   1    vk_glsl       the GLSL language table for the features       core
 *   1    vk_pipeline   SPIR-V -> shader module, layouts, pipeline;    core
 *                      the VkPipelineCache; DevProgram
 *   2    vk_dispatch   batches, barriers, descriptors, submission,    core, pipeline
 *                      completion (the serials); the kernel ABI
 *   3    vk_compile    GLSL -> SPIR-V (shaderc), the SPIR-V cache;    core, pipeline, dispatch
 *                      making and freeing programs
 *   3    vk_memory     the sub-allocator, buffers, host copies        core, dispatch
 *   4    vk_device     instance, device choice, the DeviceOps table,  all of the above
 *                      create and destroy
 *
 * What decides the order: freeing a program, copying to or from a buffer and
 * retrying an allocation that ran out of memory all wait for pending launches,
 * so compile and memory sit above dispatch and call vk_wait / vk_wait_serial
 * directly. The dispatcher only binds buffers and pipelines, so it needs
 * DevBuffer's layout (here, below it) and DevProgram's (vk_pipeline.h), never
 * a function above it.
 *
 * Threading: a device is used by one thread at a time (a tvk context is), so
 * nothing locks, except the validation counter, which the driver may bump from
 * its own threads.
 *
 * Errors: every fallible function returns a tvk_status and writes its message
 * with err_set(&v->base.err, ...). A VkResult that is not VK_SUCCESS goes through
 * vk_check(), which names the call and the result, maps out-of-memory results to
 * TVK_ERR_OUT_OF_MEMORY and marks the device lost on VK_ERROR_DEVICE_LOST; every
 * entry of the ops table starts with vk_alive(), so a lost device answers
 * TVK_ERR_DEVICE "device lost" from then on.
 */
#ifndef TVK_BACKEND_VK_CORE_H
#define TVK_BACKEND_VK_CORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <volk.h> /* defines VK_NO_PROTOTYPES and includes vulkan.h */

#include "runtime/device.h"

/* ---- features (VkDev.features): what the device has and we enabled ---- */

enum {
  VKFEAT_FLOAT16 = 1u << 0,         /* shaderFloat16: float16_t arithmetic */
  VKFEAT_INT8 = 1u << 1,            /* shaderInt8: int8_t arithmetic */
  VKFEAT_INT16 = 1u << 2,           /* shaderInt16 */
  VKFEAT_INT64 = 1u << 3,           /* shaderInt64 */
  VKFEAT_FLOAT64 = 1u << 4,         /* shaderFloat64 */
  VKFEAT_STORAGE8 = 1u << 5,        /* storageBuffer8BitAccess: 8-bit types in SSBOs */
  VKFEAT_STORAGE16 = 1u << 6,       /* storageBuffer16BitAccess: 16-bit types in SSBOs */
  VKFEAT_TIMELINE = 1u << 7,        /* timelineSemaphore */
  VKFEAT_PUSH_DESCRIPTOR = 1u << 8, /* VK_KHR_push_descriptor enabled */
  VKFEAT_TIMESTAMPS = 1u << 9,      /* the compute queue has timestampValidBits > 0 */
  /* shaderSignedZeroInfNanPreserveFloat32 / 64 (float controls): kernels declare the
   * SignedZeroInfNanPreserve execution mode, so that the compiler keeps IEEE's
   * answers for inf, NaN and -0 (x - x, x * 0, 0 - x) */
  VKFEAT_PRESERVE32 = 1u << 10,
  VKFEAT_PRESERVE64 = 1u << 11,
  VKFEAT_FLOAT_CONTROLS_EXT = 1u << 12, /* VK_KHR_shader_float_controls enabled (Vulkan 1.1):
                                           SPIR-V names SPV_KHR_float_controls */
  /* VK_EXT_calibrated_timestamps enabled, with the device's clock and
   * CLOCK_MONOTONIC calibrateable: timings map onto the host's clock */
  VKFEAT_CALIBRATED = 1u << 13,
  /* Not a Vulkan feature: a CPU-type device (lavapipe) with shaderInt64, whose
   * kernels access runs of 8 32-bit elements as one u64vec4 (vk_glsl.c): its
   * every access is a loop over the SIMD lanes, so their count is what costs */
  VKFEAT_WIDE = 1u << 14,
  /* computeFullSubgroups (Vulkan 1.3's subgroupSizeControl features, or
   * VK_EXT_subgroup_size_control) enabled: a kernel that combines through
   * subgroups is created with REQUIRE_FULL_SUBGROUPS (vk_pipeline.c), so its
   * invocation's index subgroup_id * S + subgroup_lane covers the work group
   * (Vulkan promises no relation between subgroups and local ids otherwise) */
  VKFEAT_FULL_SUBGROUPS = 1u << 15,
};

/* The device's limits, as the backend needs them (DeviceLimits holds the subset
 * the core reads). */
typedef struct {
  VkDeviceSize max_storage_range; /* maxStorageBufferRange: the most one binding addresses */
  VkDeviceSize max_alloc;         /* maxMemoryAllocationSize (1.1), else the largest heap */
  VkDeviceSize max_buffer;        /* maxBufferSize (1.3/maintenance4), else max_alloc */
  VkDeviceSize storage_align;     /* minStorageBufferOffsetAlignment */
  VkDeviceSize atom;              /* nonCoherentAtomSize */
  uint32_t max_wg_count[3];       /* maxComputeWorkGroupCount */
  uint32_t max_wg_size[3];        /* maxComputeWorkGroupSize */
  uint32_t max_wg_invocations;    /* maxComputeWorkGroupInvocations */
  uint32_t max_shared;            /* maxComputeSharedMemorySize */
  uint32_t max_push_constants;    /* maxPushConstantsSize, bytes */
  uint32_t max_storage_buffers;   /* maxPerStageDescriptorStorageBuffers */
  uint32_t max_bound_sets;        /* maxBoundDescriptorSets */
  uint32_t max_push_descriptors;  /* maxPushDescriptors (0 without the extension) */
  uint32_t subgroup_size;         /* VkPhysicalDeviceSubgroupProperties.subgroupSize */
  uint32_t timestamp_bits;        /* timestampValidBits of the compute queue family */
  float timestamp_period;         /* nanoseconds per timestamp tick */
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
  /* NULL without VK_EXT_calibrated_timestamps */
  PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT vkGetPhysicalDeviceCalibrateableTimeDomainsEXT;
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;   /* NULL unless validating */
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT; /* NULL unless validating */
} VkInstanceFns;

/* State owned by the files above; each defines its struct. */
typedef struct VkMem VkMem;                     /* vk_memory.c */
typedef struct VkPipelineState VkPipelineState; /* vk_pipeline.h */
typedef struct VkDispatchState VkDispatchState; /* vk_dispatch.c */

/* Memory modes (VkDev.mem_mode), from $TVK_VK_MEMORY ("staging", "noncoherent",
 * comma-separated) so tests can run the discrete-GPU paths on any device. */
enum {
  VKMEM_FORCE_STAGING = 1u << 0,     /* never map buffers: copy through a staging buffer */
  VKMEM_FORCE_NONCOHERENT = 1u << 1, /* flush/invalidate even coherent mapped memory */
};

typedef struct VkDev {
  Device base;                                      /* first, so a Device * is a VkDev * */
  char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE + 16]; /* "Vulkan: <deviceName>" */
  int debug;                                        /* TVK_DEBUG level */
  bool profile;         /* DeviceOptions.profile: timestamps without the TVK_DEBUG lines */
  bool validate;        /* VK_LAYER_KHRONOS_validation is on */
  bool sync_validation; /* and synchronization validation (TVK_VALIDATE=2) */
  char *cache_dir;      /* opt->cache_dir (malloc'ed); NULL: the default places */
  int cache_readonly;   /* opt->cache_readonly (0: $TVK_CACHE_READONLY decides) */
  bool no_disk_cache;   /* opt->no_disk_cache: no cache directory, kernels compiled in memory */

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
  /* instance, device and queue are the app's (vk_device_create_app): used,
   * never destroyed; its buffers may be wrapped (vk_buffer_wrap) */
  bool app_owned;
  struct VolkDeviceTable vk; /* device functions of this device: v->vk.vkCreateBuffer(...) */
  VkQueue queue;

  _Atomic bool lost; /* VK_ERROR_DEVICE_LOST was seen: every entry fails from now on (atomic:
                      * compiles on other threads may see it) */

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
  bool dispatch_started;      /* pipeline and dispatch init were called (destroy then calls
                                 their cleanups) */
} VkDev;

static inline VkDev *vk_of(Device *d) { return (VkDev *)d; }

/* A buffer: a range of one block's VkBuffer. Bind it as (buffer, offset, range).
 * vk_memory.c makes and frees it; it is defined here because vk_dispatch.c,
 * below memory, binds it. */
struct DevBuffer {
  VkBuffer buffer;       /* the block's buffer (shared by every allocation of the block) */
  VkDeviceSize offset;   /* in buffer; a multiple of minStorageBufferOffsetAlignment */
  VkDeviceSize range;    /* bytes a descriptor binds: size rounded up to 4, at least 4 */
  size_t size;           /* bytes asked for (may be 0) */
  VkDeviceSize reserved; /* bytes taken from the block: range rounded up to the alignment */
  uint8_t *host;         /* mapped address of offset; NULL: copies go through staging */
  struct VkBlock *block; /* NULL for a wrapped buffer */
  bool wrapped;          /* the app's VkBuffer (vk_buffer_wrap): freeing frees only this record */
  /* vk_memory.c's bookkeeping: the list of live buffers (destroy frees those the
   * caller did not), and the list of freed ones waiting for serial_done >= freed_serial. */
  DevBuffer *prev, *next;
  uint64_t freed_serial;
};

/* ---- errors (vk_core.c) ---- */

/* The name of a VkResult ("VK_ERROR_DEVICE_LOST"); never NULL. */
const char *vk_result_name(VkResult r);
/* TVK_OK for VK_SUCCESS; otherwise a message "<call> failed: <VK_ERROR_...>" in
 * v->base.error and TVK_ERR_OUT_OF_MEMORY (out of host/device memory, too many
 * objects) or TVK_ERR_DEVICE (anything else; VK_ERROR_DEVICE_LOST also marks the
 * device lost). Callers handle the non-error codes they expect (VK_TIMEOUT,
 * VK_NOT_READY, VK_INCOMPLETE) before calling. */
tvk_status vk_check(VkDev *v, VkResult r, const char *call);
/* The same into err (a compile's, which may run on another thread). */
tvk_status vk_check_to(VkDev *v, Error *err, VkResult r, const char *call);
/* TVK_ERR_DEVICE with "device lost ..." once the device is lost, else TVK_OK. */
tvk_status vk_alive(VkDev *v);
/* The same into err. */
tvk_status vk_alive_to(VkDev *v, Error *err);

#endif
