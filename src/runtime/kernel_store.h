/* Generated kernels on disk: a kernel's code generation (its source, launch
 * and plan) kept by the structure of its AST, so that a new process skips
 * lowering, simplifying and rendering for every kernel it has seen before.
 * Together with the devices' caches of compiled programs, a warm start does
 * no compile work at all (docs/runtime.md, "The kernel store").
 *
 * The key hashes the AST node by node (op, dtype, arg by value, sources by
 * position), the codegen options, the device's name, the plan search width,
 * and the build identity of the tvk code itself (its ELF build ID): a
 * rebuilt tvk, whose codegen may differ, never reads another build's
 * records. Without a build ID there is no store (kstore_key says false). */
#ifndef TVK_RUNTIME_KERNEL_STORE_H
#define TVK_RUNTIME_KERNEL_STORE_H

#include <stdbool.h>

#include "codegen/kernel.h"
#include "ir/uop.h"

#define KSTORE_KEY_LEN 32

/* The key of ast generated with o for the device `device` (its name) and plan
 * search width beam; false (no key) without a build identity or out of
 * memory. */
bool kstore_key(UOp *ast, const CodegenOpts *o, const char *device, int beam,
                char key[KSTORE_KEY_LEN + 1]);
/* The record of key under dir, into *out (free with kernel_source_free):
 * true when a whole, sealed and well-formed one was there. */
bool kstore_load(const char *dir, const char *key, KernelSource *out);
/* Writes ks as the record of key under dir (made if missing); failures only
 * cost the next process its shortcut, so they are not reported. */
void kstore_save(const char *dir, const char *key, const KernelSource *ks);

#endif
