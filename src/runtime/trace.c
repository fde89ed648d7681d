/* Chrome trace-event JSON, written as spans end (trace.h). */
#include "runtime/trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/vec.h"

struct Trace {
  pthread_mutex_t mu;
  FILE *f;
  int64_t t0;  /* ns: ts 0 of the file */
  bool failed; /* a write failed */
  int *named;  /* host tracks whose thread_name is written */
  size_t nnamed, capnamed;
};

int64_t trace_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A thread's track: numbered in the order threads first add a span, the
 * same in every trace of the process. */
static int this_track(void) {
  static atomic_int next = 1;
  static _Thread_local int mine;
  if (!mine) mine = atomic_fetch_add(&next, 1);
  return mine;
}

char *trace_json_str(const char *s, char *buf, size_t n) {
  size_t at = 0;
  if (n == 0) return buf;
  for (; s && *s && at + 7 < n; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      buf[at++] = '\\', buf[at++] = (char)c;
    else if (c < 0x20)
      at += (size_t)snprintf(buf + at, n - at, "\\u%04x", c);
    else
      buf[at++] = (char)c;
  }
  buf[at] = 0;
  return buf;
}

static void put_meta(Trace *t, int tid, const char *what, const char *name) {
  char esc[300];
  if (fprintf(t->f,
              ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"%s\",\"args\":{\"name\":\"%s\"}}",
              tid, what, trace_json_str(name, esc, sizeof esc)) < 0)
    t->failed = true;
}

tvk_status trace_open(const char *path, const char *device, Trace **out, Error *err) {
  *out = NULL;
  Trace *t = calloc(1, sizeof *t);
  if (!t) return err_set(err, TVK_ERR_OUT_OF_MEMORY, "trace: out of memory");
  if (!(t->f = fopen(path, "w"))) {
    int e = errno;
    free(t);
    return err_set(err, TVK_ERR_INVALID_ARG, "cannot create the trace file '%s': %s", path,
                   strerror(e));
  }
  pthread_mutex_init(&t->mu, NULL);
  t->t0 = trace_now_ns();
  /* the object form, so that a viewer shows milliseconds; the first event
   * names the process, so every later one starts with a comma */
  if (fprintf(t->f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
                    "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\","
                    "\"args\":{\"name\":\"tvk\"}}") < 0)
    t->failed = true;
  char name[300];
  snprintf(name, sizeof name, "device: %s", device ? device : "?");
  put_meta(t, TRACE_DEVICE_TRACK, "thread_name", name);
  *out = t;
  return TVK_OK;
}

bool trace_close(Trace *t) {
  if (!t) return true;
  bool ok = !t->failed && fprintf(t->f, "\n]}\n") >= 0;
  ok = fclose(t->f) == 0 && ok;
  pthread_mutex_destroy(&t->mu);
  free(t->named);
  free(t);
  return ok;
}

/* Names the host track tid the first time a span lands on it. Under t->mu. */
static void name_track(Trace *t, int tid) {
  for (size_t i = 0; i < t->nnamed; i++)
    if (t->named[i] == tid) return;
  if (!VEC_RESERVE(t->named, t->capnamed, t->nnamed + 1)) return;
  t->named[t->nnamed++] = tid;
  char name[32];
  snprintf(name, sizeof name, "host thread %d", tid);
  put_meta(t, tid, "thread_name", name);
}

/* A span on track tid; a host thread's track is named the first time. */
static void span_on(Trace *t, int tid, bool host, const char *cat, const char *name, int64_t t0,
                    int64_t t1, const char *args) {
  char esc[300];
  trace_json_str(name, esc, sizeof esc);
  if (t1 < t0) t1 = t0;
  pthread_mutex_lock(&t->mu);
  if (host) name_track(t, tid);
  /* ts and dur in microseconds, to the ns */
  if (fprintf(t->f,
              ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"cat\":\"%s\",\"name\":\"%s\","
              "\"ts\":%.3f,\"dur\":%.3f,\"args\":{%s}}",
              tid, cat, esc, (double)(t0 - t->t0) / 1e3, (double)(t1 - t0) / 1e3,
              args ? args : "") < 0)
    t->failed = true;
  pthread_mutex_unlock(&t->mu);
}

void trace_span(Trace *t, bool device, const char *cat, const char *name, int64_t t0, int64_t t1,
                const char *args) {
  if (t) span_on(t, device ? TRACE_DEVICE_TRACK : this_track(), !device, cat, name, t0, t1, args);
}

static int device_track(int device) {
  return device > 0 ? TRACE_MORE_DEVICES + device : TRACE_DEVICE_TRACK;
}

void trace_device_span(Trace *t, int device, const char *cat, const char *name, int64_t t0,
                       int64_t t1, const char *args) {
  if (t) span_on(t, device_track(device), false, cat, name, t0, t1, args);
}

void trace_name_device(Trace *t, int device, const char *name) {
  if (!t) return;
  char full[300];
  snprintf(full, sizeof full, "device %d: %s", device, name ? name : "?");
  pthread_mutex_lock(&t->mu);
  put_meta(t, device_track(device), "thread_name", full);
  pthread_mutex_unlock(&t->mu);
}
