/* Launches (vk_dispatch.c): recording dispatches into batches with the barriers
 * they need, binding buffers, submitting, and knowing what has completed (the
 * serials of VkDev). The files above wait here before they touch what a pending
 * batch may use: copies and allocation (vk_memory.c), freeing a program
 * (vk_compile.c). */
#ifndef TVK_BACKEND_VK_DISPATCH_H
#define TVK_BACKEND_VK_DISPATCH_H

#include <stdint.h>

#include "vk_core.h"

/* ---- the kernel ABI on Vulkan (what the GLSL renderer emits, vk_launch feeds) ----
 *
 * Buffers: launch buffer i is the storage buffer at (set 0, binding i), bound as
 * (DevBuffer.buffer, .offset, .range). Declare inputs `readonly`: bindings the
 * SPIR-V marks NonWritable are treated as read-only, which spares barriers
 * between kernels that only read the same buffer. Bindings the shader does not
 * declare (or the optimiser removed) are neither bound nor tracked.
 *
 * Push constants: one block, std430, in this order:
 *
 *   layout(push_constant) uniform TvkPush {
 *     uint grid_x, grid_y, grid_z;   // offset 0: the launch's dims->global
 *     int v0, v1, ...;               // offset VK_PUSH_VALS_OFFSET + 4*i: vals[i]
 *   } pc;
 *
 * vk_launch pushes exactly the block the SPIR-V declares: values past its end
 * are not pushed (the kernel does not read them), a block longer than the grid
 * plus the launch's values is refused, and a kernel with no block gets nothing.
 * 12 + 4*nvals bytes must fit in maxPushConstantsSize (128 on most devices: 29
 * values).
 *
 * Work groups: dims->global is the logical grid; dims->local must equal the
 * shader's local_size. When a grid dimension exceeds maxComputeWorkGroupCount,
 * vk_launch dispatches the total number of groups T = grid_x*grid_y*grid_z
 * (T < 2^32) spread over x, y, z instead, so every kernel reconstructs its
 * logical group id from the linear one, and groups past T exit at once (a whole
 * group returns, so a later barrier() stays in uniform control flow):
 *
 *   uint lin = gl_WorkGroupID.x + gl_NumWorkGroups.x *
 *              (gl_WorkGroupID.y + gl_NumWorkGroups.y * gl_WorkGroupID.z);
 *   if (lin >= pc.grid_x * pc.grid_y * pc.grid_z) return;
 *   uvec3 gid = uvec3(lin % pc.grid_x, (lin / pc.grid_x) % pc.grid_y,
 *                     lin / (pc.grid_x * pc.grid_y));
 *
 * When the grid fits, the dispatch is exactly (grid_x, grid_y, grid_z) and gid
 * equals gl_WorkGroupID. */
enum { VK_PUSH_VALS_OFFSET = 12 };

/* Command pools, fences, query pools of the batch slots; sets v->dispatch. On
 * failure leaves what it made for vk_dispatch_destroy to free. */
tvk_status vk_dispatch_init(VkDev *v);
/* Frees command pools, fences, query pools, descriptor pools. NULL-safe on
 * v->dispatch. */
void vk_dispatch_destroy(VkDev *v);

/* The launch entry of the ops table: checks, then records (does not submit
 * unless the batch is full). */
tvk_status vk_launch(Device *d, DevProgram *p, DevBuffer *const *bufs, int nbufs,
                     const int32_t *vals, int nvals, const LaunchDims *dims);
/* TVK_OK when b can be bound as a storage buffer; otherwise TVK_ERR_DEVICE with
 * a message naming the buffer's index in the launch, its size and
 * maxStorageBufferRange. A buffer larger than one binding can address is
 * allocated (memory allows it) but refused here, never bound truncated. */
tvk_status vk_buffer_check_bind(VkDev *v, const DevBuffer *b, int index);

/* Submits the recorded batch, if any; does not wait. */
tvk_status vk_flush(VkDev *v);
/* Submits and waits until all submitted work is complete and its writes are
 * visible to the host (the batch ends with a barrier to HOST_READ) and to later
 * transfers. The sync entry of the ops table. */
tvk_status vk_wait(VkDev *v);
/* Waits until the batch of `serial` is complete (submitting it first if it is
 * still being recorded). */
tvk_status vk_wait_serial(VkDev *v, uint64_t serial);

/* The graph entries of the ops table (runtime/device.h): the launches
 * recorded once into a command buffer of the graph's own, with the barriers
 * vk_launch would record; a launch of it is one submission. */
tvk_status vk_graph_create(Device *d, const DevLaunch *l, int n, DevGraph **out);
tvk_status vk_graph_launch(Device *d, DevGraph *g);
void vk_graph_free(Device *d, DevGraph *g);

/* Counters since the device was made (tests check barriers). */
typedef struct {
  uint64_t dispatches; /* vkCmdDispatch recorded */
  uint64_t barriers;   /* pipeline barriers between dispatches (not the batch's first/last) */
  uint64_t submits;    /* batches submitted */
} VkDispatchStats;
void vk_dispatch_stats(const VkDev *v, VkDispatchStats *out);

#endif
