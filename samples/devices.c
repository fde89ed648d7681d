/* devices: lists what tvk can run on, with the name to pass to
 * tvk_ctx_create (or $TVK_DEVICE, or samples/hello's argument).
 *
 *   build/samples/devices
 */
#include <inttypes.h>
#include <stdio.h>

#include "tvk.h"

int main(void) {
  int n = tvk_device_count();
  printf("%d device%s (* = the default):\n", n, n == 1 ? "" : "s");
  for (int i = 0; i < n; i++) {
    tvk_device_info d;
    if (tvk_device_get_info(i, &d) != TVK_OK) {
      fprintf(stderr, "devices: %s\n", tvk_last_error());
      return 1;
    }
    printf("%c %-6s %s (%s)\n", d.is_default ? '*' : ' ', d.name, d.description,
           tvk_device_kind_name(d.kind));
    if (!d.usable) printf("         not usable: %s\n", d.unusable_reason);
    if (d.kind == TVK_DEVICE_KIND_CPU)
      printf("         %d threads, %.1f GiB memory, %d float32 SIMD lanes\n", d.cores,
             (double)d.memory_bytes / (1 << 30), d.subgroup_size);
    else
      printf("         Vulkan %u.%u, vendor 0x%04x device 0x%04x, driver %s\n"
             "         %.1f GiB device memory, subgroup %d, fp16 %s, int8 %s, fp64 %s\n",
             (unsigned)(d.api_version >> 22) & 0x7f, (unsigned)(d.api_version >> 12) & 0x3ff,
             (unsigned)d.vendor_id, (unsigned)d.device_id, *d.driver ? d.driver : "(unknown)",
             (double)d.memory_bytes / (1 << 30), d.subgroup_size, d.fp16 ? "yes" : "no",
             d.int8 ? "yes" : "no", d.fp64 ? "yes" : "no");
  }
  return 0;
}
