/* Interop: tensors over memory the app owns, and tvk on the app's own Vulkan
 * objects (tvk.h's tvk_from_host_ptr; tvk_vulkan.h).
 *
 *   1. CPU: host memory used in place (no copy), its release callback, the
 *      alignment and argument checks, and the Vulkan entries refusing a CPU
 *      context (and, in a TVK_VULKAN=OFF build, refusing to make one).
 *   2. Vulkan (built with it): the test makes its own instance, device, queue
 *      and buffers, as an app would, hands them to tvk, computes from and
 *      into its buffers, reads a result through the buffer tvk exports, and
 *      checks that its device outlives the context. With $TVK_VALIDATE set
 *      its instance has the validation layer and its own messenger, which
 *      must count no message. Skipped when the machine has no Vulkan device,
 *      unless TVK_REQUIRE_VK is set.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, strdup (test_util.h) */
/* cmocka.h needs these first */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TVK_HAVE_VULKAN
#include <volk.h> /* the library's loader: the test calls Vulkan through it too */
#endif

#include "test_util.h"
#include "tvk.h"
#include "tvk_vulkan.h" /* compiles in a TVK_VULKAN=OFF build too, with the system's headers */

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

/* A release callback's record: how often it ran. */
static void count_release(void *user) { (*(int *)user)++; }

static tvk_ctx *cpu_ctx(void) {
  tvk_ctx_options o = {.device = "CPU", .cache_dir = test_cache_dir()};
  tvk_ctx *ctx = NULL;
  tvk_status st = tvk_ctx_create_opts(&o, &ctx);
  if (st != TVK_OK) fprintf(stderr, "tvk_ctx_create: %s\n", tvk_last_create_error());
  assert_int_equal(st, TVK_OK);
  return ctx;
}

/* y = x * 2 + 1; the intermediate tensors are released, so that only y
 * reads x (the release callbacks' timing is tested). */
static tvk_tensor *affine(tvk_tensor *x) {
  tvk_tensor *c2 = tvk_scalar(tvk_ctx_of(x), TVK_FLOAT32, 2.0);
  tvk_tensor *c1 = tvk_scalar(tvk_ctx_of(x), TVK_FLOAT32, 1.0);
  tvk_tensor *two = tvk_mul(x, c2), *y = tvk_add(two, c1);
  tvk_release(c2), tvk_release(c1), tvk_release(two);
  return y;
}

static void check_affine(const float *x, const float *y, int n) {
  for (int i = 0; i < n; i++) assert_float_equal(y[i], (double)x[i] * 2.0 + 1.0, 1e-6);
}

/* ================================================================ 1. CPU */

/* The tensor reads the app's memory when a kernel runs, not when it is made. */
static void test_host_ptr_no_copy(void **state) {
  (void)state;
  tvk_ctx *ctx = cpu_ctx();
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6];
  int released = 0;
  tvk_tensor *t = tvk_from_host_ptr(ctx, TVK_FLOAT32, 2, SHAPE(2, 3), x, count_release, &released);
  assert_int_equal(tvk_status_of(t), TVK_OK);
  tvk_tensor *a = affine(t);
  x[4] = 50; /* before the realize: seen */
  assert_int_equal(tvk_to_host(a, y, sizeof y), TVK_OK);
  check_affine(x, y, 6);
  x[0] = -7; /* a later computation sees this too; a's result is kept */
  tvk_tensor *s = tvk_sum(t, 0, NULL, false);
  float sum = 0;
  assert_int_equal(tvk_to_host(s, &sum, sizeof sum), TVK_OK);
  double want = 0;
  for (int i = 0; i < 6; i++) want += x[i];
  assert_float_equal(sum, want, 1e-5);
  assert_int_equal(tvk_to_host(a, y, sizeof y), TVK_OK);
  assert_float_equal(y[0], 3.0, 0); /* the old x[0] = 1 */
  /* Something lazy still reads x: releasing t does not release the memory. */
  tvk_tensor *lazy = tvk_mul(t, t);
  tvk_release(t);
  tvk_release(a);
  tvk_release(s);
  assert_int_equal(released, 0);
  float sq[6];
  assert_int_equal(tvk_to_host(lazy, sq, sizeof sq), TVK_OK);
  for (int i = 0; i < 6; i++) assert_float_equal(sq[i], (double)x[i] * x[i], 1e-4);
  tvk_release(lazy); /* realized: its result is its own buffer, x is no longer needed */
  assert_int_equal(released, 1);
  tvk_ctx_destroy(ctx);
  assert_int_equal(released, 1);
}

/* tvk_assign writes the app's memory in place. */
static void test_host_ptr_assign(void **state) {
  (void)state;
  tvk_ctx *ctx = cpu_ctx();
  int32_t x[4] = {1, 2, 3, 4};
  int released = 0;
  tvk_tensor *t = tvk_from_host_ptr(ctx, TVK_INT32, 1, SHAPE(4), x, count_release, &released);
  tvk_tensor *v = tvk_add(t, tvk_scalar(ctx, TVK_INT32, 10));
  assert_int_equal(tvk_assign(t, v), TVK_OK);
  assert_int_equal(tvk_realize(1, &t), TVK_OK);
  for (int i = 0; i < 4; i++) assert_int_equal(x[i], i + 11);
  tvk_ctx_destroy(ctx); /* t still alive: released here */
  assert_int_equal(released, 1);
}

static void test_host_ptr_errors(void **state) {
  (void)state;
  tvk_ctx *ctx = cpu_ctx();
  int released = 0;
  _Alignas(8) unsigned char bytes[64] = {0};
  tvk_tensor *t = tvk_from_host_ptr(ctx, TVK_FLOAT32, 1, SHAPE(4), NULL, count_release, &released);
  assert_int_equal(tvk_status_of(t), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_error_of(t), "NULL"));
  t = tvk_from_host_ptr(ctx, TVK_FLOAT32, 1, SHAPE(4), bytes + 2, count_release, &released);
  assert_int_equal(tvk_status_of(t), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_error_of(t), "not aligned to 4 bytes"));
  assert_non_null(strstr(tvk_error_of(t), "float32"));
  char addr[32];
  snprintf(addr, sizeof addr, "%p", (void *)(bytes + 2));
  assert_non_null(strstr(tvk_error_of(t), addr));
  t = tvk_from_host_ptr(ctx, TVK_FLOAT64, 1, SHAPE(2), bytes + 4, count_release, &released);
  assert_int_equal(tvk_status_of(t), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_error_of(t), "8 bytes"));
  t = tvk_from_host_ptr(ctx, (tvk_dtype)99, 1, SHAPE(4), bytes, count_release, &released);
  assert_int_equal(tvk_status_of(t), TVK_ERR_DTYPE);
  t = tvk_from_host_ptr(ctx, TVK_FLOAT32, 1, SHAPE(-1), bytes, count_release, &released);
  assert_int_equal(tvk_status_of(t), TVK_ERR_SHAPE);
  t = tvk_from_host_ptr(ctx, TVK_FLOAT32, TVK_MAX_DIMS + 1, SHAPE(1), bytes, count_release,
                        &released);
  assert_int_equal(tvk_status_of(t), TVK_ERR_INVALID_ARG);
  assert_null(tvk_from_host_ptr(NULL, TVK_FLOAT32, 1, SHAPE(4), bytes, NULL, NULL));
  /* uint8 has no alignment to keep; NULL release is fine */
  t = tvk_from_host_ptr(ctx, TVK_UINT8, 1, SHAPE(3), bytes + 1, NULL, NULL);
  assert_int_equal(tvk_status_of(t), TVK_OK);
  tvk_ctx_destroy(ctx);
  assert_int_equal(released, 0); /* none of the failed calls took the memory */
}

/* The Vulkan entries on a CPU context, and without Vulkan in the library. */
static void test_vulkan_entries_on_cpu(void **state) {
  (void)state;
  tvk_ctx *ctx = cpu_ctx();
  float x[4] = {1, 2, 3, 4};
  tvk_tensor *t = tvk_from_data(ctx, TVK_FLOAT32, 1, SHAPE(4), x);
  uint64_t buf = 1, off = 1, size = 1;
  assert_int_equal(tvk_vulkan_buffer_u64(t, &buf, &off, &size), TVK_ERR_DEVICE);
  assert_non_null(strstr(tvk_ctx_error(ctx), "not a Vulkan device"));
  assert_true(buf == 0 && off == 0 && size == 0);
  assert_int_equal(tvk_vulkan_buffer_u64(NULL, NULL, NULL, NULL), TVK_ERR_INVALID_ARG);
  int released = 0;
  tvk_tensor *u = tvk_from_vulkan_buffer_u64(ctx, TVK_FLOAT32, 1, SHAPE(4), 0x1234, 0, 16,
                                             count_release, &released);
  assert_int_equal(tvk_status_of(u), TVK_ERR_DEVICE);
  assert_non_null(strstr(tvk_error_of(u), "tvk_ctx_create_vulkan"));
  tvk_ctx_destroy(ctx);
  assert_int_equal(released, 0);

  tvk_ctx *none = (tvk_ctx *)1;
  assert_int_equal(tvk_ctx_create_vulkan_sized(NULL, 0, NULL, 0, &none), TVK_ERR_INVALID_ARG);
  assert_null(none);
#ifndef TVK_HAVE_VULKAN
  tvk_vulkan_device vk = {.api_version = VK_API_VERSION_1_1};
  assert_int_equal(tvk_ctx_create_vulkan(&vk, NULL, &none), TVK_ERR_DEVICE);
  assert_non_null(strstr(tvk_last_create_error(), "without Vulkan"));
  assert_null(none);
#endif
}

#define CPU_TESTS                                                                                  \
  cmocka_unit_test(test_host_ptr_no_copy), cmocka_unit_test(test_host_ptr_assign),                 \
      cmocka_unit_test(test_host_ptr_errors), cmocka_unit_test(test_vulkan_entries_on_cpu)

/* ================================================================ 2. Vulkan */

#ifdef TVK_HAVE_VULKAN

/* The app: its instance, device, queue and device functions. */
typedef struct {
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice phys;
  VkDevice device;
  uint32_t family, api;
  VkQueue queue;
  struct VolkDeviceTable vk;
  VkPhysicalDeviceProperties props;
  VkPhysicalDeviceFeatures2 f2; /* what the device was created with */
  VkPhysicalDeviceVulkan11Features f11;
} App;

static int app_messages; /* what the app's messenger counted */

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                 void *user) {
  (void)severity, (void)types, (void)user;
  app_messages++;
  fprintf(stderr, "app's validation message: %s\n", data->pMessage);
  return VK_FALSE;
}

/* $TVK_VALIDATE as tvk reads it: 1 the validation layer, 2 with
 * synchronization validation (which sees hazards between the app's commands
 * and tvk's on the shared queue). */
static int validating(void) {
  const char *v = getenv("TVK_VALIDATE");
  return v ? atoi(v) : 0;
}

/* Skips (unless TVK_REQUIRE_VK) when there is no Vulkan to make an app of. */
static void no_vulkan(const char *why) {
  if (vk_required()) fail_msg("Vulkan is required (TVK_REQUIRE_VK) but %s", why);
  fprintf(stderr, "skipping: %s\n", why);
  skip();
}

/* What an app does: an instance (validated when $TVK_VALIDATE is set), the
 * first physical device with a compute queue, and a device with the features
 * it wants: not shaderFloat64, to see tvk keep to what was enabled. */
static void app_create(App *a) {
  *a = (App){0};
  app_messages = 0;
  if (volkInitialize() != VK_SUCCESS) no_vulkan("no Vulkan loader");
  /* As the library does for its own instances (vk_device.c, "the loader"):
   * one instance for the life of the process keeps the driver (and the
   * validation layer) loaded, since both leak a little at every unload, and
   * leaks of an unloaded library are reported where no suppression reaches. */
  static VkInstance anchor = VK_NULL_HANDLE;
  const char *anchor_layer = "VK_LAYER_KHRONOS_validation";
  VkInstanceCreateInfo bare = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .enabledLayerCount = validating() > 0,
                               .ppEnabledLayerNames = &anchor_layer};
  if (!anchor && vkCreateInstance(&bare, NULL, &anchor) != VK_SUCCESS) anchor = VK_NULL_HANDLE;
  a->api = volkGetInstanceVersion() >= VK_API_VERSION_1_2 ? VK_API_VERSION_1_2 : VK_API_VERSION_1_1;
  const char *layer = "VK_LAYER_KHRONOS_validation";
  const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME,
                        VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
  int val = validating() > 0;
  VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkDebugUtilsMessengerCreateInfoEXT mi = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
      .pfnUserCallback = on_message};
  VkValidationFeaturesEXT vf = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                                .pNext = &mi,
                                .enabledValidationFeatureCount = 1,
                                .pEnabledValidationFeatures = &sync};
  VkApplicationInfo ai = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = a->api};
  VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                             .pNext = validating() >= 2 ? (void *)&vf
                                      : val             ? (void *)&mi
                                                        : NULL,
                             .pApplicationInfo = &ai,
                             .enabledLayerCount = val,
                             .ppEnabledLayerNames = &layer,
                             .enabledExtensionCount = validating() >= 2 ? 2 : val,
                             .ppEnabledExtensionNames = exts};
  VkResult r = vkCreateInstance(&ci, NULL, &a->instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) no_vulkan("no Vulkan driver");
  assert_int_equal(r, VK_SUCCESS);
  volkLoadInstanceOnly(a->instance);
  if (val)
    assert_int_equal(vkCreateDebugUtilsMessengerEXT(a->instance, &mi, NULL, &a->messenger),
                     VK_SUCCESS);
  VkPhysicalDevice ps[16];
  uint32_t n = 16;
  r = vkEnumeratePhysicalDevices(a->instance, &n, ps);
  assert_true(r == VK_SUCCESS || r == VK_INCOMPLETE);
  for (uint32_t i = 0; i < n && !a->phys; i++) {
    VkQueueFamilyProperties qs[16];
    uint32_t nq = 16;
    vkGetPhysicalDeviceProperties(ps[i], &a->props);
    if (a->props.apiVersion < VK_API_VERSION_1_1) continue;
    vkGetPhysicalDeviceQueueFamilyProperties(ps[i], &nq, qs);
    for (uint32_t q = 0; q < nq && !a->phys; q++)
      if (qs[q].queueFlags & VK_QUEUE_COMPUTE_BIT) a->phys = ps[i], a->family = q;
  }
  if (!a->phys) {
    vkDestroyInstance(a->instance, NULL);
    no_vulkan("no Vulkan 1.1 device with a compute queue");
  }
  VkPhysicalDeviceVulkan11Features h11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceFeatures2 have = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = a->api >= VK_API_VERSION_1_2 ? &h11 : NULL};
  vkGetPhysicalDeviceFeatures2(a->phys, &have);
  a->f11 = (VkPhysicalDeviceVulkan11Features){
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
      .storageBuffer16BitAccess = h11.storageBuffer16BitAccess};
  a->f2 = (VkPhysicalDeviceFeatures2){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                      .pNext = a->api >= VK_API_VERSION_1_2 ? &a->f11 : NULL};
  a->f2.features.shaderInt64 = have.features.shaderInt64;
  float prio = 1;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                .queueFamilyIndex = a->family,
                                .queueCount = 1,
                                .pQueuePriorities = &prio};
  VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                           .pNext = &a->f2,
                           .queueCreateInfoCount = 1,
                           .pQueueCreateInfos = &qi};
  assert_int_equal(vkCreateDevice(a->phys, &di, NULL, &a->device), VK_SUCCESS);
  volkLoadDeviceTable(&a->vk, a->device);
  a->vk.vkGetDeviceQueue(a->device, a->family, 0, &a->queue);
}

static tvk_vulkan_device app_handles(const App *a) {
  return (tvk_vulkan_device){.instance = a->instance,
                             .physical_device = a->phys,
                             .device = a->device,
                             .queue_family = a->family,
                             .queue = a->queue,
                             .api_version = a->api,
                             .get_instance_proc_addr = vkGetInstanceProcAddr,
                             .enabled_features = &a->f2};
}

/* The app's device still works: it waits, and is destroyed by the app. */
static void app_destroy(App *a) {
  assert_int_equal(a->vk.vkDeviceWaitIdle(a->device), VK_SUCCESS);
  a->vk.vkDestroyDevice(a->device, NULL);
  if (a->messenger) vkDestroyDebugUtilsMessengerEXT(a->instance, a->messenger, NULL);
  vkDestroyInstance(a->instance, NULL);
  assert_int_equal(app_messages, 0);
}

static tvk_ctx *app_ctx(const App *a) {
  tvk_vulkan_device vk = app_handles(a);
  tvk_ctx_options o = {.cache_dir = test_cache_dir()};
  tvk_ctx *ctx = NULL;
  tvk_status st = tvk_ctx_create_vulkan(&vk, &o, &ctx);
  if (st != TVK_OK) fprintf(stderr, "tvk_ctx_create_vulkan: %s\n", tvk_last_create_error());
  assert_int_equal(st, TVK_OK);
  return ctx;
}

/* An app buffer: storage + transfers, in host-visible coherent memory, mapped. */
typedef struct {
  VkBuffer buf;
  VkDeviceMemory mem;
  VkDeviceSize size;
  void *ptr;
} AppBuf;

static AppBuf app_buffer(App *a, VkDeviceSize size) {
  AppBuf b = {.size = size};
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                           .size = size,
                           .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                    VK_BUFFER_USAGE_TRANSFER_DST_BIT};
  assert_int_equal(a->vk.vkCreateBuffer(a->device, &bi, NULL, &b.buf), VK_SUCCESS);
  VkMemoryRequirements req;
  a->vk.vkGetBufferMemoryRequirements(a->device, b.buf, &req);
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(a->phys, &mp);
  const VkMemoryPropertyFlags want =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = UINT32_MAX;
  for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; i++)
    if ((req.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want)
      type = i;
  assert_true(type != UINT32_MAX);
  VkMemoryAllocateInfo mi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                             .allocationSize = req.size,
                             .memoryTypeIndex = type};
  assert_int_equal(a->vk.vkAllocateMemory(a->device, &mi, NULL, &b.mem), VK_SUCCESS);
  assert_int_equal(a->vk.vkBindBufferMemory(a->device, b.buf, b.mem, 0), VK_SUCCESS);
  assert_int_equal(a->vk.vkMapMemory(a->device, b.mem, 0, VK_WHOLE_SIZE, 0, &b.ptr), VK_SUCCESS);
  return b;
}

static void app_buffer_free(App *a, AppBuf *b) {
  a->vk.vkUnmapMemory(a->device, b->mem);
  a->vk.vkDestroyBuffer(a->device, b->buf, NULL);
  a->vk.vkFreeMemory(a->device, b->mem, NULL);
}

/* The app copies n bytes from (src, off) into dst with its own command buffer
 * on the same queue, and waits; the barriers order the copy after tvk's
 * shader writes and make it visible to the host. */
static void app_copy(App *a, VkBuffer src, VkDeviceSize off, AppBuf *dst, VkDeviceSize n) {
  VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                .queueFamilyIndex = a->family};
  VkCommandPool pool;
  assert_int_equal(a->vk.vkCreateCommandPool(a->device, &pi, NULL, &pool), VK_SUCCESS);
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                    .commandPool = pool,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                    .commandBufferCount = 1};
  VkCommandBuffer cmd;
  assert_int_equal(a->vk.vkAllocateCommandBuffers(a->device, &ai, &cmd), VK_SUCCESS);
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  assert_int_equal(a->vk.vkBeginCommandBuffer(cmd, &bi), VK_SUCCESS);
  VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT};
  a->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
  VkBufferCopy region = {.srcOffset = off, .dstOffset = 0, .size = n};
  a->vk.vkCmdCopyBuffer(cmd, src, dst->buf, 1, &region);
  VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
  a->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                             &after, 0, NULL, 0, NULL);
  assert_int_equal(a->vk.vkEndCommandBuffer(cmd), VK_SUCCESS);
  VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
  assert_int_equal(a->vk.vkQueueSubmit(a->queue, 1, &si, VK_NULL_HANDLE), VK_SUCCESS);
  assert_int_equal(a->vk.vkQueueWaitIdle(a->queue), VK_SUCCESS);
  a->vk.vkDestroyCommandPool(a->device, pool, NULL);
}

/* y = x * 2 + 1 and sum(y) from the app's buffer x, y read back through the
 * buffer tvk exports; z = x * 3 written into the app's buffer out by
 * tvk_assign. */
static void test_vk_import_export(void **state) {
  (void)state;
  App a;
  app_create(&a);
  tvk_ctx *ctx = app_ctx(&a);
  enum { N = 1000 };
  AppBuf in = app_buffer(&a, N * sizeof(float)), out = app_buffer(&a, N * sizeof(float)),
         back = app_buffer(&a, N * sizeof(float));
  float *x = in.ptr;
  for (int i = 0; i < N; i++) x[i] = (float)((i * 37) % 101) / 7.0f - 5.0f;
  int rel_in = 0, rel_out = 0;
  tvk_tensor *t = tvk_from_vulkan_buffer(ctx, TVK_FLOAT32, 1, SHAPE(N), in.buf, 0, in.size,
                                         count_release, &rel_in);
  assert_int_equal(tvk_status_of(t), TVK_OK);
  tvk_tensor *y = affine(t);
  tvk_tensor *s = tvk_sum(y, 0, NULL, false);
  VkBuffer yb = VK_NULL_HANDLE;
  VkDeviceSize yoff = 1, ysize = 0;
  assert_int_equal(tvk_vulkan_buffer(y, &yb, &yoff, &ysize), TVK_OK);
  assert_true(yb != VK_NULL_HANDLE);
  assert_int_equal(ysize, N * sizeof(float));
  app_copy(&a, yb, yoff, &back, ysize);
  check_affine(x, back.ptr, N);
  float sum = 0;
  assert_int_equal(tvk_to_host(s, &sum, sizeof sum), TVK_OK);
  double want = 0;
  for (int i = 0; i < N; i++) want += (double)x[i] * 2.0 + 1.0;
  assert_float_equal(sum, want, 1e-4 * fabs(want) + 1e-3);
  /* the imported tensor itself: exported as the app's own buffer */
  VkBuffer tb;
  VkDeviceSize toff, tsize;
  assert_int_equal(tvk_vulkan_buffer(t, &tb, &toff, &tsize), TVK_OK);
  assert_true(tb == in.buf && toff == 0 && tsize == N * sizeof(float));

  /* into the app's buffer, in place */
  tvk_tensor *o = tvk_from_vulkan_buffer(ctx, TVK_FLOAT32, 1, SHAPE(N), out.buf, 0, out.size,
                                         count_release, &rel_out);
  tvk_tensor *three = tvk_scalar(ctx, TVK_FLOAT32, 3.0), *z3 = tvk_mul(t, three);
  assert_int_equal(tvk_assign(o, z3), TVK_OK);
  tvk_release(three), tvk_release(z3);
  assert_int_equal(tvk_realize(1, &o), TVK_OK);
  assert_int_equal(tvk_sync(ctx), TVK_OK);
  const float *z = out.ptr;
  for (int i = 0; i < N; i++) assert_float_equal(z[i], (double)x[i] * 3.0, 1e-5);

  /* float64 was not enabled on the app's device: refused as on a device without it */
  tvk_tensor *d = tvk_cast(t, TVK_FLOAT64);
  double dv[N];
  tvk_status st = tvk_to_host(d, dv, sizeof dv);
  assert_int_equal(st, TVK_ERR_DTYPE);
  assert_non_null(strstr(tvk_ctx_error(ctx), "shaderFloat64"));

  /* The input is released once nothing reads it any more: d, which failed,
   * is still lazy and reads it. y, s and o were realized into buffers. */
  tvk_release(t);
  assert_int_equal(rel_in, 0);
  tvk_release(d);
  assert_int_equal(rel_in, 1);
  assert_int_equal(rel_out, 0);
  tvk_release(o);
  assert_int_equal(rel_out, 1);
  tvk_release(y);
  tvk_release(s);
  tvk_ctx_destroy(ctx);
  assert_int_equal(rel_in, 1);
  assert_int_equal(rel_out, 1);
  app_buffer_free(&a, &in);
  app_buffer_free(&a, &out);
  app_buffer_free(&a, &back);
  app_destroy(&a);
}

/* A context on the loader's functions (get_instance_proc_addr NULL), whose
 * imported tensor is still alive at tvk_ctx_destroy. */
static void test_vk_release_at_destroy(void **state) {
  (void)state;
  App a;
  app_create(&a);
  tvk_vulkan_device vk = app_handles(&a);
  vk.get_instance_proc_addr = NULL;
  vk.enabled_features = NULL; /* nothing beyond 1.0: int64 refused too */
  tvk_ctx *ctx = NULL;
  assert_int_equal(tvk_ctx_create_vulkan(&vk, NULL, &ctx), TVK_OK);
  assert_non_null(strstr(tvk_ctx_device(ctx), a.props.deviceName));
  AppBuf in = app_buffer(&a, 256);
  int32_t *x = in.ptr;
  for (int i = 0; i < 64; i++) x[i] = i;
  int released = 0;
  tvk_tensor *t = tvk_from_vulkan_buffer(ctx, TVK_INT32, 2, SHAPE(8, 8), in.buf, 0, in.size,
                                         count_release, &released);
  tvk_tensor *tt = tvk_transpose(t, 0, 1); /* exported as a contiguous copy */
  VkBuffer b;
  VkDeviceSize off, size;
  assert_int_equal(tvk_vulkan_buffer(tt, &b, &off, &size), TVK_OK);
  assert_true(b != in.buf && size == 256);
  int32_t got[64];
  assert_int_equal(tvk_to_host(tt, got, sizeof got), TVK_OK);
  for (int i = 0; i < 64; i++) assert_int_equal(got[i], (i % 8) * 8 + i / 8);
  tvk_tensor *l = tvk_cast(t, TVK_INT64);
  int64_t l64[64];
  assert_int_equal(tvk_to_host(l, l64, sizeof l64), TVK_ERR_DTYPE);
  tvk_ctx_destroy(ctx);
  assert_int_equal(released, 1);
  app_buffer_free(&a, &in);
  app_destroy(&a);
}

static void expect_create_error(const tvk_vulkan_device *vk, const char *what) {
  tvk_ctx *ctx = (tvk_ctx *)1;
  tvk_status st = tvk_ctx_create_vulkan(vk, NULL, &ctx);
  if (st != TVK_ERR_INVALID_ARG || !strstr(tvk_last_create_error(), what))
    fail_msg("expected TVK_ERR_INVALID_ARG naming '%s', got %s: %s", what, tvk_status_name(st),
             tvk_last_create_error());
  assert_null(ctx);
}

static void test_vk_bad_args(void **state) {
  (void)state;
  App a;
  app_create(&a);
  tvk_vulkan_device vk = app_handles(&a), bad;
  bad = vk, bad.instance = VK_NULL_HANDLE;
  expect_create_error(&bad, "instance is VK_NULL_HANDLE");
  bad = vk, bad.physical_device = VK_NULL_HANDLE;
  expect_create_error(&bad, "physical_device is VK_NULL_HANDLE");
  bad = vk, bad.device = VK_NULL_HANDLE;
  expect_create_error(&bad, "device is VK_NULL_HANDLE");
  bad = vk, bad.queue = VK_NULL_HANDLE;
  expect_create_error(&bad, "queue is VK_NULL_HANDLE");
  bad = vk, bad.api_version = VK_API_VERSION_1_0;
  expect_create_error(&bad, "api_version is 1.0.0");
  bad = vk, bad.queue_family = 77;
  expect_create_error(&bad, "queue_family 77 is out of range");
  bad = vk, bad.enabled_extension_count = 2;
  expect_create_error(&bad, "enabled_extensions is NULL");
  VkQueueFamilyProperties qs[16];
  uint32_t nq = 16;
  vkGetPhysicalDeviceQueueFamilyProperties(a.phys, &nq, qs);
  for (uint32_t q = 0; q < nq; q++)
    if (!(qs[q].queueFlags & VK_QUEUE_COMPUTE_BIT)) {
      bad = vk, bad.queue_family = q;
      expect_create_error(&bad, "has no VK_QUEUE_COMPUTE_BIT");
    }

  tvk_ctx *ctx = app_ctx(&a);
  AppBuf b = app_buffer(&a, 1024);
  int released = 0;
  VkDeviceSize align = a.props.limits.minStorageBufferOffsetAlignment;
  tvk_tensor *t;
  if (align > 1) {
    t = tvk_from_vulkan_buffer(ctx, TVK_FLOAT32, 1, SHAPE(4), b.buf, align / 2, b.size,
                               count_release, &released);
    assert_int_equal(tvk_status_of(t), TVK_ERR_INVALID_ARG);
    assert_non_null(strstr(tvk_error_of(t), "minStorageBufferOffsetAlignment"));
  }
  t = tvk_from_vulkan_buffer(ctx, TVK_FLOAT32, 1, SHAPE(257), b.buf, 0, b.size, count_release,
                             &released); /* 1028 bytes */
  assert_int_equal(tvk_status_of(t), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_error_of(t), "do not fit in a buffer of 1024 bytes"));
  t = tvk_from_vulkan_buffer(ctx, TVK_FLOAT64, 1, SHAPE(128), b.buf, align, b.size, count_release,
                             &released); /* fits only without the offset */
  assert_int_equal(tvk_status_of(t), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_error_of(t), "float64"));
  t = tvk_from_vulkan_buffer(ctx, TVK_FLOAT32, 1, SHAPE(4), b.buf, 0, 1 << 20, count_release,
                             &released);
  assert_int_equal(tvk_status_of(t), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(tvk_error_of(t), "buffer_size 1048576 is larger than the buffer"));
  t = tvk_from_vulkan_buffer(ctx, TVK_FLOAT32, 1, SHAPE(4), VK_NULL_HANDLE, 0, b.size,
                             count_release, &released);
  assert_int_equal(tvk_status_of(t), TVK_ERR_INVALID_ARG);
  t = tvk_from_vulkan_buffer(ctx, (tvk_dtype)-1, 1, SHAPE(4), b.buf, 0, b.size, count_release,
                             &released);
  assert_int_equal(tvk_status_of(t), TVK_ERR_DTYPE);
  float host[4] = {0};
  t = tvk_from_host_ptr(ctx, TVK_FLOAT32, 1, SHAPE(4), host, count_release, &released);
  assert_int_equal(tvk_status_of(t), TVK_ERR_DEVICE);
  assert_non_null(strstr(tvk_error_of(t), "tvk_from_data"));
  /* the largest that fits, at an aligned offset: fine */
  t = tvk_from_vulkan_buffer(ctx, TVK_FLOAT32, 1, SHAPE(16), b.buf, align, b.size, count_release,
                             &released);
  assert_int_equal(tvk_status_of(t), TVK_OK);
  tvk_ctx_destroy(ctx);
  assert_int_equal(released, 1);
  app_buffer_free(&a, &b);
  app_destroy(&a);
}

#define VK_TESTS                                                                                   \
  , cmocka_unit_test(test_vk_import_export), cmocka_unit_test(test_vk_release_at_destroy),         \
      cmocka_unit_test(test_vk_bad_args)
#else
#define VK_TESTS
#endif

int main(void) {
  const struct CMUnitTest tests[] = {CPU_TESTS VK_TESTS};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
