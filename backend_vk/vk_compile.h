/* Compiling kernels (vk_compile.c): GLSL -> SPIR-V with shaderc through the
 * on-disk SPIR-V cache, then a pipeline (vk_pipeline.h); and freeing them, which
 * first waits for the batches that use them (vk_dispatch.h). */
#ifndef TVK_BACKEND_VK_COMPILE_H
#define TVK_BACKEND_VK_COMPILE_H

#include <stdbool.h>

#include "vk_core.h"

/* The compile and program_free entries of the ops table. vk_compile reports
 * into err, and may run on several threads at once. */
tvk_status vk_compile(Device *d, const char *name, const char *src, DevProgram **out,
                      bool *cache_hit, Error *err);
void vk_program_free(Device *d, DevProgram *p); /* NULL ok */

#endif
