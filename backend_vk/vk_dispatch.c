/* Launches: many dispatches recorded into one command buffer (a batch), with a
 * buffer memory barrier only where a dispatch depends on an earlier one of the
 * batch; descriptors pushed (VK_KHR_push_descriptor) or taken from pools; the
 * work-group split; submission, completion by fence, recycling; timestamps.
 * See docs/vulkan.md ("Batching and barriers") and the kernel ABI in
 * vk_dispatch.h. */
#include "vk_dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/ptrmap.h"
#include "ir/vec.h"
#include "vk_pipeline.h"

enum {
  VK_BATCH_MAX = 256, /* dispatches per command buffer before it is submitted */
  VK_SLOTS = 3,       /* command buffers in flight or being recorded */
  VK_POOL_SETS = 64,  /* descriptor sets per pool (the pool path); more pools when full */
  VK_POOL_BUFFERS = 512,
};

/* Hazard state of one buffer within the batch being recorded. */
typedef struct {
  uint32_t read_epoch; /* epoch + 1 of the last read; 0: not read in this batch */
  bool write_pending;  /* written, and no barrier has made that write visible yet */
} Hazard;

/* One command buffer and what it needs until its submission completes: a
 * batch slot of the ring, or a graph's (kept: recorded once, its commands and
 * descriptor sets outlive each submission). */
typedef struct {
  VkCommandPool pool;
  VkCommandBuffer cmd;
  VkFence fence;
  VkQueryPool queries; /* VK_NULL_HANDLE unless timing */
  VkDescriptorPool *dpools;
  size_t ndpools, capdpools; /* pools made; room for them */
  size_t dpool_used;         /* index of the one sets come from */
  DevProgram **progs;        /* of each dispatch, for the timings: room for cap */
  int ndispatch, cap;
  int64_t submit_ns; /* CLOCK_MONOTONIC at submission: where timings go without calibration */
  uint64_t serial;   /* 0: free; else the batch it holds */
  bool submitted;
  bool kept; /* a graph's */
} VkSlot;

/* A graph: a kept slot, listed so that waits and polls see its submission. */
struct DevGraph {
  VkSlot slot;
  DevGraph *prev, *next;
};

struct VkDispatchState {
  VkSlot slots[VK_SLOTS];
  int recording; /* index of the slot being recorded; -1: none */
  int next;      /* the slot the next batch takes */
  bool timing;   /* TVK_DEBUG >= 1 and the queue has timestamps */
  /* Hazards of the recording batch: each buffer's index in haz. The map keeps
   * its room from batch to batch. */
  PtrMap haz_of;
  Hazard *haz;
  size_t nhaz, haz_cap;
  uint32_t epoch;   /* barriers recorded in this batch */
  VkPipeline bound; /* last pipeline bound in this batch */
  /* Scratch, grown as needed. */
  VkDescriptorBufferInfo *infos;
  VkWriteDescriptorSet *writes;
  VkBufferMemoryBarrier *barriers;
  size_t infos_cap, writes_cap, barriers_cap;
  uint8_t *push;    /* max_push_constants bytes */
  DevGraph *graphs; /* alive */
  VkDispatchStats stats;
};

/* ---- hazards ---- */

/* The entry of b; NULL when b has none in this batch. */
static Hazard *haz_find(VkDispatchState *s, const DevBuffer *b) {
  int64_t i = ptrmap_get(&s->haz_of, b);
  return i < 0 ? NULL : &s->haz[i];
}

/* The entry of b, made if new. NULL when out of memory. */
static Hazard *haz_get(VkDispatchState *s, const DevBuffer *b) {
  /* Room first, so a new key never maps to an entry that could not be made. */
  if (!VEC_RESERVE(s->haz, s->haz_cap, s->nhaz + 1)) return NULL;
  bool added;
  int64_t *i = ptrmap_insert(&s->haz_of, b, (int64_t)s->nhaz, &added);
  if (!i) return NULL;
  if (added) s->haz[s->nhaz++] = (Hazard){0};
  return &s->haz[*i];
}

/* Forgets every buffer but keeps the map's room, so a new batch does not grow
 * it again. */
static void haz_clear(VkDispatchState *s) {
  ptrmap_clear(&s->haz_of);
  s->nhaz = 0;
  s->epoch = 0;
}

/* ---- slots ---- */

/* A slot with room for cap dispatches; kept: a graph's. */
static tvk_status slot_init(VkDev *v, VkDispatchState *s, VkSlot *sl, int cap, bool kept) {
  sl->kept = kept;
  sl->cap = cap;
  if (!(sl->progs = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *sl->progs)))
    return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "out of memory for a command buffer");
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .flags = kept ? 0 : VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
                                 .queueFamilyIndex = v->queue_family};
  VkResult r = v->vk.vkCreateCommandPool(v->device, &pci, NULL, &sl->pool);
  if (r != VK_SUCCESS) return vk_check(v, r, "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                    .commandPool = sl->pool,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                    .commandBufferCount = 1};
  r = v->vk.vkAllocateCommandBuffers(v->device, &ai, &sl->cmd);
  if (r != VK_SUCCESS) return vk_check(v, r, "vkAllocateCommandBuffers");
  VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  r = v->vk.vkCreateFence(v->device, &fci, NULL, &sl->fence);
  if (r != VK_SUCCESS) return vk_check(v, r, "vkCreateFence");
  if (!s->timing) return TVK_OK;
  VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                               .queryType = VK_QUERY_TYPE_TIMESTAMP,
                               .queryCount = 2 * (uint32_t)(cap > 0 ? cap : 1)};
  r = v->vk.vkCreateQueryPool(v->device, &qci, NULL, &sl->queries);
  return r == VK_SUCCESS ? TVK_OK : vk_check(v, r, "vkCreateQueryPool");
}

static void slot_destroy(VkDev *v, VkSlot *sl) {
  for (size_t i = 0; i < sl->ndpools; i++)
    v->vk.vkDestroyDescriptorPool(v->device, sl->dpools[i], NULL);
  free(sl->dpools);
  free(sl->progs);
  if (sl->queries) v->vk.vkDestroyQueryPool(v->device, sl->queries, NULL);
  if (sl->fence) v->vk.vkDestroyFence(v->device, sl->fence, NULL);
  if (sl->pool) v->vk.vkDestroyCommandPool(v->device, sl->pool, NULL); /* frees cmd too */
}

tvk_status vk_dispatch_init(VkDev *v) {
  VkDispatchState *s = calloc(1, sizeof *s);
  uint8_t *push = malloc(v->lim.max_push_constants + 16u);
  if (!s || !push) {
    free(s);
    free(push);
    return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "out of memory creating the device");
  }
  s->push = push;
  s->recording = -1;
  s->timing = (v->debug >= 1 || v->profile) && (v->features & VKFEAT_TIMESTAMPS);
  v->dispatch = s;
  tvk_status st = TVK_OK;
  for (int i = 0; i < VK_SLOTS && st == TVK_OK; i++)
    st = slot_init(v, s, &s->slots[i], VK_BATCH_MAX, false);
  return st;
}

void vk_dispatch_destroy(VkDev *v) {
  VkDispatchState *s = v->dispatch;
  if (!s) return;
  for (int i = 0; i < VK_SLOTS; i++) slot_destroy(v, &s->slots[i]);
  while (s->graphs) { /* the device is idle: vkd_destroy waited */
    DevGraph *g = s->graphs;
    s->graphs = g->next;
    slot_destroy(v, &g->slot);
    free(g);
  }
  ptrmap_free(&s->haz_of);
  free(s->haz);
  free(s->infos);
  free(s->writes);
  free(s->barriers);
  free(s->push);
  free(s);
  v->dispatch = NULL;
}

/* ---- completion ---- */

static int64_t host_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The host time (CLOCK_MONOTONIC ns) of device timestamp 0 of the slot's
 * clock: from one calibrated pair of readings when the device has
 * VK_EXT_calibrated_timestamps, else by placing the batch's first timestamp
 * at its submission (the work cannot start before; it may start later). */
static double host_of_tick0(VkDev *v, const VkSlot *sl, uint64_t first, uint64_t mask) {
  double period = v->lim.timestamp_period;
  if (v->features & VKFEAT_CALIBRATED) {
    VkCalibratedTimestampInfoEXT info[2] = {
        {.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT,
         .timeDomain = VK_TIME_DOMAIN_DEVICE_EXT},
        {.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT,
         .timeDomain = VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT}};
    uint64_t now[2], deviation;
    if (v->vk.vkGetCalibratedTimestampsEXT(v->device, 2, info, now, &deviation) == VK_SUCCESS)
      return (double)now[1] - (double)(now[0] & mask) * period;
  }
  return (double)sl->submit_ns - (double)first * period;
}

/* Reports each dispatch of a completed slot: "tvk: VK kernel NAME: X.XXX ms"
 * at TVK_DEBUG >= 1, and Device.on_time. */
static void report_timings(VkDev *v, VkSlot *sl) {
  uint64_t *t = malloc((size_t)sl->ndispatch * 2 * sizeof *t);
  VkResult r = t ? v->vk.vkGetQueryPoolResults(
                       v->device, sl->queries, 0, 2u * (uint32_t)sl->ndispatch,
                       (size_t)sl->ndispatch * 2 * sizeof *t, t, sizeof *t, VK_QUERY_RESULT_64_BIT)
                 : VK_ERROR_OUT_OF_HOST_MEMORY;
  if (r != VK_SUCCESS) {
    log_msg(&v->base.log, TVK_LOG_WARN, "tvk: VK timestamps unavailable: %s", vk_result_name(r));
    free(t);
    return;
  }
  uint32_t bits = v->lim.timestamp_bits;
  uint64_t mask = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
  double period = v->lim.timestamp_period;
  /* ticks are counted from the batch's first timestamp, so that a counter
   * that wraps within the batch still gives increasing times */
  double tick0 = v->base.on_time ? host_of_tick0(v, sl, t[0] & mask, mask) : 0;
  double base = tick0 + (double)(t[0] & mask) * period;
  for (int i = 0; i < sl->ndispatch; i++) {
    uint64_t ticks = (t[2 * i + 1] - t[2 * i]) & mask, from = (t[2 * i] - t[0]) & mask;
    double ms = (double)ticks * period * 1e-6;
    const char *name = sl->progs[i]->name;
    if (v->debug >= 1) log_msg(&v->base.log, TVK_LOG_INFO, "tvk: VK kernel %s: %.3f ms", name, ms);
    if (!v->base.on_time) continue;
    double start = base + (double)from * period;
    LaunchTime lt = {name, sl->progs[i], ms, (int64_t)start,
                     (int64_t)(start + (double)ticks * period)};
    v->base.on_time(v->base.time_user, &lt);
  }
  free(t);
}

/* The slot's work is done: report timings and make it free again. A batch's
 * pools are reset here, so a finished batch holds no descriptor sets; a
 * graph keeps its commands and sets for the next submission. */
static tvk_status slot_complete(VkDev *v, VkSlot *sl, bool report) {
  if (report && sl->queries && sl->ndispatch > 0) report_timings(v, sl);
  if (sl->serial > v->serial_done) v->serial_done = sl->serial;
  sl->serial = 0;
  bool submitted = sl->submitted;
  sl->submitted = false;
  VkResult r = submitted ? v->vk.vkResetFences(v->device, 1, &sl->fence) : VK_SUCCESS;
  if (sl->kept) return r == VK_SUCCESS ? TVK_OK : vk_check(v, r, "vkResetFences");
  for (size_t i = 0; i < sl->dpool_used + 1 && i < sl->ndpools; i++)
    v->vk.vkResetDescriptorPool(v->device, sl->dpools[i], 0);
  sl->dpool_used = 0;
  sl->ndispatch = 0;
  if (r == VK_SUCCESS) r = v->vk.vkResetCommandPool(v->device, sl->pool, 0);
  return r == VK_SUCCESS ? TVK_OK : vk_check(v, r, "vkResetCommandPool");
}

/* The submitted slot (of a batch or a graph) with the smallest serial, not
 * above `upto`; NULL if none. */
static VkSlot *oldest_submitted(VkDispatchState *s, uint64_t upto) {
  VkSlot *best = NULL;
  for (int i = 0; i < VK_SLOTS; i++) {
    VkSlot *sl = &s->slots[i];
    if (sl->submitted && sl->serial <= upto && (!best || sl->serial < best->serial)) best = sl;
  }
  for (DevGraph *g = s->graphs; g; g = g->next) {
    VkSlot *sl = &g->slot;
    if (sl->submitted && sl->serial <= upto && (!best || sl->serial < best->serial)) best = sl;
  }
  return best;
}

static tvk_status wait_slot(VkDev *v, VkSlot *sl) {
  VkResult r = v->vk.vkWaitForFences(v->device, 1, &sl->fence, VK_TRUE, UINT64_MAX);
  if (r != VK_SUCCESS) return vk_check(v, r, "vkWaitForFences");
  return slot_complete(v, sl, true);
}

/* Completes, in order, the submitted batches that are already done. */
static tvk_status poll_done(VkDev *v) {
  VkSlot *sl;
  while ((sl = oldest_submitted(v->dispatch, UINT64_MAX))) {
    VkResult r = v->vk.vkGetFenceStatus(v->device, sl->fence);
    if (r == VK_NOT_READY) return TVK_OK;
    if (r != VK_SUCCESS) return vk_check(v, r, "vkGetFenceStatus");
    tvk_status st = slot_complete(v, sl, true);
    if (st != TVK_OK) return st;
  }
  return TVK_OK;
}

/* ---- recording and submitting ---- */

static void barrier_global(VkDev *v, VkCommandBuffer cmd, VkPipelineStageFlags src,
                           VkAccessFlags src_access, VkPipelineStageFlags dst,
                           VkAccessFlags dst_access) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = src_access,
                        .dstAccessMask = dst_access};
  v->vk.vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* What a command buffer of dispatches opens with: earlier submissions' shader
 * and transfer writes (other batches, graphs, staging copies) made visible to
 * its shaders. */
static void open_barrier(VkDev *v, VkCommandBuffer cmd) {
  barrier_global(v, cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
}

/* What it closes with: the shaders' writes made visible to the host (mapped
 * reads) and to transfers (staging copies, later submissions). */
static void close_barrier(VkDev *v, VkCommandBuffer cmd) {
  barrier_global(v, cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                 VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT);
}

/* Starts a batch in the next slot, first waiting for that slot's previous
 * batch. */
static tvk_status batch_begin(VkDev *v) {
  VkDispatchState *s = v->dispatch;
  tvk_status st = poll_done(v);
  VkSlot *sl = &s->slots[s->next];
  if (st == TVK_OK && sl->submitted) st = wait_slot(v, sl);
  if (st != TVK_OK) return st;
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  VkResult r = v->vk.vkBeginCommandBuffer(sl->cmd, &bi);
  if (r != VK_SUCCESS) return vk_check(v, r, "vkBeginCommandBuffer");
  if (sl->queries) v->vk.vkCmdResetQueryPool(sl->cmd, sl->queries, 0, 2 * VK_BATCH_MAX);
  open_barrier(v, sl->cmd);
  sl->serial = ++v->serial_used;
  sl->ndispatch = 0;
  s->recording = s->next;
  s->next = (s->next + 1) % VK_SLOTS;
  s->bound = VK_NULL_HANDLE;
  haz_clear(s);
  return TVK_OK;
}

/* A batch that could not be submitted never runs: wait for the queue, so the
 * serials stay in order, and call everything done. */
static void batch_abandon(VkDev *v, VkSlot *sl) {
  VkDispatchState *s = v->dispatch;
  (void)v->vk.vkQueueWaitIdle(v->queue);
  for (int i = 0; i < VK_SLOTS; i++)
    if (s->slots[i].submitted && !v->lost) (void)slot_complete(v, &s->slots[i], false);
  for (DevGraph *g = s->graphs; g; g = g->next)
    if (g->slot.submitted && !v->lost) (void)slot_complete(v, &g->slot, false);
  (void)slot_complete(v, sl, false);
  v->serial_done = v->serial_used;
}

/* Ends and submits the recording batch. */
static tvk_status batch_submit(VkDev *v) {
  VkDispatchState *s = v->dispatch;
  if (s->recording < 0) return TVK_OK;
  VkSlot *sl = &s->slots[s->recording];
  s->recording = -1;
  close_barrier(v, sl->cmd);
  VkResult r = v->vk.vkEndCommandBuffer(sl->cmd);
  const char *call = "vkEndCommandBuffer";
  if (r == VK_SUCCESS) {
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &sl->cmd};
    sl->submit_ns = host_ns();
    r = v->vk.vkQueueSubmit(v->queue, 1, &si, sl->fence);
    call = "vkQueueSubmit";
  }
  if (r != VK_SUCCESS) {
    tvk_status st = vk_check(v, r, call);
    batch_abandon(v, sl);
    return st;
  }
  sl->submitted = true;
  s->stats.submits++;
  return TVK_OK;
}

void vk_dispatch_stats(const VkDev *v, VkDispatchStats *out) {
  *out = v->dispatch ? v->dispatch->stats : (VkDispatchStats){0};
}

tvk_status vk_flush(VkDev *v) { return v->dispatch ? batch_submit(v) : TVK_OK; }

tvk_status vk_wait_serial(VkDev *v, uint64_t serial) {
  VkDispatchState *s = v->dispatch;
  if (!s || serial <= v->serial_done) return TVK_OK;
  tvk_status st = vk_alive(v);
  if (st == TVK_OK && s->recording >= 0 && s->slots[s->recording].serial <= serial)
    st = batch_submit(v);
  VkSlot *sl;
  while (st == TVK_OK && (sl = oldest_submitted(s, serial))) st = wait_slot(v, sl);
  return st;
}

tvk_status vk_wait(VkDev *v) { return vk_wait_serial(v, v->serial_used); }

/* ---- launch: checks ---- */

/* Spreads `total` work groups over x, y, z within the device's per-dimension
 * limits (the kernel reconstructs the linear id; see vk_dispatch.h). */
static bool split_groups(const VkDevLimits *l, uint64_t total, uint32_t out[3]) {
  uint64_t x = total < l->max_wg_count[0] ? total : l->max_wg_count[0];
  uint64_t rest = (total + x - 1) / x;
  uint64_t y = rest < l->max_wg_count[1] ? rest : l->max_wg_count[1];
  uint64_t z = (total + x * y - 1) / (x * y);
  if (z > l->max_wg_count[2] || x * y * z > UINT32_MAX) return false;
  out[0] = (uint32_t)x, out[1] = (uint32_t)y, out[2] = (uint32_t)z;
  return true;
}

tvk_status vk_buffer_check_bind(VkDev *v, const DevBuffer *b, int index) {
  if (b->range <= v->lim.max_storage_range) return TVK_OK;
  return err_set(&v->base.err, TVK_ERR_DEVICE,
                 "buffer %d of the launch is %zu bytes, more than one storage-buffer binding "
                 "addresses on %s (maxStorageBufferRange %llu bytes)",
                 index, b->size, v->name, (unsigned long long)v->lim.max_storage_range);
}

static tvk_status check_args(VkDev *v, const DevProgram *p, DevBuffer *const *bufs, int nbufs,
                             const int32_t *vals, int nvals) {
  Device *d = &v->base;
  if (!p || p->owner != v)
    return err_set(&d->err, TVK_ERR_INVALID_ARG, "launch: program is %s",
                   p ? "of another device" : "NULL");
  if (nbufs < 0 || nvals < 0 || (nbufs > 0 && !bufs) || (nvals > 0 && !vals))
    return err_set(&d->err, TVK_ERR_INVALID_ARG,
                   "launch of kernel '%s': bad arguments (nbufs %d, bufs %p, nvals %d, vals %p)",
                   p->name, nbufs, (const void *)bufs, nvals, (const void *)vals);
  if (nbufs < p->nbindings)
    return err_set(&d->err, TVK_ERR_INVALID_ARG,
                   "launch of kernel '%s': %d buffers given, the kernel binds %d", p->name, nbufs,
                   p->nbindings);
  for (int i = 0; i < p->nbindings; i++) {
    if (!p->access[i]) continue;
    if (!bufs[i])
      return err_set(&d->err, TVK_ERR_INVALID_ARG, "launch of kernel '%s': buffer %d is NULL",
                     p->name, i);
    tvk_status st = vk_buffer_check_bind(v, bufs[i], i);
    if (st != TVK_OK) return st;
  }
  uint64_t need = VK_PUSH_VALS_OFFSET + 4 * (uint64_t)nvals;
  if (need > v->lim.max_push_constants)
    return err_set(&d->err, TVK_ERR_INVALID_ARG,
                   "launch of kernel '%s': %d values need %llu bytes of push constants; the "
                   "device holds %u (maxPushConstantsSize)",
                   p->name, nvals, (unsigned long long)need, v->lim.max_push_constants);
  if (p->push_bytes > need)
    return err_set(
        &d->err, TVK_ERR_INVALID_ARG,
        "launch of kernel '%s': its push constants take %u bytes (grid and %u "
        "values), the launch gives %d values",
        p->name, p->push_bytes,
        p->push_bytes > VK_PUSH_VALS_OFFSET ? (p->push_bytes - VK_PUSH_VALS_OFFSET) / 4 : 0, nvals);
  return TVK_OK;
}

/* dims->local must be the shader's local_size; the grid becomes the group
 * counts to dispatch (*total 0: nothing to run). */
static tvk_status check_dims(VkDev *v, const DevProgram *p, const LaunchDims *dims,
                             uint32_t grid[3], uint32_t groups[3], uint64_t *total) {
  Device *d = &v->base;
  const VkDevLimits *l = &v->lim;
  int64_t g[3] = {1, 1, 1};
  if (dims) {
    const int64_t *lc = dims->local;
    if (lc[0] != p->local[0] || lc[1] != p->local[1] || lc[2] != p->local[2])
      return err_set(&d->err, TVK_ERR_INVALID_ARG,
                     "launch of kernel '%s': work-group size %lldx%lldx%lld, but the shader "
                     "declares local_size %ux%ux%u",
                     p->name, (long long)lc[0], (long long)lc[1], (long long)lc[2], p->local[0],
                     p->local[1], p->local[2]);
    memcpy(g, dims->global, sizeof g);
  }
  uint64_t t = 1;
  for (int i = 0; i < 3; i++) {
    if (g[i] < 0 || g[i] > UINT32_MAX)
      return err_set(&d->err, TVK_ERR_INVALID_ARG,
                     "launch of kernel '%s': group count %lld in "
                     "dimension %d",
                     p->name, (long long)g[i], i);
    grid[i] = (uint32_t)g[i];
    t = t > UINT32_MAX ? t : t * (uint64_t)g[i];
  }
  *total = t;
  if (t == 0) return TVK_OK;
  bool fits = grid[0] <= l->max_wg_count[0] && grid[1] <= l->max_wg_count[1] &&
              grid[2] <= l->max_wg_count[2];
  if (fits && t <= UINT32_MAX) {
    memcpy(groups, grid, 3 * sizeof *groups);
    return TVK_OK;
  }
  /* The kernel computes the linear id and the total in 32-bit uint. */
  if (t > UINT32_MAX || !split_groups(l, t, groups))
    return err_set(&d->err, TVK_ERR_INVALID_ARG,
                   "launch of kernel '%s': %lldx%lldx%lld work groups; at most 2^32-1 in all "
                   "(and maxComputeWorkGroupCount %ux%ux%u)",
                   p->name, (long long)g[0], (long long)g[1], (long long)g[2], l->max_wg_count[0],
                   l->max_wg_count[1], l->max_wg_count[2]);
  return TVK_OK;
}

/* ---- launch: recording ---- */

/* Room for one entry per binding of a launch in each scratch array. */
static bool scratch_reserve(VkDispatchState *s, int n) {
  size_t need = (size_t)n;
  return VEC_RESERVE(s->infos, s->infos_cap, need) && VEC_RESERVE(s->writes, s->writes_cap, need) &&
         VEC_RESERVE(s->barriers, s->barriers_cap, need);
}

/* Records the barrier this dispatch needs against earlier ones of the batch
 * (none when it touches nothing they wrote and writes nothing they touched),
 * then notes its own accesses. Hazards per buffer:
 *   read after write, write after write -> barrier: shader write -> read/write
 *   write after read                    -> execution dependency (same barrier)
 * A barrier orders all earlier dispatches, so reads before it are settled;
 * writes stay pending until a barrier names their buffer. */
static tvk_status record_hazards(VkDev *v, VkCommandBuffer cmd, const DevProgram *p,
                                 DevBuffer *const *bufs) {
  VkDispatchState *s = v->dispatch;
  uint32_t nb = 0;
  for (int i = 0; i < p->nbindings; i++) {
    uint8_t a = p->access[i];
    Hazard *h = a ? haz_find(s, bufs[i]) : NULL;
    if (!h) continue;
    bool raw_waw = h->write_pending;
    bool war = (a & VKACC_WRITE) && h->read_epoch == s->epoch + 1;
    if (!raw_waw && !war) continue;
    bool listed = false;
    for (uint32_t k = 0; k < nb; k++)
      listed |=
          s->barriers[k].buffer == bufs[i]->buffer && s->barriers[k].offset == bufs[i]->offset;
    if (!listed)
      s->barriers[nb++] = (VkBufferMemoryBarrier){
          .sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER,
          .srcAccessMask = raw_waw ? VK_ACCESS_SHADER_WRITE_BIT : 0,
          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
          .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
          .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
          .buffer = bufs[i]->buffer,
          .offset = bufs[i]->offset,
          .size = bufs[i]->range};
    h->write_pending = false;
  }
  if (nb > 0) {
    v->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                               VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 0, NULL, nb, s->barriers, 0,
                               NULL);
    s->epoch++;
    s->stats.barriers++;
  }
  for (int i = 0; i < p->nbindings; i++) {
    uint8_t a = p->access[i];
    if (!a) continue;
    Hazard *h = haz_get(s, bufs[i]);
    if (!h) return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "launch: out of memory");
    if (a & VKACC_READ) h->read_epoch = s->epoch + 1;
    if (a & VKACC_WRITE) h->write_pending = true;
  }
  return TVK_OK;
}

/* A descriptor set from the slot's pools, making a pool when they are full. */
static tvk_status alloc_set(VkDev *v, VkSlot *sl, const DevProgram *p, VkDescriptorSet *out) {
  for (;;) {
    if (sl->dpool_used == sl->ndpools) {
      if (!VEC_RESERVE(sl->dpools, sl->capdpools, sl->ndpools + 1))
        return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "launch: out of memory");
      uint32_t nbuf = VK_POOL_BUFFERS > p->nbindings ? VK_POOL_BUFFERS : (uint32_t)p->nbindings;
      VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, nbuf};
      VkDescriptorPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                       .maxSets = VK_POOL_SETS,
                                       .poolSizeCount = 1,
                                       .pPoolSizes = &size};
      VkResult r = v->vk.vkCreateDescriptorPool(v->device, &ci, NULL, &sl->dpools[sl->ndpools]);
      if (r != VK_SUCCESS) return vk_check(v, r, "vkCreateDescriptorPool");
      sl->ndpools++;
    }
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = sl->dpools[sl->dpool_used],
                                      .descriptorSetCount = 1,
                                      .pSetLayouts = &p->set_layout};
    VkResult r = v->vk.vkAllocateDescriptorSets(v->device, &ai, out);
    if (r == VK_SUCCESS) return TVK_OK;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
      return vk_check(v, r, "vkAllocateDescriptorSets");
    sl->dpool_used++; /* this pool is full for the rest of the batch */
  }
}

static tvk_status bind_buffers(VkDev *v, VkSlot *sl, const DevProgram *p, DevBuffer *const *bufs) {
  VkDispatchState *s = v->dispatch;
  uint32_t n = 0;
  for (int i = 0; i < p->nbindings; i++) {
    if (!p->access[i]) continue;
    s->infos[n] = (VkDescriptorBufferInfo){bufs[i]->buffer, bufs[i]->offset, bufs[i]->range};
    s->writes[n] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                          .dstBinding = (uint32_t)i,
                                          .descriptorCount = 1,
                                          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          .pBufferInfo = &s->infos[n]};
    n++;
  }
  if (n == 0) return TVK_OK;
  if (p->push_descriptors) {
    v->vk.vkCmdPushDescriptorSetKHR(sl->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, n,
                                    s->writes);
    return TVK_OK;
  }
  VkDescriptorSet set;
  tvk_status st = alloc_set(v, sl, p, &set);
  if (st != TVK_OK) return st;
  for (uint32_t k = 0; k < n; k++) s->writes[k].dstSet = set;
  v->vk.vkUpdateDescriptorSets(v->device, n, s->writes, 0, NULL);
  v->vk.vkCmdBindDescriptorSets(sl->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0,
                                NULL);
  return TVK_OK;
}

/* The push-constant block: the grid, then the values, zero-padded to the size
 * the shader declares. */
static void push_constants(VkDev *v, VkSlot *sl, const DevProgram *p, const uint32_t grid[3],
                           const int32_t *vals, int nvals) {
  if (p->push_bytes == 0) return;
  uint8_t *b = v->dispatch->push;
  memset(b, 0, p->push_bytes);
  memcpy(b, grid, VK_PUSH_VALS_OFFSET);
  size_t nv = (size_t)nvals * 4, room = p->push_bytes - VK_PUSH_VALS_OFFSET;
  if (p->push_bytes > VK_PUSH_VALS_OFFSET && nv > 0)
    memcpy(b + VK_PUSH_VALS_OFFSET, vals, nv < room ? nv : room);
  v->vk.vkCmdPushConstants(sl->cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_bytes, b);
}

/* Records one checked dispatch into sl, with the barrier it needs against the
 * earlier ones of the same command buffer. */
static tvk_status record_dispatch(VkDev *v, VkSlot *sl, DevProgram *p, DevBuffer *const *bufs,
                                  const uint32_t grid[3], const uint32_t groups[3],
                                  const int32_t *vals, int nvals) {
  VkDispatchState *s = v->dispatch;
  if (!scratch_reserve(s, p->nbindings))
    return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "launch: out of memory");
  tvk_status st = record_hazards(v, sl->cmd, p, bufs);
  if (st == TVK_OK && s->bound != p->pipeline) {
    v->vk.vkCmdBindPipeline(sl->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    s->bound = p->pipeline;
  }
  if (st == TVK_OK) st = bind_buffers(v, sl, p, bufs);
  if (st != TVK_OK) return st;
  push_constants(v, sl, p, grid, vals, nvals);
  uint32_t q = 2u * (uint32_t)sl->ndispatch;
  if (sl->queries)
    v->vk.vkCmdWriteTimestamp(sl->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, sl->queries, q);
  v->vk.vkCmdDispatch(sl->cmd, groups[0], groups[1], groups[2]);
  if (sl->queries)
    v->vk.vkCmdWriteTimestamp(sl->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, sl->queries, q + 1);
  sl->progs[sl->ndispatch++] = p;
  return TVK_OK;
}

tvk_status vk_launch(Device *d, DevProgram *p, DevBuffer *const *bufs, int nbufs,
                     const int32_t *vals, int nvals, const LaunchDims *dims) {
  VkDev *v = vk_of(d);
  VkDispatchState *s = v->dispatch;
  uint32_t grid[3] = {0}, groups[3] = {0};
  uint64_t total;
  tvk_status st = check_args(v, p, bufs, nbufs, vals, nvals);
  if (st == TVK_OK) st = check_dims(v, p, dims, grid, groups, &total);
  if (st != TVK_OK || total == 0) return st;
  if (s->recording < 0 && (st = batch_begin(v)) != TVK_OK) return st;
  VkSlot *sl = &s->slots[s->recording];
  if ((st = record_dispatch(v, sl, p, bufs, grid, groups, vals, nvals)) != TVK_OK) return st;
  s->stats.dispatches++;
  p->serial = sl->serial;
  return sl->ndispatch == VK_BATCH_MAX ? batch_submit(v) : TVK_OK;
}

/* ---- graphs: a command buffer recorded once, submitted again ---- */

static void graph_destroy(VkDev *v, DevGraph *g) {
  VkDispatchState *s = v->dispatch;
  if (g->prev)
    g->prev->next = g->next;
  else
    s->graphs = g->next;
  if (g->next) g->next->prev = g->prev;
  slot_destroy(v, &g->slot);
  free(g);
}

/* The launches checked and recorded as vk_launch would record them into one
 * batch, with the same barriers, but into a command buffer of the graph's own
 * that is never reset: push descriptors and push constants are recorded in it,
 * descriptor sets come from its own pools. */
tvk_status vk_graph_create(Device *d, const DevLaunch *l, int n, DevGraph **out) {
  VkDev *v = vk_of(d);
  VkDispatchState *s = v->dispatch;
  *out = NULL;
  if (n < 0 || (n > 0 && !l))
    return err_set(&d->err, TVK_ERR_INVALID_ARG, "graph: bad arguments (%d launches at %p)", n,
                   (const void *)l);
  /* the hazard state is the recording batch's: that batch goes first */
  tvk_status st = batch_submit(v);
  if (st != TVK_OK) return st;
  DevGraph *g = calloc(1, sizeof *g);
  if (!g) return err_set(&d->err, TVK_ERR_OUT_OF_MEMORY, "graph: out of memory");
  g->next = s->graphs;
  if (s->graphs) s->graphs->prev = g;
  s->graphs = g;
  VkSlot *sl = &g->slot;
  st = slot_init(v, s, sl, n, true);
  if (st == TVK_OK) {
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    VkResult r = v->vk.vkBeginCommandBuffer(sl->cmd, &bi);
    if (r != VK_SUCCESS) st = vk_check(v, r, "vkBeginCommandBuffer");
  }
  if (st == TVK_OK) {
    if (sl->queries) v->vk.vkCmdResetQueryPool(sl->cmd, sl->queries, 0, 2u * (uint32_t)(n ? n : 1));
    open_barrier(v, sl->cmd);
    haz_clear(s);
    s->bound = VK_NULL_HANDLE;
  }
  for (int i = 0; i < n && st == TVK_OK; i++) {
    uint32_t grid[3] = {0}, groups[3] = {0};
    uint64_t total;
    st = check_args(v, l[i].prog, l[i].bufs, l[i].nbufs, l[i].vals, l[i].nvals);
    if (st == TVK_OK) st = check_dims(v, l[i].prog, l[i].dims, grid, groups, &total);
    if (st == TVK_OK && total > 0)
      st = record_dispatch(v, sl, l[i].prog, l[i].bufs, grid, groups, l[i].vals, l[i].nvals);
  }
  if (st == TVK_OK) {
    close_barrier(v, sl->cmd);
    VkResult r = v->vk.vkEndCommandBuffer(sl->cmd);
    if (r != VK_SUCCESS) st = vk_check(v, r, "vkEndCommandBuffer");
  }
  haz_clear(s);
  s->bound = VK_NULL_HANDLE;
  if (st != TVK_OK) {
    graph_destroy(v, g);
    return st;
  }
  *out = g;
  return TVK_OK;
}

/* Submits the graph after the batch being recorded, once its previous run is
 * complete (its command buffer is not made for simultaneous use). */
tvk_status vk_graph_launch(Device *d, DevGraph *g) {
  VkDev *v = vk_of(d);
  VkDispatchState *s = v->dispatch;
  if (!g) return err_set(&d->err, TVK_ERR_INVALID_ARG, "graph: launch of a NULL graph");
  VkSlot *sl = &g->slot;
  tvk_status st = batch_submit(v);
  if (st == TVK_OK && sl->submitted) st = vk_wait_serial(v, sl->serial);
  if (st != TVK_OK || sl->ndispatch == 0) return st;
  sl->serial = ++v->serial_used;
  VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &sl->cmd};
  sl->submit_ns = host_ns();
  VkResult r = v->vk.vkQueueSubmit(v->queue, 1, &si, sl->fence);
  if (r != VK_SUCCESS) {
    st = vk_check(v, r, "vkQueueSubmit");
    batch_abandon(v, sl);
    return st;
  }
  sl->submitted = true;
  s->stats.submits++;
  s->stats.dispatches += (uint64_t)sl->ndispatch;
  for (int i = 0; i < sl->ndispatch; i++) sl->progs[i]->serial = sl->serial;
  return TVK_OK;
}

void vk_graph_free(Device *d, DevGraph *g) {
  if (!g) return;
  VkDev *v = vk_of(d);
  if (g->slot.submitted) (void)vk_wait_serial(v, g->slot.serial);
  if (g->slot.submitted) { /* the wait failed (a lost device): the queue idles first */
    (void)v->vk.vkQueueWaitIdle(v->queue);
    (void)slot_complete(v, &g->slot, false);
  }
  graph_destroy(v, g);
}
