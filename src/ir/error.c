/* Error: see error.h. */
#include "ir/error.h"

#include <stdio.h>
#include <string.h>

tvk_status err_vset(Error *e, tvk_status status, const char *fmt, va_list ap) {
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  e->status = status;
  return status;
}

tvk_status err_set(Error *e, tvk_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err_vset(e, status, fmt, ap);
  va_end(ap);
  return status;
}

void err_append(Error *e, const char *text) {
  static const char more[] = " [...]";
  size_t used = strlen(e->msg), room = sizeof e->msg - 1 - used, len = strlen(text);
  if (len <= room) {
    memcpy(e->msg + used, text, len + 1);
  } else if (room >= sizeof more - 1) {
    size_t keep = room - (sizeof more - 1);
    memcpy(e->msg + used, text, keep);
    memcpy(e->msg + used + keep, more, sizeof more);
  }
}

tvk_status err_first(Error *e, tvk_status status, const char *fmt, ...) {
  if (e->status != TVK_OK) return e->status;
  va_list ap;
  va_start(ap, fmt);
  err_vset(e, status, fmt, ap);
  va_end(ap);
  return status;
}
