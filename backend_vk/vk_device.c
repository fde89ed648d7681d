/* The Vulkan device: loading the loader (volk), the instance and its validation
 * messenger, choosing a physical device and a compute queue, enabling the
 * features kernels may use, the limits, the DeviceOps table, and creating and
 * destroying the other files' state in order. The top of the layers (vk_core.h).
 * See docs/vulkan.md. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_compile.h"
#include "vk_core.h"
#include "vk_dispatch.h"
#include "vk_glsl.h"
#include "vk_memory.h"
#include "vk_pipeline.h"

/* After vk_core.h (volk) so that vulkan_core.h comes without prototypes. */
#include "tvk_vulkan.h"

enum {
  VK_DEFAULT_BLOCK_BYTES = 64 << 20,
  VK_MAX_EXTENSIONS = 16, /* device extensions we may enable */
};

/* ---- the loader ----
 * volk keeps the loader's entry points in process-wide variables. They are
 * written once: volkInitialize under pthread_once, and vkGetDeviceProcAddr (which
 * volkLoadDeviceTable reads) the first time a device is loaded, under a mutex.
 * Both hold the loader's trampolines, valid for every instance and device.
 *
 * The same once also creates a bare instance that is never destroyed. It keeps
 * the drivers loaded for the life of the process: otherwise the loader unloads
 * them with the last instance and loads them again for the next context, which
 * costs time and, with Mesa's lavapipe, leaks a little driver memory on every
 * unload (which LeakSanitizer then reports against an unknown module, where no
 * suppression can reach it). The first validated device likewise anchors the
 * validation layer: it is large to load, and its own leaks are then reported
 * against its name, which tests/lsan.supp suppresses. */

static pthread_once_t loader_once = PTHREAD_ONCE_INIT, layer_once = PTHREAD_ONCE_INIT;
static VkResult loader_result = VK_ERROR_INITIALIZATION_FAILED;
/* Never destroyed, and reachable, so never reported as leaks. */
static VkInstance loader_anchor = VK_NULL_HANDLE, layer_anchor = VK_NULL_HANDLE;
static pthread_mutex_t device_table_mu = PTHREAD_MUTEX_INITIALIZER;

static VkInstance bare_instance(const char *layer) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .apiVersion = VK_API_VERSION_1_0};
  VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                             .pApplicationInfo = &app,
                             .enabledLayerCount = layer ? 1 : 0,
                             .ppEnabledLayerNames = &layer};
  VkInstance inst = VK_NULL_HANDLE;
  return vkCreateInstance(&ci, NULL, &inst) == VK_SUCCESS ? inst : VK_NULL_HANDLE;
}

static void loader_init(void) {
  loader_result = volkInitialize();
  if (loader_result == VK_SUCCESS) loader_anchor = bare_instance(NULL);
}

static void layer_init(void) { layer_anchor = bare_instance("VK_LAYER_KHRONOS_validation"); }

static void load_device_table(VkDev *v) {
  pthread_mutex_lock(&device_table_mu);
  if (!vkGetDeviceProcAddr) vkGetDeviceProcAddr = v->vki.vkGetDeviceProcAddr;
  volkLoadDeviceTable(&v->vk, v->device);
  pthread_mutex_unlock(&device_table_mu);
}

/* The same through the vkGetDeviceProcAddr of the app's instance: it may come
 * from another loader than ours (its get_instance_proc_addr), so it is put in
 * volk's variable only while the table loads. */
static void load_app_device_table(VkDev *v) {
  pthread_mutex_lock(&device_table_mu);
  PFN_vkGetDeviceProcAddr saved = vkGetDeviceProcAddr;
  vkGetDeviceProcAddr = v->vki.vkGetDeviceProcAddr;
  volkLoadDeviceTable(&v->vk, v->device);
  vkGetDeviceProcAddr = saved;
  pthread_mutex_unlock(&device_table_mu);
}

/* ---- the validation messenger ---- */

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                 void *user) {
  (void)types;
  VkDev *v = user;
  atomic_fetch_add(&v->validation_messages, 1);
  const char *what = severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning";
  log_msg(&v->base.log, TVK_LOG_WARN, "tvk: Vulkan validation %s: %s", what,
          data && data->pMessage ? data->pMessage : "(no message)");
  return VK_FALSE; /* never abort the call that triggered it */
}

static VkDebugUtilsMessengerCreateInfoEXT messenger_info(VkDev *v) {
  return (VkDebugUtilsMessengerCreateInfoEXT){
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
      .pfnUserCallback = on_message,
      .pUserData = v,
  };
}

/* ---- the instance ---- */

static bool has_layer(const VkLayerProperties *ls, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(ls[i].layerName, name)) return true;
  return false;
}

static bool has_extension(const VkExtensionProperties *es, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(es[i].extensionName, name)) return true;
  return false;
}

/* The instance extensions of the loader and (when not NULL) of one layer, as a
 * malloc'ed array in *out. */
static tvk_status instance_extensions(VkDev *v, const char *layer, VkExtensionProperties **out,
                                      uint32_t *n) {
  uint32_t base = 0, extra = 0;
  VkResult r = vkEnumerateInstanceExtensionProperties(NULL, &base, NULL);
  if (r == VK_SUCCESS && layer) r = vkEnumerateInstanceExtensionProperties(layer, &extra, NULL);
  if (r != VK_SUCCESS) return vk_check(v, r, "vkEnumerateInstanceExtensionProperties");
  VkExtensionProperties *es = calloc((size_t)base + extra + 1, sizeof *es);
  if (!es) return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "out of memory listing extensions");
  r = vkEnumerateInstanceExtensionProperties(NULL, &base, es);
  if ((r == VK_SUCCESS || r == VK_INCOMPLETE) && layer)
    r = vkEnumerateInstanceExtensionProperties(layer, &extra, es + base);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    free(es);
    return vk_check(v, r, "vkEnumerateInstanceExtensionProperties");
  }
  *out = es;
  *n = base + (layer ? extra : 0);
  return TVK_OK;
}

static tvk_status check_validation_layer(VkDev *v) {
  uint32_t n = 0;
  VkResult r = vkEnumerateInstanceLayerProperties(&n, NULL);
  if (r != VK_SUCCESS) return vk_check(v, r, "vkEnumerateInstanceLayerProperties");
  VkLayerProperties *ls = calloc(n + 1, sizeof *ls);
  if (!ls) return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "out of memory listing layers");
  r = vkEnumerateInstanceLayerProperties(&n, ls);
  bool found =
      (r == VK_SUCCESS || r == VK_INCOMPLETE) && has_layer(ls, n, "VK_LAYER_KHRONOS_validation");
  free(ls);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE)
    return vk_check(v, r, "vkEnumerateInstanceLayerProperties");
  if (!found)
    return err_set(&v->base.err, TVK_ERR_DEVICE,
                   "validation requested but VK_LAYER_KHRONOS_validation is not installed "
                   "(vulkan-validationlayers)");
  return TVK_OK;
}

#define LOAD_INSTANCE_FN(v, name) ((v)->vki.name = (PFN_##name)gipa((v)->instance, #name))

/* gipa: the loader's vkGetInstanceProcAddr, or the app's (tvk_vulkan_device). */
static tvk_status load_instance_fns(VkDev *v, PFN_vkGetInstanceProcAddr gipa) {
  LOAD_INSTANCE_FN(v, vkDestroyInstance);
  LOAD_INSTANCE_FN(v, vkEnumeratePhysicalDevices);
  LOAD_INSTANCE_FN(v, vkGetPhysicalDeviceProperties);
  LOAD_INSTANCE_FN(v, vkGetPhysicalDeviceProperties2);
  LOAD_INSTANCE_FN(v, vkGetPhysicalDeviceFeatures2);
  LOAD_INSTANCE_FN(v, vkGetPhysicalDeviceQueueFamilyProperties);
  LOAD_INSTANCE_FN(v, vkGetPhysicalDeviceMemoryProperties);
  LOAD_INSTANCE_FN(v, vkEnumerateDeviceExtensionProperties);
  LOAD_INSTANCE_FN(v, vkCreateDevice);
  LOAD_INSTANCE_FN(v, vkGetDeviceProcAddr);
  LOAD_INSTANCE_FN(v, vkGetPhysicalDeviceCalibrateableTimeDomainsEXT);
  if (v->validate) {
    LOAD_INSTANCE_FN(v, vkCreateDebugUtilsMessengerEXT);
    LOAD_INSTANCE_FN(v, vkDestroyDebugUtilsMessengerEXT);
  }
  const VkInstanceFns *f = &v->vki;
  if (!f->vkDestroyInstance || !f->vkEnumeratePhysicalDevices ||
      !f->vkGetPhysicalDeviceProperties || !f->vkGetPhysicalDeviceProperties2 ||
      !f->vkGetPhysicalDeviceFeatures2 || !f->vkGetPhysicalDeviceQueueFamilyProperties ||
      !f->vkGetPhysicalDeviceMemoryProperties || !f->vkEnumerateDeviceExtensionProperties ||
      !f->vkCreateDevice || !f->vkGetDeviceProcAddr ||
      (v->validate && (!f->vkCreateDebugUtilsMessengerEXT || !f->vkDestroyDebugUtilsMessengerEXT)))
    return err_set(&v->base.err, TVK_ERR_DEVICE,
                   "the Vulkan loader lacks a Vulkan 1.1 instance function (vkGetInstanceProcAddr "
                   "returned NULL)");
  return TVK_OK;
}

static uint32_t version_of(uint32_t v) {
  return VK_MAKE_API_VERSION(0, VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), 0);
}

static tvk_status create_instance(VkDev *v) {
  pthread_once(&loader_once, loader_init);
  if (loader_result != VK_SUCCESS)
    return err_set(&v->base.err, TVK_ERR_DEVICE,
                   "no Vulkan loader: libvulkan.so.1 could not be loaded (install libvulkan1 and a "
                   "driver, e.g. mesa-vulkan-drivers)");
  uint32_t loader_version = version_of(volkGetInstanceVersion());
  if (loader_version < VK_API_VERSION_1_1)
    return err_set(&v->base.err, TVK_ERR_DEVICE,
                   "the Vulkan loader supports Vulkan %u.%u; tvk needs 1.1 or newer",
                   VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version));
  v->api_version = loader_version < VK_API_VERSION_1_3 ? loader_version : VK_API_VERSION_1_3;

  const char *layer = v->validate ? "VK_LAYER_KHRONOS_validation" : NULL;
  tvk_status st = v->validate ? check_validation_layer(v) : TVK_OK;
  if (st == TVK_OK && v->validate) pthread_once(&layer_once, layer_init);
  VkExtensionProperties *es = NULL;
  uint32_t nes = 0;
  if (st == TVK_OK) st = instance_extensions(v, layer, &es, &nes);
  if (st != TVK_OK) return st;
  const char *exts[4]; /* at most: portability, debug utils, validation features */
  uint32_t next = 0;
  VkInstanceCreateFlags flags = 0;
  /* Portability drivers (MoltenVK) are listed only when we ask for them. */
  if (has_extension(es, nes, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    exts[next++] = VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME;
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  bool debug_utils = has_extension(es, nes, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  bool features = has_extension(es, nes, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
  free(es);
  if (v->validate && !debug_utils)
    return err_set(&v->base.err, TVK_ERR_DEVICE,
                   "validation requested but the instance lacks VK_EXT_debug_utils");
  if (v->validate) exts[next++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  /* Synchronization validation reports missing or wrong barriers, the bugs that
   * a software device (which runs dispatches in order) would otherwise hide. */
  VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT vf = {
      .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
      .enabledValidationFeatureCount = 1,
      .pEnabledValidationFeatures = &sync,
  };
  bool sync_validation = v->validate && features && v->sync_validation;
  if (sync_validation) exts[next++] = VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME;

  VkApplicationInfo app = {
      .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
      .pApplicationName = "tvk",
      .pEngineName = "tvk",
      .engineVersion = VK_MAKE_API_VERSION(0, 0, 1, 0),
      .apiVersion = v->api_version,
  };
  /* Chained so that messages of vkCreateInstance/vkDestroyInstance are counted too. */
  VkDebugUtilsMessengerCreateInfoEXT mi = messenger_info(v);
  vf.pNext = &mi;
  VkInstanceCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
      .pNext = sync_validation ? (void *)&vf
               : v->validate   ? (void *)&mi
                               : NULL,
      .flags = flags,
      .pApplicationInfo = &app,
      .enabledLayerCount = v->validate ? 1 : 0,
      .ppEnabledLayerNames = &layer,
      .enabledExtensionCount = next,
      .ppEnabledExtensionNames = exts,
  };
  VkResult r = vkCreateInstance(&ci, NULL, &v->instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
    return err_set(&v->base.err, TVK_ERR_DEVICE,
                   "no Vulkan driver: vkCreateInstance failed with VK_ERROR_INCOMPATIBLE_DRIVER "
                   "(install a driver, e.g. mesa-vulkan-drivers)");
  if (r != VK_SUCCESS) return vk_check(v, r, "vkCreateInstance");
  st = load_instance_fns(v, vkGetInstanceProcAddr);
  if (st == TVK_OK && v->validate) {
    r = v->vki.vkCreateDebugUtilsMessengerEXT(v->instance, &mi, NULL, &v->messenger);
    st = vk_check(v, r, "vkCreateDebugUtilsMessengerEXT");
  }
  return st;
}

/* ---- choosing a physical device ---- */

static int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
  case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
  default: return 0;
  }
}

/* The compute-capable queue family to use, preferring one with timestamps; -1 if none. */
static int64_t compute_family(VkDev *v, VkPhysicalDevice p, uint32_t *ts_bits) {
  uint32_t n = 0;
  v->vki.vkGetPhysicalDeviceQueueFamilyProperties(p, &n, NULL);
  VkQueueFamilyProperties *qs = calloc(n + 1, sizeof *qs);
  if (!qs) return -1;
  v->vki.vkGetPhysicalDeviceQueueFamilyProperties(p, &n, qs);
  int64_t best = -1;
  for (uint32_t i = 0; i < n; i++) {
    if (!(qs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || qs[i].queueCount == 0) continue;
    if (best < 0 || (qs[best].timestampValidBits == 0 && qs[i].timestampValidBits > 0)) best = i;
  }
  if (best >= 0 && ts_bits) *ts_bits = qs[best].timestampValidBits;
  free(qs);
  return best;
}

/* Why device p cannot be used, or NULL. */
static const char *unusable(VkDev *v, VkPhysicalDevice p, const VkPhysicalDeviceProperties *pp) {
  if (version_of(pp->apiVersion) < VK_API_VERSION_1_1) return "it supports only Vulkan 1.0";
  if (compute_family(v, p, NULL) < 0) return "it has no compute queue";
  return NULL;
}

static tvk_status choose_physical(VkDev *v, int index) {
  uint32_t n = 0;
  VkResult r = v->vki.vkEnumeratePhysicalDevices(v->instance, &n, NULL);
  if (r != VK_SUCCESS) return vk_check(v, r, "vkEnumeratePhysicalDevices");
  if (n == 0)
    return err_set(&v->base.err, TVK_ERR_DEVICE,
                   "no Vulkan device: the loader found no driver with a device (install one, e.g. "
                   "mesa-vulkan-drivers)");
  VkPhysicalDevice *ps = calloc(n, sizeof *ps);
  if (!ps) return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "out of memory listing devices");
  r = v->vki.vkEnumeratePhysicalDevices(v->instance, &n, ps);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    free(ps);
    return vk_check(v, r, "vkEnumeratePhysicalDevices");
  }
  tvk_status st = TVK_OK;
  VkPhysicalDeviceProperties pp;
  if (index >= 0) {
    if ((uint32_t)index >= n) {
      if (n == 1)
        st = err_set(&v->base.err, TVK_ERR_DEVICE,
                     "VK:%d: no such Vulkan device; 1 device found (VK:0)", index);
      else
        st = err_set(&v->base.err, TVK_ERR_DEVICE,
                     "VK:%d: no such Vulkan device; %u devices found (VK:0 .. VK:%u)", index, n,
                     n - 1);
    } else {
      v->phys = ps[index];
      v->vki.vkGetPhysicalDeviceProperties(v->phys, &pp);
      const char *why = unusable(v, v->phys, &pp);
      if (why)
        st = err_set(&v->base.err, TVK_ERR_DEVICE, "VK:%d (%s) cannot be used: %s", index,
                     pp.deviceName, why);
    }
  } else {
    /* VK_BEST_GPU: ranks from the virtual GPU's up (a CPU-type device is a
     * software rasteriser on the CPU the CPU backend runs on faster) */
    int best_rank = -1,
        least = index == VK_BEST_GPU ? type_rank(VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU) : 0;
    for (uint32_t i = 0; i < n; i++) {
      v->vki.vkGetPhysicalDeviceProperties(ps[i], &pp);
      if (unusable(v, ps[i], &pp) || type_rank(pp.deviceType) <= best_rank ||
          type_rank(pp.deviceType) < least)
        continue;
      best_rank = type_rank(pp.deviceType);
      v->phys = ps[i];
    }
    if (best_rank < 0 && index == VK_BEST_GPU)
      st = err_set(&v->base.err, TVK_ERR_DEVICE,
                   "no Vulkan GPU: %u device%s found, none a usable GPU", n, n == 1 ? "" : "s");
    else if (best_rank < 0)
      st =
          err_set(&v->base.err, TVK_ERR_DEVICE,
                  "no usable Vulkan device: %u found, none with Vulkan 1.1 and a compute queue", n);
  }
  free(ps);
  return st;
}

/* ---- listing devices (tvk_device_get_info) ---- */

static tvk_device_kind kind_of(VkPhysicalDeviceType t) {
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return TVK_DEVICE_KIND_DISCRETE_GPU;
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return TVK_DEVICE_KIND_INTEGRATED_GPU;
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return TVK_DEVICE_KIND_VIRTUAL_GPU;
  case VK_PHYSICAL_DEVICE_TYPE_CPU: return TVK_DEVICE_KIND_SOFTWARE;
  default: return TVK_DEVICE_KIND_OTHER;
  }
}

/* Device i's entry. Structures of Vulkan 1.2 are chained only for a 1.2+
 * device (a 1.1 one need not know them). */
static void describe(VkDev *v, VkPhysicalDevice p, int i, tvk_device_info *d) {
  memset(d, 0, sizeof *d);
  snprintf(d->name, sizeof d->name, "VK:%d", i);
  VkPhysicalDeviceDriverProperties drv = {.sType =
                                              VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties sub = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 pp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  VkPhysicalDeviceProperties base;
  v->vki.vkGetPhysicalDeviceProperties(p, &base);
  bool v12 = version_of(base.apiVersion) >= VK_API_VERSION_1_2;
  bool v11 = version_of(base.apiVersion) >= VK_API_VERSION_1_1;
  snprintf(d->description, sizeof d->description, "%s", base.deviceName);
  d->kind = kind_of(base.deviceType);
  d->vendor_id = base.vendorID;
  d->device_id = base.deviceID;
  d->api_version = base.apiVersion;
  const char *why = unusable(v, p, &base);
  d->usable = !why;
  if (why) snprintf(d->unusable_reason, sizeof d->unusable_reason, "%s", why);
  if (v11) {
    pp.pNext = &sub;
    if (v12) sub.pNext = &drv;
    v->vki.vkGetPhysicalDeviceProperties2(p, &pp);
    d->subgroup_size = (int)sub.subgroupSize;
    if (v12)
      snprintf(d->driver, sizeof d->driver, "%.60s%s%.60s", drv.driverName,
               *drv.driverInfo ? ", " : "", drv.driverInfo);
    VkPhysicalDeviceShaderFloat16Int8Features f16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = v12 ? &f16 : NULL};
    v->vki.vkGetPhysicalDeviceFeatures2(p, &f2);
    d->fp64 = f2.features.shaderFloat64;
    d->fp16 = f16.shaderFloat16;
    d->int8 = f16.shaderInt8;
  }
  VkPhysicalDeviceMemoryProperties mp;
  v->vki.vkGetPhysicalDeviceMemoryProperties(p, &mp);
  for (uint32_t h = 0; h < mp.memoryHeapCount; h++)
    if ((mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
        mp.memoryHeaps[h].size > d->memory_bytes)
      d->memory_bytes = mp.memoryHeaps[h].size;
}

tvk_status vk_list_devices(tvk_device_info **out, int *n, Error *err) {
  *out = NULL;
  *n = 0;
  VkDev *v = calloc(1, sizeof *v);
  if (!v) return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory listing devices");
  atomic_init(&v->validation_messages, 0);
  tvk_status st = TVK_OK;
  uint32_t count = 0;
  VkPhysicalDevice *ps = NULL;
  /* no loader, no driver, no instance: simply no Vulkan devices */
  if (create_instance(v) == TVK_OK &&
      v->vki.vkEnumeratePhysicalDevices(v->instance, &count, NULL) == VK_SUCCESS && count > 0) {
    ps = calloc(count, sizeof *ps);
    tvk_device_info *list = calloc(count, sizeof *list);
    VkResult r = ps && list ? v->vki.vkEnumeratePhysicalDevices(v->instance, &count, ps)
                            : VK_ERROR_OUT_OF_HOST_MEMORY;
    if (r == VK_SUCCESS || r == VK_INCOMPLETE) {
      int best = -1, best_rank = -1;
      for (uint32_t i = 0; i < count; i++) {
        describe(v, ps[i], (int)i, &list[i]);
        VkPhysicalDeviceProperties pp;
        v->vki.vkGetPhysicalDeviceProperties(ps[i], &pp);
        if (list[i].usable && type_rank(pp.deviceType) > best_rank)
          best = (int)i, best_rank = type_rank(pp.deviceType);
      }
      /* as choose_physical(VK_BEST_GPU) picks: never a CPU-type device */
      if (best >= 0 && best_rank >= type_rank(VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU))
        list[best].is_default = true;
      *out = list, *n = (int)count;
    } else {
      free(list);
      if (r == VK_ERROR_OUT_OF_HOST_MEMORY)
        st = err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory listing devices");
    }
  }
  free(ps);
  if (v->instance) v->vki.vkDestroyInstance(v->instance, NULL);
  free(v);
  return st;
}

/* ---- features, extensions, limits ---- */

/* The feature structs we query and then enable (a copy with only wanted bits). */
typedef struct {
  VkPhysicalDeviceFeatures2 f2;
  VkPhysicalDevice16BitStorageFeatures s16;
  VkPhysicalDevice8BitStorageFeatures s8;
  VkPhysicalDeviceShaderFloat16Int8Features f16i8;
  VkPhysicalDeviceTimelineSemaphoreFeatures timeline;
  VkPhysicalDeviceSubgroupSizeControlFeatures sizes; /* 1.3 or VK_EXT_subgroup_size_control */
} FeatureChain;

/* Device extensions: what the device offers, and what we enable. */
typedef struct {
  VkExtensionProperties *have;
  uint32_t nhave;
  const char *on[VK_MAX_EXTENSIONS];
  uint32_t non;
} Extensions;

static bool ext_has(const Extensions *e, const char *name) {
  return has_extension(e->have, e->nhave, name);
}

static tvk_status list_device_extensions(VkDev *v, Extensions *e) {
  uint32_t n = 0;
  VkResult r = v->vki.vkEnumerateDeviceExtensionProperties(v->phys, NULL, &n, NULL);
  if (r != VK_SUCCESS) return vk_check(v, r, "vkEnumerateDeviceExtensionProperties");
  e->have = calloc(n + 1, sizeof *e->have);
  if (!e->have)
    return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "out of memory listing extensions");
  r = v->vki.vkEnumerateDeviceExtensionProperties(v->phys, NULL, &n, e->have);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE)
    return vk_check(v, r, "vkEnumerateDeviceExtensionProperties");
  e->nhave = n;
  return TVK_OK;
}

/* Chains the structs the device can answer: on 1.2+ all of them are core; on
 * 1.1 the 8-bit, float16/int8 and timeline structs need their extensions;
 * subgroup size control is core in 1.3, else an extension. */
static void chain_features(VkDev *v, const Extensions *e, FeatureChain *c) {
  bool v12 = v->api_version >= VK_API_VERSION_1_2, v13 = v->api_version >= VK_API_VERSION_1_3;
  *c = (FeatureChain){0};
  c->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  c->s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  c->s8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
  c->f16i8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  c->timeline.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
  void **tail = &c->f2.pNext;
  *tail = &c->s16, tail = &c->s16.pNext;
  if (v12 || ext_has(e, VK_KHR_8BIT_STORAGE_EXTENSION_NAME)) *tail = &c->s8, tail = &c->s8.pNext;
  if (v12 || ext_has(e, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME))
    *tail = &c->f16i8, tail = &c->f16i8.pNext;
  if (v12 || ext_has(e, VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME))
    *tail = &c->timeline, tail = &c->timeline.pNext;
  c->sizes.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
  if (v13 || ext_has(e, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME))
    *tail = &c->sizes, tail = &c->sizes.pNext;
}

static void ext_enable(VkDev *v, Extensions *e, const char *name, bool core) {
  (void)v;
  if (core || !ext_has(e, name) || e->non >= VK_MAX_EXTENSIONS) return;
  e->on[e->non++] = name;
}

/* Float controls (core in 1.2, VK_KHR_shader_float_controls in 1.1): whether
 * shaders may ask for SignedZeroInfNanPreserve on 32- and 64-bit floats. It is a
 * property, not a feature: nothing to enable but the extension on 1.1. Without
 * it a compiler may fold x - x or x * 0 to 0 and 0 - x to -x (Mesa's NIR does),
 * which is wrong for inf, NaN and signed zeros. */
static uint32_t float_controls(VkDev *v, Extensions *e) {
  bool v12 = v->api_version >= VK_API_VERSION_1_2;
  if (!v12 && !ext_has(e, VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME)) return 0;
  VkPhysicalDeviceFloatControlsProperties fc = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                    .pNext = &fc};
  v->vki.vkGetPhysicalDeviceProperties2(v->phys, &p2);
  uint32_t f = fc.shaderSignedZeroInfNanPreserveFloat32 ? VKFEAT_PRESERVE32 : 0;
  f |= fc.shaderSignedZeroInfNanPreserveFloat64 ? VKFEAT_PRESERVE64 : 0;
  if (f && !v12) {
    uint32_t before = e->non;
    ext_enable(v, e, VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME, false);
    if (e->non == before) return 0; /* no room left in the list: do without */
    f |= VKFEAT_FLOAT_CONTROLS_EXT;
  }
  return f;
}

/* Queries the features, keeps in `want` only those we use, and sets v->features
 * and the extensions that carry them. */
static void choose_features(VkDev *v, Extensions *e, FeatureChain *want) {
  FeatureChain have;
  chain_features(v, e, &have);
  v->vki.vkGetPhysicalDeviceFeatures2(v->phys, &have.f2);
  chain_features(v, e, want);
  const VkPhysicalDeviceFeatures *h = &have.f2.features;
  VkPhysicalDeviceFeatures *w = &want->f2.features;
  w->shaderInt64 = h->shaderInt64;
  w->shaderInt16 = h->shaderInt16;
  w->shaderFloat64 = h->shaderFloat64;
  want->s16.storageBuffer16BitAccess = have.s16.storageBuffer16BitAccess;
  want->s8.storageBuffer8BitAccess = have.s8.storageBuffer8BitAccess;
  want->f16i8.shaderFloat16 = have.f16i8.shaderFloat16;
  want->f16i8.shaderInt8 = have.f16i8.shaderInt8;
  want->timeline.timelineSemaphore = have.timeline.timelineSemaphore;
  want->sizes.computeFullSubgroups = have.sizes.computeFullSubgroups;
  uint32_t f = 0;
  f |= w->shaderInt64 ? VKFEAT_INT64 : 0;
  f |= w->shaderInt16 ? VKFEAT_INT16 : 0;
  f |= w->shaderFloat64 ? VKFEAT_FLOAT64 : 0;
  f |= want->s16.storageBuffer16BitAccess ? VKFEAT_STORAGE16 : 0;
  f |= want->s8.storageBuffer8BitAccess ? VKFEAT_STORAGE8 : 0;
  f |= want->f16i8.shaderFloat16 ? VKFEAT_FLOAT16 : 0;
  f |= want->f16i8.shaderInt8 ? VKFEAT_INT8 : 0;
  f |= want->timeline.timelineSemaphore ? VKFEAT_TIMELINE : 0;
  f |= want->sizes.computeFullSubgroups ? VKFEAT_FULL_SUBGROUPS : 0;
  bool v12 = v->api_version >= VK_API_VERSION_1_2, v13 = v->api_version >= VK_API_VERSION_1_3;
  if (f & VKFEAT_STORAGE8) ext_enable(v, e, VK_KHR_8BIT_STORAGE_EXTENSION_NAME, v12);
  if (f & (VKFEAT_FLOAT16 | VKFEAT_INT8))
    ext_enable(v, e, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME, v12);
  if (f & VKFEAT_TIMELINE) ext_enable(v, e, VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME, v12);
  if (f & VKFEAT_FULL_SUBGROUPS) {
    uint32_t before = e->non;
    ext_enable(v, e, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME, v13);
    if (!v13 && e->non == before) { /* no room left in the list: do without */
      f &= ~(uint32_t)VKFEAT_FULL_SUBGROUPS;
      want->sizes.computeFullSubgroups = VK_FALSE;
    }
  }
  if (ext_has(e, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME)) {
    ext_enable(v, e, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME, false);
    f |= VKFEAT_PUSH_DESCRIPTOR;
  }
  /* The spec requires enabling it where offered (MoltenVK). */
  ext_enable(v, e, "VK_KHR_portability_subset", false);
  v->features = f | float_controls(v, e);
}

/* When launches are timed (TVK_DEBUG, TVK_PROFILE, TVK_TRACE), calibrated
 * timestamps put each kernel's span where it ran on the host's clock, next to
 * the host's own spans in a trace. */
static bool calibrateable(VkDev *v, const Extensions *e) {
  PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT domains =
      v->vki.vkGetPhysicalDeviceCalibrateableTimeDomainsEXT;
  if ((v->debug < 1 && !v->profile) || !(v->features & VKFEAT_TIMESTAMPS) || !domains ||
      !ext_has(e, VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME))
    return false;
  VkTimeDomainEXT have[8];
  uint32_t n = 8;
  VkResult r = domains(v->phys, &n, have);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) return false;
  bool dev = false, mono = false;
  for (uint32_t i = 0; i < n; i++) {
    dev |= have[i] == VK_TIME_DOMAIN_DEVICE_EXT;
    mono |= have[i] == VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
  }
  return dev && mono;
}

static void calibrated_clock(VkDev *v, Extensions *e) {
  uint32_t before = e->non;
  if (calibrateable(v, e)) ext_enable(v, e, VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME, false);
  if (e->non > before) v->features |= VKFEAT_CALIBRATED;
}

static void read_limits(VkDev *v, const Extensions *e, uint32_t ts_bits) {
  VkPhysicalDeviceMaintenance3Properties m3 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties sg = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &m3};
  VkPhysicalDeviceMaintenance4Properties m4 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES, .pNext = &sg};
  VkPhysicalDevicePushDescriptorPropertiesKHR pd = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  bool has_m4 =
      v->api_version >= VK_API_VERSION_1_3 || ext_has(e, VK_KHR_MAINTENANCE_4_EXTENSION_NAME);
  p2.pNext = has_m4 ? (void *)&m4 : (void *)&sg;
  if (v->features & VKFEAT_PUSH_DESCRIPTOR) pd.pNext = p2.pNext, p2.pNext = &pd;
  v->vki.vkGetPhysicalDeviceProperties2(v->phys, &p2);
  v->vki.vkGetPhysicalDeviceMemoryProperties(v->phys, &v->mem_props);
  v->props = p2.properties;

  const VkPhysicalDeviceLimits *l = &v->props.limits;
  VkDevLimits *x = &v->lim;
  x->max_storage_range = l->maxStorageBufferRange;
  x->max_alloc = m3.maxMemoryAllocationSize;
  if (x->max_alloc == 0) /* a driver that leaves it 0: the largest heap bounds it */
    for (uint32_t i = 0; i < v->mem_props.memoryHeapCount; i++)
      if (v->mem_props.memoryHeaps[i].size > x->max_alloc)
        x->max_alloc = v->mem_props.memoryHeaps[i].size;
  x->max_buffer = has_m4 && m4.maxBufferSize ? m4.maxBufferSize : x->max_alloc;
  x->storage_align = l->minStorageBufferOffsetAlignment ? l->minStorageBufferOffsetAlignment : 1;
  x->atom = l->nonCoherentAtomSize ? l->nonCoherentAtomSize : 1;
  for (int i = 0; i < 3; i++) {
    x->max_wg_count[i] = l->maxComputeWorkGroupCount[i];
    x->max_wg_size[i] = l->maxComputeWorkGroupSize[i];
  }
  x->max_wg_invocations = l->maxComputeWorkGroupInvocations;
  x->max_shared = l->maxComputeSharedMemorySize;
  x->max_push_constants = l->maxPushConstantsSize;
  x->max_storage_buffers = l->maxPerStageDescriptorStorageBuffers;
  x->max_bound_sets = l->maxBoundDescriptorSets;
  x->max_push_descriptors = (v->features & VKFEAT_PUSH_DESCRIPTOR) ? pd.maxPushDescriptors : 0;
  x->subgroup_size = sg.subgroupSize;
  x->timestamp_bits = ts_bits;
  x->timestamp_period = l->timestampPeriod;
  if (ts_bits > 0 && l->timestampPeriod > 0) v->features |= VKFEAT_TIMESTAMPS;

  /* The largest buffer a tensor may have: one a kernel can bind whole. */
  VkDeviceSize biggest = x->max_alloc < x->max_buffer ? x->max_alloc : x->max_buffer;
  if (x->max_storage_range < biggest) biggest = x->max_storage_range;
  v->base.limits = (DeviceLimits){
      .max_buffer_bytes = biggest > SIZE_MAX ? SIZE_MAX : (size_t)biggest,
      .max_global = {x->max_wg_count[0], x->max_wg_count[1], x->max_wg_count[2]},
      .max_local_threads = x->max_wg_invocations,
      .shared_mem_bytes = x->max_shared,
      .cores = 1,
      .max_kernel_buffers =
          x->max_storage_buffers > INT32_MAX ? INT32_MAX : (int)x->max_storage_buffers,
      /* GPUs run fma at the rate of a multiply. Vulkan leaves it to the
       * driver whether GLSL's fma rounds once (lavapipe's rounds twice). */
      .fma = true,
      .emulated = v->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU,
      .subgroup_size = x->subgroup_size > 1024 ? 1024 : (int)x->subgroup_size,
      /* GL_KHR_shader_subgroup_arithmetic in compute kernels: SPIR-V for
       * Vulkan 1.1 or later (vk_compile.c's target), the subgroup size a
       * power of two, and full subgroups (VKFEAT_FULL_SUBGROUPS): a combine
       * needs every invocation in a subgroup of known place */
      .subgroup_reduce =
          v->api_version >= VK_API_VERSION_1_1 && (v->features & VKFEAT_FULL_SUBGROUPS) &&
          (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
          (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) && x->subgroup_size >= 2 &&
          x->subgroup_size <= 128 && (x->subgroup_size & (x->subgroup_size - 1)) == 0,
  };
}

static tvk_status create_logical(VkDev *v) {
  uint32_t ts_bits = 0;
  int64_t family = compute_family(v, v->phys, &ts_bits);
  if (family < 0) return err_set(&v->base.err, TVK_ERR_DEVICE, "%s has no compute queue", v->name);
  v->queue_family = (uint32_t)family;
  VkPhysicalDeviceProperties pp;
  v->vki.vkGetPhysicalDeviceProperties(v->phys, &pp);
  if (version_of(pp.apiVersion) < v->api_version) v->api_version = version_of(pp.apiVersion);

  Extensions e = {0};
  tvk_status st = list_device_extensions(v, &e);
  FeatureChain want;
  if (st == TVK_OK) {
    choose_features(v, &e, &want);
    read_limits(v, &e, ts_bits);
    calibrated_clock(v, &e);
  }
  if (st != TVK_OK) {
    free(e.have);
    return st;
  }
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qi = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
      .queueFamilyIndex = v->queue_family,
      .queueCount = 1,
      .pQueuePriorities = &priority,
  };
  VkDeviceCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
      .pNext = &want.f2,
      .queueCreateInfoCount = 1,
      .pQueueCreateInfos = &qi,
      .enabledExtensionCount = e.non,
      .ppEnabledExtensionNames = e.on,
  };
  VkResult r = v->vki.vkCreateDevice(v->phys, &ci, NULL, &v->device);
  free(e.have);
  if (r != VK_SUCCESS) return vk_check(v, r, "vkCreateDevice");
  load_device_table(v);
  if (!v->vk.vkGetDeviceQueue || !v->vk.vkDestroyDevice)
    return err_set(&v->base.err, TVK_ERR_DEVICE,
                   "%s: vkGetDeviceProcAddr returned NULL for a core function", v->name);
  v->vk.vkGetDeviceQueue(v->device, v->queue_family, 0, &v->queue);
  if (!v->vk.vkGetCalibratedTimestampsEXT) v->features &= ~(uint32_t)VKFEAT_CALIBRATED;
  return TVK_OK;
}

/* ---- the ops table ---- */

static const char *vkd_name(Device *d) { return vk_of(d)->name; }

static tvk_status vkd_compile(Device *d, const char *name, const char *src, DevProgram **out,
                              bool *cache_hit, Error *err) {
  if (!err) err = &d->err;
  tvk_status st = vk_alive_to(vk_of(d), err);
  if (st != TVK_OK) {
    if (out) *out = NULL;
    return st;
  }
  return vk_compile(d, name, src, out, cache_hit, err);
}

static tvk_status vkd_launch(Device *d, DevProgram *p, DevBuffer *const *bufs, int nbufs,
                             const int32_t *vals, int nvals, const LaunchDims *dims) {
  tvk_status st = vk_alive(vk_of(d));
  return st != TVK_OK ? st : vk_launch(d, p, bufs, nbufs, vals, nvals, dims);
}

static tvk_status vkd_sync(Device *d) {
  tvk_status st = vk_alive(vk_of(d));
  return st != TVK_OK ? st : vk_wait(vk_of(d));
}

static tvk_status vkd_flush(Device *d) {
  tvk_status st = vk_alive(vk_of(d));
  return st != TVK_OK ? st : vk_flush(vk_of(d));
}

static tvk_status vkd_graph_create(Device *d, const DevLaunch *l, int n, DevGraph **out) {
  tvk_status st = vk_alive(vk_of(d));
  if (st != TVK_OK) *out = NULL;
  return st != TVK_OK ? st : vk_graph_create(d, l, n, out);
}

static tvk_status vkd_graph_launch(Device *d, DevGraph *g) {
  tvk_status st = vk_alive(vk_of(d));
  return st != TVK_OK ? st : vk_graph_launch(d, g);
}

static void vkd_destroy(Device *d) {
  VkDev *v = vk_of(d);
  if (!v) return;
  if (v->device && v->vk.vkDestroyDevice) { /* the table is loaded right after creation */
    if (v->dispatch_started) {
      if (!v->lost) (void)vk_wait(v);
      vk_pipeline_cleanup(v);
      vk_dispatch_destroy(v);
    }
    /* After a loss too: objects must be idle to free. The app's other queues
     * are the app's (vkDeviceWaitIdle would need them externally
     * synchronised too): only ours is waited for. */
    if (v->app_owned)
      (void)v->vk.vkQueueWaitIdle(v->queue);
    else
      (void)v->vk.vkDeviceWaitIdle(v->device);
    vk_mem_destroy(v);
    if (!v->app_owned) v->vk.vkDestroyDevice(v->device, NULL);
  }
  if (v->messenger) v->vki.vkDestroyDebugUtilsMessengerEXT(v->instance, v->messenger, NULL);
  if (v->instance && !v->app_owned) v->vki.vkDestroyInstance(v->instance, NULL);
  free(v->cache_dir);
  vk_glsl_lang_free(v->glsl);
  free(v);
}

static const DeviceOps vk_ops = {
    .name = vkd_name,
    .alloc = vk_buffer_alloc,
    .free = vk_buffer_free,
    .wrap = vk_buffer_wrap,
    .copy_in = vk_copy_in,
    .copy_out = vk_copy_out,
    .compile = vkd_compile,
    .program_free = vk_program_free,
    .launch = vkd_launch,
    .sync = vkd_sync,
    .flush = vkd_flush,
    .graph_create = vkd_graph_create,
    .graph_launch = vkd_graph_launch,
    .graph_free = vk_graph_free,
    .destroy = vkd_destroy,
};

uint64_t vk_validation_messages(Device *d) {
  if (!d || d->ops != &vk_ops) return 0;
  return atomic_load(&vk_of(d)->validation_messages);
}

tvk_status vk_buffer_export(Device *d, DevBuffer *b, uint64_t *handle, uint64_t *offset) {
  *handle = *offset = 0;
  if (d->ops != &vk_ops)
    return err_set(&d->err, TVK_ERR_DEVICE,
                   "%s is not a Vulkan device: tvk_vulkan_buffer needs a Vulkan context",
                   d->ops->name(d));
  tvk_status st = vk_alive(vk_of(d));
  if (st != TVK_OK || !b) return st;
  *handle = tvk_vulkan_handle_bits(b->buffer);
  *offset = b->offset;
  return TVK_OK;
}

/* $TVK_VK_MEMORY: comma-separated modes that force the discrete-GPU paths. */
static tvk_status parse_memory_modes(VkDev *v) {
  const char *s = getenv("TVK_VK_MEMORY");
  while (s && *s) {
    size_t n = strcspn(s, ",");
    if (n == 7 && !strncmp(s, "staging", n))
      v->mem_mode |= VKMEM_FORCE_STAGING;
    else if (n == 11 && !strncmp(s, "noncoherent", n))
      v->mem_mode |= VKMEM_FORCE_NONCOHERENT;
    else if (n > 0)
      return err_set(&v->base.err, TVK_ERR_INVALID_ARG,
                     "TVK_VK_MEMORY: unknown mode '%.*s' (expected staging, noncoherent)", (int)n,
                     s);
    s += n + (s[n] == ',');
  }
  return TVK_OK;
}

/* What every device takes from the options, before any Vulkan call. */
static tvk_status take_options(VkDev *v, const DeviceOptions *opt) {
  v->base.ops = &vk_ops;
  v->debug = opt ? opt->debug : 0;
  v->profile = opt && opt->profile > 0;
  if (opt) v->base.log = opt->log;
  v->validate = opt && opt->validate;
  v->sync_validation = opt && opt->validate >= 2;
  v->block_bytes = VK_DEFAULT_BLOCK_BYTES;
  snprintf(v->name, sizeof v->name, "Vulkan");
  v->cache_readonly = opt ? opt->cache_readonly : 0;
  v->no_disk_cache = opt && opt->no_disk_cache > 0;
  if (opt && opt->cache_dir && !(v->cache_dir = strdup(opt->cache_dir)))
    return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "out of memory creating the Vulkan device");
  return parse_memory_modes(v);
}

/* The files above the device: memory, the GLSL table, pipelines, dispatch. */
static tvk_status start_device(VkDev *v) {
  tvk_status st = vk_mem_init(v);
  if (st == TVK_OK) st = vk_glsl_attach(v);
  if (st == TVK_OK) {
    v->dispatch_started = true;
    st = vk_pipeline_init(v);
  }
  if (st == TVK_OK) st = vk_dispatch_init(v);
  return st;
}

static tvk_status create(VkDev *v, const DeviceOptions *opt, int index) {
  tvk_status st = take_options(v, opt);
  if (st == TVK_OK) st = create_instance(v);
  if (st == TVK_OK) st = choose_physical(v, index);
  if (st == TVK_OK) {
    VkPhysicalDeviceProperties pp;
    v->vki.vkGetPhysicalDeviceProperties(v->phys, &pp);
    snprintf(v->name, sizeof v->name, "Vulkan: %s", pp.deviceName);
    st = create_logical(v);
  }
  return st == TVK_OK ? start_device(v) : st;
}

/* ---- the app's own objects (tvk_vulkan.h) ---- */

/* What the app says it enabled, from its feature chain and extension list. */
typedef struct {
  VkPhysicalDeviceFeatures core;
  bool s16, s8, f16, i8, timeline;
} AppFeatures;

static void app_features_read(const tvk_vulkan_device *a, AppFeatures *f) {
  *f = (AppFeatures){0};
  if (!a->enabled_features) return;
  f->core = a->enabled_features->features;
  /* The chain is walked as the loader does: every struct starts with sType and pNext. */
  for (const VkBaseInStructure *p = a->enabled_features->pNext; p; p = p->pNext) {
    switch (p->sType) {
    case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES:
      f->s16 |= ((const VkPhysicalDeviceVulkan11Features *)p)->storageBuffer16BitAccess;
      break;
    case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES: {
      const VkPhysicalDeviceVulkan12Features *x = (const void *)p;
      f->s8 |= x->storageBuffer8BitAccess;
      f->f16 |= x->shaderFloat16;
      f->i8 |= x->shaderInt8;
      f->timeline |= x->timelineSemaphore;
      break;
    }
    case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES:
      f->s16 |= ((const VkPhysicalDevice16BitStorageFeatures *)p)->storageBuffer16BitAccess;
      break;
    case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES:
      f->s8 |= ((const VkPhysicalDevice8BitStorageFeatures *)p)->storageBuffer8BitAccess;
      break;
    case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES: {
      const VkPhysicalDeviceShaderFloat16Int8Features *x = (const void *)p;
      f->f16 |= x->shaderFloat16;
      f->i8 |= x->shaderInt8;
      break;
    }
    case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES:
      f->timeline |= ((const VkPhysicalDeviceTimelineSemaphoreFeatures *)p)->timelineSemaphore;
      break;
    default: break;
    }
  }
}

static bool app_ext(const tvk_vulkan_device *a, const char *name) {
  for (uint32_t i = 0; i < a->enabled_extension_count; i++)
    if (a->enabled_extensions && a->enabled_extensions[i] &&
        !strcmp(a->enabled_extensions[i], name))
      return true;
  return false;
}

/* v->features: what the app enabled, the device has, and (on 1.1) the
 * extension that carries it is enabled. */
static void app_choose_features(VkDev *v, const Extensions *e, const tvk_vulkan_device *a) {
  FeatureChain have;
  chain_features(v, e, &have);
  v->vki.vkGetPhysicalDeviceFeatures2(v->phys, &have.f2);
  AppFeatures on;
  app_features_read(a, &on);
  bool v12 = v->api_version >= VK_API_VERSION_1_2;
  bool s8_ext = v12 || app_ext(a, VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  bool f16_ext = v12 || app_ext(a, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  bool tl_ext = v12 || app_ext(a, VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME);
  const VkPhysicalDeviceFeatures *h = &have.f2.features;
  uint32_t f = 0;
  f |= on.core.shaderInt64 && h->shaderInt64 ? VKFEAT_INT64 : 0;
  f |= on.core.shaderInt16 && h->shaderInt16 ? VKFEAT_INT16 : 0;
  f |= on.core.shaderFloat64 && h->shaderFloat64 ? VKFEAT_FLOAT64 : 0;
  f |= on.s16 && have.s16.storageBuffer16BitAccess ? VKFEAT_STORAGE16 : 0;
  f |= on.s8 && s8_ext && have.s8.storageBuffer8BitAccess ? VKFEAT_STORAGE8 : 0;
  f |= on.f16 && f16_ext && have.f16i8.shaderFloat16 ? VKFEAT_FLOAT16 : 0;
  f |= on.i8 && f16_ext && have.f16i8.shaderInt8 ? VKFEAT_INT8 : 0;
  f |= on.timeline && tl_ext && have.timeline.timelineSemaphore ? VKFEAT_TIMELINE : 0;
  if (app_ext(a, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) &&
      ext_has(e, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME))
    f |= VKFEAT_PUSH_DESCRIPTOR;
  /* Float controls is a property: what matters is that shaders may use it,
   * i.e. 1.2, or the extension enabled on 1.1. */
  if (v12 || app_ext(a, VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME)) {
    VkPhysicalDeviceFloatControlsProperties fc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &fc};
    v->vki.vkGetPhysicalDeviceProperties2(v->phys, &p2);
    uint32_t pf = fc.shaderSignedZeroInfNanPreserveFloat32 ? VKFEAT_PRESERVE32 : 0;
    pf |= fc.shaderSignedZeroInfNanPreserveFloat64 ? VKFEAT_PRESERVE64 : 0;
    if (pf && !v12) pf |= VKFEAT_FLOAT_CONTROLS_EXT;
    f |= pf;
  }
  v->features = f;
}

#define APP_ERR(v, ...)                                                                            \
  err_set(&(v)->base.err, TVK_ERR_INVALID_ARG, "tvk_ctx_create_vulkan: " __VA_ARGS__)

/* The handles and the version, before anything is called through them. */
static tvk_status app_check(VkDev *v, const tvk_vulkan_device *a) {
  if (!a->instance) return APP_ERR(v, "instance is VK_NULL_HANDLE");
  if (!a->physical_device) return APP_ERR(v, "physical_device is VK_NULL_HANDLE");
  if (!a->device) return APP_ERR(v, "device is VK_NULL_HANDLE");
  if (!a->queue) return APP_ERR(v, "queue is VK_NULL_HANDLE");
  if (a->enabled_extension_count > 0 && !a->enabled_extensions)
    return APP_ERR(v, "enabled_extensions is NULL with enabled_extension_count %u",
                   a->enabled_extension_count);
  if (version_of(a->api_version) < VK_API_VERSION_1_1)
    return APP_ERR(v, "api_version is %u.%u.%u (0x%x); tvk needs Vulkan 1.1 or newer",
                   VK_API_VERSION_MAJOR(a->api_version), VK_API_VERSION_MINOR(a->api_version),
                   VK_API_VERSION_PATCH(a->api_version), a->api_version);
  return TVK_OK;
}

/* The queue family: in range and able to compute; its timestamp bits. */
static tvk_status app_queue(VkDev *v, uint32_t family, uint32_t *ts_bits) {
  uint32_t n = 0;
  v->vki.vkGetPhysicalDeviceQueueFamilyProperties(v->phys, &n, NULL);
  VkQueueFamilyProperties *qs = calloc(n + 1, sizeof *qs);
  if (!qs) return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "out of memory listing queues");
  v->vki.vkGetPhysicalDeviceQueueFamilyProperties(v->phys, &n, qs);
  tvk_status st = TVK_OK;
  if (family >= n)
    st = APP_ERR(v, "queue_family %u is out of range: %s has %u queue families", family,
                 v->props.deviceName, n);
  else if (!(qs[family].queueFlags & VK_QUEUE_COMPUTE_BIT))
    st = APP_ERR(v, "queue_family %u has no VK_QUEUE_COMPUTE_BIT (its flags are 0x%x)", family,
                 (unsigned)qs[family].queueFlags);
  else
    *ts_bits = qs[family].timestampValidBits;
  free(qs);
  return st;
}

static tvk_status create_app(VkDev *v, const DeviceOptions *opt, const tvk_vulkan_device *a) {
  tvk_status st = take_options(v, opt);
  /* The validation layer and its messenger are the app's (on its instance). */
  v->validate = v->sync_validation = false;
  if (st == TVK_OK) st = app_check(v, a);
  if (st != TVK_OK) return st;
  PFN_vkGetInstanceProcAddr gipa = a->get_instance_proc_addr;
  if (!gipa) {
    pthread_once(&loader_once, loader_init);
    if (loader_result != VK_SUCCESS)
      return err_set(&v->base.err, TVK_ERR_DEVICE,
                     "tvk_ctx_create_vulkan: get_instance_proc_addr is NULL and the Vulkan loader "
                     "(libvulkan.so.1) could not be loaded");
    gipa = vkGetInstanceProcAddr;
  }
  v->instance = a->instance;
  v->app_owned = true; /* from here on nothing of the app's is destroyed */
  st = load_instance_fns(v, gipa);
  if (st != TVK_OK) return st;
  v->phys = a->physical_device;
  v->vki.vkGetPhysicalDeviceProperties(v->phys, &v->props);
  snprintf(v->name, sizeof v->name, "Vulkan: %s", v->props.deviceName);
  uint32_t dev_version = version_of(v->props.apiVersion);
  if (dev_version < VK_API_VERSION_1_1)
    return APP_ERR(v, "%s supports only Vulkan %u.%u; tvk needs 1.1 or newer", v->props.deviceName,
                   VK_API_VERSION_MAJOR(dev_version), VK_API_VERSION_MINOR(dev_version));
  v->api_version = version_of(a->api_version);
  if (dev_version < v->api_version) v->api_version = dev_version;
  if (v->api_version > VK_API_VERSION_1_3) v->api_version = VK_API_VERSION_1_3;
  uint32_t ts_bits = 0;
  st = app_queue(v, a->queue_family, &ts_bits);
  if (st != TVK_OK) return st;
  v->queue_family = a->queue_family;
  Extensions e = {0};
  st = list_device_extensions(v, &e);
  if (st == TVK_OK) {
    app_choose_features(v, &e, a);
    read_limits(v, &e, ts_bits);
    /* calibrated timings only where the app enabled the extension */
    if (app_ext(a, VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME) && calibrateable(v, &e))
      v->features |= VKFEAT_CALIBRATED;
  }
  free(e.have);
  if (st != TVK_OK) return st;
  v->device = a->device;
  v->queue = a->queue;
  load_app_device_table(v);
  if (!v->vk.vkGetCalibratedTimestampsEXT) v->features &= ~(uint32_t)VKFEAT_CALIBRATED;
  if (!v->vk.vkDestroyDevice || !v->vk.vkQueueSubmit || !v->vk.vkQueueWaitIdle ||
      !v->vk.vkCreateBuffer)
    return err_set(&v->base.err, TVK_ERR_DEVICE,
                   "%s: vkGetDeviceProcAddr returned NULL for a core function", v->name);
  return start_device(v);
}

tvk_status vk_device_create_app(const DeviceOptions *opt, const void *app, size_t app_size,
                                Device **out, Error *err) {
  err_clear(err);
  *out = NULL;
  /* The fields the app knows; newer ones keep their zero defaults. */
  tvk_vulkan_device a = {0};
  memcpy(&a, app, app_size < sizeof a ? app_size : sizeof a);
  VkDev *v = calloc(1, sizeof *v);
  if (!v) return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory creating the Vulkan device");
  atomic_init(&v->validation_messages, 0);
  tvk_status st = create_app(v, opt, &a);
  if (st != TVK_OK) {
    *err = v->base.err;
    vkd_destroy(&v->base);
    return st;
  }
  *out = &v->base;
  return TVK_OK;
}

tvk_status vk_device_create(const DeviceOptions *opt, int index, Device **out, Error *err) {
  err_clear(err);
  if (!out) return err_set(err, TVK_ERR_INVALID_ARG, "vk_device_create: out is NULL");
  *out = NULL;
  VkDev *v = calloc(1, sizeof *v);
  if (!v) return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory creating the Vulkan device");
  atomic_init(&v->validation_messages, 0);
  tvk_status st = create(v, opt, index);
  if (st != TVK_OK) {
    *err = v->base.err;
    vkd_destroy(&v->base);
    return st;
  }
  *out = &v->base;
  return TVK_OK;
}
