/* The Vulkan backend, below the tensor API.
 *
 * Two sections, by owner:
 *   1. device and memory (vk_device.c, vk_memory.c): loading, device choice,
 *      validation, the sub-allocator, copies, limits, errors;
 *   2. dispatch (vk_compile.c, vk_pipeline.c, vk_dispatch.c): appended below.
 *
 * Every device is created with validation on (VK_LAYER_KHRONOS_validation) and
 * every test ends by asserting that the messenger counted no message. The tests
 * skip only when the machine has no Vulkan loader or device; with
 * TVK_REQUIRE_VK=1 (CI) that is a failure instead.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, strdup, mkdtemp, mkstemp, truncate */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../backend_vk/vk_core.h"
#include "../backend_vk/vk_dispatch.h"
#include "../backend_vk/vk_memory.h"
#include "../backend_vk/vk_pipeline.h"
#include "runtime/cache.h"
#include "test_util.h"

/* ---- shared helpers ---- */

/* Creates a Vulkan device with validation on; skips the test when the machine
 * has no Vulkan at all (unless TVK_REQUIRE_VK is set). */
static Device *open_vk(int index) {
  DeviceOptions opt = {.validate = 2};
  Device *d = NULL;
  Error err;
  tvk_status st = vk_device_create(&opt, index, &d, &err);
  if (st == TVK_ERR_DEVICE &&
      (strstr(err.msg, "no Vulkan") || strstr(err.msg, "no usable Vulkan"))) {
    if (!vk_required()) {
      fprintf(stderr, "skipping: %s\n", err.msg);
      skip();
    }
  }
  if (st != TVK_OK) fprintf(stderr, "vk_device_create: %s: %s\n", tvk_status_name(st), err.msg);
  assert_int_equal(st, TVK_OK);
  assert_non_null(d);
  return d;
}

/* Every test ends here: no validation message, then destroy. */
static void close_vk(Device *d) {
  assert_int_equal(vk_validation_messages(d), 0);
  d->ops->destroy(d);
}

/* ================================================================ 1. device and memory */

static void test_create_name_limits(void **state) {
  (void)state;
  Device *d = open_vk(-1);
  VkDev *v = vk_of(d);
  const char *name = d->ops->name(d);
  assert_true(!strncmp(name, "Vulkan: ", 8));
  assert_string_equal(name + 8, v->props.deviceName);
  assert_true(v->validate);
  assert_true(v->api_version >= VK_API_VERSION_1_1);
  /* The limits the core reads come from the device's own. */
  assert_int_equal(d->limits.max_global[0], v->props.limits.maxComputeWorkGroupCount[0]);
  assert_int_equal(d->limits.max_local_threads, v->props.limits.maxComputeWorkGroupInvocations);
  assert_int_equal(d->limits.shared_mem_bytes, v->props.limits.maxComputeSharedMemorySize);
  assert_true(d->limits.max_buffer_bytes > 0);
  assert_int_equal(v->lim.max_storage_range, v->props.limits.maxStorageBufferRange);
  assert_int_equal(v->lim.storage_align, v->props.limits.minStorageBufferOffsetAlignment);
  assert_true(v->lim.max_push_constants >= 128); /* the spec's minimum */
  fprintf(stderr, "device: %s, api %u.%u, features 0x%x\n", name,
          VK_API_VERSION_MAJOR(v->api_version), VK_API_VERSION_MINOR(v->api_version), v->features);
  close_vk(d);
}

static void test_choice_by_index(void **state) {
  (void)state;
  Device *best = open_vk(-1);
  /* VK:0 exists whenever a best device does. */
  Device *first = open_vk(0);
  assert_true(!strncmp(first->ops->name(first), "Vulkan: ", 8));
  close_vk(first);
  close_vk(best);

  DeviceOptions opt = {.validate = 1};
  Device *d = (Device *)1;
  Error err;
  assert_int_equal(vk_device_create(&opt, 99, &d, &err), TVK_ERR_DEVICE);
  assert_null(d);
  assert_non_null(strstr(err.msg, "VK:99"));
  assert_non_null(strstr(err.msg, "found")); /* says how many exist */
  assert_int_equal(vk_device_create(&opt, 0, NULL, &err), TVK_ERR_INVALID_ARG);
}

/* Environment-driven failures: no driver, no validation layer. The loader reads
 * these variables at instance creation, so setting them around one create is
 * enough. */
static void test_no_driver_no_layer(void **state) {
  (void)state;
  close_vk(open_vk(-1)); /* skip unless Vulkan works at all */
  DeviceOptions opt = {.validate = 0};
  Device *d = NULL;
  Error err;
  const char *old = getenv("VK_ICD_FILENAMES");
  char *saved = old ? strdup(old) : NULL;
  setenv("VK_ICD_FILENAMES", "/nonexistent/tvk_icd.json", 1);
  tvk_status st = vk_device_create(&opt, -1, &d, &err);
  if (saved)
    setenv("VK_ICD_FILENAMES", saved, 1);
  else
    unsetenv("VK_ICD_FILENAMES");
  free(saved);
  assert_int_equal(st, TVK_ERR_DEVICE);
  assert_null(d);
  assert_non_null(strstr(err.msg, "driver"));

  opt.validate = 1;
  old = getenv("VK_LAYER_PATH");
  saved = old ? strdup(old) : NULL;
  setenv("VK_LAYER_PATH", "/nonexistent", 1);
  st = vk_device_create(&opt, -1, &d, &err);
  if (saved)
    setenv("VK_LAYER_PATH", saved, 1);
  else
    unsetenv("VK_LAYER_PATH");
  free(saved);
  assert_int_equal(st, TVK_ERR_DEVICE);
  assert_string_equal(err.msg, "validation requested but VK_LAYER_KHRONOS_validation is not "
                               "installed (vulkan-validationlayers)");
}

/* The messenger counts: a deliberate misuse that every driver tolerates (an
 * undefined flag bit on a fence) must be reported once. */
static void test_validation_counts(void **state) {
  (void)state;
  Device *d = open_vk(-1);
  VkDev *v = vk_of(d);
  assert_int_equal(vk_validation_messages(d), 0);
  VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, .flags = 0x100};
  VkFence f = VK_NULL_HANDLE;
  fprintf(stderr, "(a validation error about VkFenceCreateInfo flags is expected next)\n");
  VkResult r = v->vk.vkCreateFence(v->device, &fi, NULL, &f);
  if (r == VK_SUCCESS) v->vk.vkDestroyFence(v->device, f, NULL);
  assert_true(vk_validation_messages(d) >= 1);
  assert_int_equal(vk_validation_messages(NULL), 0);
  atomic_store(&v->validation_messages, 0);
  close_vk(d);
}

static void test_results_and_lost(void **state) {
  (void)state;
  Device *d = open_vk(-1);
  VkDev *v = vk_of(d);
  assert_string_equal(vk_result_name(VK_ERROR_DEVICE_LOST), "VK_ERROR_DEVICE_LOST");
  assert_string_equal(vk_result_name(VK_SUCCESS), "VK_SUCCESS");
  assert_string_equal(vk_result_name((VkResult)-123456), "VK_RESULT_UNKNOWN");
  assert_int_equal(vk_check(v, VK_SUCCESS, "vkFoo"), TVK_OK);
  assert_int_equal(vk_check(v, VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkFoo"), TVK_ERR_OUT_OF_MEMORY);
  assert_non_null(strstr(d->err.msg, "vkFoo failed: VK_ERROR_OUT_OF_DEVICE_MEMORY"));
  assert_int_equal(vk_check(v, VK_ERROR_INITIALIZATION_FAILED, "vkBar"), TVK_ERR_DEVICE);
  assert_non_null(strstr(d->err.msg, "vkBar failed: VK_ERROR_INITIALIZATION_FAILED"));
  assert_false(v->lost);

  DevBuffer *b = NULL;
  assert_int_equal(d->ops->alloc(d, 64, &b), TVK_OK);
  /* A lost device refuses everything, and still frees and destroys cleanly. */
  assert_int_equal(vk_check(v, VK_ERROR_DEVICE_LOST, "vkQueueSubmit"), TVK_ERR_DEVICE);
  assert_true(v->lost);
  char buf[64] = {0};
  DevBuffer *b2 = (DevBuffer *)1;
  assert_int_equal(d->ops->alloc(d, 64, &b2), TVK_ERR_DEVICE);
  assert_null(b2);
  assert_non_null(strstr(d->err.msg, "device lost"));
  assert_int_equal(d->ops->copy_in(d, b, 0, buf, sizeof buf), TVK_ERR_DEVICE);
  assert_int_equal(d->ops->copy_out(d, b, 0, buf, sizeof buf), TVK_ERR_DEVICE);
  assert_int_equal(d->ops->sync(d), TVK_ERR_DEVICE);
  assert_non_null(strstr(d->err.msg, "device lost"));
  DevProgram *p = (DevProgram *)1;
  bool hit = false;
  assert_int_equal(d->ops->compile(d, "k", "void main() {}", &p, &hit, NULL), TVK_ERR_DEVICE);
  assert_null(p);
  d->ops->free(d, b);
  close_vk(d);
}

/* Pattern byte `i` of buffer number `id`. */
static uint8_t pat(uint64_t id, size_t i) { return (uint8_t)(id * 131 + i * 7 + (i >> 8)); }

/* The bytes of buffer `id` that the random test writes and later checks: all of
 * a small one; the first and last 4 KiB of a big one. */
static void fill_or_check(Device *d, DevBuffer *b, uint64_t id, bool check) {
  enum { EDGE = 4096 };
  static uint8_t tmp[EDGE];
  size_t spans[2][2] = {{0, b->size}, {0, 0}};
  if (b->size > 2 * EDGE) {
    spans[0][1] = EDGE;
    spans[1][0] = b->size - EDGE, spans[1][1] = EDGE;
  }
  for (int s = 0; s < 2; s++) {
    size_t off = spans[s][0], n = spans[s][1];
    for (size_t done = 0; done < n; done += EDGE) {
      size_t c = n - done < EDGE ? n - done : EDGE;
      if (!check) {
        for (size_t i = 0; i < c; i++) tmp[i] = pat(id, off + done + i);
        assert_int_equal(d->ops->copy_in(d, b, off + done, tmp, c), TVK_OK);
      } else {
        assert_int_equal(d->ops->copy_out(d, b, off + done, tmp, c), TVK_OK);
        for (size_t i = 0; i < c; i++)
          if (tmp[i] != pat(id, off + done + i)) {
            fprintf(stderr, "buffer %llu (size %zu, offset %llu): byte %zu is %u, wrote %u\n",
                    (unsigned long long)id, b->size, (unsigned long long)b->offset, off + done + i,
                    tmp[i], pat(id, off + done + i));
            fail();
          }
      }
    }
  }
}

/* Sizes the random test draws: 0, 1, odd, small, up to a block, over a block. */
static size_t random_size(uint64_t *s, size_t block) {
  switch (xorshift64(s) % 10) {
  case 0: return 0;
  case 1: return 1;
  case 2:
  case 3: return (xorshift64(s) % 1000) | 1;
  case 4:
  case 5:
  case 6: return xorshift64(s) % 65536;
  case 7:
  case 8: return xorshift64(s) % block;
  default:
    return xorshift64(s) % 50 == 0 ? block + xorshift64(s) % (block / 2) : xorshift64(s) % 4096;
  }
}

/* The ranges two live buffers bind never overlap (a brute-force check). */
static void check_disjoint(DevBuffer *const *live, int n) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      const DevBuffer *a = live[i], *b = live[j];
      if (a->buffer != b->buffer) continue;
      bool apart = a->offset + a->range <= b->offset || b->offset + b->range <= a->offset;
      if (!apart) {
        fprintf(stderr, "overlap: [%llu, +%llu) and [%llu, +%llu)\n", (unsigned long long)a->offset,
                (unsigned long long)a->range, (unsigned long long)b->offset,
                (unsigned long long)b->range);
        fail();
      }
    }
}

static void test_suballoc_random(void **state) {
  (void)state;
  enum { MAX_LIVE = 48, OPS = 2500 };
  const size_t block = 1 << 20;
  Device *d = open_vk(-1);
  VkDev *v = vk_of(d);
  v->block_bytes = block; /* small blocks, so the test crosses many of them */
  VkDeviceSize align = v->lim.storage_align > v->lim.atom ? v->lim.storage_align : v->lim.atom;
  DevBuffer *live[MAX_LIVE];
  uint64_t ids[MAX_LIVE];
  int n = 0;
  uint64_t s = 0x9e3779b97f4a7c15ull, next_id = 1, max_blocks = 0;
  for (int op = 0; op < OPS; op++) {
    bool do_alloc = n == 0 || (n < MAX_LIVE && xorshift64(&s) % 5 < 3);
    if (do_alloc) {
      size_t size = random_size(&s, block);
      DevBuffer *b = NULL;
      tvk_status st = d->ops->alloc(d, size, &b);
      if (st != TVK_OK) fprintf(stderr, "op %d: alloc(%zu): %s\n", op, size, d->err.msg);
      assert_int_equal(st, TVK_OK);
      assert_int_equal(b->size, size);
      assert_true(b->range >= size && b->range >= 4 && b->range % 4 == 0);
      if (b->offset % align != 0) {
        fprintf(stderr, "op %d: offset %llu not aligned to %llu\n", op,
                (unsigned long long)b->offset, (unsigned long long)align);
        fail();
      }
      live[n] = b;
      ids[n] = next_id++;
      fill_or_check(d, b, ids[n], false);
      n++;
      check_disjoint(live, n);
    } else {
      int i = (int)(xorshift64(&s) % (uint64_t)n);
      fill_or_check(d, live[i], ids[i], true);
      d->ops->free(d, live[i]);
      live[i] = live[n - 1], ids[i] = ids[n - 1];
      n--;
    }
    VkMemStats ms;
    vk_mem_stats(v, &ms);
    assert_int_equal(ms.live, (uint64_t)n);
    if (ms.blocks > max_blocks) max_blocks = ms.blocks;
    /* Bounded: at most MAX_LIVE buffers, each under 1.5 blocks, so the blocks
     * in use stay well below what one block per buffer would take. */
    if (ms.block_bytes > (uint64_t)(MAX_LIVE / 2) * block) {
      fprintf(stderr, "op %d: %llu bytes in %llu blocks for %d buffers\n", op,
              (unsigned long long)ms.block_bytes, (unsigned long long)ms.blocks, n);
      fail();
    }
  }
  for (int i = 0; i < n; i++) {
    fill_or_check(d, live[i], ids[i], true);
    d->ops->free(d, live[i]);
  }
  VkMemStats ms;
  vk_mem_stats(v, &ms);
  fprintf(stderr, "random: at most %llu blocks; after freeing all: %llu blocks, %llu bytes\n",
          (unsigned long long)max_blocks, (unsigned long long)ms.blocks,
          (unsigned long long)ms.block_bytes);
  /* Freed space coalesces: everything freed leaves at most the kept empty
   * blocks. */
  assert_int_equal(ms.live, 0);
  assert_int_equal(ms.live_bytes, 0);
  assert_true(ms.blocks <= VK_KEEP_EMPTY_BLOCKS && ms.block_bytes <= VK_KEEP_EMPTY_BLOCKS * block);
  close_vk(d);
}

/* A realize's pattern: an input of a block's size stays, and each run takes
 * two small buffers and an output of a block's size and frees them. After the
 * first run no block is made: the kept empty blocks hold the small buffers
 * and the output (with one kept block, the small buffers took it and the
 * output needed a new block at every run). */
static void test_kept_blocks(void **state) {
  (void)state;
  Device *d = open_vk(-1);
  VkDev *v = vk_of(d);
  v->block_bytes = 1 << 20;
  DevBuffer *x, *s1, *s2, *out;
  assert_int_equal(d->ops->alloc(d, 1 << 20, &x), TVK_OK);
  VkMemStats ms;
  uint64_t made = 0;
  for (int run = 0; run < 4; run++) {
    assert_int_equal(d->ops->alloc(d, 4096, &s1), TVK_OK);
    assert_int_equal(d->ops->alloc(d, 4096, &s2), TVK_OK);
    assert_int_equal(d->ops->alloc(d, 1 << 20, &out), TVK_OK);
    d->ops->free(d, s1), d->ops->free(d, s2), d->ops->free(d, out);
    assert_int_equal(d->ops->sync(d), TVK_OK);
    vk_mem_stats(v, &ms);
    if (run == 0) made = ms.blocks_made;
    if (ms.blocks_made != made)
      fail_msg("run %d made %llu blocks after the first run's %llu", run,
               (unsigned long long)ms.blocks_made, (unsigned long long)made);
  }
  d->ops->free(d, x);
  close_vk(d);
}

static void test_reuse(void **state) {
  (void)state;
  Device *d = open_vk(-1);
  VkDev *v = vk_of(d);
  v->block_bytes = 1 << 20;
  DevBuffer *a, *b, *c;
  assert_int_equal(d->ops->alloc(d, 1000, &a), TVK_OK);
  assert_int_equal(d->ops->alloc(d, 3000, &b), TVK_OK);
  VkBuffer buf = a->buffer;
  VkDeviceSize off = a->offset;
  d->ops->free(d, a);
  /* The freed range is handed out again, and no memory is allocated for it. */
  assert_int_equal(d->ops->alloc(d, 1000, &c), TVK_OK);
  assert_true(c->buffer == buf);
  assert_int_equal(c->offset, off);
  VkMemStats ms;
  vk_mem_stats(v, &ms);
  assert_int_equal(ms.blocks, 1);
  d->ops->free(d, c);
  d->ops->free(d, b);
  /* A loop of alloc/free of a fixed size keeps using the one kept block. */
  for (int i = 0; i < 200; i++) {
    assert_int_equal(d->ops->alloc(d, (size_t)(i * 997) % (1 << 19), &a), TVK_OK);
    d->ops->free(d, a);
  }
  vk_mem_stats(v, &ms);
  assert_int_equal(ms.blocks, 1);
  /* A buffer larger than a block gets its own block, freed with it. */
  assert_int_equal(d->ops->alloc(d, (1 << 20) + 1, &a), TVK_OK);
  vk_mem_stats(v, &ms);
  assert_int_equal(ms.blocks, 2);
  d->ops->free(d, a);
  vk_mem_stats(v, &ms);
  assert_int_equal(ms.blocks, 1);
  /* Buffers the caller never frees are freed by destroy (ASan checks). */
  assert_int_equal(d->ops->alloc(d, 10, &a), TVK_OK);
  close_vk(d);
}

/* Writes and reads at random offsets against a host mirror, in the current
 * memory mode ($TVK_VK_MEMORY). */
static void roundtrip(Device *d, uint64_t seed) {
  const size_t sizes[] = {1, 3, 4097, (1 << 20) + 12, (20 << 20) + 5};
  enum { NB = sizeof sizes / sizeof sizes[0] };
  DevBuffer *b[NB];
  uint8_t *mirror[NB], *tmp = malloc(sizes[NB - 1]);
  assert_non_null(tmp);
  uint64_t s = seed;
  for (int i = 0; i < NB; i++) {
    assert_int_equal(d->ops->alloc(d, sizes[i], &b[i]), TVK_OK);
    mirror[i] = malloc(sizes[i]);
    assert_non_null(mirror[i]);
    for (size_t k = 0; k < sizes[i]; k++) mirror[i][k] = (uint8_t)xorshift64(&s);
    assert_int_equal(d->ops->copy_in(d, b[i], 0, mirror[i], sizes[i]), TVK_OK);
  }
  for (int it = 0; it < 300; it++) {
    int i = (int)(xorshift64(&s) % NB);
    size_t size = sizes[i], off = xorshift64(&s) % size;
    size_t n = xorshift64(&s) % 4 == 0 ? size - off : xorshift64(&s) % (size - off + 1);
    if (xorshift64(&s) % 2) {
      for (size_t k = 0; k < n; k++) tmp[k] = (uint8_t)xorshift64(&s);
      assert_int_equal(d->ops->copy_in(d, b[i], off, tmp, n), TVK_OK);
      memcpy(mirror[i] + off, tmp, n);
    } else {
      memset(tmp, 0xcd, n);
      assert_int_equal(d->ops->copy_out(d, b[i], off, tmp, n), TVK_OK);
      if (memcmp(tmp, mirror[i] + off, n) != 0) {
        fprintf(stderr, "iteration %d: buffer %d, offset %zu, %zu bytes differ\n", it, i, off, n);
        fail();
      }
    }
  }
  for (int i = 0; i < NB; i++) {
    assert_int_equal(d->ops->copy_out(d, b[i], 0, tmp, sizes[i]), TVK_OK);
    assert_memory_equal(tmp, mirror[i], sizes[i]);
    d->ops->free(d, b[i]);
    free(mirror[i]);
  }
  free(tmp);
}

static void test_copy_roundtrip(void **state) {
  (void)state;
  Device *d = open_vk(-1);
  roundtrip(d, 0x1234567887654321ull);
  close_vk(d);
}

/* The discrete-GPU paths on any device: staging copies, and flushes as if the
 * memory were not coherent. */
static void test_copy_roundtrip_staging(void **state) {
  (void)state;
  setenv("TVK_VK_MEMORY", "staging,noncoherent", 1);
  Device *d = open_vk(-1);
  unsetenv("TVK_VK_MEMORY");
  VkDev *v = vk_of(d);
  assert_int_equal(v->mem_mode, VKMEM_FORCE_STAGING | VKMEM_FORCE_NONCOHERENT);
  DevBuffer *b;
  assert_int_equal(d->ops->alloc(d, 100, &b), TVK_OK);
  assert_null(b->host); /* not mapped: copies must go through staging */
  d->ops->free(d, b);
  roundtrip(d, 0xfeedface12345678ull);
  VkMemStats ms;
  vk_mem_stats(v, &ms);
  assert_true(ms.staging_bytes > 0 && ms.staging_bytes < (20 << 20)); /* big copies were chunked */
  close_vk(d);

  setenv("TVK_VK_MEMORY", "noncoherent", 1);
  d = open_vk(-1);
  unsetenv("TVK_VK_MEMORY");
  roundtrip(d, 0x0badc0de0badc0deull);
  close_vk(d);

  setenv("TVK_VK_MEMORY", "fast", 1);
  DeviceOptions opt = {0};
  Error err;
  assert_int_equal(vk_device_create(&opt, -1, &d, &err), TVK_ERR_INVALID_ARG);
  unsetenv("TVK_VK_MEMORY");
  assert_non_null(strstr(err.msg, "'fast'"));
}

static void test_copy_bounds(void **state) {
  (void)state;
  Device *d = open_vk(-1);
  DevBuffer *b;
  uint8_t buf[32] = {0};
  assert_int_equal(d->ops->alloc(d, 10, &b), TVK_OK);
  assert_int_equal(d->ops->copy_in(d, b, 9, buf, 2), TVK_ERR_INVALID_ARG);
  assert_string_equal(d->err.msg,
                      "copy_in: offset 9 + size 2 is out of bounds of a buffer of 10 bytes");
  assert_int_equal(d->ops->copy_out(d, b, 11, buf, 0), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->copy_out(d, b, 1, buf, SIZE_MAX), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->copy_in(d, b, SIZE_MAX, buf, 1), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->copy_in(d, NULL, 0, buf, 1), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->copy_in(d, b, 0, NULL, 1), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(d->err.msg, "host pointer is NULL"));
  /* Empty copies are fine anywhere inside, with any pointer. */
  assert_int_equal(d->ops->copy_in(d, b, 10, NULL, 0), TVK_OK);
  assert_int_equal(d->ops->copy_out(d, b, 0, buf, 10), TVK_OK);
  d->ops->free(d, b);
  DevBuffer *z;
  assert_int_equal(d->ops->alloc(d, 0, &z), TVK_OK);
  assert_int_equal(z->range, 4); /* a zero-size buffer still binds something */
  assert_int_equal(d->ops->copy_out(d, z, 0, buf, 1), TVK_ERR_INVALID_ARG);
  d->ops->free(d, z);
  d->ops->free(d, NULL);
  close_vk(d);
}

static void test_size_limits(void **state) {
  (void)state;
  Device *d = open_vk(-1);
  VkDev *v = vk_of(d);
  DevBuffer *b = (DevBuffer *)1;
  /* More than one allocation may hold: refused, naming the limit. */
  assert_int_equal(d->ops->alloc(d, SIZE_MAX, &b), TVK_ERR_OUT_OF_MEMORY);
  assert_null(b);
  assert_non_null(strstr(d->err.msg, "maxMemoryAllocationSize"));
  VkDeviceSize cap = v->lim.max_alloc < v->lim.max_buffer ? v->lim.max_alloc : v->lim.max_buffer;
  assert_int_equal(d->ops->alloc(d, (size_t)cap + 1, &b), TVK_ERR_OUT_OF_MEMORY);

  /* More than one binding addresses: allocated, written and read, but refused
   * for binding, naming the limit and the size. */
  VkDeviceSize range = v->lim.max_storage_range;
  if (range + 64 >= cap || range > ((VkDeviceSize)1 << 31)) {
    fprintf(stderr, "maxStorageBufferRange %llu: no buffer above it fits; part skipped\n",
            (unsigned long long)range);
  } else {
    DevBuffer *big, *edge;
    assert_int_equal(d->ops->alloc(d, (size_t)range + 64, &big), TVK_OK);
    assert_int_equal(vk_buffer_check_bind(v, big, 3), TVK_ERR_DEVICE);
    assert_non_null(strstr(d->err.msg, "maxStorageBufferRange"));
    assert_non_null(strstr(d->err.msg, "buffer 3"));
    uint32_t w = 0xdeadbeef, r = 0;
    assert_int_equal(d->ops->copy_in(d, big, (size_t)range + 60, &w, 4), TVK_OK);
    assert_int_equal(d->ops->copy_out(d, big, (size_t)range + 60, &r, 4), TVK_OK);
    assert_int_equal(r, w);
    d->ops->free(d, big);
    assert_int_equal(d->ops->alloc(d, (size_t)range, &edge), TVK_OK);
    assert_int_equal(vk_buffer_check_bind(v, edge, 0), TVK_OK);
    d->ops->free(d, edge);
  }
  close_vk(d);
}

/* A buffer freed while a batch that may use it is pending keeps its memory
 * until the batch completes (simulated here with the serials). */
static void test_deferred_free(void **state) {
  (void)state;
  Device *d = open_vk(-1);
  VkDev *v = vk_of(d);
  uint64_t used = v->serial_used, done = v->serial_done;
  DevBuffer *a, *b, *c;
  assert_int_equal(d->ops->alloc(d, 256, &a), TVK_OK);
  VkBuffer abuf = a->buffer;
  VkDeviceSize aoff = a->offset;
  v->serial_used = done + 1; /* a batch holding commands is pending */
  d->ops->free(d, a);
  assert_int_equal(d->ops->alloc(d, 256, &b), TVK_OK);
  assert_false(b->buffer == abuf && b->offset == aoff); /* not handed out again yet */
  VkMemStats ms;
  vk_mem_stats(v, &ms);
  assert_int_equal(ms.live, 2);    /* the pending one still holds its memory */
  v->serial_done = v->serial_used; /* the batch completed */
  assert_int_equal(d->ops->alloc(d, 256, &c), TVK_OK);
  assert_true(c->buffer == abuf && c->offset == aoff);
  d->ops->free(d, b);
  d->ops->free(d, c);
  vk_mem_stats(v, &ms);
  assert_int_equal(ms.live, 0);
  /* A buffer still pending at destroy is freed too (ASan checks). */
  v->serial_used = v->serial_done + 1;
  assert_int_equal(d->ops->alloc(d, 8, &a), TVK_OK);
  d->ops->free(d, a);
  v->serial_used = used, v->serial_done = done; /* as they were: nothing pending */
  close_vk(d);
}

/* Out of device memory (simulated: lavapipe never refuses an allocation) is
 * TVK_ERR_OUT_OF_MEMORY; the kept empty block is given up first, space in
 * existing blocks is still handed out, and nothing leaks. */
static void test_out_of_memory(void **state) {
  (void)state;
  const size_t block = 1 << 20;
  Device *d = open_vk(-1);
  VkDev *v = vk_of(d);
  v->block_bytes = block;
  DevBuffer *a, *b, *c = (DevBuffer *)1;
  assert_int_equal(d->ops->alloc(d, 1000, &a), TVK_OK);
  d->ops->free(d, a); /* leaves one empty, kept block */
  v->mem_fail = true;
  assert_int_equal(d->ops->alloc(d, 1000, &a), TVK_OK); /* fits the kept block */
  assert_int_equal(d->ops->alloc(d, 3 * block, &c), TVK_ERR_OUT_OF_MEMORY);
  assert_null(c);
  assert_non_null(strstr(d->err.msg, "out of device memory for a buffer of 3145728 bytes"));
  assert_non_null(strstr(d->err.msg, "VK_ERROR_OUT_OF_DEVICE_MEMORY"));
  d->ops->free(d, a);
  assert_int_equal(d->ops->alloc(d, 2 * block, &c), TVK_ERR_OUT_OF_MEMORY);
  VkMemStats ms;
  vk_mem_stats(v, &ms);
  assert_int_equal(ms.blocks, 0); /* the kept block was dropped to make room */
  v->mem_fail = false;
  assert_int_equal(d->ops->alloc(d, 2 * block, &b), TVK_OK);
  uint8_t x = 7, y = 0;
  assert_int_equal(d->ops->copy_in(d, b, 2 * block - 1, &x, 1), TVK_OK);
  assert_int_equal(d->ops->copy_out(d, b, 2 * block - 1, &y, 1), TVK_OK);
  assert_int_equal(y, 7);
  d->ops->free(d, b);
  close_vk(d);
}

#define DEVICE_MEMORY_TESTS                                                                        \
  cmocka_unit_test(test_create_name_limits), cmocka_unit_test(test_choice_by_index),               \
      cmocka_unit_test(test_no_driver_no_layer), cmocka_unit_test(test_validation_counts),         \
      cmocka_unit_test(test_results_and_lost), cmocka_unit_test(test_suballoc_random),             \
      cmocka_unit_test(test_reuse), cmocka_unit_test(test_kept_blocks),                            \
      cmocka_unit_test(test_copy_roundtrip), cmocka_unit_test(test_copy_roundtrip_staging),        \
      cmocka_unit_test(test_copy_bounds), cmocka_unit_test(test_size_limits),                      \
      cmocka_unit_test(test_deferred_free), cmocka_unit_test(test_out_of_memory)

/* ================================================================ 2. dispatch
 * (vk_compile.c, vk_pipeline.c, vk_dispatch.c). The kernels are hand-written
 * GLSL that follows the kernel ABI of vk_dispatch.h (push block: grid, then the
 * values; the linear group id with its early exit). The kernels go to the
 * build tree's cache (test_cache_dir, made $TVK_CACHE_DIR by main), except in
 * the test of the cache itself, which runs in a fresh directory, removed
 * afterwards. */

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* The prologue every test kernel shares: the ABI's push block with `nv` values
 * named v0.., and the linear group id `lin` (groups past the grid return). */
#define GLSL_HEAD(local) "#version 450\nlayout(local_size_x = " #local ") in;\n"
#define GLSL_LIN                                                                                   \
  "  uint lin = gl_WorkGroupID.x + gl_NumWorkGroups.x *\n"                                         \
  "             (gl_WorkGroupID.y + gl_NumWorkGroups.y * gl_WorkGroupID.z);\n"                     \
  "  if (lin >= pc.grid_x * pc.grid_y * pc.grid_z) return;\n"

/* y[i] = x[i] * 3 + a for i < n; vals = {n, a}. */
static const char k_axpb[] = GLSL_HEAD(
    64) "layout(std430, binding = 0) writeonly buffer Y { float y[]; };\n"
        "layout(std430, binding = 1) readonly buffer X { float x[]; };\n"
        "layout(push_constant) uniform TvkPush { uint grid_x, grid_y, grid_z; int n; int a; } pc;\n"
        "void main() {\n" GLSL_LIN "  uint i = lin * 64u + gl_LocalInvocationID.x;\n"
        "  if (i < uint(pc.n)) y[i] = x[i] * 3.0 + float(pc.a);\n"
        "}\n";

/* out[i] = in[i] + 1 for i < n; vals = {n}. */
static const char k_inc[] = GLSL_HEAD(
    64) "layout(std430, binding = 0) writeonly buffer O { int o[]; };\n"
        "layout(std430, binding = 1) readonly buffer I { int x[]; };\n"
        "layout(push_constant) uniform TvkPush { uint grid_x, grid_y, grid_z; int n; } pc;\n"
        "void main() {\n" GLSL_LIN "  uint i = lin * 64u + gl_LocalInvocationID.x;\n"
        "  if (i < uint(pc.n)) o[i] = x[i] + 1;\n"
        "}\n";

/* One invocation per logical group (local size 1): out[g] = g.x*7 + g.y*3 + g.z,
 * and a counter of the groups that ran. No values. */
static const char k_groups[] =
    GLSL_HEAD(1) "layout(std430, binding = 0) buffer O { uint o[]; };\n"
                 "layout(std430, binding = 1) buffer C { uint count; };\n"
                 "layout(push_constant) uniform TvkPush { uint grid_x, grid_y, grid_z; } pc;\n"
                 "void main() {\n" GLSL_LIN
                 "  uvec3 g = uvec3(lin % pc.grid_x, (lin / pc.grid_x) % pc.grid_y,\n"
                 "                  lin / (pc.grid_x * pc.grid_y));\n"
                 "  o[lin] = g.x * 7u + g.y * 3u + g.z;\n"
                 "  atomicAdd(count, 1u);\n"
                 "}\n";

typedef struct {
  char dir[256];
  char *saved; /* $TVK_CACHE_DIR before the test */
} CacheDir;

/* The inode of the one file of dir ending with `suffix` (0 if none): a file
 * published again by rename gets a new one. */
static ino_t file_inode(const char *dir, const char *suffix) {
  DIR *dd = opendir(dir);
  struct dirent *e;
  ino_t ino = 0;
  size_t k = strlen(suffix);
  while (dd && (e = readdir(dd))) {
    size_t l = strlen(e->d_name);
    if (l < k || strcmp(e->d_name + l - k, suffix)) continue;
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (stat(path, &st) == 0) ino = st.st_ino;
  }
  if (dd) closedir(dd);
  return ino;
}

static int setup_cache(void **state) {
  CacheDir *c = calloc(1, sizeof *c);
  if (!c) return -1;
  if (!temp_dir(c->dir, sizeof c->dir, "test-vk")) return -1;
  c->saved = env_save("TVK_CACHE_DIR");
  setenv("TVK_CACHE_DIR", c->dir, 1);
  *state = c;
  return 0;
}

static int teardown_cache(void **state) {
  CacheDir *c = *state;
  env_restore("TVK_CACHE_DIR", c->saved);
  rm_rf(c->dir);
  free(c);
  return 0;
}

/* A device with synchronization validation (TVK_VALIDATE=2): a missing or
 * wrong barrier between dispatches is then a validation message, which close_vk
 * counts as a failure. Skips, as open_vk does, when there is no Vulkan. */
static Device *open_vk_sync(int debug) {
  DeviceOptions opt = {.validate = 2, .debug = debug};
  Device *d = NULL;
  Error err;
  if (vk_device_create(&opt, -1, &d, &err) == TVK_OK) return d;
  close_vk(open_vk(-1)); /* skips when there is no Vulkan at all */
  fprintf(stderr, "vk_device_create with synchronization validation: %s\n", err.msg);
  fail();
  return NULL;
}

static DevProgram *compile_ok(Device *d, const char *name, const char *src, bool *hit) {
  DevProgram *p = NULL;
  bool h = false;
  tvk_status st = d->ops->compile(d, name, src, &p, &h, NULL);
  if (st != TVK_OK) fprintf(stderr, "compile %s: %s\n", name, d->err.msg);
  assert_int_equal(st, TVK_OK);
  assert_non_null(p);
  if (hit) *hit = h;
  return p;
}

static DevBuffer *alloc_ok(Device *d, size_t n) {
  DevBuffer *b = NULL;
  assert_int_equal(d->ops->alloc(d, n, &b), TVK_OK);
  return b;
}

static LaunchDims dims_for(int64_t n, int64_t local) {
  return (LaunchDims){{(n + local - 1) / local, 1, 1}, {local, 1, 1}};
}

static void launch_ok(Device *d, DevProgram *p, DevBuffer **bufs, int nbufs, const int32_t *vals,
                      int nvals, const LaunchDims *dims) {
  tvk_status st = d->ops->launch(d, p, bufs, nbufs, vals, nvals, dims);
  if (st != TVK_OK) fprintf(stderr, "launch: %s\n", d->err.msg);
  assert_int_equal(st, TVK_OK);
}

static uint64_t shaderc_calls(Device *d) { return vk_of(d)->pipelines->shaderc_calls; }

/* A kernel compiled, run, and checked against a loop; both descriptor paths. */
static void run_axpb(Device *d) {
  enum { N = 1000 };
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)i * 0.5f - 7.0f;
  DevProgram *p = compile_ok(d, "axpb", k_axpb, NULL);
  DevBuffer *bx = alloc_ok(d, sizeof x), *by = alloc_ok(d, sizeof y);
  assert_int_equal(d->ops->copy_in(d, bx, 0, x, sizeof x), TVK_OK);
  DevBuffer *bufs[2] = {by, bx};
  int32_t vals[2] = {N, -5};
  LaunchDims dims = dims_for(N, 64);
  launch_ok(d, p, bufs, 2, vals, 2, &dims);
  assert_int_equal(d->ops->copy_out(d, by, 0, y, sizeof y), TVK_OK);
  for (int i = 0; i < N; i++)
    if (y[i] != x[i] * 3.0f - 5.0f) {
      fprintf(stderr, "y[%d] = %g, want %g\n", i, (double)y[i], (double)(x[i] * 3.0f - 5.0f));
      fail();
    }
  d->ops->free(d, bx);
  d->ops->free(d, by);
  d->ops->program_free(d, p);
}

static void test_compile_and_run(void **state) {
  (void)state;
  Device *d = open_vk_sync(0);
  VkDev *v = vk_of(d);
  run_axpb(d);
  /* The same through descriptor pools, as on a device without push descriptors. */
  v->features &= ~(uint32_t)VKFEAT_PUSH_DESCRIPTOR;
  run_axpb(d);
  DevProgram *p = compile_ok(d, "axpb", k_axpb, NULL);
  assert_false(p->push_descriptors);
  /* The interface read from the SPIR-V. */
  assert_int_equal(p->nbindings, 2);
  assert_int_equal(p->access[0], VKACC_WRITE);
  assert_int_equal(p->access[1], VKACC_READ);
  assert_int_equal(p->push_bytes, 20);
  assert_int_equal(p->local[0], 64);
  assert_int_equal(p->local[1], 1);
  d->ops->program_free(d, p);
  close_vk(d);
}

/* The second compile of a source reads the SPIR-V from disk: no shaderc call,
 * in this device and in the next one; a damaged cache file is recompiled. */
static void test_spirv_cache(void **state) {
  CacheDir *c = *state;
  Device *d = open_vk_sync(0);
  bool hit = true;
  DevProgram *p = compile_ok(d, "axpb", k_axpb, &hit);
  assert_false(hit);
  assert_int_equal(shaderc_calls(d), 1);
  assert_int_equal(count_files(c->dir, ".spv"), 1);
  DevProgram *q = compile_ok(d, "axpb", k_axpb, &hit);
  assert_true(hit);
  assert_int_equal(shaderc_calls(d), 1);
  d->ops->program_free(d, q);
  d->ops->program_free(d, p);
  close_vk(d);
  /* Destroy saved the pipeline cache next to the SPIR-V. */
  assert_int_equal(count_files(c->dir, ".bin"), 1);
  ino_t saved = file_inode(c->dir, ".bin");

  d = open_vk_sync(0);
  p = compile_ok(d, "axpb", k_axpb, &hit);
  assert_true(hit);
  assert_int_equal(shaderc_calls(d), 0);
  assert_null(vk_of(d)->pipelines->shaderc); /* its first-call cost never paid */
  d->ops->program_free(d, p);
  vk_pipeline_cleanup(vk_of(d)); /* as destroy does: the pipeline came from the loaded cache */
  assert_true(file_inode(c->dir, ".bin") == saved); /* so the file was not rewritten */
  assert_int_equal(vk_pipeline_init(vk_of(d)), TVK_OK);
  /* Cut every cached SPIR-V short: the next compile is a miss and rewrites it. */
  DIR *dd = opendir(c->dir);
  struct dirent *e;
  while ((e = readdir(dd))) {
    size_t l = strlen(e->d_name);
    if (l < 4 || strcmp(e->d_name + l - 4, ".spv")) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", c->dir, e->d_name);
    assert_int_equal(truncate(path, 10), 0);
  }
  closedir(dd);
  p = compile_ok(d, "axpb", k_axpb, &hit);
  assert_false(hit);
  assert_int_equal(shaderc_calls(d), 1);
  d->ops->program_free(d, p);
  run_axpb(d); /* and the rewritten file works */
  assert_int_equal(shaderc_calls(d), 1);
  close_vk(d);
}

/* 1,000 kernels, each reading the previous one's output, recorded without a
 * sync in between: one barrier per kernel, across four batches. */
static void dependent_chain(Device *d) {
  enum { N = 333, K = 1000 };
  int32_t host[N];
  for (int i = 0; i < N; i++) host[i] = i * 11 - 1000;
  DevProgram *p = compile_ok(d, "inc", k_inc, NULL);
  DevBuffer *b[2] = {alloc_ok(d, sizeof host), alloc_ok(d, sizeof host)};
  assert_int_equal(d->ops->copy_in(d, b[0], 0, host, sizeof host), TVK_OK);
  VkDispatchStats s0, s1;
  vk_dispatch_stats(vk_of(d), &s0);
  LaunchDims dims = dims_for(N, 64);
  int32_t n = N;
  for (int k = 0; k < K; k++) {
    DevBuffer *bufs[2] = {b[(k + 1) % 2], b[k % 2]}; /* out, in */
    launch_ok(d, p, bufs, 2, &n, 1, &dims);
  }
  int32_t out[N];
  assert_int_equal(d->ops->copy_out(d, b[K % 2], 0, out, sizeof out), TVK_OK);
  for (int i = 0; i < N; i++)
    if (out[i] != host[i] + K) {
      fprintf(stderr, "element %d: %d after %d kernels, want %d\n", i, out[i], K, host[i] + K);
      fail();
    }
  vk_dispatch_stats(vk_of(d), &s1);
  assert_int_equal(s1.dispatches - s0.dispatches, K);
  assert_int_equal(s1.submits - s0.submits, (K + 255) / 256);
  /* Within a batch every kernel but the first depends on the one before. */
  assert_int_equal(s1.barriers - s0.barriers, K - (K + 255) / 256);
  d->ops->free(d, b[0]);
  d->ops->free(d, b[1]);
  d->ops->program_free(d, p);
}

/* The path of the one file of dir ending with `suffix` into out, and its size. */
static off_t find_file(const char *dir, const char *suffix, char *out, size_t outn) {
  DIR *dd = opendir(dir);
  struct dirent *e;
  off_t size = -1;
  size_t k = strlen(suffix);
  while (dd && (e = readdir(dd))) {
    size_t l = strlen(e->d_name);
    if (l < k || strcmp(e->d_name + l - k, suffix)) continue;
    struct stat st;
    snprintf(out, outn, "%s/%s", dir, e->d_name);
    if (stat(out, &st) == 0) size = st.st_size;
  }
  if (dd) closedir(dd);
  assert_true(size >= 0);
  return size;
}

/* Flips one bit of the byte at offset `at` of path. */
static void flip_byte(const char *path, off_t at) {
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  unsigned char c;
  assert_int_equal(pread(fd, &c, 1, at), 1);
  c ^= 0x20;
  assert_int_equal(pwrite(fd, &c, 1, at), 1);
  close(fd);
}

/* A damaged .spv is never handed to the driver. The magic and whole-words check
 * alone let through a file cut at a word boundary past the header, and any
 * changed byte; the seal catches both (and a cut to any length, see the
 * cpu_device suite's test_cache_seal). Each is a miss that writes a whole
 * file again, and the kernel runs right with no validation message. */
static void test_spirv_cache_damaged(void **state) {
  CacheDir *c = *state;
  Device *d = open_vk_sync(0);
  run_axpb(d);
  close_vk(d);
  char path[512];
  off_t whole = find_file(c->dir, ".spv", path, sizeof path);
  for (int kind = 0; kind < 2; kind++) {
    if (kind == 0)
      assert_int_equal(truncate(path, (whole / 2) & ~(off_t)3), 0); /* magic kept, whole words */
    else
      flip_byte(path, whole / 2);
    ino_t damaged = file_inode(c->dir, ".spv");
    d = open_vk_sync(0);
    bool hit = true;
    DevProgram *p = compile_ok(d, "axpb", k_axpb, &hit);
    assert_false(hit);
    assert_int_equal(shaderc_calls(d), 1);
    d->ops->program_free(d, p);
    run_axpb(d);
    close_vk(d);
    assert_true(file_inode(c->dir, ".spv") != damaged);
    assert_int_equal(find_file(c->dir, ".spv", path, sizeof path), whole);
  }
}

/* A pipeline cache file cut short keeps its header, which is all the device
 * check looks at, and data that is not what vkGetPipelineCacheData returned is
 * invalid usage. The seal drops it, at every length (every one up to 256
 * bytes, then 32 spread over the rest), and the device starts with an empty
 * cache; a run then writes a whole file again. */
static void test_pipeline_cache_truncated(void **state) {
  CacheDir *c = *state;
  Device *d = open_vk_sync(0);
  run_axpb(d);
  close_vk(d);
  char path[512];
  off_t whole = find_file(c->dir, ".bin", path, sizeof path);
  void *data;
  size_t n;
  assert_int_equal(cache_file_read(path, &data, &n), 0);
  assert_int_equal(n, whole);
  d = open_vk_sync(0);
  VkDev *v = vk_of(d);
  assert_true(v->pipelines->loaded_key[0] != 0); /* the whole file loads */
  for (off_t len = 0; len < whole; len += len < 256 ? 1 : (whole - 256) / 32 + 1) {
    vk_pipeline_cleanup(v); /* no pipeline was made since init: nothing is saved */
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    assert_int_equal(vk_pipeline_init(v), TVK_OK);
    if (v->pipelines->loaded_key[0])
      fail_msg("cut to %lld of %lld bytes: loaded", (long long)len, (long long)whole);
  }
  free(data);
  ino_t cut = file_inode(c->dir, ".bin");
  run_axpb(d);
  close_vk(d);
  assert_true(file_inode(c->dir, ".bin") != cut);
  assert_int_equal(find_file(c->dir, ".bin", path, sizeof path), whole);
}

/* A read-only cache ($TVK_CACHE_READONLY=1, DeviceOptions.cache_readonly):
 * hits are served from it, a miss is compiled and runs, and nothing in the
 * directory changes -- no new .spv, and no pipeline cache written back at
 * destroy although a pipeline was created. (A directory that cannot be written
 * is detected by the shared cache_dir_open: the cpu_device suite tests that.) */
static void test_spirv_cache_readonly(void **state) {
  CacheDir *c = *state;
  Device *d = open_vk_sync(0);
  run_axpb(d);
  close_vk(d);
  uint64_t before = dir_state(c->dir);
  for (int how = 0; how < 2; how++) {
    char *saved = env_save("TVK_CACHE_READONLY");
    if (how == 0) setenv("TVK_CACHE_READONLY", "1", 1);
    DeviceOptions opt = {.validate = 2, .cache_readonly = how};
    Error err;
    d = NULL;
    assert_int_equal(vk_device_create(&opt, -1, &d, &err), TVK_OK);
    bool hit = false;
    DevProgram *p = compile_ok(d, "axpb", k_axpb, &hit);
    assert_true(hit);
    assert_int_equal(shaderc_calls(d), 0);
    d->ops->program_free(d, p);
    for (int again = 0; again < 2; again++) { /* not in the cache, and not kept there */
      p = compile_ok(d, "inc", k_inc, &hit);
      assert_false(hit);
      assert_int_equal(shaderc_calls(d), 1 + again);
      enum { N = 100 };
      int32_t host[N], out[N], n = N;
      for (int i = 0; i < N; i++) host[i] = i * 3 - 50;
      DevBuffer *b[2] = {alloc_ok(d, sizeof out), alloc_ok(d, sizeof host)};
      assert_int_equal(d->ops->copy_in(d, b[1], 0, host, sizeof host), TVK_OK);
      LaunchDims dims = dims_for(N, 64);
      launch_ok(d, p, b, 2, &n, 1, &dims);
      assert_int_equal(d->ops->copy_out(d, b[0], 0, out, sizeof out), TVK_OK);
      for (int i = 0; i < N; i++) assert_int_equal(out[i], host[i] + 1);
      d->ops->free(d, b[0]);
      d->ops->free(d, b[1]);
      d->ops->program_free(d, p);
    }
    close_vk(d);
    env_restore("TVK_CACHE_READONLY", saved);
    assert_true(dir_state(c->dir) == before);
  }
}

static void test_dependent_chain(void **state) {
  (void)state;
  Device *d = open_vk_sync(0);
  dependent_chain(d);
  vk_of(d)->features &= ~(uint32_t)VKFEAT_PUSH_DESCRIPTOR; /* many pools per batch */
  dependent_chain(d);
  close_vk(d);
}

/* Kernels that only share what they read need no barrier; a kernel that reads
 * what an earlier one wrote, or overwrites what it read, does. */
static void test_barriers_only_where_needed(void **state) {
  (void)state;
  enum { N = 100, M = 8 };
  Device *d = open_vk_sync(0);
  DevProgram *p = compile_ok(d, "inc", k_inc, NULL);
  int32_t host[N], out[N];
  for (int i = 0; i < N; i++) host[i] = 3 * i;
  DevBuffer *in = alloc_ok(d, sizeof host), *outs[M];
  assert_int_equal(d->ops->copy_in(d, in, 0, host, sizeof host), TVK_OK);
  for (int k = 0; k < M; k++) outs[k] = alloc_ok(d, sizeof host);
  LaunchDims dims = dims_for(N, 64);
  int32_t n = N;
  VkDispatchStats s0, s1;
  vk_dispatch_stats(vk_of(d), &s0);
  for (int k = 0; k < M; k++) launch_ok(d, p, (DevBuffer *[]){outs[k], in}, 2, &n, 1, &dims);
  vk_dispatch_stats(vk_of(d), &s1);
  assert_int_equal(s1.barriers - s0.barriers, 0); /* independent */
  /* Reads outs[0] (written above): read after write. */
  launch_ok(d, p, (DevBuffer *[]){outs[1], outs[0]}, 2, &n, 1, &dims);
  vk_dispatch_stats(vk_of(d), &s0);
  assert_int_equal(s0.barriers - s1.barriers, 1);
  /* Writes outs[0], which the last kernel read: write after read. */
  launch_ok(d, p, (DevBuffer *[]){outs[0], in}, 2, &n, 1, &dims);
  vk_dispatch_stats(vk_of(d), &s1);
  assert_int_equal(s1.barriers - s0.barriers, 1);
  /* Reads `in` again, writes a buffer nothing touched in this batch: none. */
  DevBuffer *extra = alloc_ok(d, sizeof host);
  launch_ok(d, p, (DevBuffer *[]){extra, in}, 2, &n, 1, &dims);
  vk_dispatch_stats(vk_of(d), &s0);
  assert_int_equal(s0.barriers - s1.barriers, 0);
  /* Writes outs[7] again, still not made visible by any barrier: write after
   * write. It reads outs[1], written two kernels back: one barrier for both. */
  launch_ok(d, p, (DevBuffer *[]){outs[7], outs[1]}, 2, &n, 1, &dims);
  vk_dispatch_stats(vk_of(d), &s1);
  assert_int_equal(s1.barriers - s0.barriers, 1);
  assert_int_equal(d->ops->sync(d), TVK_OK);
  assert_int_equal(d->ops->copy_out(d, extra, 0, out, sizeof out), TVK_OK);
  for (int i = 0; i < N; i++) assert_int_equal(out[i], host[i] + 1);
  d->ops->free(d, extra);
  int want[M] = {1, 2, 1, 1, 1, 1, 1, 3};
  for (int k = 0; k < M; k++) {
    assert_int_equal(d->ops->copy_out(d, outs[k], 0, out, sizeof out), TVK_OK);
    for (int i = 0; i < N; i++) assert_int_equal(out[i], host[i] + want[k]);
  }
  for (int k = 0; k < M; k++) d->ops->free(d, outs[k]);
  d->ops->free(d, in);
  d->ops->program_free(d, p);
  close_vk(d);
}

/* A grid over the per-dimension limit is split; every logical group runs once
 * and sees its own (x, y, z). */
static void check_groups(Device *d, DevProgram *p, int64_t gx, int64_t gy, int64_t gz) {
  size_t total = (size_t)(gx * gy * gz);
  uint32_t *o = malloc(total * sizeof *o), count = 0;
  assert_non_null(o);
  DevBuffer *bo = alloc_ok(d, total * sizeof *o), *bc = alloc_ok(d, 4);
  assert_int_equal(d->ops->copy_in(d, bc, 0, &count, 4), TVK_OK);
  LaunchDims dims = {{gx, gy, gz}, {1, 1, 1}};
  launch_ok(d, p, (DevBuffer *[]){bo, bc}, 2, NULL, 0, &dims);
  assert_int_equal(d->ops->copy_out(d, bc, 0, &count, 4), TVK_OK);
  assert_int_equal(d->ops->copy_out(d, bo, 0, o, total * sizeof *o), TVK_OK);
  assert_int_equal(count, total);
  for (size_t lin = 0; lin < total; lin++) {
    uint32_t x = (uint32_t)(lin % (size_t)gx), y = (uint32_t)(lin / (size_t)gx % (size_t)gy);
    uint32_t z = (uint32_t)(lin / (size_t)(gx * gy));
    if (o[lin] != x * 7 + y * 3 + z) {
      fprintf(stderr, "grid %lldx%lldx%lld: group %zu wrote %u\n", (long long)gx, (long long)gy,
              (long long)gz, lin, o[lin]);
      fail();
    }
  }
  d->ops->free(d, bo);
  d->ops->free(d, bc);
  free(o);
}

static void test_group_split(void **state) {
  (void)state;
  Device *d = open_vk_sync(0);
  VkDev *v = vk_of(d);
  DevProgram *p = compile_ok(d, "groups", k_groups, NULL);
  /* Lowered to the spec's minimum (lavapipe's own), so that desktop GPUs with
   * 2^31-1 groups in x take the split path too. */
  for (int i = 0; i < 3; i++)
    if (v->lim.max_wg_count[i] > 65535) v->lim.max_wg_count[i] = 65535;
  int64_t mx = 65535;
  check_groups(d, p, 5, 3, 2);         /* fits: dispatched as is */
  check_groups(d, p, mx + 4465, 1, 1); /* 70,000 on a 65,535 limit */
  check_groups(d, p, mx + 1, 2, 1);    /* over the limit, with a y */
  check_groups(d, p, 3, mx + 7, 1);    /* y over its limit */
  /* More than the kernel's 32-bit linear id can count: refused. */
  LaunchDims big = {{(int64_t)1 << 16, (int64_t)1 << 16, 1}, {1, 1, 1}};
  DevBuffer *bo = alloc_ok(d, 4), *bc = alloc_ok(d, 4);
  assert_int_equal(d->ops->launch(d, p, (DevBuffer *[]){bo, bc}, 2, NULL, 0, &big),
                   TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(d->err.msg, "maxComputeWorkGroupCount"));
  /* An empty grid runs nothing. */
  LaunchDims none = {{0, 1, 1}, {1, 1, 1}};
  assert_int_equal(d->ops->launch(d, p, (DevBuffer *[]){bo, bc}, 2, NULL, 0, &none), TVK_OK);
  d->ops->free(d, bo);
  d->ops->free(d, bc);
  d->ops->program_free(d, p);
  close_vk(d);
}

static void test_compile_error(void **state) {
  (void)state;
  Device *d = open_vk_sync(0);
  static const char bad[] = GLSL_HEAD(64) "void main() {\n  uint i = gl_LocalInvocationID.x\n}\n";
  DevProgram *p = (DevProgram *)1;
  bool hit = true;
  assert_int_equal(d->ops->compile(d, "broken_kernel", bad, &p, &hit, NULL), TVK_ERR_COMPILE);
  assert_null(p);
  assert_false(hit);
  const char *e = d->err.msg;
  assert_non_null(strstr(e, "broken_kernel"));               /* the kernel's name */
  assert_non_null(strstr(e, "broken_kernel.comp:5: error")); /* shaderc's message, with the line */
  /* A local size over the device's limit never reaches a pipeline. */
  static const char wide[] =
      "#version 450\nlayout(local_size_x = 1024, local_size_y = 2) in;\nvoid main() {}\n";
  assert_int_equal(d->ops->compile(d, "wide", wide, &p, &hit, NULL), TVK_ERR_COMPILE);
  assert_non_null(strstr(d->err.msg, "maxComputeWorkGroupInvocations"));
  assert_int_equal(d->ops->compile(d, "bad name", k_inc, &p, &hit, NULL), TVK_ERR_INVALID_ARG);
  close_vk(d);
}

/* What launch refuses, with the limit named. */
static void test_launch_checks(void **state) {
  (void)state;
  Device *d = open_vk_sync(0);
  VkDev *v = vk_of(d);
  DevProgram *p = compile_ok(d, "inc", k_inc, NULL);
  DevBuffer *a = alloc_ok(d, 256), *b = alloc_ok(d, 256);
  DevBuffer *bufs[2] = {a, b};
  int32_t vals[64] = {64};
  LaunchDims dims = dims_for(64, 64);
  LaunchDims wrong = dims_for(64, 32);
  assert_int_equal(d->ops->launch(d, p, bufs, 2, vals, 1, &wrong), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(d->err.msg, "local_size 64x1x1"));
  int many = (int)(v->lim.max_push_constants / 4); /* 12 bytes of grid leave room for fewer */
  assert_int_equal(d->ops->launch(d, p, bufs, 2, vals, many, &dims), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(d->err.msg, "maxPushConstantsSize"));
  assert_int_equal(d->ops->launch(d, p, bufs, 2, vals, 0, &dims), TVK_ERR_INVALID_ARG);
  assert_non_null(strstr(d->err.msg, "values"));
  assert_int_equal(d->ops->launch(d, p, bufs, 1, vals, 1, &dims), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->launch(d, p, (DevBuffer *[]){a, NULL}, 2, vals, 1, &dims),
                   TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->launch(d, NULL, bufs, 2, vals, 1, &dims), TVK_ERR_INVALID_ARG);
  /* A buffer larger than one binding addresses is refused, never bound cut short. */
  VkDeviceSize range = v->lim.max_storage_range;
  if (range < ((VkDeviceSize)1 << 30) && range + 64 < v->lim.max_alloc) {
    DevBuffer *big = alloc_ok(d, (size_t)range + 64);
    assert_int_equal(d->ops->launch(d, p, (DevBuffer *[]){big, b}, 2, vals, 1, &dims),
                     TVK_ERR_DEVICE);
    assert_non_null(strstr(d->err.msg, "maxStorageBufferRange"));
    d->ops->free(d, big);
  }
  /* Nothing was recorded by the refusals. */
  VkDispatchStats s;
  vk_dispatch_stats(v, &s);
  assert_int_equal(s.dispatches, 0);
  /* A program freed right after its launch waits for it (validation would
   * report a pipeline destroyed while in use). */
  launch_ok(d, p, bufs, 2, vals, 1, &dims);
  d->ops->program_free(d, p);
  assert_int_equal(d->ops->sync(d), TVK_OK);
  d->ops->free(d, a);
  d->ops->free(d, b);
  close_vk(d);
}

/* At TVK_DEBUG >= 1 each dispatch is timed and printed after completion. */
static void test_timestamps(void **state) {
  (void)state;
  Device *d = open_vk_sync(1);
  if (!(vk_of(d)->features & VKFEAT_TIMESTAMPS)) {
    fprintf(stderr, "the queue has no timestamps: nothing to time\n");
    close_vk(d);
    skip(); /* reported as skipped, not passed */
  }
  DevProgram *p = compile_ok(d, "timed_kernel", k_inc, NULL);
  DevBuffer *a = alloc_ok(d, 4096), *b = alloc_ok(d, 4096);
  int32_t n = 1024;
  LaunchDims dims = dims_for(n, 64);
  char path[] = "/tmp/tvk-test-vk-stderr-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  tvk_status st1 = d->ops->launch(d, p, (DevBuffer *[]){a, b}, 2, &n, 1, &dims);
  tvk_status st2 = d->ops->launch(d, p, (DevBuffer *[]){b, a}, 2, &n, 1, &dims);
  tvk_status st3 = d->ops->sync(d);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char text[4096] = {0};
  lseek(fd, 0, SEEK_SET);
  ssize_t got = read(fd, text, sizeof text - 1);
  close(fd);
  unlink(path);
  assert_int_equal(st1, TVK_OK);
  assert_int_equal(st2, TVK_OK);
  assert_int_equal(st3, TVK_OK);
  assert_true(got > 0);
  fprintf(stderr, "%s", text);
  int lines = 0;
  for (const char *s = text; (s = strstr(s, "tvk: VK kernel timed_kernel: ")); s++) {
    double ms = -1;
    assert_int_equal(sscanf(s, "tvk: VK kernel timed_kernel: %lf ms", &ms), 1);
    assert_true(ms >= 0 && ms < 10000);
    lines++;
  }
  assert_int_equal(lines, 2);
  d->ops->free(d, a);
  d->ops->free(d, b);
  d->ops->program_free(d, p);
  close_vk(d);
}

/* Graphs: K dependent kernels recorded once, submitted three times without a
 * sync between, with plain launches between two of the submissions, give the
 * result of running them all in that order; freeing a graph whose run is
 * pending waits for it. Under synchronization validation, with push
 * descriptors and with the graph's own descriptor pools (K needs two). */
static void graph_chain(Device *d) {
  enum { N = 200, K = 100 };
  int32_t host[N], out[N];
  for (int i = 0; i < N; i++) host[i] = 5 * i - 300;
  DevProgram *p = compile_ok(d, "inc", k_inc, NULL);
  DevBuffer *b[2] = {alloc_ok(d, sizeof host), alloc_ok(d, sizeof host)};
  assert_int_equal(d->ops->copy_in(d, b[0], 0, host, sizeof host), TVK_OK);
  LaunchDims dims = dims_for(N, 64);
  int32_t n = N;
  DevBuffer *pairs[K][2];
  DevLaunch l[K];
  for (int k = 0; k < K; k++) {
    pairs[k][0] = b[(k + 1) % 2], pairs[k][1] = b[k % 2]; /* out, in: ends in b[0] */
    l[k] = (DevLaunch){p, pairs[k], 2, &n, 1, &dims};
  }
  DevGraph *g = NULL;
  assert_int_equal(d->ops->graph_create(d, l, K, &g), TVK_OK);
  assert_non_null(g);
  VkDispatchStats s0, s1;
  vk_dispatch_stats(vk_of(d), &s0);
  assert_int_equal(d->ops->graph_launch(d, g), TVK_OK);
  assert_int_equal(d->ops->graph_launch(d, g), TVK_OK); /* waits for the first run */
  launch_ok(d, p, (DevBuffer *[]){b[1], b[0]}, 2, &n, 1, &dims);
  launch_ok(d, p, (DevBuffer *[]){b[0], b[1]}, 2, &n, 1, &dims);
  assert_int_equal(d->ops->graph_launch(d, g), TVK_OK);
  assert_int_equal(d->ops->sync(d), TVK_OK);
  vk_dispatch_stats(vk_of(d), &s1);
  assert_int_equal(s1.dispatches - s0.dispatches, 3 * K + 2);
  assert_int_equal(s1.submits - s0.submits, 4);
  assert_int_equal(d->ops->copy_out(d, b[0], 0, out, sizeof out), TVK_OK);
  for (int i = 0; i < N; i++)
    if (out[i] != host[i] + 3 * K + 2) {
      fprintf(stderr, "element %d: %d, want %d\n", i, out[i], host[i] + 3 * K + 2);
      fail();
    }
  assert_int_equal(d->ops->graph_launch(d, g), TVK_OK);
  d->ops->graph_free(d, g); /* pending: waits */
  assert_int_equal(d->ops->copy_out(d, b[0], 0, out, sizeof out), TVK_OK);
  for (int i = 0; i < N; i++) assert_int_equal(out[i], host[i] + 4 * K + 2);
  /* a bad launch: nothing is made, and the message names the kernel */
  l[3].bufs = (DevBuffer *[]){b[0], NULL};
  g = (DevGraph *)&g;
  assert_int_equal(d->ops->graph_create(d, l, K, &g), TVK_ERR_INVALID_ARG);
  assert_null(g);
  assert_non_null(strstr(d->err.msg, "'inc'"));
  assert_int_equal(d->ops->graph_create(d, l, -1, &g), TVK_ERR_INVALID_ARG);
  assert_int_equal(d->ops->graph_launch(d, NULL), TVK_ERR_INVALID_ARG);
  d->ops->graph_free(d, NULL);
  /* an empty graph runs nothing */
  assert_int_equal(d->ops->graph_create(d, l, 0, &g), TVK_OK);
  assert_int_equal(d->ops->graph_launch(d, g), TVK_OK);
  d->ops->graph_free(d, g);
  d->ops->free(d, b[0]);
  d->ops->free(d, b[1]);
  d->ops->program_free(d, p);
}

static void test_graph(void **state) {
  (void)state;
  Device *d = open_vk_sync(0);
  graph_chain(d);
  vk_of(d)->features &= ~(uint32_t)VKFEAT_PUSH_DESCRIPTOR; /* the graph's own pools */
  graph_chain(d);
  /* a graph still alive goes with the device (the ASan build checks) */
  DevProgram *p = compile_ok(d, "inc", k_inc, NULL);
  DevBuffer *b = alloc_ok(d, 256);
  int32_t n = 64;
  LaunchDims dims = dims_for(n, 64);
  DevGraph *g = NULL;
  assert_int_equal(
      d->ops->graph_create(d, &(DevLaunch){p, (DevBuffer *[]){b, b}, 2, &n, 1, &dims}, 1, &g),
      TVK_OK);
  assert_int_equal(d->ops->graph_launch(d, g), TVK_OK);
  close_vk(d);
}

#define DISPATCH_TESTS                                                                             \
  , cmocka_unit_test(test_compile_and_run),                                                        \
      cmocka_unit_test_setup_teardown(test_spirv_cache, setup_cache, teardown_cache),              \
      cmocka_unit_test_setup_teardown(test_spirv_cache_damaged, setup_cache, teardown_cache),      \
      cmocka_unit_test_setup_teardown(test_pipeline_cache_truncated, setup_cache, teardown_cache), \
      cmocka_unit_test_setup_teardown(test_spirv_cache_readonly, setup_cache, teardown_cache),     \
      cmocka_unit_test(test_dependent_chain), cmocka_unit_test(test_barriers_only_where_needed),   \
      cmocka_unit_test(test_group_split), cmocka_unit_test(test_compile_error),                    \
      cmocka_unit_test(test_launch_checks), cmocka_unit_test(test_timestamps),                     \
      cmocka_unit_test(test_graph)

/* ================================================================ main */

int main(void) {
  /* Devices find their cache through $TVK_CACHE_DIR: the build tree's, also
   * when the suite is run by hand. */
  setenv("TVK_CACHE_DIR", test_cache_dir(), 1);
  const struct CMUnitTest tests[] = {DEVICE_MEMORY_TESTS DISPATCH_TESTS};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
