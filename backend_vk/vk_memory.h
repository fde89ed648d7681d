/* Device memory (vk_memory.c): the sub-allocator over VkDeviceMemory blocks, the
 * buffers carved from them (DevBuffer, vk_core.h) and host <-> device copies.
 * Copies, and an allocation that runs out of memory, wait for pending launches
 * (vk_dispatch.h) first. */
#ifndef TVK_BACKEND_VK_MEMORY_H
#define TVK_BACKEND_VK_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "vk_core.h"

/* Creates the allocator (no memory is allocated until the first alloc). */
tvk_status vk_mem_init(VkDev *v);
/* Frees every block, the staging buffer and the copy command pool. The device
 * must be idle. NULL-safe on v->mem. */
void vk_mem_destroy(VkDev *v);

/* The DeviceOps entries. copy_in/copy_out first call vk_wait (so pending
 * dispatches that use the buffer are done), then copy directly through the
 * mapping, or through the staging buffer with vkCmdCopyBuffer on the queue,
 * waiting for the copy. */
tvk_status vk_buffer_alloc(Device *d, size_t nbytes, DevBuffer **out);
void vk_buffer_free(Device *d, DevBuffer *b);
tvk_status vk_copy_in(Device *d, DevBuffer *b, size_t offset, const void *src, size_t n);
tvk_status vk_copy_out(Device *d, DevBuffer *b, size_t offset, void *dst, size_t n);
/* DeviceOps.wrap: a DevBuffer over the app's VkBuffer, after checking what can
 * be checked (the offset's alignment, the size against the binding range and
 * the buffer's memory requirements). */
tvk_status vk_buffer_wrap(Device *d, const DevForeign *m, DevBuffer **out);

/* Empty blocks kept for reuse, at most (the CPU device's cache holds 256 MiB
 * of freed buffers likewise). One was too few: a realize whose small buffers
 * took the kept block needed a new block for a buffer of a block's size at
 * every run (softmax 4096^2 on lavapipe: a fresh 64 MiB block per run, and
 * the kernel writing it took 39 ms against 24 over memory touched before).
 * They are given up before an allocation reports out of memory. */
enum { VK_KEEP_EMPTY_BLOCKS = 4 };

typedef struct {
  uint64_t blocks;        /* VkDeviceMemory blocks held (kept empty ones included) */
  uint64_t block_bytes;   /* their total size */
  uint64_t live;          /* live buffers */
  uint64_t live_bytes;    /* bytes reserved by live buffers */
  uint64_t staging_bytes; /* size of the staging buffer (0 until a staging copy) */
  uint64_t blocks_made;   /* blocks created since the device opened */
} VkMemStats;
void vk_mem_stats(const VkDev *v, VkMemStats *out);

#endif
