/* Internals of the CPU backend, shared by its files only (src/ never sees them).
 *
 *   cpu_device.c   the DeviceOps table: buffers, programs, launch
 *   cpu_pool.c     the persistent thread pool a launch runs on
 *   cpu_compile.c  the C compiler: finding it, running it, loading its output
 *   cpu_process.c  running a compiler as a child process, with a deadline
 *   cpu_identity.c the CPU identity that goes into the cache key
 *   cpu_program.c  programs: the compile tiers and the background builders
 *   cpu_tcc.c      the fast tier: kernels compiled by TinyCC, in memory by
 *                  libtcc or (the shared library) by the tcc executable
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
  char *cc_request;     /* opt->cc or $CC; NULL: try cc, gcc, clang */
  char *cache_request;  /* opt->cache_dir or $TVK_CACHE_DIR; NULL: default places */
  char cpu_model[128];  /* for the device name */
  char *cpu_id;         /* identity lines of /proc/cpuinfo; NULL if unknown */
  int timeout_s;        /* opt->cc_timeout, $TVK_CC_TIMEOUT or 120: one compiler run at most */
  bool want_ro;         /* opt->cache_readonly or $TVK_CACHE_READONLY */
  bool no_disk;         /* opt->no_disk_cache: no cache directory, every kernel built privately */
  bool probed;          /* cc, cc_version, cache_dir and cache_ro below are set */
  char *cc;             /* the compiler that answered --version; NULL: none works */
  char *cc_error;       /* why there is none (for the first build that needs one) */
  tvk_status cc_status; /* its status: TVK_ERR_DEVICE, or TVK_ERR_COMPILE for a hung one */
  char *cc_version;     /* its --version output */
  bool native;          /* -march=native: the CPU is known and cc targets this machine */
  char *cache_dir;
  bool cache_ro;     /* cache_dir is only read: misses go to private_dir */
  char *private_dir; /* mkdtemp'ed at the first miss of a read-only cache; removed by free */
} CpuToolchain;

/* Reads options, environment and /proc/cpuinfo; starts no process. Returns TVK_OK,
 * TVK_ERR_OUT_OF_MEMORY, or TVK_ERR_INVALID_ARG for a timeout that is not a
 * whole number of seconds > 0 (the message names the value). */
tvk_status cpu_toolchain_init(CpuToolchain *t, const DeviceOptions *opt, Error *err);
void cpu_toolchain_free(CpuToolchain *t);

/* Kernel `name` of `src` from the cache, if a build of it for this machine is
 * there: *found, with *handle a dlopen handle and *fn the kernel. Runs no
 * compiler (only `cc --version` once, to know whose builds to look for; a
 * device without a compiler takes any build for this machine). Errors go to
 * err (never the device's, so several threads may call at once):
 * TVK_ERR_INVALID_ARG (no source, a name that is not a C identifier),
 * TVK_ERR_DEVICE (an unusable cache directory), TVK_ERR_COMPILE (the cached
 * object lacks `name`). */
tvk_status cpu_cache_load(Error *err, CpuToolchain *t, const char *name, const char *src,
                          void **handle, CpuKernelFn *fn, bool *found);
/* Builds src with the system compiler into the cache (or a read-only cache's
 * private directory) and loads it. Errors (in err): TVK_ERR_DEVICE (no
 * compiler: the message says what to install; no usable directory; dlopen
 * failed), TVK_ERR_COMPILE (the compiler rejected the source, or ran past the
 * timeout and was killed, or `name` is not in its output). */
tvk_status cpu_cc_build(Error *err, CpuToolchain *t, const char *name, const char *src,
                        void **handle, CpuKernelFn *fn);
/* ---- programs (cpu_program.c) ---- */

typedef struct CpuPrograms CpuPrograms;

/* tiers: a tvk_cpu_tiers other than DEFAULT; cores bounds the builder
 * threads. Starts no thread (the first background build does). */
tvk_status cpu_programs_create(CpuToolchain *tc, int tiers, int cores, LogSink log,
                               CpuPrograms **out, Error *err);
/* The program of kernel `name`: from the disk cache (*cache_hit), else as the
 * tiers say. Errors in err; thread-safe. */
tvk_status cpu_program_build(CpuPrograms *ps, Device *owner, const char *name, const char *src,
                             DevProgram **out, bool *cache_hit, Error *err);
/* The function a launch of p calls now. */
CpuKernelFn cpu_program_fn(DevProgram *p);
Device *cpu_program_owner(const DevProgram *p);
const char *cpu_program_name(const DevProgram *p);
/* Frees p (NULL ok); its pending background build is cancelled. */
void cpu_program_free(CpuPrograms *ps, DevProgram *p);
/* Returns when no background build is queued or running. */
void cpu_programs_wait(CpuPrograms *ps);
/* Stops the builders (waiting for a build in progress) and frees every
 * program; NULL ok. */
void cpu_programs_destroy(CpuPrograms *ps);

/* ---- child processes (cpu_process.c) ---- */

/* What a compiler said is kept up to this size; the rest is drained. */
enum { CC_OUTPUT_CAP = 16 * 1024 };

typedef struct {
  int status;              /* exit status; 128 + signal number when killed */
  bool timed_out;          /* it ran past the timeout and was killed */
  size_t len;              /* bytes kept in out */
  char out[CC_OUTPUT_CAP]; /* stdout and stderr interleaved, NUL-terminated */
} CpuRun;

/* Runs argv (argv[0] looked up in PATH unless it has a '/') with stdin from
 * /dev/null and stdout+stderr captured into r, for at most timeout_s seconds.
 * The child leads a process group of its own, so that on a timeout the whole
 * group (cc and the cc1, as and ld it started) is killed: SIGTERM first, so a
 * compiler can remove its temporary files, then SIGKILL. The child is always
 * reaped. Returns 0 when the process ran (r->timed_out says whether it was
 * killed), else the errno of the failure to start it. */
int cpu_run_process(char *const argv[], int timeout_s, CpuRun *r);

/* ---- the fast tier (cpu_tcc.c) ---- */

/* Whether this build has libtcc. */
bool cpu_tcc_available(void);
/* Compiles src in memory with TinyCC: *state (freed by cpu_tcc_free) holds
 * the code of *fn, the kernel `name`. TVK_ERR_COMPILE with TinyCC's messages
 * when it rejects the source; TVK_ERR_DEVICE without libtcc. Thread-safe. */
tvk_status cpu_tcc_compile(const char *name, const char *src, void **state, CpuKernelFn *fn,
                           Error *err);
void cpu_tcc_free(void *state); /* NULL ok */

/* The "model name" of /proc/cpuinfo (or "unknown CPU") into out; and, when id
 * is not NULL, a malloc'ed string of the lines that identify the CPU's
 * instruction set (NULL if none were found). */
void cpu_read_cpuinfo(char *model, size_t modeln, char **id);

/* The size in bytes of the first core's level-2 cache (its data or unified
 * cache), from sysfs (Linux, Android), else sysconf where the C library
 * reports it; 0 when neither knows. */
size_t cpu_l2_bytes(void);

#endif
