/* The devices an application can pick (tvk_device_count, tvk_device_get_info),
 * listed once per process by the runtime's registry (runtime/device.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "runtime/device.h"

static struct {
  pthread_once_t once;
  tvk_device_info *list;
  int n;
} devices = {PTHREAD_ONCE_INIT, NULL, 0};

/* Never freed: the list lives as long as the process, and stays reachable. */
static void list_devices(void) {
  Error err;
  err_clear(&err);
  if (device_list(&devices.list, &devices.n, &err) != TVK_OK) devices.n = 0;
}

int tvk_device_count(void) {
  pthread_once(&devices.once, list_devices);
  return devices.n;
}

tvk_status tvk_device_info_sized(int i, tvk_device_info *out, size_t out_size) {
  int n = tvk_device_count();
  if (!out) return front_no_ctx_error(TVK_ERR_INVALID_ARG, "tvk_device_get_info: out is NULL");
  if (i < 0 || i >= n)
    return front_no_ctx_error(
        TVK_ERR_INVALID_ARG, "tvk_device_get_info: device %d does not exist (%d device%s: 0 .. %d)",
        i, n, n == 1 ? "" : "s", n - 1);
  memcpy(out, &devices.list[i], out_size < sizeof *out ? out_size : sizeof *out);
  return TVK_OK;
}

const char *tvk_device_kind_name(tvk_device_kind kind) {
  switch (kind) {
  case TVK_DEVICE_KIND_CPU: return "CPU";
  case TVK_DEVICE_KIND_DISCRETE_GPU: return "discrete GPU";
  case TVK_DEVICE_KIND_INTEGRATED_GPU: return "integrated GPU";
  case TVK_DEVICE_KIND_VIRTUAL_GPU: return "virtual GPU";
  case TVK_DEVICE_KIND_SOFTWARE: return "software";
  default: return "other";
  }
}
