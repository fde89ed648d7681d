/* The device registry: a device name to the backend that makes it. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"

/* "VK" is the first Vulkan device in preference order, "VK:n" the n-th. */
static bool parse_vk(const char *name, int *index) {
  if (strncmp(name, "VK", 2) && strncmp(name, "vk", 2)) return false;
  if (name[2] == '\0') return (*index = -1), true;
  char *end;
  long n = name[2] == ':' ? strtol(name + 3, &end, 10) : -1;
  if (name[2] != ':' || end == name + 3 || *end || n < 0 || n > 1000) return false;
  *index = (int)n;
  return true;
}

#ifndef TVK_HAVE_VULKAN
/* A library built with TVK_VULKAN=OFF: every Vulkan name is a clear error,
 * and the default device is the CPU. */
tvk_status vk_device_create(const DeviceOptions *opt, int index, Device **out, Error *err) {
  (void)opt, (void)index;
  *out = NULL;
  return err_set(err, TVK_ERR_DEVICE, "this libtvk was built without Vulkan (TVK_VULKAN=OFF)");
}

uint64_t vk_validation_messages(Device *d) {
  (void)d;
  return 0;
}

tvk_status vk_device_create_app(const DeviceOptions *opt, const void *app, size_t app_size,
                                Device **out, Error *err) {
  (void)opt, (void)app, (void)app_size;
  *out = NULL;
  return err_set(err, TVK_ERR_DEVICE,
                 "tvk_ctx_create_vulkan: this libtvk was built without Vulkan (TVK_VULKAN=OFF)");
}

tvk_status vk_buffer_export(Device *d, DevBuffer *b, uint64_t *handle, uint64_t *offset) {
  (void)b;
  *handle = *offset = 0;
  return err_set(&d->err, TVK_ERR_DEVICE,
                 "%s is not a Vulkan device (this libtvk was built without Vulkan)",
                 d->ops->name(d));
}

tvk_status vk_list_devices(tvk_device_info **out, int *n, Error *err) {
  (void)err;
  *out = NULL;
  *n = 0;
  return TVK_OK;
}
#endif

tvk_status device_list(tvk_device_info **out, int *n, Error *err) {
  tvk_device_info *vk = NULL;
  int nvk = 0;
  tvk_status st = vk_list_devices(&vk, &nvk, err);
  if (st != TVK_OK) return st;
  tvk_device_info *all = realloc(vk, (size_t)(nvk + 1) * sizeof *all);
  if (!all) {
    free(vk);
    return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory listing devices");
  }
  cpu_device_describe(&all[nvk]);
  bool any_default = false;
  for (int i = 0; i < nvk; i++) any_default |= all[i].is_default;
  all[nvk].is_default = !any_default; /* the CPU when there is no usable Vulkan device */
  *out = all;
  *n = nvk + 1;
  return TVK_OK;
}

tvk_status device_open(const char *name, const DeviceOptions *opt, Device **out, Error *err) {
  int index;
  if (!name) { /* the best available: a Vulkan GPU, else the CPU (never a
                * software Vulkan device, which runs on the same CPU slower) */
    if (vk_device_create(opt, VK_BEST_GPU, out, err) == TVK_OK) return TVK_OK;
    err_clear(err);
  }
  if (!name || !strcmp(name, "CPU") || !strcmp(name, "cpu"))
    return cpu_device_create(opt, out, err);
  if (parse_vk(name, &index)) return vk_device_create(opt, index, out, err);
  *out = NULL;
  return err_set(err, TVK_ERR_DEVICE,
                 "unknown device \"%s\": expected \"CPU\", \"VK\" or \"VK:<n>\"", name);
}
