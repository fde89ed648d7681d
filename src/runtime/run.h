/* Running a schedule on the context's device: code generation, the compiled
 * program cache, launches, stats and the TVK_DEBUG output (docs/runtime.md). */
#ifndef TVK_RUNTIME_RUN_H
#define TVK_RUNTIME_RUN_H

#include "frontend/frontend.h"
#include "schedule/schedule.h"

/* Generates, compiles (through the context's program cache) and launches every
 * item of s in order, then waits for the device. Buffers must be allocated
 * (schedule_alloc). On error returns the status with ctx->error naming the
 * kernel; kernels before the failing one have run. */
tvk_status run_schedule(tvk_ctx *ctx, const Schedule *s);

/* Frees the context's compiled programs (ctx->programs); tvk_ctx_destroy calls
 * it before destroying the device. */
void run_cache_free(tvk_ctx *ctx);

#endif
