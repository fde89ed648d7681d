/* Internals of the CPU backend, shared by its files only (src/ never sees them).
 *
 *   cpu_device.c   the DeviceOps table: buffers, programs, launch
 *   cpu_pool.c     the persistent thread pool a launch runs on
 *   cpu_compile.c  the C compiler: finding it, running it, loading its output
 *   cpu_identity.c the CPU identity that goes into the cache key
 *
 * docs/cpu_backend.md describes the kernel ABI, the cache and the threading.
 */
#ifndef TVK_BACKEND_CPU_INTERNAL_H
#define TVK_BACKEND_CPU_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/cache.h"
#include "runtime/device.h"

/* The ABI of a compiled kernel: buffer data pointers, symbolic int values, and
 * which of the n_cores calls of one launch this is. */
typedef void (*CpuKernelFn)(void *const *bufs, const int32_t *vals, int32_t core_id,
                            int32_t n_cores);

/* ---- thread pool (cpu_pool.c) ---- */

typedef struct CpuPool CpuPool;

/* Starts n-1 workers; the launching thread is core 0. n >= 1. On failure writes
 * a message into err and returns TVK_ERR_DEVICE or TVK_ERR_OUT_OF_MEMORY. */
tvk_status cpu_pool_create(int n, CpuPool **out, Error *err);
/* Calls fn(bufs, vals, core, cores) for every core in 0..cores-1 (cores
 * clamped to 1..n), in parallel, and returns when all calls have returned;
 * with one core, directly on the calling thread. Launches from several
 * threads are serialised. */
void cpu_pool_run(CpuPool *p, int cores, CpuKernelFn fn, void *const *bufs, const int32_t *vals);
/* Joins the workers; NULL ok. */
void cpu_pool_destroy(CpuPool *p);

/* ---- compiler (cpu_compile.c) ---- */

/* What a device knows about its compiler and CPU. Probing the compiler
 * (`cc --version`) and creating the cache directory happen at the first
 * compile, under `mu`, so a device without a compiler can still be created. */
typedef struct {
  pthread_mutex_t mu;
  char *cc_request;    /* opt->cc or $CC; NULL: try cc, gcc, clang */
  char *cache_request; /* opt->cache_dir or $TVK_CACHE_DIR; NULL: default places */
  char cpu_model[128]; /* for the device name */
  char *cpu_id;        /* identity lines of /proc/cpuinfo; NULL if unknown */
  int timeout_s;       /* opt->cc_timeout, $TVK_CC_TIMEOUT or 120: one compiler run at most */
  bool want_ro;        /* opt->cache_readonly or $TVK_CACHE_READONLY */
  bool no_disk;        /* opt->no_disk_cache: no cache directory, every kernel built privately */
  bool probed;         /* cc, cc_version, cache_dir and cache_ro below are set */
  char *cc;            /* the compiler that answered --version */
  char *cc_version;    /* its --version output */
  bool native;         /* -march=native: the CPU is known and cc targets this machine */
  char *cache_dir;
  bool cache_ro;     /* cache_dir is only read: misses go to private_dir */
  char *private_dir; /* mkdtemp'ed at the first miss of a read-only cache; removed by free */
} CpuToolchain;

/* Reads options, environment and /proc/cpuinfo; starts no process. Returns TVK_OK,
 * TVK_ERR_OUT_OF_MEMORY, or TVK_ERR_INVALID_ARG for a timeout that is not a
 * whole number of seconds > 0 (the message names the value). */
tvk_status cpu_toolchain_init(CpuToolchain *t, const DeviceOptions *opt, Error *err);
void cpu_toolchain_free(CpuToolchain *t);

/* Compiles `src` (or finds it in the cache) and loads it. On success *handle is
 * a dlopen handle and *fn the kernel `name` in it. Errors (in d->err):
 * TVK_ERR_DEVICE (no compiler, unusable cache directory, dlopen failure),
 * TVK_ERR_COMPILE (the compiler rejected the source or ran past the timeout and
 * was killed, or `name` is not in it). */
tvk_status cpu_compile(Device *d, CpuToolchain *t, const char *name, const char *src, void **handle,
                       CpuKernelFn *fn, bool *cache_hit);

/* The "model name" of /proc/cpuinfo (or "unknown CPU") into out; and, when id
 * is not NULL, a malloc'ed string of the lines that identify the CPU's
 * instruction set (NULL if none were found). */
void cpu_read_cpuinfo(char *model, size_t modeln, char **id);

#endif
