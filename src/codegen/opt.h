/* Kernel optimisation plans (opt.c): how one kernel's axes are split before
 * lowering. A plan (OptPlan, kernel.h) is data — a short list of (kind, axis,
 * amount) steps — so it can be printed with the kernel, named in its source
 * (and so in the program-cache key), replayed and searched. Lowering
 * (lower.c) follows it and decides nothing about performance itself.
 *
 *   OPT_UPCAST  axis a, amount u: an output axis of size n (u divides n) is
 *               split into n/u blocks, and each invocation / loop iteration
 *               computes the u elements of a block: the kernel body is copied
 *               u times with the axis index block*u + 0..u-1. Copies share
 *               what does not depend on the axis (a load of A's row in a
 *               matmul is made once for the u columns of B), and each keeps
 *               its own accumulator, so two upcast axes make a register tile.
 *
 * Upcasting never changes what a kernel computes or the order in which a
 * reduce adds: an optimised kernel gives the same bits as the unoptimised one.
 */
#ifndef TVK_CODEGEN_OPT_H
#define TVK_CODEGEN_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"
#include "ir/error.h"
#include "ir/uop.h"

/* What the heuristic may assume of the device. */
typedef struct {
  CgMode mode;
  int vector_floats; /* float32 lanes worth filling on the CPU (its widest SIMD) */
} OptTarget;

/* The plan the heuristic picks for a verified kernel (kernel_verify's norm and
 * desc) on target t. Always valid (opt_check passes); empty where nothing
 * pays. */
void opt_heuristic(UOp *norm, const KernelDesc *kd, const OptTarget *t, OptPlan *plan);

/* Whether `plan` can be applied to the kernel: known kinds, axes in range,
 * upcasts of output axes only, amounts >= 1 dividing the axis, no axis
 * upcast twice, at most OPT_MAX_COPIES copies. TVK_ERR_INVALID_ARG naming the
 * step otherwise. */
tvk_status opt_check(const KernelDesc *kd, const OptPlan *plan, Error *err);

/* The upcast amount of every axis (1: none) of a checked plan. */
void opt_upcasts(const KernelDesc *kd, const OptPlan *plan, int64_t up[TVK_MAX_DIMS]);

/* "UPCAST(1,16) UPCAST(0,4)"; "" for an empty plan. */
void opt_plan_str(const OptPlan *plan, char *buf, size_t n);

/* The kernel's name under a plan: E_ or r_ and the full shape, an upcast
 * axis written <blocks>u<amount> (r_64u4_16u16_1024). */
void opt_kernel_name(const KernelDesc *kd, const OptPlan *plan, char *buf, size_t n);

#endif
