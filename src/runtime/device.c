/* Helpers shared by every backend: see device.h. */
#include "device.h"

#include <stdarg.h>
#include <stdio.h>

tvk_status dev_fail(Device *d, tvk_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->error, sizeof d->error, fmt, ap);
  va_end(ap);
  return status;
}
