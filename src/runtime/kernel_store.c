/* The kernel store (kernel_store.h): keys from the AST's structure and the
 * build identity, records of generated kernels in <dir>/kernels/. */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codegen/render.h"
#include "ir/ptrmap.h"
#include "ir/strbuf.h"
#include "ir/view.h"
#include "runtime/cache.h"
#include "runtime/kernel_store.h"

#define RECORD_MAGIC "tvk-kernel 3"

/* ---------------------------------------------------------------- the build identity */

/* The NT_GNU_BUILD_ID of the loaded object holding this code: the library,
 * or the executable libtvk.a was linked into. Found once. */
static struct {
  pthread_once_t once;
  unsigned char id[64];
  size_t n;
} build = {PTHREAD_ONCE_INIT, {0}, 0};

static int find_build_id(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  uintptr_t here = (uintptr_t)data;
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    mine = ph->p_type == PT_LOAD && here >= lo && here < lo + ph->p_memsz;
  }
  if (!mine) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    const unsigned char *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
      const unsigned char *name = p + sizeof *nh;
      const unsigned char *desc = name + ((nh->n_namesz + 3) & ~3u);
      const unsigned char *next = desc + ((nh->n_descsz + 3) & ~3u);
      if (next > end) break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
          nh->n_descsz > 0 && nh->n_descsz <= sizeof build.id) {
        memcpy(build.id, desc, nh->n_descsz);
        build.n = nh->n_descsz;
        return 1;
      }
      p = next;
    }
  }
  return 1; /* ours, without a build ID */
}

static void read_build_id(void) {
  dl_iterate_phdr(find_build_id, (void *)(uintptr_t)&read_build_id);
}

/* ---------------------------------------------------------------- the key */

static void hash_i64(CacheHash *h, int64_t v) { cache_hash_bytes(h, &v, sizeof v); }

/* A symbolic sint is a handle numbered in the order this process made its
 * expressions: its text goes into the key, never the number. */
static bool hash_sints(CacheHash *h, const sint *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!sint_is_sym(v[i])) {
      hash_i64(h, v[i]);
      continue;
    }
    int len = sint_str(v[i], NULL, 0);
    char *txt = len >= 0 ? malloc((size_t)len + 1) : NULL;
    hash_i64(h, SINT_NONE); /* a tag no integer size has */
    if (txt) sint_str(v[i], txt, (size_t)len + 1);
    if (!txt) return false; /* out of memory: no key, rather than a key that might repeat */
    cache_hash_field(h, txt);
    free(txt);
  }
  return true;
}

static bool hash_arg(CacheHash *h, const Arg *a) {
  hash_i64(h, a->kind);
  switch ((ArgKind)a->kind) {
  case ARG_NONE: break;
  case ARG_INT: hash_i64(h, a->i); break;
  case ARG_FLOAT: cache_hash_bytes(h, &a->f, sizeof a->f); break;
  case ARG_INTS: cache_hash_bytes(h, a->ints.v, (size_t)a->ints.n * sizeof *a->ints.v); break;
  case ARG_VAR:
    cache_hash_field(h, a->var.name);
    hash_i64(h, a->var.lo), hash_i64(h, a->var.hi);
    break;
  case ARG_REDUCE:
    hash_i64(h, a->red.op);
    cache_hash_bytes(h, a->red.axes, (size_t)a->red.n * sizeof *a->red.axes);
    break;
  case ARG_ST:
    hash_i64(h, a->st->nviews);
    for (int i = 0; i < a->st->nviews; i++) {
      const View *v = &a->st->views[i];
      hash_i64(h, v->ndim), hash_i64(h, v->has_mask);
      if (!hash_sints(h, &v->offset, 1) || !hash_sints(h, v->shape, (size_t)v->ndim) ||
          !hash_sints(h, v->strides, (size_t)v->ndim) ||
          (v->has_mask && !hash_sints(h, &v->mask[0][0], 2 * (size_t)v->ndim)))
        return false;
    }
    break;
  }
  return true;
}

bool kstore_key(UOp *ast, const CodegenOpts *o, const char *device, int beam,
                char key[KSTORE_KEY_LEN + 1]) {
  pthread_once(&build.once, read_build_id);
  if (!build.n) return false;
  size_t n;
  UOp **order = uop_toposort(ast, &n);
  PtrMap at = {0};
  bool ok = order && ptrmap_init(&at, n);
  CacheHash h;
  cache_hash_init(&h);
  cache_hash_field(&h, RECORD_MAGIC);
  cache_hash_bytes(&h, build.id, build.n);
  cache_hash_field(&h, device);
  cache_hash_field(&h, o->lang ? o->lang->name : "C");
  int64_t opts[] = {o->mode,
                    o->local_size,
                    o->noopt,
                    o->vector_floats,
                    o->vector_regs,
                    o->max_local,
                    (int64_t)o->shared_bytes,
                    beam,
                    o->plan ? o->plan->n : -1,
                    o->fma,
                    o->emulated,
                    o->subgroup,
                    (int64_t)o->cache_bytes};
  cache_hash_bytes(&h, opts, sizeof opts);
  for (int i = 0; o->plan && i < o->plan->n; i++) {
    const OptStep *s = &o->plan->step[i];
    int64_t step[3] = {s->kind, s->axis, s->amount};
    cache_hash_bytes(&h, step, sizeof step);
  }
  /* Node by node, sources before users: a node's sources by their position
   * in this order, so the key is the graph's structure, not its addresses. */
  for (size_t i = 0; ok && i < n; i++) {
    UOp *u = order[i];
    ok = ptrmap_put(&at, u, (int64_t)i);
    int64_t head[5] = {u->op, u->dtype.scalar, u->dtype.count, u->dtype.addr, u->nsrc};
    cache_hash_bytes(&h, head, sizeof head);
    ok = hash_arg(&h, &u->arg) && ok;
    for (uint32_t k = 0; ok && k < u->nsrc; k++) hash_i64(&h, ptrmap_get(&at, u->src[k]));
  }
  ptrmap_free(&at);
  free(order);
  if (ok) cache_hash_hex(&h, key);
  return ok;
}

/* ---------------------------------------------------------------- records */

static void put(Str *s, const void *p, size_t n) { str_addn(s, p, n); }
static void put_i64(Str *s, int64_t v) { put(s, &v, sizeof v); }
static void put_str(Str *s, const char *t) {
  size_t n = t ? strlen(t) : 0;
  put_i64(s, (int64_t)n);
  if (n) put(s, t, n);
}

/* A reader over a record: every get fails (and stays failed) past its end. */
typedef struct {
  const unsigned char *p, *end;
  bool bad;
} Rd;

static bool get(Rd *r, void *out, size_t n) {
  if (r->bad || (size_t)(r->end - r->p) < n) return !(r->bad = true);
  memcpy(out, r->p, n);
  r->p += n;
  return true;
}

static int64_t get_i64(Rd *r, int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (get(r, &v, sizeof v) && (v < lo || v > hi)) r->bad = true;
  return r->bad ? lo : v;
}

static char *get_str(Rd *r) {
  int64_t n = get_i64(r, 0, r->end - r->p);
  char *t = r->bad ? NULL : malloc((size_t)n + 1);
  if (!t || !get(r, t, (size_t)n)) {
    free(t);
    r->bad = true;
    return NULL;
  }
  t[n] = '\0';
  return t;
}

static char *record_path(const char *dir, const char *key, bool make) {
  Str p = {0};
  str_printf(&p, "%s/kernels", dir);
  if (make && !p.oom) mkdir(p.p, 0700);
  str_printf(&p, "/%s.kernel", key);
  return str_take(&p);
}

void kstore_save(const char *dir, const char *key, const KernelSource *ks) {
  /* a symbolic launch size is a handle of this process: not a record */
  if (ks->groups) return;
  Str s = {0};
  put_str(&s, RECORD_MAGIC);
  put_str(&s, ks->name);
  put_str(&s, ks->src);
  put_i64(&s, ks->nbufs);
  for (int i = 0; i < ks->nbufs; i++) {
    const KernelBuf *b = &ks->bufs[i];
    unsigned char f[3] = {b->dtype, b->read, b->written};
    put(&s, f, sizeof f);
    put_i64(&s, b->band);
  }
  put_i64(&s, ks->nvars);
  for (int i = 0; i < ks->nvars; i++) {
    put_str(&s, ks->vars[i].name);
    put_i64(&s, ks->vars[i].lo), put_i64(&s, ks->vars[i].hi);
  }
  put_i64(&s, ks->ndim);
  put(&s, ks->full_shape, (size_t)ks->ndim * sizeof *ks->full_shape);
  put(&s, ks->out_shape, (size_t)ks->ndim * sizeof *ks->out_shape);
  put(&s, ks->global, sizeof ks->global);
  put(&s, ks->local, sizeof ks->local);
  put_i64(&s, ks->rows);
  put_i64(&s, ks->plan.n);
  for (int i = 0; i < ks->plan.n; i++) {
    const OptStep *st = &ks->plan.step[i];
    int64_t step[3] = {st->kind, st->axis, st->amount};
    put(&s, step, sizeof step);
  }
  double cost[2] = {ks->flops, ks->bytes};
  put(&s, cost, sizeof cost);
  char *path = s.oom ? NULL : record_path(dir, key, true);
  if (path) cache_file_write_sealed(path, s.p, s.len, 0600);
  free(path);
  free(s.p);
}

static bool parse(Rd *r, KernelSource *ks) {
  char *magic = get_str(r);
  bool ok = magic && !strcmp(magic, RECORD_MAGIC);
  free(magic);
  if (!ok) return false;
  ks->name = get_str(r);
  ks->src = get_str(r);
  ks->nbufs = (int)get_i64(r, 0, 1 << 20);
  ks->bufs = r->bad ? NULL : calloc((size_t)ks->nbufs + 1, sizeof *ks->bufs);
  if (!ks->bufs) return false;
  for (int i = 0; i < ks->nbufs; i++) {
    unsigned char f[3];
    if (!get(r, f, sizeof f) || f[0] >= DT_COUNT || f[1] > 1 || f[2] > 1) return false;
    ks->bufs[i] = (KernelBuf){f[0], f[1], f[2], get_i64(r, 0, INT64_MAX)};
  }
  int nvars = (int)get_i64(r, 0, 1 << 20);
  ks->vars = r->bad ? NULL : calloc((size_t)nvars + 1, sizeof *ks->vars);
  if (!ks->vars) return false;
  for (; ks->nvars < nvars && !r->bad; ks->nvars++) {
    KernelVar *v = &ks->vars[ks->nvars];
    v->name = get_str(r);
    v->lo = get_i64(r, INT64_MIN, INT64_MAX), v->hi = get_i64(r, INT64_MIN, INT64_MAX);
  }
  ks->ndim = (int)get_i64(r, 0, TVK_MAX_DIMS);
  get(r, ks->full_shape, (size_t)ks->ndim * sizeof *ks->full_shape);
  get(r, ks->out_shape, (size_t)ks->ndim * sizeof *ks->out_shape);
  get(r, ks->global, sizeof ks->global);
  get(r, ks->local, sizeof ks->local);
  ks->rows = get_i64(r, 0, INT64_MAX);
  ks->plan.n = (int)get_i64(r, 0, OPT_MAX_STEPS);
  for (int i = 0; i < ks->plan.n && !r->bad; i++) {
    int64_t step[3];
    get(r, step, sizeof step);
    if (step[0] < 0 || step[0] >= OPT_KINDS || step[1] < 0 || step[1] >= TVK_MAX_DIMS ||
        step[2] < INT32_MIN || step[2] > INT32_MAX)
      return false;
    ks->plan.step[i] = (OptStep){(uint8_t)step[0], (uint8_t)step[1], (int32_t)step[2]};
  }
  double cost[2] = {0, 0};
  if (get(r, cost, sizeof cost) && (!(cost[0] >= 0) || !(cost[1] >= 0))) return false;
  ks->flops = cost[0], ks->bytes = cost[1];
  return !r->bad && r->p == r->end && ks->name && ks->src && *ks->name;
}

bool kstore_load(const char *dir, const char *key, KernelSource *out) {
  memset(out, 0, sizeof *out);
  char *path = record_path(dir, key, false);
  void *data = NULL;
  size_t n = 0;
  bool ok = path && cache_file_read_sealed(path, &data, &n) == 0;
  free(path);
  if (ok) {
    Rd r = {data, (const unsigned char *)data + n, false};
    ok = parse(&r, out);
  }
  free(data);
  if (!ok) kernel_source_free(out);
  return ok;
}
