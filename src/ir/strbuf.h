/* A growable string for every pass that writes text (the renderer, the UOp
 * printers, the linear program listing). Text of any length is kept whole: nothing is
 * written through a fixed buffer, so nothing is ever cut short. After a failed
 * allocation the string stops growing and `oom` stays set; str_take reports it. */
#ifndef TVK_IR_STRBUF_H
#define TVK_IR_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/vec.h"

typedef struct {
  char *p; /* NUL-terminated once anything was added; NULL before */
  size_t len, cap;
  bool oom; /* an allocation (or a format) failed: the text is incomplete */
} Str;

/* Room for n more characters and the terminator; false (and oom set) if none. */
static inline bool str_reserve(Str *s, size_t n) {
  if (s->oom) return false;
  if (n > SIZE_MAX / 4 - s->len || !VEC_RESERVE(s->p, s->cap, s->len + n + 1))
    return s->oom = true, false;
  return true;
}

static inline void str_addn(Str *s, const char *t, size_t n) {
  if (!str_reserve(s, n)) return;
  memcpy(s->p + s->len, t, n);
  s->len += n;
  s->p[s->len] = 0;
}

static inline void str_add(Str *s, const char *t) { str_addn(s, t, strlen(t)); }

/* printf-style text of any length: measured first, then written in place. */
static inline void str_vprintf(Str *s, const char *fmt, va_list ap) {
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  if (n < 0)
    s->oom = true;
  else if (str_reserve(s, (size_t)n))
    vsnprintf(s->p + s->len, (size_t)n + 1, fmt, again), s->len += (size_t)n;
  va_end(again);
}

static inline void str_printf(Str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void str_printf(Str *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  str_vprintf(s, fmt, ap);
  va_end(ap);
}

/* Takes the text out of s (malloc'd; "" when empty) and empties s; NULL (and
 * the text freed) when something failed. */
static inline char *str_take(Str *s) {
  if (!s->oom && !s->p) str_addn(s, "", 0);
  char *p = s->oom ? NULL : s->p;
  if (s->oom) free(s->p);
  s->p = NULL, s->len = s->cap = 0, s->oom = false;
  return p;
}

#endif
