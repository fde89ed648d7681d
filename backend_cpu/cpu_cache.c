/* The CPU backend's on-disk cache: the content hash that names a compiled
 * kernel, the directory it lives in, and the CPU identity that goes into the key. */
#include "cpu_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- hash ---- */

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* The 64-bit finaliser of MurmurHash3: every input bit flips each output bit
 * with probability ~1/2. */
static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= UINT64_C(0xff51afd7ed558ccd);
  x ^= x >> 33;
  x *= UINT64_C(0xc4ceb9fe1a85ec53);
  x ^= x >> 33;
  return x;
}

void cpu_hash_init(CpuHash *h) {
  h->a = UINT64_C(0xcbf29ce484222325); /* FNV-1a offset basis */
  h->b = UINT64_C(0x9e3779b97f4a7c15); /* golden ratio */
  h->n = 0;
}

static void hash_byte(CpuHash *h, unsigned char c) {
  h->a = (h->a ^ c) * UINT64_C(0x100000001b3);                 /* FNV-1a */
  h->b = (rotl64(h->b, 7) ^ c) * UINT64_C(0xc6a4a7935bd1e995); /* a rotate-multiply lane */
  h->n++;
}

void cpu_hash_field(CpuHash *h, const char *s) {
  size_t len = s ? strlen(s) : 0;
  for (int i = 0; i < 8; i++) hash_byte(h, (unsigned char)((uint64_t)len >> (8 * i)));
  for (size_t i = 0; i < len; i++) hash_byte(h, (unsigned char)s[i]);
}

void cpu_hash_hex(const CpuHash *h, char out[33]) {
  uint64_t a = mix64(h->a ^ h->n);
  uint64_t b = mix64(h->b ^ (h->n * UINT64_C(0x9e3779b97f4a7c15)));
  snprintf(out, 33, "%016" PRIx64 "%016" PRIx64, a, b);
}

/* ---- directory ---- */

/* mkdir -p with mode 0700 for what it creates. Returns 0 or an errno value. */
static int mkdir_p(const char *path) {
  size_t n = strlen(path);
  char *tmp = malloc(n + 1);
  if (!tmp) return ENOMEM;
  memcpy(tmp, path, n + 1);
  int rc = 0;
  for (size_t i = 1; i <= n && rc == 0; i++) {
    if (tmp[i] != '/' && tmp[i] != '\0') continue;
    char saved = tmp[i];
    tmp[i] = '\0';
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST) rc = errno;
    tmp[i] = saved;
  }
  free(tmp);
  if (rc) return rc;
  struct stat st;
  if (stat(path, &st) != 0) return errno;
  if (!S_ISDIR(st.st_mode)) return ENOTDIR;
  if (access(path, W_OK | X_OK) != 0) return errno;
  return 0;
}

/* A malloc'ed printf result; NULL when out of memory. */
__attribute__((format(printf, 1, 2))) static char *str_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (!s) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

/* The last resort lives in a shared temp dir, so it must be ours alone: a
 * directory others can write could hand us a .so to load. */
static int check_private(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno;
  if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 0022)) return EPERM;
  return 0;
}

static tvk_status open_tmp_fallback(char **out, char *err, size_t errn) {
  const char *tmpdir = getenv("TMPDIR");
  if (!tmpdir || !*tmpdir) tmpdir = "/tmp";
  char *path = str_printf("%s/tvk-%lu", tmpdir, (unsigned long)getuid());
  if (!path) {
    snprintf(err, errn, "out of memory building the cache path");
    return TVK_ERR_OUT_OF_MEMORY;
  }
  int rc = mkdir_p(path);
  if (rc == 0) rc = check_private(path);
  if (rc != 0) {
    snprintf(err, errn,
             "no usable kernel cache directory: tried the home cache and '%s' (%s); "
             "set TVK_CACHE_DIR",
             path, strerror(rc));
    free(path);
    return TVK_ERR_DEVICE;
  }
  *out = path;
  return TVK_OK;
}

tvk_status cpu_cache_dir_open(const char *explicit_dir, char **out, char *err, size_t errn) {
  *out = NULL;
  if (explicit_dir && *explicit_dir) {
    int rc = mkdir_p(explicit_dir);
    if (rc != 0) {
      snprintf(err, errn, "cannot use kernel cache directory '%s': %s", explicit_dir, strerror(rc));
      return TVK_ERR_DEVICE;
    }
    *out = strdup(explicit_dir);
    if (!*out) goto oom;
    return TVK_OK;
  }
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  char *cand = NULL;
  if (xdg && *xdg) {
    cand = str_printf("%s/tvk", xdg);
    if (!cand) goto oom;
  } else if (home && *home) {
    cand = str_printf("%s/.cache/tvk", home);
    if (!cand) goto oom;
  }
  if (cand && mkdir_p(cand) == 0) {
    *out = cand;
    return TVK_OK;
  }
  free(cand); /* an unwritable home is not an error: fall back */
  return open_tmp_fallback(out, err, errn);
oom:
  snprintf(err, errn, "out of memory building the cache path");
  return TVK_ERR_OUT_OF_MEMORY;
}

/* ---- CPU identity ---- */

/* Lines of /proc/cpuinfo that name the instruction set: x86 "model name" and
 * "flags", Arm "Features", "CPU implementer" and "CPU part". Only the first
 * core's block is read; cores of one machine agree on these for our use. */
static const char *const cpuinfo_keys[] = {"model name", "flags", "Features", "CPU implementer",
                                           "CPU part"};

static bool is_id_line(const char *line) {
  for (size_t i = 0; i < sizeof cpuinfo_keys / sizeof cpuinfo_keys[0]; i++) {
    size_t k = strlen(cpuinfo_keys[i]);
    if (strncmp(line, cpuinfo_keys[i], k) == 0 &&
        (line[k] == ' ' || line[k] == '\t' || line[k] == ':'))
      return true;
  }
  return false;
}

/* Copies the value after ':' of `line` into model, without the newline. */
static void copy_value(const char *line, char *model, size_t modeln) {
  const char *v = strchr(line, ':');
  v = v ? v + 1 : line;
  while (*v == ' ' || *v == '\t') v++;
  snprintf(model, modeln, "%s", v);
  model[strcspn(model, "\n")] = '\0';
}

void cpu_read_cpuinfo(char *model, size_t modeln, char **id) {
  snprintf(model, modeln, "unknown CPU");
  if (id) *id = NULL;
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char *line = NULL, *acc = NULL;
  size_t cap = 0, accn = 0;
  bool have_model = false;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) > 0) {
    if (line[0] == '\n') break; /* end of the first core's block */
    if (!is_id_line(line)) continue;
    if (!have_model && strncmp(line, "model name", 10) == 0) {
      copy_value(line, model, modeln);
      have_model = true;
    }
    char *grown = id ? realloc(acc, accn + (size_t)len + 1) : NULL;
    if (!grown) continue;
    acc = grown;
    memcpy(acc + accn, line, (size_t)len + 1);
    accn += (size_t)len;
  }
  free(line);
  fclose(f);
  if (id) *id = acc;
}
