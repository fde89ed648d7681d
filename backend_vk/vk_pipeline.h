/* Programs as Vulkan objects (vk_pipeline.c): the interface read from a kernel's
 * SPIR-V, its shader module, layouts and compute pipeline, and the device's
 * VkPipelineCache. Nothing here waits for launches: freeing a program that a
 * pending batch may use is vk_compile.c's (vk_program_free), which waits first. */
#ifndef TVK_BACKEND_VK_PIPELINE_H
#define TVK_BACKEND_VK_PIPELINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vk_core.h"

/* Access of one binding, from the SPIR-V (NonWritable / NonReadable). */
enum { VKACC_READ = 1u << 0, VKACC_WRITE = 1u << 1 };

/* A compiled kernel (vk_compile.c builds it, vk_pipeline.c makes its objects). */
struct DevProgram {
  VkDev *owner;
  DevProgram *prev, *next; /* the device's live programs (VkPipelineState.programs) */
  char *name;
  int nbindings;         /* highest storage-buffer binding of set 0, plus 1 */
  uint8_t *access;       /* per binding: VKACC_* (0: the shader does not declare it) */
  uint32_t push_bytes;   /* size of the push-constant block the shader declares (0: none) */
  uint32_t local[3];     /* the shader's local_size */
  bool subgroups;        /* it declares GroupNonUniform (subgroup operations) */
  bool push_descriptors; /* bound with vkCmdPushDescriptorSetKHR, not a pool's set */
  VkShaderModule module;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  uint64_t serial; /* the newest batch that uses it (program_free waits for it) */
};

/* The shaderc compiler, the cache directory and the VkPipelineCache of a device
 * (v->pipelines), made by vk_pipeline_init when the device is created. */
struct shaderc_compiler;
struct VkPipelineState {
  /* Compiles run on several threads at once (the runtime's): this guards
   * shaderc's creation, shaderc_calls, cache_dirty and the programs list.
   * The cache directory is resolved at init and only read after. */
  pthread_mutex_t mu;
  struct shaderc_compiler *shaderc; /* made at the first cache miss (~200 ms), then kept */
  char *cache_dir;                  /* resolved by vk_pipeline_init; NULL: none */
  bool cache_ro;                    /* cache_dir is only read: nothing is written there */
  bool no_dir; /* no usable directory: kernels are compiled in memory (said once, as a warning) */
  VkPipelineCache cache;
  char *cache_path;    /* the pipeline cache's file; NULL: not saved */
  bool cache_dirty;    /* pipelines were created since it was loaded */
  char loaded_key[33]; /* content hash of the data loaded ("" if none): unchanged data is
                          not written back */
  DevProgram *programs;
  uint64_t shaderc_calls; /* compiles that ran shaderc (tests count cache hits) */
};

/* Creates v->pipelines and loads the VkPipelineCache. On failure leaves what it
 * made for vk_pipeline_cleanup to free. */
tvk_status vk_pipeline_init(VkDev *v);
/* Reads the interface of the SPIR-V (bindings, their access, the push-constant
 * block, local_size), checks it against the device's limits and makes the
 * shader module, layouts and the pipeline into p (p->name set). Failures go
 * to err; calls for different programs may run at once. */
tvk_status vk_pipeline_build(VkDev *v, DevProgram *p, const uint32_t *spirv, size_t nwords,
                             Error *err);
/* Destroys p's Vulkan objects and frees p (not the list links). NULL ok. */
void vk_pipeline_release(VkDev *v, DevProgram *p);
/* The cache directory, opened at the first call (which sets ps->cache_ro).
 * *dir is NULL when there is none: none wanted (no_disk_cache), or none
 * usable, which is said once as a TVK_LOG_WARN and is no error: the kernels
 * are then compiled in memory. Fails only when out of memory. */
tvk_status vk_cache_dir(VkDev *v, const char **dir);
/* Frees every program, pipeline and layout; saves the pipeline cache. Device
 * idle. NULL-safe on v->pipelines. */
void vk_pipeline_cleanup(VkDev *v);

#endif
