/* What the CPU backend reads of the machine: the CPU identity that goes into
 * its cache key (the hash and the cache directory are shared with the other
 * backends: src/runtime/cache.c), and the L2 size the optimiser sizes its
 * CACHE runs with. */
#include "cpu_internal.h"
#include "ir/vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

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
  size_t cap = 0, accn = 0, acccap = 0;
  bool have_model = false;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) > 0) {
    if (line[0] == '\n') break; /* end of the first core's block */
    if (!is_id_line(line)) continue;
    if (!have_model && strncmp(line, "model name", 10) == 0) {
      copy_value(line, model, modeln);
      have_model = true;
    }
    if (!id || !VEC_RESERVE(acc, acccap, accn + (size_t)len + 1)) continue;
    memcpy(acc + accn, line, (size_t)len + 1);
    accn += (size_t)len;
  }
  free(line);
  fclose(f);
  if (id) *id = acc;
}

/* A sysfs cache size: "1024K", "2M" or bytes. */
static size_t parse_size(const char *v) {
  char *end;
  unsigned long long n = strtoull(v, &end, 10);
  if (end == v) return 0;
  if (*end == 'K' || *end == 'k') n <<= 10;
  if (*end == 'M' || *end == 'm') n <<= 20;
  return (size_t)n;
}

/* The first line of a small sysfs file into buf; false if unreadable. */
static bool read_line(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  bool ok = fgets(buf, (int)n, f) != NULL;
  fclose(f);
  if (ok) buf[strcspn(buf, "\n")] = '\0';
  return ok;
}

size_t cpu_l2_bytes(void) {
  for (int i = 0; i < 8; i++) { /* cpu0's caches: index0 (L1d), index1 (L1i), index2 (L2), ... */
    char path[96], v[64];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    if (!read_line(path, v, sizeof v)) break;
    if (strcmp(v, "2") != 0) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    if (!read_line(path, v, sizeof v) || !strcmp(v, "Instruction")) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (read_line(path, v, sizeof v) && parse_size(v) > 0) return parse_size(v);
  }
#ifdef _SC_LEVEL2_CACHE_SIZE
  long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (v > 0) return (size_t)v;
#endif
  return 0;
}
