/* Per program: the interface read from the SPIR-V, the shader module, the
 * descriptor set layout, the pipeline layout and the compute pipeline; and the
 * device's VkPipelineCache, loaded at creation and saved at destroy. See
 * docs/vulkan.md ("Pipelines"). */
#include "vk_pipeline.h"

#include <pthread.h>

#include <shaderc/shaderc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cache.h"

/* ---- reading the SPIR-V interface ----
 *
 * Only what a pipeline needs: storage-buffer bindings and whether each is
 * written, the push-constant block's size, and local_size. The numbers are the
 * SPIR-V specification's (opcodes, decorations, storage classes). */

enum {
  SPV_OP_EXECUTION_MODE = 16,
  SPV_OP_CAPABILITY = 17,
  SPV_OP_TYPE_INT = 21,
  SPV_OP_TYPE_FLOAT = 22,
  SPV_OP_TYPE_VECTOR = 23,
  SPV_OP_TYPE_MATRIX = 24,
  SPV_OP_TYPE_ARRAY = 28,
  SPV_OP_TYPE_STRUCT = 30,
  SPV_OP_TYPE_POINTER = 32,
  SPV_OP_CONSTANT = 43,
  SPV_OP_VARIABLE = 59,
  SPV_OP_DECORATE = 71,
  SPV_OP_MEMBER_DECORATE = 72,
  SPV_OP_EXECUTION_MODE_ID = 331,
};
enum { SPV_MODE_LOCAL_SIZE = 17, SPV_MODE_LOCAL_SIZE_ID = 38 };
enum { SPV_CAP_GROUP_NON_UNIFORM = 61 };
enum {
  SPV_DEC_BLOCK = 2,
  SPV_DEC_BUFFER_BLOCK = 3,
  SPV_DEC_ARRAY_STRIDE = 6,
  SPV_DEC_NON_WRITABLE = 24,
  SPV_DEC_NON_READABLE = 25,
  SPV_DEC_BINDING = 33,
  SPV_DEC_DESCRIPTOR_SET = 34,
  SPV_DEC_OFFSET = 35,
};
enum { SPV_SC_UNIFORM = 2, SPV_SC_PUSH_CONSTANT = 9, SPV_SC_STORAGE_BUFFER = 12 };

enum { ID_NON_WRITABLE = 1, ID_NON_READABLE = 2, ID_BLOCK = 4, ID_BUFFER_BLOCK = 8 };

/* What one result id is, as far as we care. */
typedef struct {
  const uint32_t *inst;  /* the instruction that defines it (types, constants, variables) */
  uint32_t binding, set; /* decorations; UINT32_MAX when absent */
  uint32_t array_stride; /* 0 when absent */
  uint32_t members;      /* structs: member count */
  uint32_t members_nw;   /* structs: members decorated NonWritable */
  uint32_t members_nr;   /* structs: members decorated NonReadable */
  uint8_t flags;         /* ID_* */
} SpvId;

typedef struct {
  const uint32_t *w;
  size_t n;
  uint32_t bound;
  SpvId *ids;
} Spv;

static uint32_t op_of(uint32_t w) { return w & 0xffffu; }
static uint32_t len_of(uint32_t w) { return w >> 16; }

static SpvId *spv_id(const Spv *s, uint32_t id) { return id < s->bound ? &s->ids[id] : NULL; }

/* Every instruction's word count is nonzero and stays inside the module. */
static bool spv_valid_stream(const Spv *s) {
  for (size_t i = 5; i < s->n;) {
    uint32_t len = len_of(s->w[i]);
    if (len == 0 || len > s->n - i) return false;
    i += len;
  }
  return true;
}

static void note_decoration(SpvId *t, const uint32_t *in, uint32_t len) {
  uint32_t dec = in[2], lit = len > 3 ? in[3] : 0;
  if (dec == SPV_DEC_BINDING) t->binding = lit;
  if (dec == SPV_DEC_DESCRIPTOR_SET) t->set = lit;
  if (dec == SPV_DEC_ARRAY_STRIDE) t->array_stride = lit;
  if (dec == SPV_DEC_NON_WRITABLE) t->flags |= ID_NON_WRITABLE;
  if (dec == SPV_DEC_NON_READABLE) t->flags |= ID_NON_READABLE;
  if (dec == SPV_DEC_BLOCK) t->flags |= ID_BLOCK;
  if (dec == SPV_DEC_BUFFER_BLOCK) t->flags |= ID_BUFFER_BLOCK;
}

/* First pass: definitions and id-level decorations. */
static void spv_index(Spv *s) {
  for (size_t i = 5; i < s->n; i += len_of(s->w[i])) {
    const uint32_t *in = &s->w[i];
    uint32_t op = op_of(in[0]), len = len_of(in[0]);
    SpvId *t;
    if (op == SPV_OP_DECORATE && len >= 3 && (t = spv_id(s, in[1]))) note_decoration(t, in, len);
    if ((op >= SPV_OP_TYPE_INT && op <= SPV_OP_TYPE_POINTER) && len >= 2 &&
        (t = spv_id(s, in[1]))) {
      t->inst = in;
      if (op == SPV_OP_TYPE_STRUCT) t->members = len - 2;
    }
    if ((op == SPV_OP_CONSTANT || op == SPV_OP_VARIABLE) && len >= 4 && (t = spv_id(s, in[2])))
      t->inst = in;
  }
}

/* The value of an integer OpConstant; false if id is not one. */
static bool spv_const(const Spv *s, uint32_t id, uint32_t *out) {
  const SpvId *t = spv_id(s, id);
  if (!t || !t->inst || op_of(t->inst[0]) != SPV_OP_CONSTANT) return false;
  *out = t->inst[3];
  return true;
}

/* Byte size of a type as laid out in a push-constant block (std430: the
 * ArrayStride decorations say the array strides). 0 for what we cannot size. */
static uint64_t spv_size(const Spv *s, uint32_t type, int depth) {
  const SpvId *t = spv_id(s, type);
  if (!t || !t->inst || depth > 16) return 0;
  const uint32_t *in = t->inst;
  uint32_t n = 0;
  switch (op_of(in[0])) {
  case SPV_OP_TYPE_INT:
  case SPV_OP_TYPE_FLOAT: return in[2] / 8;
  case SPV_OP_TYPE_VECTOR:
  case SPV_OP_TYPE_MATRIX: return (uint64_t)in[3] * spv_size(s, in[2], depth + 1);
  case SPV_OP_TYPE_ARRAY:
    if (!spv_const(s, in[3], &n)) return 0;
    return (uint64_t)n * (t->array_stride ? t->array_stride : spv_size(s, in[2], depth + 1));
  default: return 0;
  }
}

/* Second pass: member decorations. Struct sizes come from Offset + member
 * size, so this needs the types of the first pass. `push_struct` is the
 * push-constant block's type (0: none); its size goes to *push_bytes. */
static void spv_members(Spv *s, uint32_t push_struct, uint64_t *push_bytes) {
  for (size_t i = 5; i < s->n; i += len_of(s->w[i])) {
    const uint32_t *in = &s->w[i];
    if (op_of(in[0]) != SPV_OP_MEMBER_DECORATE || len_of(in[0]) < 4) continue;
    SpvId *t = spv_id(s, in[1]);
    if (!t || !t->inst || op_of(t->inst[0]) != SPV_OP_TYPE_STRUCT || in[2] >= t->members) continue;
    if (in[3] == SPV_DEC_NON_WRITABLE) t->members_nw++;
    if (in[3] == SPV_DEC_NON_READABLE) t->members_nr++;
    if (in[3] == SPV_DEC_OFFSET && len_of(in[0]) >= 5 && in[1] == push_struct) {
      uint64_t end = in[4] + spv_size(s, t->inst[2 + in[2]], 0);
      if (end > *push_bytes) *push_bytes = end;
    }
  }
}

/* The struct a variable points to (0 if it is not a pointer to a struct). */
static uint32_t pointee_struct(const Spv *s, const SpvId *var) {
  const SpvId *ptr = spv_id(s, var->inst[1]);
  if (!ptr || !ptr->inst || op_of(ptr->inst[0]) != SPV_OP_TYPE_POINTER) return 0;
  const SpvId *st = spv_id(s, ptr->inst[3]);
  return st && st->inst && op_of(st->inst[0]) == SPV_OP_TYPE_STRUCT ? ptr->inst[3] : 0;
}

static bool is_storage_buffer(const Spv *s, const SpvId *var) {
  uint32_t sc = var->inst[3], st = pointee_struct(s, var);
  if (sc == SPV_SC_STORAGE_BUFFER) return true;
  return sc == SPV_SC_UNIFORM && st && (s->ids[st].flags & ID_BUFFER_BLOCK);
}

static uint8_t access_of(const Spv *s, const SpvId *var) {
  uint32_t st = pointee_struct(s, var);
  const SpvId *t = st ? &s->ids[st] : NULL;
  bool nw = (var->flags & ID_NON_WRITABLE) || (t && t->members && t->members_nw == t->members);
  bool nr = (var->flags & ID_NON_READABLE) || (t && t->members && t->members_nr == t->members);
  uint8_t a = (uint8_t)((nr ? 0 : VKACC_READ) | (nw ? 0 : VKACC_WRITE));
  return a ? a : VKACC_READ; /* declared but neither: bound, tracked as a read */
}

/* local_size from OpExecutionMode LocalSize or OpExecutionMode(Id) LocalSizeId. */
static bool spv_local_size(const Spv *s, uint32_t out[3]) {
  for (size_t i = 5; i < s->n; i += len_of(s->w[i])) {
    const uint32_t *in = &s->w[i];
    uint32_t op = op_of(in[0]), len = len_of(in[0]);
    if ((op != SPV_OP_EXECUTION_MODE && op != SPV_OP_EXECUTION_MODE_ID) || len < 6) continue;
    if (in[2] == SPV_MODE_LOCAL_SIZE) {
      memcpy(out, &in[3], 3 * sizeof *out);
      return true;
    }
    if (in[2] == SPV_MODE_LOCAL_SIZE_ID)
      return spv_const(s, in[3], &out[0]) && spv_const(s, in[4], &out[1]) &&
             spv_const(s, in[5], &out[2]);
  }
  return false;
}

/* Whether the module declares the GroupNonUniform capability (any subgroup
 * operation or built-in). */
static bool spv_subgroups(const Spv *s) {
  for (size_t i = 5; i < s->n; i += len_of(s->w[i])) {
    const uint32_t *in = &s->w[i];
    if (op_of(in[0]) == SPV_OP_CAPABILITY && len_of(in[0]) >= 2 &&
        in[1] == SPV_CAP_GROUP_NON_UNIFORM)
      return true;
  }
  return false;
}

/* Finds the buffers (into p->nbindings / p->access) and the push block size. */
static tvk_status reflect_interface(DevProgram *p, Spv *s, Error *err) {
  uint32_t push_struct = 0, maxb = 0;
  bool any = false;
  for (uint32_t id = 0; id < s->bound; id++) {
    const SpvId *t = &s->ids[id];
    if (!t->inst || op_of(t->inst[0]) != SPV_OP_VARIABLE) continue;
    if (t->inst[3] == SPV_SC_PUSH_CONSTANT) push_struct = pointee_struct(s, t);
    if (t->inst[3] == SPV_SC_UNIFORM && !is_storage_buffer(s, t))
      return err_set(err, TVK_ERR_COMPILE,
                     "kernel '%s' declares a uniform buffer; tvk binds storage buffers only",
                     p->name);
    if (!is_storage_buffer(s, t)) continue;
    if (t->set != 0 && t->set != UINT32_MAX)
      return err_set(err, TVK_ERR_COMPILE,
                     "kernel '%s' uses descriptor set %u; tvk binds set 0 only", p->name, t->set);
    if (t->binding == UINT32_MAX || t->binding >= 4096)
      return err_set(err, TVK_ERR_COMPILE,
                     "kernel '%s' has a storage buffer without a usable binding number", p->name);
    any = true;
    if (t->binding > maxb) maxb = t->binding;
  }
  uint64_t push = 0;
  spv_members(s, push_struct, &push);
  p->push_bytes = (uint32_t)((push + 3) & ~UINT64_C(3));
  p->nbindings = any ? (int)maxb + 1 : 0;
  p->access = calloc(p->nbindings ? (size_t)p->nbindings : 1, 1);
  if (!p->access)
    return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory for kernel '%s'", p->name);
  for (uint32_t id = 0; id < s->bound; id++) {
    const SpvId *t = &s->ids[id];
    if (t->inst && op_of(t->inst[0]) == SPV_OP_VARIABLE && is_storage_buffer(s, t))
      p->access[t->binding] |= access_of(s, t);
  }
  return TVK_OK;
}

static tvk_status reflect(DevProgram *p, const uint32_t *w, size_t n, Error *err) {
  Spv s = {.w = w, .n = n};
  if (n < 5 || w[0] != 0x07230203 || w[3] == 0 || w[3] > (1u << 22) || !spv_valid_stream(&s))
    return err_set(err, TVK_ERR_COMPILE, "kernel '%s': malformed SPIR-V", p->name);
  s.bound = w[3];
  s.ids = malloc(s.bound * sizeof *s.ids);
  if (!s.ids) return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory for kernel '%s'", p->name);
  for (uint32_t i = 0; i < s.bound; i++)
    s.ids[i] = (SpvId){.binding = UINT32_MAX, .set = UINT32_MAX};
  spv_index(&s);
  tvk_status st = reflect_interface(p, &s, err);
  if (st == TVK_OK && !spv_local_size(&s, p->local))
    st = err_set(err, TVK_ERR_COMPILE, "kernel '%s' declares no local_size", p->name);
  p->subgroups = spv_subgroups(&s);
  free(s.ids);
  return st;
}

/* ---- limits ---- */

static tvk_status check_limits(VkDev *v, const DevProgram *p, Error *err) {
  const VkDevLimits *l = &v->lim;
  const uint32_t *ls = p->local;
  uint64_t inv = (uint64_t)ls[0] * ls[1] * ls[2];
  if (ls[0] > l->max_wg_size[0] || ls[1] > l->max_wg_size[1] || ls[2] > l->max_wg_size[2] ||
      inv > l->max_wg_invocations || inv == 0)
    return err_set(err, TVK_ERR_COMPILE,
                   "kernel '%s': local_size %ux%ux%u does not fit the device "
                   "(maxComputeWorkGroupSize %ux%ux%u, maxComputeWorkGroupInvocations %u)",
                   p->name, ls[0], ls[1], ls[2], l->max_wg_size[0], l->max_wg_size[1],
                   l->max_wg_size[2], l->max_wg_invocations);
  int declared = 0;
  for (int i = 0; i < p->nbindings; i++) declared += p->access[i] != 0;
  if ((uint32_t)declared > l->max_storage_buffers)
    return err_set(err, TVK_ERR_COMPILE,
                   "kernel '%s' binds %d storage buffers; the device allows %u per stage "
                   "(maxPerStageDescriptorStorageBuffers)",
                   p->name, declared, l->max_storage_buffers);
  if (p->push_bytes > l->max_push_constants)
    return err_set(err, TVK_ERR_COMPILE,
                   "kernel '%s' declares %u bytes of push constants; the device holds %u "
                   "(maxPushConstantsSize)",
                   p->name, p->push_bytes, l->max_push_constants);
  return TVK_OK;
}

/* ---- Vulkan objects ---- */

static tvk_status make_layouts(VkDev *v, DevProgram *p, Error *err) {
  VkDescriptorSetLayoutBinding *b = calloc(p->nbindings ? (size_t)p->nbindings : 1, sizeof *b);
  if (!b) return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory for kernel '%s'", p->name);
  uint32_t n = 0;
  for (int i = 0; i < p->nbindings; i++) {
    if (!p->access[i]) continue;
    b[n++] = (VkDescriptorSetLayoutBinding){.binding = (uint32_t)i,
                                            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                            .descriptorCount = 1,
                                            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  }
  p->push_descriptors = (v->features & VKFEAT_PUSH_DESCRIPTOR) && v->vk.vkCmdPushDescriptorSetKHR &&
                        n <= v->lim.max_push_descriptors;
  VkDescriptorSetLayoutCreateInfo dci = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .flags = p->push_descriptors ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0,
      .bindingCount = n,
      .pBindings = b};
  VkResult r = v->vk.vkCreateDescriptorSetLayout(v->device, &dci, NULL, &p->set_layout);
  free(b);
  if (r != VK_SUCCESS) return vk_check_to(v, err, r, "vkCreateDescriptorSetLayout");
  VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = p->push_bytes};
  VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                    .setLayoutCount = 1,
                                    .pSetLayouts = &p->set_layout,
                                    .pushConstantRangeCount = p->push_bytes ? 1 : 0,
                                    .pPushConstantRanges = &pr};
  r = v->vk.vkCreatePipelineLayout(v->device, &lci, NULL, &p->layout);
  return r == VK_SUCCESS ? TVK_OK : vk_check_to(v, err, r, "vkCreatePipelineLayout");
}

static tvk_status make_pipeline(VkDev *v, DevProgram *p, const uint32_t *spirv, size_t nwords,
                                Error *err) {
  VkShaderModuleCreateInfo mci = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = nwords * 4, .pCode = spirv};
  VkResult r = v->vk.vkCreateShaderModule(v->device, &mci, NULL, &p->module);
  if (r != VK_SUCCESS) return vk_check_to(v, err, r, "vkCreateShaderModule");
  /* A kernel that uses subgroups runs on full ones where the device can
   * promise it and its work group's width is a multiple of the subgroup:
   * tvk's combines index subgroups as subgroup_id * S + subgroup_lane. */
  bool full = p->subgroups && (v->features & VKFEAT_FULL_SUBGROUPS) && v->lim.subgroup_size &&
              p->local[0] % v->lim.subgroup_size == 0;
  VkComputePipelineCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .flags = full ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT : 0,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = p->module,
                .pName = "main"},
      .layout = p->layout};
  VkPipelineState *ps = v->pipelines;
  r = v->vk.vkCreateComputePipelines(v->device, ps->cache, 1, &ci, NULL, &p->pipeline);
  if (r != VK_SUCCESS) return vk_check_to(v, err, r, "vkCreateComputePipelines");
  pthread_mutex_lock(&ps->mu);
  ps->cache_dirty = true;
  pthread_mutex_unlock(&ps->mu);
  return TVK_OK;
}

tvk_status vk_pipeline_build(VkDev *v, DevProgram *p, const uint32_t *spirv, size_t nwords,
                             Error *err) {
  tvk_status st = reflect(p, spirv, nwords, err);
  if (st == TVK_OK) st = check_limits(v, p, err);
  if (st == TVK_OK) st = make_layouts(v, p, err);
  if (st == TVK_OK) st = make_pipeline(v, p, spirv, nwords, err);
  return st;
}

void vk_pipeline_release(VkDev *v, DevProgram *p) {
  if (!p) return;
  if (p->pipeline) v->vk.vkDestroyPipeline(v->device, p->pipeline, NULL);
  if (p->layout) v->vk.vkDestroyPipelineLayout(v->device, p->layout, NULL);
  if (p->set_layout) v->vk.vkDestroyDescriptorSetLayout(v->device, p->set_layout, NULL);
  if (p->module) v->vk.vkDestroyShaderModule(v->device, p->module, NULL);
  free(p->access);
  free(p->name);
  free(p);
}

/* ---- the cache directory and the VkPipelineCache ---- */

tvk_status vk_cache_dir(VkDev *v, const char **dir) {
  VkPipelineState *ps = v->pipelines;
  *dir = NULL;
  if (v->no_disk_cache || ps->no_dir) return TVK_OK;
  if (!ps->cache_dir) {
    const char *req = v->cache_dir ? v->cache_dir : getenv("TVK_CACHE_DIR");
    tvk_status st = cache_dir_open(req, cache_readonly_wanted(v->cache_readonly), &ps->cache_dir,
                                   &ps->cache_ro, &v->base.err);
    if (st == TVK_ERR_OUT_OF_MEMORY) return st;
    if (st != TVK_OK) { /* Vulkan compiles in-process: a missing disk costs only time */
      log_msg(&v->base.log, TVK_LOG_WARN,
              "tvk: %s; Vulkan kernels are compiled in memory, without a disk cache",
              v->base.err.msg);
      err_clear(&v->base.err);
      ps->no_dir = true;
      return TVK_OK;
    }
  }
  *dir = ps->cache_dir;
  return TVK_OK;
}

/* The header every pipeline cache blob starts with (VkPipelineCacheHeaderVersionOne).
 * Data made by another driver, device or driver version is dropped here rather
 * than trusted to the driver's own check. */
static bool cache_data_matches(const VkDev *v, const uint8_t *d, size_t n) {
  uint32_t hdr[4];
  if (n < 16 + VK_UUID_SIZE) return false;
  memcpy(hdr, d, sizeof hdr);
  return hdr[0] >= 16 + VK_UUID_SIZE && hdr[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE &&
         hdr[2] == v->props.vendorID && hdr[3] == v->props.deviceID &&
         memcmp(d + 16, v->props.pipelineCacheUUID, VK_UUID_SIZE) == 0;
}

/* <dir>/vk-pipelines-<key>.bin, the key naming the device and driver. */
static char *cache_file_path(const VkDev *v, const char *dir) {
  CacheHash h;
  char key[33], buf[64];
  cache_hash_init(&h);
  cache_hash_field(&h, "tvk-vk-pipelines-v2"); /* v2: the file is sealed */
  snprintf(buf, sizeof buf, "%u:%u:%u", v->props.vendorID, v->props.deviceID,
           v->props.driverVersion);
  cache_hash_field(&h, buf);
  cache_hash_bytes(&h, v->props.pipelineCacheUUID, VK_UUID_SIZE);
  cache_hash_hex(&h, key);
  size_t n = strlen(dir) + 64;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/vk-pipelines-%s.bin", dir, key);
  return p;
}

static void blob_key(const void *data, size_t n, char key[33]) {
  CacheHash h;
  cache_hash_init(&h);
  cache_hash_bytes(&h, data, n);
  cache_hash_hex(&h, key);
}

tvk_status vk_pipeline_init(VkDev *v) {
  VkPipelineState *ps = calloc(1, sizeof *ps);
  if (!ps) return err_set(&v->base.err, TVK_ERR_OUT_OF_MEMORY, "out of memory creating the device");
  pthread_mutex_init(&ps->mu, NULL);
  v->pipelines = ps;
  /* An unusable cache directory is a warning (vk_cache_dir), never an error. */
  const char *dir = NULL;
  void *data = NULL;
  size_t n = 0;
  Error saved = v->base.err;
  if (vk_cache_dir(v, &dir) == TVK_OK && dir) ps->cache_path = cache_file_path(v, dir);
  v->base.err = saved;
  /* The seal drops a file cut short: its header would still match, and data
   * that is not what vkGetPipelineCacheData returned is invalid usage. */
  if (ps->cache_path && cache_file_read_sealed(ps->cache_path, &data, &n) == 0 &&
      !cache_data_matches(v, data, n)) {
    free(data);
    data = NULL;
    n = 0;
  }
  if (data) blob_key(data, n, ps->loaded_key);
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                  .initialDataSize = data ? n : 0,
                                  .pInitialData = data};
  VkResult r = v->vk.vkCreatePipelineCache(v->device, &ci, NULL, &ps->cache);
  if (r != VK_SUCCESS && data) { /* a driver that rejects its own old data: start empty */
    ci.initialDataSize = 0, ci.pInitialData = NULL;
    r = v->vk.vkCreatePipelineCache(v->device, &ci, NULL, &ps->cache);
  }
  free(data);
  return r == VK_SUCCESS ? TVK_OK : vk_check(v, r, "vkCreatePipelineCache");
}

static void save_cache(VkDev *v, VkPipelineState *ps) {
  size_t n = 0;
  if (!ps->cache || !ps->cache_path || !ps->cache_dirty || ps->cache_ro) return;
  if (v->vk.vkGetPipelineCacheData(v->device, ps->cache, &n, NULL) != VK_SUCCESS || n == 0) return;
  void *data = malloc(n);
  VkResult r = data ? v->vk.vkGetPipelineCacheData(v->device, ps->cache, &n, data) : VK_INCOMPLETE;
  char key[33] = "";
  if (r == VK_SUCCESS) blob_key(data, n, key);
  /* Pipelines that all came from the loaded cache leave its data as it was. */
  bool same = r == VK_SUCCESS && strcmp(key, ps->loaded_key) == 0;
  int rc = r == VK_SUCCESS && !same ? cache_file_write_sealed(ps->cache_path, data, n, 0600) : 0;
  if (rc != 0 && v->debug >= 1)
    log_msg(&v->base.log, TVK_LOG_WARN, "tvk: cannot save the pipeline cache '%s': %s",
            ps->cache_path, strerror(rc));
  free(data);
}

void vk_pipeline_cleanup(VkDev *v) {
  VkPipelineState *ps = v->pipelines;
  if (!ps) return;
  while (ps->programs) {
    DevProgram *p = ps->programs;
    ps->programs = p->next;
    vk_pipeline_release(v, p);
  }
  if (!v->lost) save_cache(v, ps);
  if (ps->cache) v->vk.vkDestroyPipelineCache(v->device, ps->cache, NULL);
#ifdef TVK_HAVE_SHADERC
  if (ps->shaderc) shaderc_compiler_release(ps->shaderc);
#endif
  free(ps->cache_dir);
  free(ps->cache_path);
  pthread_mutex_destroy(&ps->mu);
  free(ps);
  v->pipelines = NULL;
}
