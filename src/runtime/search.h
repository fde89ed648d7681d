/* The timed search for optimisation plans (TVK_BEAM, search.c).
 *
 * With a beam width n > 0, a kernel's plan is not the heuristic's guess but
 * the fastest of the candidates timed on the device itself: round one times
 * the empty plan, the heuristic's plan and every single step (an UPCAST of an
 * output axis or an UNROLL of a reduce axis by a power of two dividing it, a
 * GROUP of a reduce axis on devices with work groups); the n fastest are each extended by one more
 * step in round two; the fastest of all wins. Candidates that fail to generate, compile or launch
 * are skipped. Timing runs on scratch buffers of the kernel's sizes (zero-filled), so the caller's
 * data is never touched.
 *
 * The choice is stored in the kernel cache directory, in choices/<device>/
 * <kernel>.plan (a sealed file, runtime/cache.h), keyed by the unoptimised
 * kernel's source (which names the AST) and the device's name (its driver and
 * thread count included), so a second run finds it and times nothing. A file
 * that is damaged or does not parse is ignored (a message at TVK_DEBUG >= 1)
 * and the search runs again. */
#ifndef TVK_RUNTIME_SEARCH_H
#define TVK_RUNTIME_SEARCH_H

#include "codegen/kernel.h"
#include "ir/error.h"
#include "runtime/device.h"
#include "schedule/schedule.h"
#include "tvk.h"

/* What a search needs from the runtime. */
typedef struct {
  Device *dev;
  int beam;              /* the beam width (> 0) */
  int debug;             /* TVK_DEBUG level */
  const char *cache_dir; /* the kernel cache directory asked for (NULL: the default) */
  bool no_disk;          /* no cache directory: plans are searched and not stored */
  tvk_stats *stats;      /* plans_searched, plans_found */
  Error *err;
  const LogSink *log; /* TVK_DEBUG messages (NULL: stderr) */
} SearchCtx;

/* The plan for item i of s: from the choices on disk, else searched (and
 * stored). `base` is the codegen options of the device (its language, mode
 * and limits; its plan and noopt are ignored). On success *plan is the
 * choice; a search that can time nothing leaves the heuristic's plan. A
 * kernel over symbolic sizes is not searched: plan->n is -1 (use the
 * heuristic's). */
tvk_status search_plan(const SearchCtx *r, const Schedule *s, int i, const CodegenOpts *base,
                       OptPlan *plan);

#endif
