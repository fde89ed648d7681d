/* The GLSL 450 language table of the Vulkan backend (vk_glsl.c): what the
 * shared renderer (src/codegen/render.h) needs to write compute shaders for a
 * device with a given set of features. docs/vulkan.md, "GLSL kernels",
 * describes the kernels it makes. */
#ifndef TVK_BACKEND_VK_GLSL_H
#define TVK_BACKEND_VK_GLSL_H

#include <stdint.h>

#include "vk_core.h"

typedef struct Lang Lang; /* codegen/render.h */

/* The table for a device with the VKFEAT_* bits `features` (vk_core.h):
 * 8- and 16-bit elements through the storage extensions where the device has
 * them and packed in 32-bit words where not; int64/uint64 and float64 only with
 * shaderInt64 / shaderFloat64 (without them a kernel using the dtype fails with
 * TVK_ERR_DTYPE naming the feature); 8-wide accesses with VKFEAT_WIDE and
 * shaderInt64. Kernels are to be lowered in grid mode (CG_MODE_GRID). Returns
 * NULL when out of memory; free with vk_glsl_lang_free. */
Lang *vk_glsl_lang_new(uint32_t features);
void vk_glsl_lang_free(Lang *lang); /* NULL ok */

/* The VKFEAT_* bits the device's kernels are written for: v->features, and
 * VKFEAT_WIDE on a CPU-type device (lavapipe, SwiftShader). */
uint32_t vk_lang_features(const VkDev *v);

/* Builds v->glsl for vk_lang_features(v) and makes it the device's codegen: base.lang
 * and grid lowering (CG_MODE_GRID). vk_glsl_lang_free(v->glsl) frees it. */
tvk_status vk_glsl_attach(VkDev *v);

#endif
