/* The CPU backend's compiler driver: finds the system C compiler, turns a
 * kernel's C source into a shared object in the on-disk cache, and loads it.
 * The compiler runs as a child process (cpu_process.c). */
#include "cpu_internal.h"
#include "ir/strbuf.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* Seconds one compiler run may take unless TVK_CC_TIMEOUT says otherwise:
 * far more than any kernel needs (about 0.1 s), so only a hung compiler (a
 * wrapper waiting on a lock or a licence server) ever reaches it. */
enum { CC_TIMEOUT_DEFAULT = 120, CC_TIMEOUT_MAX = 1000000 };

/* Always passed; -march=native is added only when the CPU is known (and part
 * of the key) and the compiler builds for this machine (cc_is_native).
 * No contraction: a*b+c is rounded twice, as written and as on Vulkan
 * (`precise`). -fno-trapping-math changes no value (kernels never read the
 * floating-point exception flags) but lets gcc if-convert compares and
 * selects in loops and so vectorise them (softmax's exp: 6x). */
static const char *const cc_flags[] = {"-O2", "-fPIC", "-shared", "-ffp-contract=off",
                                       "-fno-trapping-math"};
static const char *const cc_flag_native = "-march=native";
/* Tried in order when neither the options nor $CC name a compiler. */
static const char *const cc_defaults[] = {"cc", "gcc", "clang"};

/* ---- toolchain ---- */

/* strdup of an option, or of the environment variable when the option is
 * unset; empty strings count as unset. *dst stays NULL when neither is set. */
static bool dup_setting(char **dst, const char *opt, const char *env) {
  const char *v = opt && *opt ? opt : getenv(env);
  *dst = NULL;
  if (!v || !*v) return true;
  *dst = strdup(v);
  return *dst != NULL;
}

/* The timeout of a compiler run: opt->cc_timeout, else $TVK_CC_TIMEOUT, else
 * the default. A value that is not a whole number of seconds is an error rather
 * than silently the default, since a typo would otherwise go unnoticed. */
static tvk_status read_timeout(CpuToolchain *t, const DeviceOptions *opt, Error *err) {
  t->timeout_s = CC_TIMEOUT_DEFAULT;
  if (opt && opt->cc_timeout < 0)
    return err_set(err, TVK_ERR_INVALID_ARG,
                   "cpu_device_create: cc_timeout is %d (seconds; 0 means $TVK_CC_TIMEOUT, "
                   "else %d)",
                   opt->cc_timeout, CC_TIMEOUT_DEFAULT);
  if (opt && opt->cc_timeout > 0) {
    t->timeout_s = opt->cc_timeout < CC_TIMEOUT_MAX ? opt->cc_timeout : CC_TIMEOUT_MAX;
    return TVK_OK;
  }
  const char *v = getenv("TVK_CC_TIMEOUT");
  if (!v || !*v) return TVK_OK;
  char *end;
  errno = 0;
  long secs = strtol(v, &end, 10);
  if (errno || end == v || *end || secs <= 0 || secs > CC_TIMEOUT_MAX)
    return err_set(err, TVK_ERR_INVALID_ARG,
                   "TVK_CC_TIMEOUT is '%s': expected a whole number of seconds from 1 to %d", v,
                   CC_TIMEOUT_MAX);
  t->timeout_s = (int)secs;
  return TVK_OK;
}

tvk_status cpu_toolchain_init(CpuToolchain *t, const DeviceOptions *opt, Error *err) {
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->mu, NULL);
  cpu_read_cpuinfo(t->cpu_model, sizeof t->cpu_model, &t->cpu_id);
  if (!dup_setting(&t->cc_request, opt ? opt->cc : NULL, "CC") ||
      !dup_setting(&t->cache_request, opt ? opt->cache_dir : NULL, "TVK_CACHE_DIR")) {
    return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory reading the CPU device options");
  }
  t->want_ro = cache_readonly_wanted(opt ? opt->cache_readonly : 0);
  t->no_disk = opt && opt->no_disk_cache > 0;
  return read_timeout(t, opt, err);
}

/* Removes the private build directory of a read-only cache and what is in it
 * (the device's programs are closed by now). Only regular files are there:
 * the .so files and the temp files of a build. */
static void remove_private_dir(const char *dir) {
  DIR *dd = opendir(dir);
  struct dirent *e;
  while (dd && (e = readdir(dd))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path) unlink(path);
  }
  if (dd) closedir(dd);
  rmdir(dir);
}

void cpu_toolchain_free(CpuToolchain *t) {
  if (t->private_dir) remove_private_dir(t->private_dir);
  free(t->private_dir);
  free(t->cc_request);
  free(t->cache_request);
  free(t->cpu_id);
  free(t->cc);
  free(t->cc_version);
  free(t->cc_error);
  free(t->cache_dir);
  pthread_mutex_destroy(&t->mu);
}

/* ---- probing the compiler and the cache directory ---- */

/* Asks `cc --version`. Returns 0 and sets t->cc / t->cc_version when it
 * answered, else the errno of the failed start, EINVAL for a nonzero exit, or
 * ETIMEDOUT when it did not answer in time (and was killed). */
static int probe_cc(CpuToolchain *t, const char *cc, CpuRun *r) {
  char *argv[] = {(char *)cc, "--version", NULL};
  int rc = cpu_run_process(argv, t->timeout_s, r);
  if (rc == 0 && r->timed_out) rc = ETIMEDOUT;
  if (rc == 0 && r->status != 0) rc = EINVAL;
  if (rc != 0) return rc;
  t->cc = strdup(cc);
  t->cc_version = strdup(r->out);
  if (!t->cc || !t->cc_version) {
    free(t->cc), free(t->cc_version);
    t->cc = t->cc_version = NULL;
    return ENOMEM;
  }
  return 0;
}

/* This library's architecture as the first word of a target triple. */
#if defined(__x86_64__)
#define CPU_ARCH "x86_64"
#elif defined(__aarch64__)
#define CPU_ARCH "aarch64"
#elif defined(__riscv) && __riscv_xlen == 64
#define CPU_ARCH "riscv64"
#else
#define CPU_ARCH NULL
#endif

/* Whether t->cc builds for this machine (`cc -dumpmachine` starts with its
 * architecture), so -march=native means this CPU. A cross compiler (tests
 * under qemu-user run with CC=aarch64-linux-gnu-gcc on an x86 host), or one
 * that cannot say, gets its own default target instead. */
static bool cc_is_native(CpuToolchain *t, CpuRun *r) {
  const char *arch = CPU_ARCH;
  if (!arch || !t->cc) return false;
  char *argv[] = {t->cc, "-dumpmachine", NULL};
  int rc = cpu_run_process(argv, t->timeout_s, r);
  if (rc == 0 && r->timed_out) {
    /* a compiler that hangs here would hang on every kernel too, each
     * costing a whole timeout: it is not used, and the kernels say why */
    Str msg = {0};
    str_printf(&msg,
               "C compiler '%s' did not answer -dumpmachine within %d s (TVK_CC_TIMEOUT); "
               "it was killed",
               t->cc, t->timeout_s);
    free(t->cc), free(t->cc_version), free(t->cc_error);
    t->cc = t->cc_version = NULL;
    t->cc_status = TVK_ERR_COMPILE, t->cc_error = str_take(&msg);
    return false;
  }
  if (rc != 0 || r->status != 0) return false;
  size_t n = strlen(arch);
  return strncmp(r->out, arch, n) == 0 && (r->out[n] == '-' || r->out[n] == '\n');
}

/* A compiler that hangs on --version is reported at once, not skipped for the
 * next candidate: each would cost a whole timeout, and the user has to know. */
static tvk_status probe_timed_out(Error *err, const CpuToolchain *t, const char *cc,
                                  const char *kernel) {
  return err_set(err, TVK_ERR_COMPILE,
                 "C compiler '%s' did not answer --version within %d s (TVK_CC_TIMEOUT) while "
                 "compiling kernel '%s'; it was killed",
                 cc, t->timeout_s, kernel);
}

static tvk_status find_cc(Error *err, CpuToolchain *t, CpuRun *r, const char *kernel) {
  if (t->cc_request) {
    int rc = probe_cc(t, t->cc_request, r);
    /* Only the first line: that is where a compiler (or a wrapper) says what
     * is wrong; the rest would bury it. */
    int first = (int)strcspn(r->out, "\r\n");
    const char *line = first ? r->out : "(no output)";
    if (rc == EINVAL)
      return err_set(err, TVK_ERR_DEVICE,
                     "C compiler '%s' failed on --version (exit status %d): %.*s", t->cc_request,
                     r->status, first ? first : (int)strlen(line), line);
    if (rc == ETIMEDOUT) return probe_timed_out(err, t, t->cc_request, kernel);
    if (rc != 0)
      return err_set(err, TVK_ERR_DEVICE,
                     "no C compiler found: tried '%s' (%s) (set CC or install gcc)", t->cc_request,
                     strerror(rc));
    return TVK_OK;
  }
  for (size_t i = 0; i < sizeof cc_defaults / sizeof cc_defaults[0]; i++) {
    int rc = probe_cc(t, cc_defaults[i], r);
    if (rc == 0) return TVK_OK;
    if (rc == ETIMEDOUT) return probe_timed_out(err, t, cc_defaults[i], kernel);
    if (rc == ENOMEM)
      return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory probing '%s'", cc_defaults[i]);
  }
  return err_set(err, TVK_ERR_DEVICE,
                 "no C compiler found: tried 'cc', 'gcc', 'clang' in PATH (set CC or install gcc)");
}

/* Compilers that answered, once per process: probing one costs two
 * processes (--version, -dumpmachine: about 10 ms), which every context would
 * pay again. Keyed by what chose it (the request, PATH for a search) and
 * whether the CPU is known (-march=native depends on it). A compiler that
 * failed is probed again, so it is reported to each device. Kept for the
 * process's life. */
typedef struct ProbeMemo {
  struct ProbeMemo *next;
  char *request, *path, *cc, *version;
  bool cpu_known, native;
} ProbeMemo;

static pthread_mutex_t memo_mu = PTHREAD_MUTEX_INITIALIZER;
static ProbeMemo *memo;

static bool same_str(const char *a, const char *b) { return !strcmp(a ? a : "", b ? b : ""); }

/* The PATH a request was searched in; NULL for a path (it has a '/'). */
static const char *memo_path(const CpuToolchain *t) {
  return t->cc_request && strchr(t->cc_request, '/') ? NULL : getenv("PATH");
}

/* Fills t's compiler from the memo; false when it holds none for t. */
static bool memo_get(CpuToolchain *t) {
  const char *path = memo_path(t);
  bool hit = false;
  pthread_mutex_lock(&memo_mu);
  for (ProbeMemo *m = memo; m && !hit; m = m->next) {
    if (!same_str(m->request, t->cc_request) || !same_str(m->path, path) ||
        m->cpu_known != (t->cpu_id != NULL))
      continue;
    t->cc = strdup(m->cc), t->cc_version = strdup(m->version);
    if (!t->cc || !t->cc_version) { /* out of memory: probe as if unknown */
      free(t->cc), free(t->cc_version);
      t->cc = t->cc_version = NULL;
      break;
    }
    t->native = m->native, hit = true;
  }
  pthread_mutex_unlock(&memo_mu);
  return hit;
}

/* Remembers t's working compiler (nothing when out of memory). */
static void memo_put(const CpuToolchain *t) {
  const char *path = memo_path(t);
  ProbeMemo *m = calloc(1, sizeof *m);
  if (m) {
    m->request = t->cc_request ? strdup(t->cc_request) : NULL;
    m->path = path ? strdup(path) : NULL;
    m->cc = strdup(t->cc), m->version = strdup(t->cc_version);
    m->cpu_known = t->cpu_id != NULL, m->native = t->native;
  }
  if (!m || (t->cc_request && !m->request) || (path && !m->path) || !m->cc || !m->version) {
    if (m) free(m->request), free(m->path), free(m->cc), free(m->version);
    free(m);
    return;
  }
  pthread_mutex_lock(&memo_mu);
  m->next = memo, memo = m;
  pthread_mutex_unlock(&memo_mu);
}

/* First compile of a device: find the compiler and the cache directory. A
 * compiler that is missing (or broken, or hung) is no error yet: kernels
 * cached for this machine still load, and TinyCC may build the rest; its
 * message is kept for the first kernel that needs it (need_cc). */
static tvk_status probe(Error *err, CpuToolchain *t, const char *kernel) {
  pthread_mutex_lock(&t->mu);
  tvk_status st = TVK_OK;
  if (!t->probed) {
    CpuRun *r = malloc(sizeof *r);
    st = r ? TVK_OK : err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory probing the C compiler");
    bool known = st == TVK_OK && !t->cc && memo_get(t);
    if (st == TVK_OK && !t->cc) {
      Error found;
      err_clear(&found);
      tvk_status cs = find_cc(&found, t, r, kernel);
      if (cs == TVK_ERR_OUT_OF_MEMORY)
        st = err_set(err, cs, "%s", found.msg);
      else if (cs != TVK_OK)
        t->cc_status = cs, t->cc_error = strdup(found.msg);
    }
    if (st == TVK_OK && !known) {
      t->native = t->cc && t->cpu_id && cc_is_native(t, r);
      if (t->cc) memo_put(t);
    }
    if (st == TVK_OK && t->no_disk)
      t->cache_ro = true; /* no directory: what is built goes to the private one */
    else if (st == TVK_OK)
      st = cache_dir_open(t->cache_request, t->want_ro, &t->cache_dir, &t->cache_ro, err);
    t->probed = st == TVK_OK;
    free(r);
  }
  pthread_mutex_unlock(&t->mu);
  return st;
}

/* The error of a build that needs the system compiler when there is none. */
static tvk_status need_cc(Error *err, const CpuToolchain *t, const char *kernel) {
  if (t->cc) return TVK_OK;
  return err_set(err, t->cc_status ? t->cc_status : TVK_ERR_DEVICE,
                 "kernel '%s' is not in the kernel cache and cannot be built: %s%s", kernel,
                 t->cc_error ? t->cc_error : "no C compiler",
                 cpu_tcc_available() ? ""
                                     : "; or build tvk with libtcc (libtcc-dev) to compile "
                                       "kernels in process");
}

/* A read-only cache cannot take new kernels, so a device builds them in a
 * directory of its own, made at its first miss: private (mkdtemp, 0700), since
 * what is in it gets loaded, and removed when the device is destroyed. */
static tvk_status private_dir(Error *err, CpuToolchain *t, const char *kernel, const char **dir) {
  pthread_mutex_lock(&t->mu);
  tvk_status st = TVK_OK;
  if (!t->private_dir) {
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    size_t n = strlen(tmp) + 32;
    char *path = malloc(n);
    if (!path) {
      st = err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory compiling kernel '%s'", kernel);
    } else {
      snprintf(path, n, "%s/tvk-build-XXXXXX", tmp);
      if (mkdtemp(path)) {
        t->private_dir = path;
      } else {
        st = err_set(err, TVK_ERR_DEVICE,
                     "kernel cache '%s' is read-only, and no directory to build kernel '%s' in "
                     "could be made: '%s': %s",
                     t->cache_dir ? t->cache_dir : "(none: no_disk_cache)", kernel, path,
                     strerror(errno));
        free(path);
      }
    }
  }
  *dir = t->private_dir;
  pthread_mutex_unlock(&t->mu);
  return st;
}

/* ---- compiling ---- */

static bool valid_name(const char *s) {
  if (!s || !(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
  for (; *s; s++) {
    char c = *s;
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return false;
  }
  return true;
}

/* A kernel's file in the cache is "<machine>-<compiler>.so". The first part
 * hashes what the .so must fit: the source, the flags, this CPU's identity
 * and architecture; the second the compiler that built it (path, --version
 * and -march=native). A device with a compiler loads only its own builds, so
 * a new compiler version makes new entries; one without a compiler loads any
 * build for this machine (find_any), since each of them runs here. */
enum { KEY_MACHINE = 32, KEY_CC = 16, KEY_LEN = KEY_MACHINE + 1 + KEY_CC };

static void machine_key(const CpuToolchain *t, const char *src, char key[KEY_MACHINE + 1]) {
  CacheHash h;
  cache_hash_init(&h);
  cache_hash_field(&h, "tvk-cpu-v3"); /* v3: the key split into machine and compiler */
  cache_hash_field(&h, src);
  for (size_t i = 0; i < sizeof cc_flags / sizeof cc_flags[0]; i++)
    cache_hash_field(&h, cc_flags[i]);
  cache_hash_field(&h, CPU_ARCH ? CPU_ARCH : "unknown");
  cache_hash_field(&h, t->cpu_id);
  cache_hash_hex(&h, key);
}

/* machine-key "-" compiler-key of t's compiler (which must exist). */
static void cache_key(const CpuToolchain *t, const char *src, char key[KEY_LEN + 1]) {
  machine_key(t, src, key);
  CacheHash h;
  cache_hash_init(&h);
  cache_hash_field(&h, t->cc);
  cache_hash_field(&h, t->cc_version);
  cache_hash_field(&h, t->native ? cc_flag_native : "");
  char cc[33];
  cache_hash_hex(&h, cc);
  key[KEY_MACHINE] = '-';
  memcpy(key + KEY_MACHINE + 1, cc, KEY_CC);
  key[KEY_LEN] = '\0';
}

static bool write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    s += w;
    n -= (size_t)w;
  }
  return true;
}

/* Paths of one compile: the final .so and the two temp files next to it. */
typedef struct {
  char so[4096];
  char src[4096];
  char tmp_so[4096];
} CpuPaths;

/* Writes the error of a failed compile: the compiler's output, cut to fit. */
static tvk_status compile_failed(Error *err, const CpuToolchain *t, const char *name,
                                 const CpuRun *r) {
  err_set(err, TVK_ERR_COMPILE, "C compiler '%s' failed on kernel '%s' (exit status %d):\n", t->cc,
          name, r->status);
  err_append(err, r->out);
  return TVK_ERR_COMPILE;
}

/* Publishes the compiler's output p->tmp_so as p->so, sealed, so that a later
 * load can tell a complete file from one cut short or damaged. */
static tvk_status publish_so(Error *err, const char *name, CpuPaths *p) {
  void *data;
  size_t n;
  int rc = cache_file_read(p->tmp_so, &data, &n);
  if (rc == 0) {
    rc = cache_file_write_sealed(p->so, data, n, 0755);
    free(data);
  }
  if (rc != 0)
    return err_set(err, rc == ENOMEM ? TVK_ERR_OUT_OF_MEMORY : TVK_ERR_DEVICE,
                   "cannot publish kernel '%s' as '%s': %s", name, p->so, strerror(rc));
  return TVK_OK;
}

/* Compiles src into p->so: source to a temp file, output to a temp name, then
 * published sealed by rename, so a reader (or a racing process) only ever sees
 * a complete .so. The file is made 0755 like any library. */
static tvk_status build_so(Error *err, const CpuToolchain *t, const char *name, const char *src,
                           CpuPaths *p) {
  int sfd = mkstemp(p->src);
  if (sfd < 0)
    return err_set(err, TVK_ERR_DEVICE, "cannot create '%s': %s", p->src, strerror(errno));
  /* Name the file after the kernel in the compiler's messages, which are
   * shorter and clearer than the temp path. */
  char line[160];
  snprintf(line, sizeof line, "#line 1 \"%s.c\"\n", name);
  bool ok = write_all(sfd, line, strlen(line)) && write_all(sfd, src, strlen(src));
  int werr = errno;
  close(sfd);
  int ofd = ok ? mkstemp(p->tmp_so) : -1;
  if (ofd >= 0) close(ofd);
  if (!ok || ofd < 0) {
    unlink(p->src);
    return err_set(err, TVK_ERR_DEVICE, "cannot write kernel '%s' into the cache: %s", name,
                   strerror(ok ? errno : werr));
  }
  const char *argv[16];
  int n = 0;
  argv[n++] = t->cc;
  for (size_t i = 0; i < sizeof cc_flags / sizeof cc_flags[0]; i++) argv[n++] = cc_flags[i];
  if (t->native) argv[n++] = cc_flag_native;
  const char *tail[] = {"-x", "c", p->src, "-x", "none", "-o", p->tmp_so, "-lm", NULL};
  for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++) argv[n++] = tail[i];

  tvk_status st = TVK_OK;
  CpuRun *r = malloc(sizeof *r);
  if (!r) {
    st = err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory compiling kernel '%s'", name);
  } else {
    int rc = cpu_run_process((char *const *)argv, t->timeout_s, r);
    if (rc != 0)
      st = err_set(err, TVK_ERR_DEVICE, "cannot run C compiler '%s': %s", t->cc, strerror(rc));
    else if (r->timed_out)
      st = err_set(err, TVK_ERR_COMPILE,
                   "C compiler '%s' timed out on kernel '%s': still running after %d s "
                   "(TVK_CC_TIMEOUT), so it was killed",
                   t->cc, name, t->timeout_s);
    else if (r->status != 0)
      st = compile_failed(err, t, name, r);
    else
      st = publish_so(err, name, p);
  }
  free(r);
  unlink(p->src);
  unlink(p->tmp_so);
  return st;
}

/* Looks up kernel `name` in the loaded object h; on failure closes h. */
static tvk_status find_symbol(Error *err, const char *name, const char *path, void *h,
                              void **handle, CpuKernelFn *fn) {
  void *sym = dlsym(h, name);
  if (!sym) {
    dlclose(h);
    return err_set(err, TVK_ERR_COMPILE, "kernel '%s' compiled, but '%s' defines no function '%s'",
                   name, path, name);
  }
  /* POSIX guarantees a dlsym'ed pointer converts to a function pointer. */
  memcpy(fn, &sym, sizeof *fn);
  *handle = h;
  return TVK_OK;
}

static tvk_status load(Error *err, const char *name, const char *path, void **handle,
                       CpuKernelFn *fn) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    return err_set(err, TVK_ERR_DEVICE, "cannot load kernel '%s' from '%s': %s", name, path,
                   e ? e : "unknown dlopen error");
  }
  return find_symbol(err, name, path, h, handle, fn);
}

/* Loads the cached object at path if its seal holds and dlopen takes it; then
 * *found is true and the status is find_symbol's. Anything else -- no file, a
 * file cut short (which dlopen would map past its end and die of SIGBUS), a
 * changed byte, a file dlopen rejects -- leaves *found false: it is rebuilt. */
static tvk_status load_cached(Error *err, const char *name, const char *path, void **handle,
                              CpuKernelFn *fn, bool *found) {
  *found = false;
  void *data;
  size_t n;
  if (cache_file_read_sealed(path, &data, &n) != 0) return TVK_OK;
  free(data);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return TVK_OK;
  *found = true;
  return find_symbol(err, name, path, h, handle, fn);
}

/* The paths of kernel `key` in dir. */
static tvk_status set_paths(Error *err, CpuPaths *p, const char *dir, const char *key) {
  int n1 = snprintf(p->so, sizeof p->so, "%s/%s.so", dir, key);
  int n2 = snprintf(p->src, sizeof p->src, "%s/%s.c-XXXXXX", dir, key);
  int n3 = snprintf(p->tmp_so, sizeof p->tmp_so, "%s/%s.so-XXXXXX", dir, key);
  if (n1 < 0 || n2 < 0 || n3 < 0 || (size_t)n3 >= sizeof p->tmp_so)
    return err_set(err, TVK_ERR_DEVICE, "kernel cache path too long: '%s'", dir);
  return TVK_OK;
}

/* Any build of src for this machine in dir (a "<machine>-*.so" whose seal
 * holds and that loads), for a device without a compiler. */
static tvk_status find_any(Error *err, const CpuToolchain *t, const char *dir, const char *name,
                           const char *src, void **handle, CpuKernelFn *fn, bool *found) {
  *found = false;
  char want[KEY_MACHINE + 2];
  machine_key(t, src, want);
  want[KEY_MACHINE] = '-';
  want[KEY_MACHINE + 1] = '\0';
  DIR *dd = opendir(dir);
  if (!dd) return TVK_OK;
  tvk_status st = TVK_OK;
  struct dirent *e;
  while (!*found && st == TVK_OK && (e = readdir(dd))) {
    size_t n = strlen(e->d_name);
    if (n != KEY_LEN + 3 || strncmp(e->d_name, want, KEY_MACHINE + 1) != 0 ||
        strcmp(e->d_name + KEY_LEN, ".so") != 0)
      continue;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
    st = load_cached(err, name, path, handle, fn, found);
  }
  closedir(dd);
  return st;
}

static tvk_status check_request(Error *err, const char *name, const char *src) {
  if (!src) return err_set(err, TVK_ERR_INVALID_ARG, "compile: kernel source is NULL");
  if (!valid_name(name))
    return err_set(err, TVK_ERR_INVALID_ARG, "compile: kernel name '%s' is not a C identifier",
                   name ? name : "(null)");
  return TVK_OK;
}

tvk_status cpu_cache_load(Error *err, CpuToolchain *t, const char *name, const char *src,
                          void **handle, CpuKernelFn *fn, bool *found) {
  *handle = NULL;
  *fn = NULL;
  *found = false;
  tvk_status st = check_request(err, name, src);
  if (st == TVK_OK) st = probe(err, t, name);
  if (st != TVK_OK) return st;
  if (!t->cc)
    return t->cache_dir ? find_any(err, t, t->cache_dir, name, src, handle, fn, found) : TVK_OK;
  char key[KEY_LEN + 1];
  cache_key(t, src, key);
  CpuPaths *p = malloc(sizeof *p);
  if (!p) return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory loading kernel '%s'", name);
  if (t->cache_dir) { /* none with no_disk_cache: everything is built privately */
    st = set_paths(err, p, t->cache_dir, key);
    if (st == TVK_OK) st = load_cached(err, name, p->so, handle, fn, found);
  }
  /* What a read-only cache lacks is built in the device's own directory,
   * where an earlier compile of this device may have put it already. */
  if (st == TVK_OK && !*found && t->cache_ro && t->private_dir) {
    st = set_paths(err, p, t->private_dir, key);
    if (st == TVK_OK) st = load_cached(err, name, p->so, handle, fn, found);
  }
  free(p);
  return st;
}

tvk_status cpu_cc_build(Error *err, CpuToolchain *t, const char *name, const char *src,
                        void **handle, CpuKernelFn *fn) {
  *handle = NULL;
  *fn = NULL;
  tvk_status st = check_request(err, name, src);
  if (st == TVK_OK) st = probe(err, t, name);
  if (st == TVK_OK) st = need_cc(err, t, name);
  if (st != TVK_OK) return st;
  char key[KEY_LEN + 1];
  cache_key(t, src, key);
  const char *dir = t->cache_dir;
  if (t->cache_ro) st = private_dir(err, t, name, &dir);
  CpuPaths *p = st == TVK_OK ? malloc(sizeof *p) : NULL;
  if (st == TVK_OK && !p)
    st = err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory compiling kernel '%s'", name);
  if (st == TVK_OK) st = set_paths(err, p, dir, key);
  if (st == TVK_OK) st = build_so(err, t, name, src, p);
  if (st == TVK_OK) st = load(err, name, p->so, handle, fn);
  free(p);
  return st;
}
