/* tvk on an application's own Vulkan objects (docs/vulkan.md, "Interop").
 *
 * An app that already has a VkInstance, a VkDevice and a compute queue runs tvk
 * on them (tvk_ctx_create_vulkan), hands tvk storage buffers it owns without a
 * copy (tvk_from_vulkan_buffer), and reads the buffer that holds a result
 * (tvk_vulkan_buffer). Everything in tvk.h holds; what is added:
 *
 * - Ownership: the instance, device, queue and the app's buffers and their
 *   memory stay the app's. tvk_ctx_destroy destroys only what tvk made (its
 *   buffers and memory, pipelines, descriptor and command pools, fences); the
 *   app destroys its objects after it.
 * - The queue: tvk submits to it (and waits on its own fences) during tvk calls
 *   on the context, tvk_ctx_destroy included. Vulkan requires a queue's use to
 *   be externally synchronised: the app must not submit to, wait on or
 *   otherwise use that queue from another thread while a tvk call on the
 *   context runs. Between tvk calls the app may use it freely.
 * - Validation: the validation layer is the app's to enable on its instance,
 *   with its own messenger; tvk_ctx_options.validate and $TVK_VALIDATE do
 *   nothing here (tvk_stats.validation_messages stays 0).
 * - Built with TVK_VULKAN=OFF, the library still has these functions:
 *   tvk_ctx_create_vulkan fails with TVK_ERR_DEVICE saying so, and the others
 *   have no Vulkan context to work on.
 *
 * Include it after volk.h or vulkan.h if the app uses them; it includes
 * <vulkan/vulkan_core.h> itself.
 */
#ifndef TVK_VULKAN_H
#define TVK_VULKAN_H

#include <stddef.h>
#include <stdint.h>

#include "tvk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the library's entry points ----
 * VkBuffer handles cross them as 64-bit integers, so that the library itself
 * is built without Vulkan headers; the inline functions below are the API.
 * (Bindings from other languages call these directly: a VkBuffer's value is
 * its 64 bits on every platform.) */
struct tvk_vulkan_device;
TVK_API tvk_status tvk_ctx_create_vulkan_sized(const struct tvk_vulkan_device *vk, size_t vk_size,
                                               const tvk_ctx_options *opts, size_t opts_size,
                                               tvk_ctx **out);
TVK_API tvk_status tvk_vulkan_buffer_u64(tvk_tensor *t, uint64_t *buffer, uint64_t *offset,
                                         uint64_t *size);
TVK_API tvk_tensor *tvk_from_vulkan_buffer_u64(tvk_ctx *ctx, tvk_dtype dt, int ndim,
                                               const int64_t *shape, uint64_t buffer,
                                               uint64_t offset, uint64_t size,
                                               void (*release)(void *user), void *user);

#ifndef TVK_VULKAN_DECLS_ONLY
#include <vulkan/vulkan_core.h>

/* The app's Vulkan objects. It grows at its end from version to version (the
 * macro passes the size the app knows); zero-initialise it. */
typedef struct tvk_vulkan_device {
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice device;       /* created from physical_device */
  uint32_t queue_family; /* a family with VK_QUEUE_COMPUTE_BIT */
  VkQueue queue;         /* a queue of that family: tvk submits all its work to it */
  /* The Vulkan version the instance was created with (VkApplicationInfo.
   * apiVersion): at least 1.1. tvk uses min(this, the device's, 1.3). */
  uint32_t api_version;
  /* Where tvk loads instance and device functions from; NULL: the system's
   * loader (libvulkan.so.1), which must then be the one the app used. */
  PFN_vkGetInstanceProcAddr get_instance_proc_addr;
  /* The features the device was created with: its VkPhysicalDeviceFeatures2
   * and the feature structs chained to it (VkPhysicalDeviceVulkan11Features,
   * ...12Features, 16BitStorage, 8BitStorage, ShaderFloat16Int8; others are
   * skipped). A device made with pEnabledFeatures: a VkPhysicalDeviceFeatures2
   * holding those. NULL: none beyond core 1.0's required ones. tvk uses only
   * features enabled here (and that the device has): without shaderFloat64,
   * float64 kernels fail with TVK_ERR_DTYPE, as on a device without it;
   * without shaderInt64, int64 ones; without 8/16-bit storage, such tensors
   * are packed in 32-bit words (slower, still right). Read during the call
   * only. */
  const VkPhysicalDeviceFeatures2 *enabled_features;
  /* The device extensions it was created with (tvk uses VK_KHR_push_descriptor,
   * and on Vulkan 1.1 VK_KHR_8bit_storage, VK_KHR_shader_float16_int8 and
   * VK_KHR_shader_float_controls, when listed). Read during the call only. */
  uint32_t enabled_extension_count;
  const char *const *enabled_extensions;
} tvk_vulkan_device;

/* A context on the app's device (tvk.h's tvk_ctx_create, with opts' device
 * name and validate ignored). opts may be NULL. On success *out is the
 * context; on failure *out is NULL and tvk_last_create_error says why:
 * TVK_ERR_INVALID_ARG for a NULL handle, a queue family out of range or
 * without VK_QUEUE_COMPUTE_BIT, or an api_version below 1.1 (the message names
 * the value); TVK_ERR_DEVICE when the functions cannot be loaded or the
 * library was built without Vulkan. Nothing of the app's is changed or
 * destroyed on failure. */
#define tvk_ctx_create_vulkan(vk, opts, out)                                                       \
  tvk_ctx_create_vulkan_sized((vk), sizeof(tvk_vulkan_device), (opts), sizeof(tvk_ctx_options),    \
                              (out))

static inline uint64_t tvk_vulkan_handle_bits(VkBuffer b) { return (uint64_t)b; }
static inline VkBuffer tvk_vulkan_handle_of(uint64_t bits) { return (VkBuffer)bits; }

/* Realizes t (into a contiguous row-major buffer of its shape, as tvk_to_host
 * does: a view or a constant is copied into one first, and t reads it from
 * then on) and returns the buffer, the byte offset in it where t's first
 * element is, and the bytes of its elements (numel * element size). When this
 * returns, tvk's writes to that range are complete and made visible to
 * transfer commands and the host; a compute shader of the app reading it
 * needs its own barrier (COMPUTE_SHADER / SHADER_WRITE before it). The buffer
 * may hold other tensors' data around that range: only [offset, offset +
 * size) is t's. Valid while t is alive, until a later tvk call that writes
 * t's buffer (tvk_assign to it); the app must not write it, nor destroy it.
 * A tensor of no elements gives VK_NULL_HANDLE, 0, 0. Any output may be NULL.
 * Errors: t NULL or in an error state, a context that is not a Vulkan one
 * (TVK_ERR_DEVICE), a failed realize. */
static inline tvk_status tvk_vulkan_buffer(tvk_tensor *t, VkBuffer *buffer, VkDeviceSize *offset,
                                           VkDeviceSize *size) {
  uint64_t h = 0, o = 0, s = 0;
  tvk_status st = tvk_vulkan_buffer_u64(t, &h, &o, &s);
  if (buffer) *buffer = st == TVK_OK ? tvk_vulkan_handle_of(h) : VK_NULL_HANDLE;
  if (offset) *offset = o;
  if (size) *size = s;
  return st;
}

/* A tensor whose elements (row-major, numel * tvk_dtype_size(dt) bytes) are
 * the app's buffer at [offset, ...), used in place without a copy, on a
 * context made with tvk_ctx_create_vulkan on the device the buffer belongs
 * to. buffer_size is the size the buffer was created with
 * (VkBufferCreateInfo.size: Vulkan cannot be asked it).
 * - The buffer must have been created with VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
 *   plus TRANSFER_SRC_BIT for tvk_to_host of the tensor itself and
 *   TRANSFER_DST_BIT for writes through the host; and be bound to memory.
 *   offset must be a multiple of minStorageBufferOffsetAlignment, the bytes
 *   rounded up to 4 must fit in buffer_size - offset and in
 *   maxStorageBufferRange (TVK_ERR_INVALID_ARG naming the values).
 * - tvk reads it when a kernel that reads the tensor runs, and tvk_assign
 *   to the tensor writes it (through the same kernels, in place). The app must
 *   have completed its own writes (a fence or vkQueueWaitIdle; device writes
 *   also made available to compute shaders by a barrier) before the tvk call
 *   that reads it, and may write it again only when no tvk work on it is
 *   pending: after tvk_sync, tvk_to_host or tvk_vulkan_buffer.
 * - release(user), if not NULL, is called once, when tvk no longer uses the
 *   buffer: the tensor, every tensor computed lazily from it and every
 *   pending kernel reading it are gone (tvk_ctx_destroy at the latest). tvk
 *   never frees the buffer or its memory, nor gives it to other data. It is
 *   not called when this function fails: the buffer is then untouched.
 * Errors come back as an error tensor (tvk.h's conventions). */
static inline tvk_tensor *tvk_from_vulkan_buffer(tvk_ctx *ctx, tvk_dtype dt, int ndim,
                                                 const int64_t *shape, VkBuffer buffer,
                                                 VkDeviceSize offset, VkDeviceSize buffer_size,
                                                 void (*release)(void *user), void *user) {
  return tvk_from_vulkan_buffer_u64(ctx, dt, ndim, shape, tvk_vulkan_handle_bits(buffer), offset,
                                    buffer_size, release, user);
}
#endif /* TVK_VULKAN_DECLS_ONLY */

#ifdef __cplusplus
}
#endif

#endif
