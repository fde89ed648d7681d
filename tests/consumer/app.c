/* An application embedding tvk, as an outside project builds it (see
 * scripts/consumer-test.sh): it calls Vulkan itself through the loader
 * (-lvulkan), before and after tvk does, so tvk's own Vulkan entry points
 * (volk's) must not take the loader's names, then checks a small tvk
 * computation on the CPU and, when a Vulkan device exists, on Vulkan.
 * Exit status 0: all good. */
#include <stdio.h>
#include <string.h>
#include <vulkan/vulkan.h>

#include "tvk.h"

/* The app's own Vulkan: an instance and its physical devices. */
static int app_vulkan(const char *when) {
  VkApplicationInfo ai = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                          .apiVersion = VK_API_VERSION_1_1};
  VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                             .pApplicationInfo = &ai};
  VkInstance inst;
  VkResult r = vkCreateInstance(&ci, NULL, &inst);
  if (r != VK_SUCCESS) {
    printf("app Vulkan %s: vkCreateInstance: %d (no driver: fine)\n", when, (int)r);
    return 0;
  }
  uint32_t n = 0;
  r = vkEnumeratePhysicalDevices(inst, &n, NULL);
  vkDestroyInstance(inst, NULL);
  printf("app Vulkan %s: %u physical device(s)\n", when, n);
  return r == VK_SUCCESS ? 0 : 1;
}

/* (a + b) * 2 summed, against the closed form. */
static int tvk_check(const char *device) {
  tvk_ctx *ctx;
  if (tvk_ctx_create(device, &ctx) != TVK_OK) {
    printf("tvk %s: no device (%s)\n", device, tvk_last_create_error());
    return strcmp(device, "CPU") == 0; /* the CPU must be there */
  }
  enum { N = 1000 };
  float a[N], b[N], got = 0;
  for (int i = 0; i < N; i++) a[i] = (float)i, b[i] = 1.0f;
  int64_t shape[1] = {N};
  tvk_tensor *x = tvk_from_data(ctx, TVK_FLOAT32, 1, shape, a);
  tvk_tensor *y = tvk_from_data(ctx, TVK_FLOAT32, 1, shape, b);
  tvk_tensor *s = tvk_sum(tvk_mul(tvk_add(x, y), tvk_scalar(ctx, TVK_FLOAT32, 2)), 0, NULL, false);
  tvk_status st = tvk_to_host(s, &got, sizeof got);
  double want = 2.0 * (N * (N - 1) / 2.0 + N); /* 2 * (sum of i + N) */
  printf("tvk %s (%s): %s, sum %g, want %g\n", device, tvk_ctx_device(ctx), tvk_status_name(st),
         (double)got, want);
  int bad = st != TVK_OK || got != want;
  tvk_ctx_destroy(ctx);
  return bad;
}

int main(void) {
  printf("tvk %s (header %d.%d.%d)\n", tvk_version_string(), TVK_VERSION_MAJOR, TVK_VERSION_MINOR,
         TVK_VERSION_PATCH);
  int bad = tvk_version() != TVK_VERSION;
  bad |= app_vulkan("before tvk");
  bad |= tvk_check("CPU");
  bad |= tvk_check("VK");
  bad |= app_vulkan("after tvk");
  puts(bad ? "consumer: FAILED" : "consumer: ok");
  return bad;
}
