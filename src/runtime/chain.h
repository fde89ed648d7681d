/* Chains of kernels run part by part on the CPU (chain.c,
 * DeviceOps.launch_parts). */
#ifndef TVK_RUNTIME_CHAIN_H
#define TVK_RUNTIME_CHAIN_H

#include "codegen/kernel.h"
#include "runtime/device.h"
#include "schedule/schedule.h"

/* How many kernels from item i of s on run as one chain on dev, item i's
 * device, and in how many parts (*parts; 0 when the count is 1). ks[k] is
 * item k's kernel (NULL for a copy), bufs[b] the device buffer of schedule
 * buffer b. 1 when item i runs alone: dev cannot run parts, the next items
 * are not kernels over the same rows whose shared memory exceeds a core's
 * cache, or some kernel would touch what another writes in another part. */
int chain_length(Device *dev, const Schedule *s, const KernelSource *const *ks,
                 DevBuffer *const *bufs, int i, int *parts);

#endif
