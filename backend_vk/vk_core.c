/* The error helpers every file of the backend reports Vulkan results through
 * (see vk_core.h). */
#include "vk_core.h"

const char *vk_result_name(VkResult r) {
  switch (r) {
#define VK_RESULT_CASE(x)                                                                          \
  case x: return #x
    VK_RESULT_CASE(VK_SUCCESS);
    VK_RESULT_CASE(VK_NOT_READY);
    VK_RESULT_CASE(VK_TIMEOUT);
    VK_RESULT_CASE(VK_EVENT_SET);
    VK_RESULT_CASE(VK_EVENT_RESET);
    VK_RESULT_CASE(VK_INCOMPLETE);
    VK_RESULT_CASE(VK_ERROR_OUT_OF_HOST_MEMORY);
    VK_RESULT_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY);
    VK_RESULT_CASE(VK_ERROR_INITIALIZATION_FAILED);
    VK_RESULT_CASE(VK_ERROR_DEVICE_LOST);
    VK_RESULT_CASE(VK_ERROR_MEMORY_MAP_FAILED);
    VK_RESULT_CASE(VK_ERROR_LAYER_NOT_PRESENT);
    VK_RESULT_CASE(VK_ERROR_EXTENSION_NOT_PRESENT);
    VK_RESULT_CASE(VK_ERROR_FEATURE_NOT_PRESENT);
    VK_RESULT_CASE(VK_ERROR_INCOMPATIBLE_DRIVER);
    VK_RESULT_CASE(VK_ERROR_TOO_MANY_OBJECTS);
    VK_RESULT_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED);
    VK_RESULT_CASE(VK_ERROR_FRAGMENTED_POOL);
    VK_RESULT_CASE(VK_ERROR_UNKNOWN);
    VK_RESULT_CASE(VK_ERROR_OUT_OF_POOL_MEMORY);
    VK_RESULT_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE);
    VK_RESULT_CASE(VK_ERROR_FRAGMENTATION);
    VK_RESULT_CASE(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS);
    VK_RESULT_CASE(VK_PIPELINE_COMPILE_REQUIRED);
    VK_RESULT_CASE(VK_ERROR_VALIDATION_FAILED_EXT);
    VK_RESULT_CASE(VK_ERROR_INVALID_SHADER_NV);
    VK_RESULT_CASE(VK_ERROR_NOT_PERMITTED_KHR);
    VK_RESULT_CASE(VK_ERROR_COMPRESSION_EXHAUSTED_EXT);
#undef VK_RESULT_CASE
  default: return "VK_RESULT_UNKNOWN";
  }
}

tvk_status vk_check(VkDev *v, VkResult r, const char *call) {
  return vk_check_to(v, &v->base.err, r, call);
}

tvk_status vk_check_to(VkDev *v, Error *err, VkResult r, const char *call) {
  if (r == VK_SUCCESS) return TVK_OK;
  switch (r) {
  case VK_ERROR_OUT_OF_HOST_MEMORY:
  case VK_ERROR_OUT_OF_DEVICE_MEMORY:
  case VK_ERROR_OUT_OF_POOL_MEMORY:
  case VK_ERROR_TOO_MANY_OBJECTS:
  case VK_ERROR_FRAGMENTED_POOL:
  case VK_ERROR_FRAGMENTATION:
    return err_set(err, TVK_ERR_OUT_OF_MEMORY, "%s failed: %s (%s)", call, vk_result_name(r),
                   v->name);
  case VK_ERROR_DEVICE_LOST:
    v->lost = true;
    return err_set(err, TVK_ERR_DEVICE,
                   "%s failed: VK_ERROR_DEVICE_LOST: device lost (%s); the context cannot run "
                   "anything more",
                   call, v->name);
  default:
    return err_set(err, TVK_ERR_DEVICE, "%s failed: %s (%d) (%s)", call, vk_result_name(r), (int)r,
                   v->name);
  }
}

tvk_status vk_alive(VkDev *v) { return vk_alive_to(v, &v->base.err); }

tvk_status vk_alive_to(VkDev *v, Error *err) {
  if (!v->lost) return TVK_OK;
  return err_set(err, TVK_ERR_DEVICE,
                 "device lost: %s reported VK_ERROR_DEVICE_LOST earlier; create a new context",
                 v->name);
}
