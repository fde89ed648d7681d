/* The error record every layer reports into: a status and its message.
 *
 * A function that can fail returns a tvk_status and, on failure, leaves the
 * message (what failed, with the values involved) in the Error it was given.
 * The context keeps one for the public tvk_ctx_error(), a device one for its
 * backend, a codegen run one of its own; a layer that calls a lower one passes
 * its record down or copies the lower message into its own with a prefix.
 */
#ifndef TVK_IR_ERROR_H
#define TVK_IR_ERROR_H

#include <stdarg.h>

#include "tvk.h"

typedef struct {
  tvk_status status; /* TVK_OK: no error recorded */
  char msg[1024];    /* "" when status is TVK_OK */
} Error;

/* Records status and the printf-style message, replacing what was there;
 * returns status, for `return err_set(e, TVK_ERR_SHAPE, "...", ...)`. */
tvk_status err_set(Error *e, tvk_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
tvk_status err_vset(Error *e, tvk_status status, const char *fmt, va_list ap);
/* The same, but keeps an error already recorded (and returns its status): for
 * passes where the first failure is the precise one and callers further up
 * only add "out of memory" or "failed". */
tvk_status err_first(Error *e, tvk_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Appends text (a tool's output: compiler errors) to the message, cut with
 * " [...]" where the record is full. */
void err_append(Error *e, const char *text);
static inline void err_clear(Error *e) {
  e->status = TVK_OK;
  e->msg[0] = '\0';
}

#endif
