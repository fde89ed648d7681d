/* The on-disk kernel cache shared by the backends: where it lives and the
 * content hash that names a compiled kernel in it.
 *
 * Each backend decides what goes into a key (source, compiler identity, device
 * identity) and what a cached file holds (a .so for the CPU, SPIR-V for Vulkan);
 * both use one directory and one hash. docs/cpu_backend.md ("The cache")
 * describes the directory rules and the hash.
 */
#ifndef TVK_RUNTIME_CACHE_H
#define TVK_RUNTIME_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/error.h"
#include "tvk.h"

/* A 128-bit, non-cryptographic hash: two 64-bit lanes with different
 * multipliers, each finished with a full avalanche mix. Strong enough that two
 * different kernels never share a cache file by accident; not meant to resist
 * someone crafting collisions (who can write the cache can replace its files
 * anyway). */
typedef struct {
  uint64_t a, b, n;
} CacheHash;

void cache_hash_init(CacheHash *h);
/* Adds one field, length-prefixed, so ("ab","c") and ("a","bc") differ. NULL is
 * hashed as an empty field. */
void cache_hash_field(CacheHash *h, const char *s);
/* Adds n raw bytes as one length-prefixed field (for binary identities such as
 * a device UUID). */
void cache_hash_bytes(CacheHash *h, const void *p, size_t n);
/* Writes 32 lowercase hex digits and a NUL into out. */
void cache_hash_hex(const CacheHash *h, char out[33]);

/* True when the cache is to be used read-only: `opt` (DeviceOptions.cache_readonly)
 * is > 0, or it is 0 and $TVK_CACHE_READONLY is set to anything but "" or "0". */
bool cache_readonly_wanted(int opt);

/* Where the cache lives. `explicit_dir` is opt->cache_dir or $TVK_CACHE_DIR:
 * when set it is used or fails; otherwise $XDG_CACHE_HOME/tvk, ~/.cache/tvk and
 * finally ${TMPDIR:-/tmp}/tvk-<uid> are tried in turn. On success *out is a
 * malloc'ed path of an existing directory and *read_only says whether files
 * may be published in it.
 *
 * With `want_read_only` nothing is created or written: the directory (the
 * explicit one, else the home cache) must already exist. Without it, an
 * explicit directory that exists and can be read but not written (a prebuilt
 * cache on a read-only mount, or owned by someone else) is used read-only too;
 * a default place that cannot be written is skipped for the next one.
 *
 * On failure returns TVK_ERR_DEVICE (or TVK_ERR_OUT_OF_MEMORY) with a message
 * in err naming the directory and the reason. */
tvk_status cache_dir_open(const char *explicit_dir, bool want_read_only, char **out,
                          bool *read_only, Error *err);

/* Reads the whole file at path into a malloc'ed buffer. Returns 0 and sets
 * *data and *n, or an errno value (ENOENT when the file does not exist). */
int cache_file_read(const char *path, void **data, size_t *n);

/* Sealed files: what a backend writes into the cache and loads from it.
 * Publishing is atomic (a mkstemp name next to the file, then rename), so a
 * reader never sees a half-written file; but that does not protect a file cut
 * short or damaged afterwards (a full disk, an interrupted copy of the
 * directory, a bad sector), and loading such a file can crash the process
 * (dlopen maps a .so past its end: SIGBUS) or hand the driver invalid data.
 * So the payload is followed by a seal of CACHE_SEAL_BYTES: a magic tag, the
 * payload's length and its content hash, and a file is used only when all
 * three match. */
enum { CACHE_SEAL_BYTES = 48 };

/* Publishes n bytes of data, then their seal, as the file at path, atomically,
 * with the given mode (0600 for data, 0755 for a shared object). Returns 0 or
 * an errno value; on failure nothing is left behind. */
int cache_file_write_sealed(const char *path, const void *data, size_t n, unsigned mode);

/* Reads a file written by cache_file_write_sealed. Returns 0 with the payload
 * (seal removed) in a malloc'ed *data of *n bytes; ENOENT when there is no
 * file; EBADMSG when the seal is missing or does not match (truncated,
 * changed, or not written by cache_file_write_sealed); another errno value
 * when it cannot be read. */
int cache_file_read_sealed(const char *path, void **data, size_t *n);

#endif
