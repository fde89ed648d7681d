/* Messages for the application: TVK_DEBUG output and warnings, delivered
 * whole to the context's log callback (tvk_ctx_options.log), or to stderr.
 * Every layer that prints takes a LogSink from the one above it; none writes
 * to stderr itself. */
#ifndef TVK_IR_LOG_H
#define TVK_IR_LOG_H

#include <stdarg.h>

#include "tvk.h"

typedef struct {
  tvk_log_fn fn; /* NULL: stderr */
  void *user;
} LogSink;

/* Formats the message and hands it to the sink (NULL sink: stderr). A message
 * is one call of the callback however long it is (kernel sources); a
 * trailing newline is dropped. */
void log_msg(const LogSink *sink, tvk_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void log_vmsg(const LogSink *sink, tvk_log_level level, const char *fmt, va_list ap);

#endif
