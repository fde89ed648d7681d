/* Device memory: a sub-allocator over large VkDeviceMemory blocks, the buffers
 * carved from them, and host <-> device copies (direct through a persistent
 * mapping, or through a staging buffer and vkCmdCopyBuffer). See docs/vulkan.md.
 *
 * Each block has one VkBuffer spanning it; a DevBuffer is (that VkBuffer, an
 * offset, a range). One buffer per block rather than per allocation: no Vulkan
 * object is made per tensor, which keeps allocation cheap and away from
 * driver limits on object counts, and a descriptor binds (buffer, offset, range)
 * either way. Every offset and reservation is a multiple of `align`, the largest
 * of minStorageBufferOffsetAlignment, nonCoherentAtomSize and 16, so free ranges
 * stay aligned without padding and flushes of a reservation never touch another. */
#include "vk_memory.h"

#include <stdlib.h>
#include <string.h>

#include "ir/vec.h"
#include "vk_dispatch.h"

/* After vk_core.h (volk) so that vulkan_core.h comes without prototypes. */
#include "tvk_vulkan.h"

enum {
  STAGING_BYTES = 8 << 20, /* one staging buffer, reused for every chunk of a copy */
  MIN_ALIGN = 16,
};

typedef struct {
  VkDeviceSize off, size;
} Range;

typedef struct VkBlock {
  struct VkBlock *next;
  VkDeviceMemory memory;
  VkBuffer buffer;
  VkDeviceSize size;
  uint8_t *mapped;  /* NULL: not mapped (copies go through staging) */
  bool coherent;    /* false: flush after host writes, invalidate before host reads */
  bool read_mapped; /* copy_out reads the mapping (else it goes through staging) */
  bool dedicated;   /* made for one buffer larger than a block; freed with it */
  uint32_t live;    /* buffers in the block, freed-but-pending ones included */
  Range *free;      /* free ranges, sorted by offset, never adjacent (coalesced) */
  size_t nfree, capfree;
} VkBlock;

struct VkMem {
  VkBlock *blocks;
  VkDeviceSize align;
  VkDeviceSize block_bytes; /* fixed at the first alloc */
  bool started;
  bool map;         /* map device memory that is also host-visible (unified, ReBAR) */
  DevBuffer *alive; /* live buffers (a list through prev/next) */
  DevBuffer *freed; /* freed buffers whose memory pending commands may still use (through next) */
  uint64_t live, live_bytes;
  uint64_t blocks_made; /* blocks created since the device opened */
  /* Staging copies: one host-visible buffer, one command buffer, one fence. */
  VkBuffer stage_buf;
  VkDeviceMemory stage_mem;
  uint8_t *stage_ptr;
  VkDeviceSize stage_size;
  bool stage_coherent;
  VkCommandPool pool;
  VkCommandBuffer cmd;
  VkFence fence;
};

static VkDeviceSize round_up(VkDeviceSize x, VkDeviceSize a) { return (x + a - 1) / a * a; }

/* ---- memory types ---- */

static const VkMemoryPropertyFlags DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                   HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                                   HC = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                   CACHED = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;

/* Types we never use: protected and lazily allocated memory, and vendor types
 * (AMD device-coherent) that need an extension we do not enable. */
static bool type_usable(VkMemoryPropertyFlags f) {
  const VkMemoryPropertyFlags ok = DL | HV | HC | CACHED;
  return (f & ~ok) == 0;
}

/* Mapping device memory pays when the host reaches it at memory speed: on
 * unified memory (integrated, CPU, virtual) and with resizable BAR, where the
 * host-visible device-local heap is the largest device-local one. A discrete GPU
 * with only the small 256 MiB BAR window gets staging copies instead. */
static bool map_policy(const VkDev *v) {
  if (v->mem_mode & VKMEM_FORCE_STAGING) return false;
  VkPhysicalDeviceType t = v->props.deviceType;
  if (t != VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) return true;
  const VkPhysicalDeviceMemoryProperties *mp = &v->mem_props;
  VkDeviceSize largest = 0, mappable = 0;
  for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
    VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
    VkDeviceSize heap = mp->memoryHeaps[mp->memoryTypes[i].heapIndex].size;
    if (!(f & DL) || !type_usable(f)) continue;
    if (heap > largest) largest = heap;
    if ((f & HV) && heap > mappable) mappable = heap;
  }
  return mappable > 0 && mappable >= largest;
}

/* Preference of memory type i for tensor blocks; 0: not a candidate. */
static int block_score(const VkDev *v, bool map, uint32_t bits, uint32_t i, bool any_dl) {
  VkMemoryPropertyFlags f = v->mem_props.memoryTypes[i].propertyFlags;
  if (!(bits & (1u << i)) || !type_usable(f)) return 0;
  if (!(f & DL)) return any_dl ? 0 : 1; /* host memory only if the device has no other */
  if (map) return (f & HV) ? ((f & HC) ? 4 : 3) : 2;
  return (f & HV) ? 3 : 4; /* real VRAM first; the BAR window is scarce */
}

/* Preference of memory type i for the staging buffer; 0: not a candidate. */
static int staging_score(const VkDev *v, uint32_t bits, uint32_t i) {
  VkMemoryPropertyFlags f = v->mem_props.memoryTypes[i].propertyFlags;
  if (!(bits & (1u << i)) || !type_usable(f) || !(f & HV)) return 0;
  return 1 + ((f & CACHED) ? 4 : 0) + ((f & HC) ? 2 : 0) + ((f & DL) ? 0 : 1);
}

/* Candidate types of `bits` in order of preference, into order[]; returns the count. */
static uint32_t rank_types(const VkDev *v, bool staging, bool map, uint32_t bits,
                           uint32_t order[VK_MAX_MEMORY_TYPES]) {
  const VkPhysicalDeviceMemoryProperties *mp = &v->mem_props;
  bool any_dl = false;
  for (uint32_t i = 0; i < mp->memoryTypeCount; i++)
    if ((bits & (1u << i)) && (mp->memoryTypes[i].propertyFlags & DL)) any_dl = true;
  int score[VK_MAX_MEMORY_TYPES];
  uint32_t n = 0;
  for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
    score[i] = staging ? staging_score(v, bits, i) : block_score(v, map, bits, i, any_dl);
    if (score[i] > 0) order[n++] = i;
  }
  /* Insertion sort by score, stable so the driver's own order breaks ties. */
  for (uint32_t a = 1; a < n; a++)
    for (uint32_t b = a; b > 0 && score[order[b]] > score[order[b - 1]]; b--) {
      uint32_t t = order[b];
      order[b] = order[b - 1];
      order[b - 1] = t;
    }
  return n;
}

static bool is_oom(VkResult r) {
  return r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY;
}

/* Creates a buffer of `size` bytes and memory for it from the best type that
 * has room, bound and (when `map` and host-visible) mapped. */
static tvk_status make_buffer(VkDev *v, VkDeviceSize size, bool staging, bool map, VkBuffer *buf,
                              VkDeviceMemory *mem, uint8_t **ptr, bool *coherent, bool *cached) {
  VkBufferCreateInfo bi = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = size,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };
  if (staging) bi.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  tvk_status st = vk_check(v, v->vk.vkCreateBuffer(v->device, &bi, NULL, buf), "vkCreateBuffer");
  if (st != TVK_OK) return st;
  VkMemoryRequirements req;
  v->vk.vkGetBufferMemoryRequirements(v->device, *buf, &req);
  uint32_t order[VK_MAX_MEMORY_TYPES];
  uint32_t n = rank_types(v, staging, map, req.memoryTypeBits, order);
  VkResult r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  uint32_t type = 0;
  for (uint32_t k = 0; k < n && (k == 0 || is_oom(r)); k++) {
    type = order[k];
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = type,
    };
    r = v->mem_fail && !staging ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                                : v->vk.vkAllocateMemory(v->device, &ai, NULL, mem);
  }
  if (n == 0)
    st = err_set(&v->base.err, TVK_ERR_DEVICE, "%s has no memory type for a %s buffer", v->name,
                 staging ? "staging" : "storage");
  else
    st = vk_check(v, r, "vkAllocateMemory");
  if (st == TVK_OK)
    st = vk_check(v, v->vk.vkBindBufferMemory(v->device, *buf, *mem, 0), "vkBindBufferMemory");
  VkMemoryPropertyFlags f = v->mem_props.memoryTypes[type].propertyFlags;
  *ptr = NULL;
  *coherent = (f & HC) && !(v->mem_mode & VKMEM_FORCE_NONCOHERENT);
  *cached = (f & CACHED) != 0;
  if (st == TVK_OK && map && (f & HV)) {
    void *p = NULL;
    st = vk_check(v, v->vk.vkMapMemory(v->device, *mem, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    *ptr = p;
  }
  if (st != TVK_OK) {
    if (r == VK_SUCCESS) v->vk.vkFreeMemory(v->device, *mem, NULL);
    v->vk.vkDestroyBuffer(v->device, *buf, NULL);
    *buf = VK_NULL_HANDLE, *mem = VK_NULL_HANDLE;
  }
  return st;
}

/* ---- blocks ---- */

static void block_destroy(VkDev *v, VkBlock *b) {
  if (b->mapped) v->vk.vkUnmapMemory(v->device, b->memory);
  v->vk.vkDestroyBuffer(v->device, b->buffer, NULL);
  v->vk.vkFreeMemory(v->device, b->memory, NULL);
  free(b->free);
  free(b);
}

static tvk_status block_create(VkDev *v, VkDeviceSize size, bool dedicated, VkBlock **out) {
  VkMem *m = v->mem;
  VkBlock *b = calloc(1, sizeof *b);
  if (!b || !VEC_RESERVE(b->free, b->capfree, 1)) { /* a failed reserve leaves b->free NULL */
    free(b);
    return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "out of host memory for a memory block");
  }
  bool cached = false;
  tvk_status st = make_buffer(v, size, false, m->map, &b->buffer, &b->memory, &b->mapped,
                              &b->coherent, &cached);
  if (st != TVK_OK) {
    free(b->free);
    free(b);
    return st;
  }
  b->size = size;
  b->dedicated = dedicated;
  m->blocks_made++;
  /* Host reads of uncached memory behind PCIe (a discrete GPU's BAR) crawl: read
   * back through a staging copy into cached host memory instead. */
  b->read_mapped =
      b->mapped && (cached || v->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU);
  b->nfree = 1;
  b->free[0] = (Range){0, size};
  b->next = m->blocks;
  m->blocks = b;
  *out = b;
  return TVK_OK;
}

static void block_unlink(VkMem *m, VkBlock *b) {
  VkBlock **p = &m->blocks;
  while (*p != b) p = &(*p)->next;
  *p = b->next;
}

/* Takes `size` bytes at free range i of b; returns the offset. */
static VkDeviceSize block_take(VkBlock *b, size_t i, VkDeviceSize size) {
  VkDeviceSize off = b->free[i].off;
  b->free[i].off += size;
  b->free[i].size -= size;
  if (b->free[i].size == 0) {
    memmove(b->free + i, b->free + i + 1, (b->nfree - i - 1) * sizeof *b->free);
    b->nfree--;
  }
  b->live++;
  return off;
}

/* Returns [off, off+size) to b's free list, merging with its neighbours. */
static bool block_give(VkBlock *b, VkDeviceSize off, VkDeviceSize size) {
  size_t i = 0;
  while (i < b->nfree && b->free[i].off < off) i++; /* i: first range after off */
  bool prev = i > 0 && b->free[i - 1].off + b->free[i - 1].size == off;
  bool next = i < b->nfree && off + size == b->free[i].off;
  if (prev && next) {
    b->free[i - 1].size += size + b->free[i].size;
    memmove(b->free + i, b->free + i + 1, (b->nfree - i - 1) * sizeof *b->free);
    b->nfree--;
  } else if (prev) {
    b->free[i - 1].size += size;
  } else if (next) {
    b->free[i].off = off;
    b->free[i].size += size;
  } else {
    if (!VEC_RESERVE(b->free, b->capfree, b->nfree + 1)) return false;
    memmove(b->free + i + 1, b->free + i, (b->nfree - i) * sizeof *b->free);
    b->free[i] = (Range){off, size};
    b->nfree++;
  }
  b->live--;
  return true;
}

static bool block_empty(const VkBlock *b) { return b->live == 0; }

/* ---- freeing (deferred while commands may use the memory) ---- */

/* Returns b's memory to its block. An empty block is destroyed when dedicated or
 * when VK_KEEP_EMPTY_BLOCKS empty blocks are already kept: they are kept so that a
 * loop that frees and allocates does not allocate device memory each time. */
static void release(VkDev *v, DevBuffer *buf) {
  VkMem *m = v->mem;
  VkBlock *b = buf->block;
  if (buf->wrapped) { /* the app's buffer and memory: nothing of ours but the record */
    free(buf);
    return;
  }
  m->live--;
  m->live_bytes -= buf->reserved;
  if (!block_give(b, buf->offset, buf->reserved)) {
    /* No host memory to record the range: it stays lost until the block goes. */
    b->live--;
  }
  free(buf);
  if (!block_empty(b)) return;
  int kept = 0;
  for (VkBlock *o = m->blocks; o; o = o->next) kept += o != b && !o->dedicated && block_empty(o);
  if (!b->dedicated && kept < VK_KEEP_EMPTY_BLOCKS) return;
  block_unlink(m, b);
  block_destroy(v, b);
}

/* Releases the freed buffers whose last batch has completed. */
static void reclaim(VkDev *v) {
  DevBuffer **p = &v->mem->freed;
  while (*p) {
    DevBuffer *b = *p;
    if (b->freed_serial <= v->serial_done || v->lost) {
      *p = b->next;
      release(v, b);
    } else {
      p = &b->next;
    }
  }
}

void vk_buffer_free(Device *d, DevBuffer *b) {
  VkDev *v = vk_of(d);
  if (!b) return;
  VkMem *m = v->mem;
  if (b->prev)
    b->prev->next = b->next;
  else
    m->alive = b->next;
  if (b->next) b->next->prev = b->prev;
  b->prev = NULL;
  if (v->serial_used <= v->serial_done || v->lost) {
    release(v, b);
    return;
  }
  b->freed_serial = v->serial_used;
  b->next = m->freed;
  m->freed = b;
}

/* Destroys the empty blocks kept for reuse (before reporting out of memory). */
static bool drop_empty_blocks(VkDev *v) {
  bool any = false;
  for (VkBlock **p = &v->mem->blocks; *p;) {
    VkBlock *b = *p;
    if (block_empty(b)) {
      *p = b->next;
      block_destroy(v, b);
      any = true;
    } else {
      p = &b->next;
    }
  }
  return any;
}

/* ---- allocation ---- */

/* Best fit over the blocks that are not dedicated: the smallest free range that
 * holds `size`. */
static VkBlock *find_fit(VkMem *m, VkDeviceSize size, size_t *range) {
  VkBlock *best = NULL;
  VkDeviceSize best_size = 0;
  for (VkBlock *b = m->blocks; b; b = b->next) {
    if (b->dedicated) continue;
    for (size_t i = 0; i < b->nfree; i++) {
      VkDeviceSize s = b->free[i].size;
      if (s >= size && (!best || s < best_size)) best = b, best_size = s, *range = i;
    }
  }
  return best;
}

static tvk_status place(VkDev *v, VkDeviceSize reserved, VkBlock **block, VkDeviceSize *off) {
  VkMem *m = v->mem;
  size_t i = 0;
  VkBlock *b = reserved <= m->block_bytes ? find_fit(m, reserved, &i) : NULL;
  if (!b) {
    bool dedicated = reserved > m->block_bytes;
    tvk_status st = block_create(v, dedicated ? reserved : m->block_bytes, dedicated, &b);
    if (st != TVK_OK) return st;
    i = 0;
  }
  *block = b;
  *off = block_take(b, i, reserved);
  return TVK_OK;
}

static void start(VkDev *v) {
  VkMem *m = v->mem;
  VkDeviceSize cap = v->lim.max_alloc < v->lim.max_buffer ? v->lim.max_alloc : v->lim.max_buffer;
  VkDeviceSize bytes = v->block_bytes ? v->block_bytes : 1;
  if (bytes > cap) bytes = cap;
  m->block_bytes = round_up(bytes, m->align);
  if (m->block_bytes > cap) m->block_bytes = bytes; /* cap not a multiple of align: unusual */
  m->map = map_policy(v);
  m->started = true;
}

tvk_status vk_buffer_alloc(Device *d, size_t nbytes, DevBuffer **out) {
  VkDev *v = vk_of(d);
  *out = NULL;
  tvk_status st = vk_alive(v);
  if (st != TVK_OK) return st;
  VkMem *m = v->mem;
  if (!m->started) start(v);
  VkDeviceSize cap = v->lim.max_alloc < v->lim.max_buffer ? v->lim.max_alloc : v->lim.max_buffer;
  if (nbytes > cap - m->align)
    return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY,
                   "alloc: a buffer of %zu bytes is larger than %s allows in one allocation "
                   "(maxMemoryAllocationSize %llu, maxBufferSize %llu bytes)",
                   nbytes, v->name, (unsigned long long)v->lim.max_alloc,
                   (unsigned long long)v->lim.max_buffer);
  DevBuffer *b = calloc(1, sizeof *b);
  if (!b) return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "alloc: out of host memory");
  b->size = nbytes;
  b->range = round_up(nbytes ? nbytes : 1, 4);
  b->reserved = round_up(b->range, m->align);
  reclaim(v);
  st = place(v, b->reserved, &b->block, &b->offset);
  /* Out of memory: wait for pending work so freed buffers come back, drop the
   * kept empty blocks, and try once more. */
  if (st == TVK_ERR_OUT_OF_MEMORY && (m->freed || drop_empty_blocks(v))) {
    if (m->freed && vk_wait(v) == TVK_OK) reclaim(v);
    drop_empty_blocks(v);
    st = place(v, b->reserved, &b->block, &b->offset);
  }
  if (st != TVK_OK) {
    free(b);
    if (st == TVK_ERR_OUT_OF_MEMORY) {
      char why[sizeof v->base.err.msg];
      memcpy(why, v->base.err.msg, sizeof why);
      err_set(&v->base.err, st, "alloc: out of device memory for a buffer of %zu bytes on %s (%s)",
              nbytes, v->name, why);
    }
    return st;
  }
  b->buffer = b->block->buffer;
  b->host = b->block->mapped ? b->block->mapped + b->offset : NULL;
  m->live++;
  m->live_bytes += b->reserved;
  b->next = m->alive;
  if (m->alive) m->alive->prev = b;
  m->alive = b;
  *out = b;
  return TVK_OK;
}

/* ---- the app's buffers ---- */

tvk_status vk_buffer_wrap(Device *d, const DevForeign *f, DevBuffer **out) {
  VkDev *v = vk_of(d);
  *out = NULL;
  tvk_status st = vk_alive(v);
  if (st != TVK_OK) return st;
  if (f->host)
    return err_set(&v->base.err, TVK_ERR_DEVICE,
                   "%s cannot read host memory in place: use tvk_from_data (a copy), or "
                   "tvk_from_vulkan_buffer with a buffer of the app's device",
                   v->name);
  if (!v->app_owned)
    return err_set(&v->base.err, TVK_ERR_DEVICE,
                   "the context's Vulkan device is tvk's own, not the app's: make the context "
                   "with tvk_ctx_create_vulkan on the device that owns the buffer");
  VkBuffer buf = tvk_vulkan_handle_of(f->handle);
  VkDeviceSize range = round_up(f->nbytes ? f->nbytes : 1, 4);
  if (f->offset % v->lim.storage_align != 0)
    return err_set(&v->base.err, TVK_ERR_INVALID_ARG,
                   "offset %llu is not a multiple of minStorageBufferOffsetAlignment (%llu)",
                   (unsigned long long)f->offset, (unsigned long long)v->lim.storage_align);
  if (f->offset > f->size || range > f->size - f->offset)
    return err_set(&v->base.err, TVK_ERR_INVALID_ARG,
                   "%zu bytes of %s (%llu rounded up to 4) at offset %llu do not fit in a buffer "
                   "of %llu bytes",
                   f->nbytes, f->dtype_name, (unsigned long long)range,
                   (unsigned long long)f->offset, (unsigned long long)f->size);
  if (range > v->lim.max_storage_range)
    return err_set(&v->base.err, TVK_ERR_INVALID_ARG,
                   "%llu bytes are more than one binding addresses (maxStorageBufferRange %llu)",
                   (unsigned long long)range, (unsigned long long)v->lim.max_storage_range);
  /* A buffer's memory covers at least its size: a claimed size beyond it is
   * not the size it was created with. */
  VkMemoryRequirements req;
  v->vk.vkGetBufferMemoryRequirements(v->device, buf, &req);
  if (f->size > req.size)
    return err_set(&v->base.err, TVK_ERR_INVALID_ARG,
                   "buffer_size %llu is larger than the buffer (its memory requirement is %llu "
                   "bytes)",
                   (unsigned long long)f->size, (unsigned long long)req.size);
  DevBuffer *b = calloc(1, sizeof *b);
  if (!b) return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "wrap: out of host memory");
  *b = (DevBuffer){
      .buffer = buf, .offset = f->offset, .range = range, .size = f->nbytes, .wrapped = true};
  /* On the live list so that destroy frees the record; not counted as ours. */
  VkMem *m = v->mem;
  b->next = m->alive;
  if (m->alive) m->alive->prev = b;
  m->alive = b;
  *out = b;
  return TVK_OK;
}

/* ---- copies ---- */

static tvk_status check_range(VkDev *v, const char *what, DevBuffer *b, size_t offset,
                              const void *host, size_t n) {
  tvk_status st = vk_alive(v);
  if (st != TVK_OK) return st;
  if (!b) return err_set(&v->base.err, TVK_ERR_INVALID_ARG, "%s: buffer is NULL", what);
  if (offset > b->size || n > b->size - offset)
    return err_set(&v->base.err, TVK_ERR_INVALID_ARG,
                   "%s: offset %zu + size %zu is out of bounds of a buffer of %zu bytes", what,
                   offset, n, b->size);
  if (n > 0 && !host)
    return err_set(&v->base.err, TVK_ERR_INVALID_ARG, "%s: host pointer is NULL", what);
  return TVK_OK;
}

/* The atom-aligned range of mapped memory [off, off+n) of block b, for
 * vkFlush/InvalidateMappedMemoryRanges. Reservations are atom-aligned, so the
 * widened range stays inside the buffer's own reservation. */
static VkMappedMemoryRange atom_range(const VkDev *v, const VkBlock *b, VkDeviceSize off,
                                      VkDeviceSize n) {
  VkDeviceSize a = v->lim.atom, lo = off / a * a, hi = round_up(off + n, a);
  return (VkMappedMemoryRange){
      .sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
      .memory = b->memory,
      .offset = lo,
      .size = hi >= b->size ? VK_WHOLE_SIZE : hi - lo,
  };
}

static tvk_status copy_mapped(VkDev *v, DevBuffer *b, size_t offset, void *host, size_t n,
                              bool in) {
  VkBlock *k = b->block;
  VkMappedMemoryRange r = atom_range(v, k, b->offset + offset, n);
  if (!in && !k->coherent) {
    tvk_status st = vk_check(v, v->vk.vkInvalidateMappedMemoryRanges(v->device, 1, &r),
                             "vkInvalidateMappedMemoryRanges");
    if (st != TVK_OK) return st;
  }
  if (in)
    memcpy(b->host + offset, host, n);
  else
    memcpy(host, b->host + offset, n);
  if (in && !k->coherent)
    return vk_check(v, v->vk.vkFlushMappedMemoryRanges(v->device, 1, &r),
                    "vkFlushMappedMemoryRanges");
  return TVK_OK;
}

/* Creates, at the first staging copy, what every staging copy uses. Each object
 * is made only if missing, so a call after a failure picks up where it stopped. */
static tvk_status staging_init(VkDev *v) {
  VkMem *m = v->mem;
  if (m->stage_size) return TVK_OK;
  tvk_status st = TVK_OK;
  if (!m->pool) {
    VkCommandPoolCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = v->queue_family,
    };
    st = vk_check(v, v->vk.vkCreateCommandPool(v->device, &pi, NULL, &m->pool),
                  "vkCreateCommandPool");
  }
  if (st == TVK_OK && !m->cmd) {
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = m->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    st = vk_check(v, v->vk.vkAllocateCommandBuffers(v->device, &ai, &m->cmd),
                  "vkAllocateCommandBuffers");
  }
  if (st == TVK_OK && !m->fence) {
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    st = vk_check(v, v->vk.vkCreateFence(v->device, &fi, NULL, &m->fence), "vkCreateFence");
  }
  VkDeviceSize size = STAGING_BYTES < v->lim.max_alloc ? STAGING_BYTES : v->lim.max_alloc;
  bool cached = false;
  if (st == TVK_OK)
    st = make_buffer(v, size, true, true, &m->stage_buf, &m->stage_mem, &m->stage_ptr,
                     &m->stage_coherent, &cached);
  if (st == TVK_OK && !m->stage_ptr) {
    v->vk.vkDestroyBuffer(v->device, m->stage_buf, NULL);
    v->vk.vkFreeMemory(v->device, m->stage_mem, NULL);
    m->stage_buf = VK_NULL_HANDLE, m->stage_mem = VK_NULL_HANDLE;
    st = err_set(&v->base.err, TVK_ERR_DEVICE, "%s: the staging buffer could not be mapped",
                 v->name);
  }
  if (st == TVK_OK) m->stage_size = size;
  return st;
}

/* Records and runs one copy between the staging buffer and b, and waits. The
 * barriers order it after earlier shader and transfer writes, and make its
 * result visible to later shaders, transfers and the host. */
static tvk_status stage_copy(VkDev *v, DevBuffer *b, VkDeviceSize off, VkDeviceSize n, bool in) {
  VkMem *m = v->mem;
  VkCommandBufferBeginInfo bi = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
  };
  tvk_status st = vk_check(v, v->vk.vkBeginCommandBuffer(m->cmd, &bi), "vkBeginCommandBuffer");
  if (st != TVK_OK) return st;
  VkMemoryBarrier before = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
      .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
  };
  v->vk.vkCmdPipelineBarrier(m->cmd,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
  VkBufferCopy region = {
      .srcOffset = in ? 0 : b->offset + off,
      .dstOffset = in ? b->offset + off : 0,
      .size = n,
  };
  v->vk.vkCmdCopyBuffer(m->cmd, in ? m->stage_buf : b->buffer, in ? b->buffer : m->stage_buf, 1,
                        &region);
  VkMemoryBarrier after = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
      .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                       VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                       VK_ACCESS_HOST_READ_BIT,
  };
  v->vk.vkCmdPipelineBarrier(m->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                                 VK_PIPELINE_STAGE_HOST_BIT,
                             0, 1, &after, 0, NULL, 0, NULL);
  st = vk_check(v, v->vk.vkEndCommandBuffer(m->cmd), "vkEndCommandBuffer");
  VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .commandBufferCount = 1,
      .pCommandBuffers = &m->cmd,
  };
  if (st == TVK_OK)
    st = vk_check(v, v->vk.vkQueueSubmit(v->queue, 1, &si, m->fence), "vkQueueSubmit (copy)");
  if (st == TVK_OK)
    st = vk_check(v, v->vk.vkWaitForFences(v->device, 1, &m->fence, VK_TRUE, UINT64_MAX),
                  "vkWaitForFences (copy)");
  if (st == TVK_OK) st = vk_check(v, v->vk.vkResetFences(v->device, 1, &m->fence), "vkResetFences");
  if (st == TVK_OK) st = vk_check(v, v->vk.vkResetCommandBuffer(m->cmd, 0), "vkResetCommandBuffer");
  return st;
}

static tvk_status copy_staged(VkDev *v, DevBuffer *b, size_t offset, void *host, size_t n,
                              bool in) {
  VkMem *m = v->mem;
  tvk_status st = staging_init(v);
  VkMappedMemoryRange whole = {
      .sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
      .memory = m->stage_mem,
      .size = VK_WHOLE_SIZE,
  };
  for (size_t done = 0; st == TVK_OK && done < n;) {
    size_t c = n - done < m->stage_size ? n - done : (size_t)m->stage_size;
    if (in) {
      memcpy(m->stage_ptr, (const uint8_t *)host + done, c);
      if (!m->stage_coherent)
        st = vk_check(v, v->vk.vkFlushMappedMemoryRanges(v->device, 1, &whole),
                      "vkFlushMappedMemoryRanges (staging)");
    }
    if (st == TVK_OK) st = stage_copy(v, b, offset + done, c, in);
    if (st == TVK_OK && !in) {
      if (!m->stage_coherent)
        st = vk_check(v, v->vk.vkInvalidateMappedMemoryRanges(v->device, 1, &whole),
                      "vkInvalidateMappedMemoryRanges (staging)");
      if (st == TVK_OK) memcpy((uint8_t *)host + done, m->stage_ptr, c);
    }
    done += c;
  }
  return st;
}

/* Both directions: wait for the queue (pending commands may use b), then copy. */
static tvk_status copy(VkDev *v, const char *what, DevBuffer *b, size_t offset, void *host,
                       size_t n, bool in) {
  tvk_status st = check_range(v, what, b, offset, host, n);
  if (st != TVK_OK || n == 0) return st;
  st = vk_wait(v);
  if (st != TVK_OK) return st;
  bool direct = b->host && (in || b->block->read_mapped);
  return direct ? copy_mapped(v, b, offset, host, n, in) : copy_staged(v, b, offset, host, n, in);
}

tvk_status vk_copy_in(Device *d, DevBuffer *b, size_t offset, const void *src, size_t n) {
  /* The cast only shares one function for both directions; src is only read. */
  return copy(vk_of(d), "copy_in", b, offset, (void *)src, n, true);
}

tvk_status vk_copy_out(Device *d, DevBuffer *b, size_t offset, void *dst, size_t n) {
  return copy(vk_of(d), "copy_out", b, offset, dst, n, false);
}

/* ---- lifetime and statistics ---- */

tvk_status vk_mem_init(VkDev *v) {
  v->mem = calloc(1, sizeof *v->mem);
  if (!v->mem)
    return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "out of memory creating the allocator");
  VkDeviceSize a = MIN_ALIGN;
  if (v->lim.storage_align > a) a = v->lim.storage_align;
  if (v->lim.atom > a) a = v->lim.atom;
  v->mem->align = a;
  return TVK_OK;
}

void vk_mem_destroy(VkDev *v) {
  VkMem *m = v->mem;
  if (!m) return;
  /* Buffers the caller did not free, and freed ones still waiting: their blocks go below. */
  for (DevBuffer **list = &m->alive; list; list = list == &m->alive ? &m->freed : NULL)
    while (*list) {
      DevBuffer *b = *list;
      *list = b->next;
      free(b);
    }
  while (m->blocks) {
    VkBlock *b = m->blocks;
    m->blocks = b->next;
    block_destroy(v, b);
  }
  if (m->stage_ptr) v->vk.vkUnmapMemory(v->device, m->stage_mem);
  if (m->stage_buf) v->vk.vkDestroyBuffer(v->device, m->stage_buf, NULL);
  if (m->stage_mem) v->vk.vkFreeMemory(v->device, m->stage_mem, NULL);
  if (m->fence) v->vk.vkDestroyFence(v->device, m->fence, NULL);
  if (m->pool) v->vk.vkDestroyCommandPool(v->device, m->pool, NULL);
  free(m);
  v->mem = NULL;
}

void vk_mem_stats(const VkDev *v, VkMemStats *out) {
  const VkMem *m = v->mem;
  *out = (VkMemStats){.live = m->live,
                      .live_bytes = m->live_bytes,
                      .staging_bytes = m->stage_size,
                      .blocks_made = m->blocks_made};
  for (const VkBlock *b = m->blocks; b; b = b->next) {
    out->blocks++;
    out->block_bytes += b->size;
  }
}
