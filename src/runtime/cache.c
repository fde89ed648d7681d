/* The on-disk kernel cache shared by the backends: the content hash, the
 * directory, and atomic file publishing. See cache.h. */
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
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

void cache_hash_init(CacheHash *h) {
  h->a = UINT64_C(0xcbf29ce484222325); /* FNV-1a offset basis */
  h->b = UINT64_C(0x9e3779b97f4a7c15); /* golden ratio */
  h->n = 0;
}

static void hash_byte(CacheHash *h, unsigned char c) {
  h->a = (h->a ^ c) * UINT64_C(0x100000001b3);                 /* FNV-1a */
  h->b = (rotl64(h->b, 7) ^ c) * UINT64_C(0xc6a4a7935bd1e995); /* a rotate-multiply lane */
  h->n++;
}

void cache_hash_bytes(CacheHash *h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (int i = 0; i < 8; i++) hash_byte(h, (unsigned char)((uint64_t)n >> (8 * i)));
  for (size_t i = 0; i < n; i++) hash_byte(h, s[i]);
}

void cache_hash_field(CacheHash *h, const char *s) { cache_hash_bytes(h, s, s ? strlen(s) : 0); }

void cache_hash_hex(const CacheHash *h, char out[33]) {
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

static tvk_status open_tmp_fallback(char **out, Error *err) {
  const char *tmpdir = getenv("TMPDIR");
  if (!tmpdir || !*tmpdir) tmpdir = "/tmp";
  char *path = str_printf("%s/tvk-%lu", tmpdir, (unsigned long)getuid());
  if (!path) {
    return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory building the cache path");
  }
  int rc = mkdir_p(path);
  if (rc == 0) rc = check_private(path);
  if (rc != 0) {
    err_set(err, TVK_ERR_DEVICE,
            "no usable kernel cache directory: tried the home cache and '%s' (%s); "
            "set TVK_CACHE_DIR",
            path, strerror(rc));
    free(path);
    return TVK_ERR_DEVICE;
  }
  *out = path;
  return TVK_OK;
}

/* 0 when path is a directory whose entries can be listed and read, else an
 * errno value (ENOENT when it does not exist). */
static int readable_dir(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return errno;
  if (!S_ISDIR(st.st_mode)) return ENOTDIR;
  if (access(path, R_OK | X_OK) != 0) return errno;
  return 0;
}

bool cache_readonly_wanted(int opt) {
  if (opt > 0) return true;
  const char *v = getenv("TVK_CACHE_READONLY");
  return v && *v && strcmp(v, "0") != 0;
}

/* The explicit directory: used as it is when it exists (read-only when it
 * cannot be written, which is how a prebuilt cache is shipped), created when it
 * does not and may be written. access() asks the kernel, so a read-only mount
 * counts as read-only even for root, who ignores permission bits. */
static tvk_status open_explicit(const char *dir, bool want_read_only, char **out, bool *read_only,
                                Error *err) {
  int rc = readable_dir(dir);
  bool ro = want_read_only;
  if (rc == 0 && !ro) ro = access(dir, W_OK) != 0;
  if (rc == ENOENT && !want_read_only) rc = mkdir_p(dir);
  if (rc != 0) {
    return err_set(err, TVK_ERR_DEVICE, "cannot use kernel cache directory '%s': %s%s", dir,
                   strerror(rc),
                   want_read_only && rc == ENOENT ? " (a read-only cache is not created)" : "");
  }
  *out = strdup(dir);
  if (!*out) return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory building the cache path");
  *read_only = ro;
  return TVK_OK;
}

/* ---- stale temporaries ---- */

/* Whether name is a temporary of publish or of the CPU's compiler: a final
 * name with an extension, then "-" and mkstemp's six characters ("k.spv-a1B2c3",
 * "<key>.so-Xy12zz"). Published names never end so. */
static bool is_temporary(const char *name) {
  size_t n = strlen(name);
  if (n < 9 || name[n - 7] != '-') return false;
  for (size_t i = n - 6; i < n; i++)
    if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
          (name[i] >= '0' && name[i] <= '9')))
      return false;
  return memchr(name, '.', n - 7) != NULL;
}

/* A temporary this old is a process's that died while writing it: a writer
 * renames or removes its own within a compile's time (TVK_CC_TIMEOUT, 120 s
 * unless set), so an hour leaves every live writer alone. */
#define CACHE_STALE_SECONDS 3600

static void clean_dir(const char *dir, time_t now, int depth) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
    char *path = str_printf("%s/%s", dir, e->d_name);
    struct stat st;
    if (path && lstat(path, &st) == 0) {
      if (S_ISDIR(st.st_mode) && depth > 0)
        clean_dir(path, now, depth - 1); /* kernels/, choices/<device>/ */
      else if (S_ISREG(st.st_mode) && is_temporary(e->d_name) &&
               now - st.st_mtime > CACHE_STALE_SECONDS)
        unlink(path);
    }
    free(path);
  }
  closedir(d);
}

/* Removes the stale temporaries of a writable cache directory, once per
 * directory and process (the first context that opens it). */
static void clean_temporaries(const char *dir) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static uint64_t done[16];
  static int ndone;
  CacheHash h;
  cache_hash_init(&h);
  cache_hash_field(&h, dir);
  uint64_t key = h.a ^ h.b;
  pthread_mutex_lock(&lock);
  bool seen = false;
  for (int i = 0; i < ndone && !seen; i++) seen = done[i] == key;
  if (!seen && ndone < 16) done[ndone++] = key; /* past 16 directories: each time */
  pthread_mutex_unlock(&lock);
  if (!seen) clean_dir(dir, time(NULL), 2);
}

static tvk_status open_dir(const char *explicit_dir, bool want_read_only, char **out,
                           bool *read_only, Error *err);

tvk_status cache_dir_open(const char *explicit_dir, bool want_read_only, char **out,
                          bool *read_only, Error *err) {
  tvk_status st = open_dir(explicit_dir, want_read_only, out, read_only, err);
  if (st == TVK_OK && !*read_only) clean_temporaries(*out);
  return st;
}

static tvk_status open_dir(const char *explicit_dir, bool want_read_only, char **out,
                           bool *read_only, Error *err) {
  *out = NULL;
  *read_only = want_read_only;
  if (explicit_dir && *explicit_dir)
    return open_explicit(explicit_dir, want_read_only, out, read_only, err);
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  char *cand = NULL;
  if (xdg && *xdg) {
    cand = str_printf("%s/tvk", xdg);
    if (!cand) goto oom;
  } else if (home && *home) {
    cand = str_printf("%s/.cache/tvk", home);
    if (!cand) goto oom;
  }
  if (want_read_only) {
    /* Only the home cache can hold prebuilt kernels; the temp fallback is
     * never shipped, so it is not looked for. */
    int rc = cand ? readable_dir(cand) : ENOENT;
    if (rc == 0) {
      *out = cand;
      return TVK_OK;
    }
    err_set(err, TVK_ERR_DEVICE, "no kernel cache to read (the cache is read-only): %s%s%s%s",
            cand ? "'" : "neither XDG_CACHE_HOME nor HOME is set", cand ? cand : "",
            cand ? "': " : "", cand ? strerror(rc) : "");
    free(cand);
    return TVK_ERR_DEVICE;
  }
  if (cand && mkdir_p(cand) == 0) {
    *out = cand;
    return TVK_OK;
  }
  free(cand); /* an unwritable home is not an error: fall back */
  return open_tmp_fallback(out, err);
oom:
  return err_set(err, TVK_ERR_OUT_OF_MEMORY, "out of memory building the cache path");
}

/* ---- files ---- */

int cache_file_read(const char *path, void **data, size_t *n) {
  *data = NULL;
  *n = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return errno;
  int rc = 0;
  long len = -1;
  if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
    rc = errno ? errno : EIO;
  char *buf = rc == 0 ? malloc(len > 0 ? (size_t)len : 1) : NULL;
  if (rc == 0 && !buf) rc = ENOMEM;
  if (rc == 0 && len > 0 && fread(buf, 1, (size_t)len, f) != (size_t)len) rc = EIO;
  fclose(f);
  if (rc != 0) {
    free(buf);
    return rc;
  }
  *data = buf;
  *n = (size_t)len;
  return 0;
}

static int write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : EIO;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Writes data, then tail, to a mkstemp name next to path, gives it `mode` and
 * renames it to path, so a reader sees no file or a complete one. */
static int publish(const char *path, const void *data, size_t n, const void *tail, size_t tn,
                   unsigned mode) {
  char *tmp = str_printf("%s-XXXXXX", path);
  if (!tmp) return ENOMEM;
  int fd = mkstemp(tmp);
  if (fd < 0) {
    int rc = errno;
    free(tmp);
    return rc;
  }
  int rc = write_all(fd, data, n);
  if (rc == 0) rc = write_all(fd, tail, tn);
  if (rc == 0 && fchmod(fd, (mode_t)mode) != 0) rc = errno;
  if (close(fd) != 0 && rc == 0) rc = errno;
  if (rc == 0 && rename(tmp, path) != 0) rc = errno;
  if (rc != 0) unlink(tmp);
  free(tmp);
  return rc;
}

/* ---- sealed files ---- */

static const char seal_magic[8] = {'t', 'v', 'k', 's', 'e', 'a', 'l', '1'};

/* The seal of n bytes: the magic, n as 8 little-endian bytes, and the 32 hex
 * digits of the content hash. */
static void make_seal(const void *data, size_t n, unsigned char seal[CACHE_SEAL_BYTES]) {
  CacheHash h;
  char hex[33];
  cache_hash_init(&h);
  cache_hash_bytes(&h, data, n);
  cache_hash_hex(&h, hex);
  memcpy(seal, seal_magic, sizeof seal_magic);
  for (int i = 0; i < 8; i++) seal[8 + i] = (unsigned char)((uint64_t)n >> (8 * i));
  memcpy(seal + 16, hex, 32);
}

int cache_file_write_sealed(const char *path, const void *data, size_t n, unsigned mode) {
  unsigned char seal[CACHE_SEAL_BYTES];
  make_seal(data, n, seal);
  return publish(path, data, n, seal, sizeof seal, mode);
}

int cache_file_read_sealed(const char *path, void **data, size_t *n) {
  int rc = cache_file_read(path, data, n);
  if (rc != 0) return rc;
  unsigned char want[CACHE_SEAL_BYTES];
  const unsigned char *buf = *data;
  size_t payload = *n >= CACHE_SEAL_BYTES ? *n - CACHE_SEAL_BYTES : 0;
  /* A file cut short loses its seal or the length in it disagrees; a changed
   * byte changes the hash. The magic is compared first, so that a file of
   * another format is refused without hashing it. */
  bool ok = *n >= CACHE_SEAL_BYTES && !memcmp(buf + payload, seal_magic, sizeof seal_magic);
  if (ok) {
    make_seal(buf, payload, want);
    ok = !memcmp(buf + payload, want, CACHE_SEAL_BYTES);
  }
  if (!ok) {
    free(*data);
    *data = NULL;
    *n = 0;
    return EBADMSG;
  }
  *n = payload;
  return 0;
}
