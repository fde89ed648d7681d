/* A trace file in Chrome's trace-event JSON (TVK_TRACE): what chrome://tracing,
 * Perfetto (ui.perfetto.dev) and speedscope open. Each span is a complete
 * event ("ph":"X") with its start and length in microseconds from the trace's
 * opening, on a track: the host threads that called into tvk or compiled for
 * it, and one track for the device's kernels. Spans are written as they end,
 * under a lock, so compile threads and the thread that reads the device's
 * timestamps may add them at once; trace_close ends the JSON. docs/runtime.md
 * lists the spans. */
#ifndef TVK_RUNTIME_TRACE_H
#define TVK_RUNTIME_TRACE_H

#include <stdint.h>

#include "ir/error.h"
#include "tvk.h"

typedef struct Trace Trace;

/* The device's track (tid) in a trace; the host's threads get 1, 2, ... in
 * the order they first add a span. */
enum { TRACE_DEVICE_TRACK = 0 };

/* Creates the file at path (truncating it) and writes the trace's head and
 * the names of the process and device tracks (`device`: what the device calls
 * itself). TVK_ERR_INVALID_ARG with the path and the reason when it cannot
 * be made. */
tvk_status trace_open(const char *path, const char *device, Trace **out, Error *err);
/* Ends the JSON, closes the file and frees t; false when a write failed (the
 * file is then incomplete). NULL ok (true). */
bool trace_close(Trace *t);

/* Now on CLOCK_MONOTONIC, in ns: the clock every span is given in. */
int64_t trace_now_ns(void);

/* Adds a span from t0 to t1 (trace_now_ns's clock) on the calling thread's
 * track (or on TRACE_DEVICE_TRACK when device is true). cat groups spans
 * ("kernel", "compile", ...); name is shown on the span. args, when not NULL,
 * is the inside of a JSON object ("\"bytes\": 4096, \"hit\": true"), shown
 * when the span is selected. NULL t: nothing. */
void trace_span(Trace *t, bool device, const char *cat, const char *name, int64_t t0, int64_t t1,
                const char *args);

/* The track of a context's device d (d > 0: its further devices; 0 is
 * TRACE_DEVICE_TRACK), named "device d: <name>" by trace_name_device, and a
 * span on it. */
enum { TRACE_MORE_DEVICES = 1000 };
void trace_name_device(Trace *t, int device, const char *name);
void trace_device_span(Trace *t, int device, const char *cat, const char *name, int64_t t0,
                       int64_t t1, const char *args);

/* s as the inside of a JSON string (quotes, backslashes and control
 * characters escaped) into buf of n bytes, cut short to fit; buf. */
char *trace_json_str(const char *s, char *buf, size_t n);

#endif
