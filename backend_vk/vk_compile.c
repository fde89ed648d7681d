/* GLSL -> SPIR-V with shaderc, in-process, through the on-disk SPIR-V cache;
 * then vk_pipeline_build turns the SPIR-V into a pipeline. See docs/vulkan.md
 * ("Compiling and caching"). */
#include "vk_compile.h"

#include <errno.h>
#include <glslang/build_info.h>
#include <pthread.h>
#include <shaderc/shaderc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cache.h"
#include "vk_dispatch.h"
#include "vk_pipeline.h"

enum { SPIRV_MAGIC = 0x07230203 };

#define VK_STR2(x) #x
#define VK_STR(x) VK_STR2(x)
/* The compiler's identity in the cache key: a glslang upgrade may change the
 * SPIR-V it emits for the same source. */
static const char glslang_version[] = VK_STR(GLSLANG_VERSION_MAJOR) "." VK_STR(
    GLSLANG_VERSION_MINOR) "." VK_STR(GLSLANG_VERSION_PATCH) GLSLANG_VERSION_FLAVOR;

/* The SPIR-V environment for the device's API version, at most Vulkan 1.2
 * (SPIR-V 1.5): for 1.3 (SPIR-V 1.6) glslang writes local_size as LocalSizeId,
 * which needs the maintenance4 feature, and 1.5 already has everything the
 * kernels use. */
static uint32_t target_env(const VkDev *v) {
  switch (VK_API_VERSION_MINOR(v->api_version)) {
  case 0: return shaderc_env_version_vulkan_1_0;
  case 1: return shaderc_env_version_vulkan_1_1;
  default: return shaderc_env_version_vulkan_1_2;
  }
}

/* Everything that changes the SPIR-V: the source, the compiler, the options. */
static void cache_key(const VkDev *v, const char *src, char key[33]) {
  char env[32];
  snprintf(env, sizeof env, "vulkan-env-%u", (unsigned)target_env(v));
  CacheHash h;
  cache_hash_init(&h);
  cache_hash_field(&h, "tvk-vk-spirv-v2"); /* v2: the file is sealed */
  cache_hash_field(&h, src);
  cache_hash_field(&h, glslang_version);
  cache_hash_field(&h, env);
  cache_hash_field(&h, "optimize-performance");
  cache_hash_hex(&h, key);
}

static bool valid_name(const char *s) {
  if (!s || !*s) return false;
  for (; *s; s++) {
    char c = *s;
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return false;
  }
  return true;
}

/* A cached file is used only if its seal holds (cache_file_read_sealed: not cut
 * short, not changed) and it looks like SPIR-V; anything else is recompiled
 * and overwritten. The check here is the last guard against handing the driver
 * something that is not SPIR-V at all. */
static bool plausible_spirv(const void *data, size_t n) {
  uint32_t magic;
  if (n < 20 || n % 4 != 0) return false;
  memcpy(&magic, data, 4);
  return magic == SPIRV_MAGIC;
}

#ifdef TVK_HAVE_SHADERC
/* Writes "shaderc failed on kernel NAME: <message>" into the device's error,
 * cut with " [...]" to fit. */
static tvk_status compile_failed(Error *err, const char *name, const char *msg) {
  err_set(err, TVK_ERR_COMPILE, "shaderc failed on kernel '%s':\n", name);
  err_append(err, msg);
  return TVK_ERR_COMPILE;
}

/* SPIR-V opcodes and enums read by add_preserve64. */
enum { SPV_OP_EXECUTION_MODE = 16, SPV_MODE_SIGNED_ZERO_INF_NAN_PRESERVE = 4461 };

/* The GLSL header asks for SignedZeroInfNanPreserve on 32-bit floats, and on a
 * device that also preserves them on 64-bit ones, vk_glsl_lang_new leaves the
 * second width to this function: glslang keeps only one execution mode of an
 * id. It inserts "OpExecutionMode %main SignedZeroInfNanPreserve 64" after the
 * 32-bit one (the capability is the same). Returns false when out of memory. */
static bool add_preserve64(const VkDev *v, void **spv, size_t *n) {
  uint32_t f = v->features;
  if (!(f & VKFEAT_PRESERVE32) || !(f & VKFEAT_PRESERVE64) || !(f & VKFEAT_FLOAT64)) return true;
  uint32_t *w = *spv;
  size_t nw = *n / 4;
  for (size_t i = 5; i < nw;) { /* instructions follow the 5-word header */
    uint32_t len = w[i] >> 16;
    if (len == 0 || i + len > nw) return true; /* malformed: left to the validator */
    if ((w[i] & 0xffffu) == SPV_OP_EXECUTION_MODE && len == 4 &&
        w[i + 2] == SPV_MODE_SIGNED_ZERO_INF_NAN_PRESERVE && w[i + 3] == 32) {
      uint32_t *g = realloc(w, (nw + 4) * 4);
      if (!g) return false;
      memmove(g + i + 8, g + i + 4, (nw - i - 4) * 4);
      memcpy(g + i + 4, g + i, 3 * 4);
      g[i + 7] = 64;
      *spv = g;
      *n = (nw + 4) * 4;
      return true;
    }
    i += len;
  }
  return true;
}

/* Runs shaderc on src. On success *out is a malloc'ed copy of the SPIR-V. */
static tvk_status run_shaderc(VkDev *v, const char *name, const char *src, void **out, size_t *n,
                              Error *err) {
  VkPipelineState *ps = v->pipelines;
  /* One compiler for every thread: shaderc_compile_into_spv takes it const. */
  pthread_mutex_lock(&ps->mu);
  if (!ps->shaderc) ps->shaderc = shaderc_compiler_initialize();
  shaderc_compiler_t compiler = ps->shaderc;
  if (compiler) ps->shaderc_calls++;
  pthread_mutex_unlock(&ps->mu);
  if (!compiler) return err_set(err, TVK_ERR_DEVICE, "shaderc_compiler_initialize failed");
  shaderc_compile_options_t o = shaderc_compile_options_initialize();
  if (!o) return err_set(err, TVK_ERR_OUT_OF_MEMORY, "shaderc: out of memory for options");
  shaderc_compile_options_set_source_language(o, shaderc_source_language_glsl);
  shaderc_compile_options_set_target_env(o, shaderc_target_env_vulkan, target_env(v));
  shaderc_compile_options_set_optimization_level(o, shaderc_optimization_level_performance);
  char file[96];
  snprintf(file, sizeof file, "%.80s.comp", name); /* messages say "NAME.comp:LINE: error" */
  shaderc_compilation_result_t r =
      shaderc_compile_into_spv(compiler, src, strlen(src), shaderc_compute_shader, file, "main", o);
  shaderc_compile_options_release(o);
  tvk_status st = TVK_OK;
  shaderc_compilation_status cs =
      r ? shaderc_result_get_compilation_status(r) : shaderc_compilation_status_internal_error;
  if (cs != shaderc_compilation_status_success) {
    const char *msg = r ? shaderc_result_get_error_message(r) : "no result (out of memory?)";
    st = compile_failed(err, name, msg && *msg ? msg : "(shaderc gave no message)");
  } else {
    *n = shaderc_result_get_length(r);
    *out = malloc(*n ? *n : 1);
    if (*out) memcpy(*out, shaderc_result_get_bytes(r), *n);
    if (*out && !add_preserve64(v, out, n)) free(*out), *out = NULL;
    if (!*out) st = err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory for kernel '%s'", name);
  }
  shaderc_result_release(r);
  return st;
}
#else /* TVK_SHADERC=OFF: no compiler; shaderc's output was patched before it was cached */

/* A library built with TVK_SHADERC=OFF runs only SPIR-V from the cache. */
static tvk_status run_shaderc(VkDev *v, const char *name, const char *src, void **out, size_t *n,
                              Error *err) {
  (void)v, (void)src, (void)out, (void)n;
  return err_set(err, TVK_ERR_COMPILE,
                 "kernel '%s' is not in the SPIR-V cache, and this libtvk was built without "
                 "shaderc (TVK_SHADERC=OFF): run it once with a libtvk that has shaderc (glslang "
                 "%s) and the same cache directory",
                 name, glslang_version);
}
#endif

/* The SPIR-V of src: from <dir>/<key>.spv when it is there, else from shaderc
 * (and then published there, unless the cache is read-only). A cache file that
 * cannot be written is not an error: the kernel still runs, it is just
 * compiled again next time. */
static tvk_status get_spirv(VkDev *v, const char *name, const char *src, void **spv, size_t *n,
                            bool *hit, Error *err) {
  /* vk_pipeline_init resolved the directory: only read here, on any thread */
  const char *dir = v->pipelines->cache_dir;
  if (!dir) return run_shaderc(v, name, src, spv, n, err); /* no disk cache */
  char key[33], path[4096];
  cache_key(v, src, key);
  if (snprintf(path, sizeof path, "%s/%s.spv", dir, key) >= (int)sizeof path)
    return err_set(err, TVK_ERR_DEVICE, "kernel cache path too long: '%s'", dir);
  if (cache_file_read_sealed(path, spv, n) == 0) {
    if (plausible_spirv(*spv, *n)) {
      *hit = true;
      return TVK_OK;
    }
    free(*spv);
    *spv = NULL;
  }
  tvk_status st = run_shaderc(v, name, src, spv, n, err);
  if (st != TVK_OK) return st;
  if (v->pipelines->cache_ro) return TVK_OK;
  int rc = cache_file_write_sealed(path, *spv, *n, 0600);
  if (rc != 0 && v->debug >= 1)
    log_msg(&v->base.log, TVK_LOG_WARN, "tvk: cannot write '%s' into the kernel cache: %s", path,
            strerror(rc));
  return TVK_OK;
}

tvk_status vk_compile(Device *d, const char *name, const char *src, DevProgram **out,
                      bool *cache_hit, Error *err) {
  VkDev *v = vk_of(d);
  bool hit = false;
  if (cache_hit) *cache_hit = false;
  if (!out) return err_set(err, TVK_ERR_INVALID_ARG, "compile: out is NULL");
  *out = NULL;
  if (!src) return err_set(err, TVK_ERR_INVALID_ARG, "compile: kernel source is NULL");
  if (!valid_name(name))
    return err_set(err, TVK_ERR_INVALID_ARG, "compile: kernel name '%s' is not an identifier",
                   name ? name : "(null)");
  void *spv = NULL;
  size_t n = 0;
  tvk_status st = get_spirv(v, name, src, &spv, &n, &hit, err);
  if (st != TVK_OK) return st;
  DevProgram *p = calloc(1, sizeof *p);
  if (p) p->name = strdup(name);
  if (!p || !p->name) {
    free(p);
    free(spv);
    return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory compiling kernel '%s'", name);
  }
  p->owner = v;
  st = vk_pipeline_build(v, p, spv, n / 4, err);
  free(spv);
  if (st != TVK_OK) {
    vk_pipeline_release(v, p);
    return st;
  }
  VkPipelineState *ps = v->pipelines;
  pthread_mutex_lock(&ps->mu);
  p->next = ps->programs;
  if (ps->programs) ps->programs->prev = p;
  ps->programs = p;
  pthread_mutex_unlock(&ps->mu);
  if (cache_hit) *cache_hit = hit;
  *out = p;
  return TVK_OK;
}

void vk_program_free(Device *d, DevProgram *p) {
  VkDev *v = vk_of(d);
  if (!p || p->owner != v) return; /* not ours: freeing it here would corrupt both lists */
  /* A program still used by a pending batch is waited for; on a lost device
   * nothing runs any more and the wait fails at once. */
  if (p->serial > v->serial_done) (void)vk_wait_serial(v, p->serial);
  VkPipelineState *ps = v->pipelines;
  if (ps) pthread_mutex_lock(&ps->mu);
  if (p->prev)
    p->prev->next = p->next;
  else if (ps)
    ps->programs = p->next;
  if (p->next) p->next->prev = p->prev;
  if (ps) pthread_mutex_unlock(&ps->mu);
  vk_pipeline_release(v, p);
}
