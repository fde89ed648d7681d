/* Messages to the application's log callback, or stderr. */
#include "ir/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void log_vmsg(const LogSink *sink, tvk_log_level level, const char *fmt, va_list ap) {
  char small[512], *msg = small;
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1)))
    vsnprintf(msg, (size_t)n + 1, fmt, again);
  va_end(again);
  if (!msg) msg = small; /* out of memory: the message cut short */
  size_t len = strlen(msg);
  if (len > 0 && msg[len - 1] == '\n') msg[len - 1] = '\0';
  if (sink && sink->fn)
    sink->fn(sink->user, level, msg);
  else
    fprintf(stderr, "%s\n", msg);
  if (msg != small) free(msg);
}

void log_msg(const LogSink *sink, tvk_log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_vmsg(sink, level, fmt, ap);
  va_end(ap);
}
