/* The rewrite engine: patterns over UOps (UPat), rule tables (PatternMatcher),
 * and graph_rewrite, following the seed's UPat / PatternMatcher / RewriteContext.
 *
 * Rule tables are static data. A rule is a pattern and a function; the function
 * gets the captures (numbered slots, 1..UPAT_SLOTS-1) and returns a replacement
 * UOp (autoreleased) or NULL for "no change". Example:
 *
 *   enum { X = 1, C };
 *   static UOp *fold_add0(void *ctx, UOp **c) { (void)ctx; return c[X]; }
 *   static const Rule rules[] = {
 *     // x + 0 -> x
 *     {PAT_COMM(OP_ADD, 0, PAT_ANY(X), PAT_CONST_VAL(0)), fold_add0},
 *   };
 *   PatternMatcher *pm = pm_new(rules, RULES_N(rules));
 */
#ifndef TVK_IR_PATTERN_H
#define TVK_IR_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uop.h"

#define UPAT_SLOTS 16

typedef enum {
  UPAT_SRC_ANY = 0, /* sources not looked at */
  UPAT_SRC_TUPLE,   /* sources matched in order; any_len: a prefix */
  UPAT_SRC_PERM,    /* sources matched in any order (commutative ops) */
  UPAT_SRC_REPEAT,  /* every source matches src[0], any number of them */
  UPAT_ALT,         /* matches if any of src matches (the seed's UPat.any) */
} UPatSrcKind;

typedef struct UPat UPat;
struct UPat {
  const uint8_t *ops; /* OP_NONE-terminated list of accepted ops */
  uint32_t groups;    /* op groups (G_*) also accepted; ops == NULL && groups == 0: any op */
  uint32_t dtypes;    /* DT_BIT set of accepted scalar types; 0: any dtype */
  const Arg *arg;     /* NULL: any arg; else compared by value */
  const CVal *cval;   /* for CONST: NULL any; else value compared after conversion */
  uint8_t slot;       /* capture slot, 0: none. Same slot twice must be the same UOp */
  uint8_t kind;       /* UPatSrcKind */
  uint8_t nsrc;
  bool any_len; /* TUPLE: the UOp may have more sources than nsrc */
  const UPat *const *src;
};

typedef UOp *(*RuleFn)(void *ctx, UOp **captures);
typedef struct {
  const UPat *pat;
  RuleFn fn;
} Rule;
#define RULES_N(r) ((int)(sizeof(r) / sizeof((r)[0])))

/* Helpers for writing patterns as static data (file-scope compound literals). */
#define P_OPS(...) ((const uint8_t[]){__VA_ARGS__, OP_NONE})
#define P_SRC(...) ((const UPat *const[]){__VA_ARGS__})
#define P_NSRC(...) ((uint8_t)(sizeof(P_SRC(__VA_ARGS__)) / sizeof(const UPat *)))
#define UPAT(...) (&(const UPat){__VA_ARGS__})
/* any UOp, captured in slot s */
#define PAT_ANY(s) UPAT(.slot = (s))
/* a UOp of op `o` with any sources */
#define PAT_OP0(o, s) UPAT(.ops = P_OPS(o), .slot = (s))
/* a CONST (any value), a CONST of exactly value v (any dtype, compared as a number) */
#define PAT_CONST(s) UPAT(.ops = P_OPS(OP_CONST), .slot = (s))
#define PAT_CONST_VAL(v) UPAT(.ops = P_OPS(OP_CONST), .cval = &(const CVal){.f = (v)})
/* op `o` with sources in order / in any order (commutative) */
#define PAT_OP(o, s, ...)                                                                          \
  UPAT(.ops = P_OPS(o), .slot = (s), .kind = UPAT_SRC_TUPLE, .src = P_SRC(__VA_ARGS__),            \
       .nsrc = P_NSRC(__VA_ARGS__))
#define PAT_COMM(o, s, ...)                                                                        \
  UPAT(.ops = P_OPS(o), .slot = (s), .kind = UPAT_SRC_PERM, .src = P_SRC(__VA_ARGS__),             \
       .nsrc = P_NSRC(__VA_ARGS__))
/* one of several patterns */
#define PAT_ALT(...) UPAT(.kind = UPAT_ALT, .src = P_SRC(__VA_ARGS__), .nsrc = P_NSRC(__VA_ARGS__))

/* PAT_CONST_VAL compares the CONST's value converted to double with cval->f;
 * so PAT_CONST_VAL(0) matches 0, 0.0 and false, and -0.0. */

typedef struct PatternMatcher PatternMatcher;

/* Builds the by-op index of a rule table (the table must outlive the matcher).
 * A rule whose pattern has no op (ops == NULL and groups == 0) is tried for
 * every op. NULL on out of memory. */
PatternMatcher *pm_new(const Rule *rules, int nrules);
/* A matcher trying a's rules, then b's (seed's pm + pm). */
PatternMatcher *pm_concat(const PatternMatcher *a, const PatternMatcher *b);
void pm_free(PatternMatcher *pm); /* NULL ok */

/* Match one pattern against one UOp. On success fills captures[1..] (slots not
 * in the pattern are NULL) and returns true. */
bool upat_match(const UPat *p, UOp *u, UOp **captures);

/* Try the rules for u's op in order; the first non-NULL result wins. */
UOp *pm_rewrite(const PatternMatcher *pm, UOp *u, void *ctx);

/* Rewrite the graph under sink to a fixed point (seed's graph_rewrite): top-down
 * rewrites each node after its sources and re-rewrites what a rule returns;
 * bottom_up applies rules to a node until none match before visiting its
 * sources. Memoised per call. Result is autoreleased. NULL on out of memory,
 * also when a rule's builder ran out (uctx_alloc_failures). */
UOp *graph_rewrite(UOp *sink, const PatternMatcher *pm, void *ctx, bool bottom_up);

/* Replace nodes by the map (from[i] -> to[i]) everywhere under root. */
UOp *uop_substitute(UOp *root, int n, UOp *const *from, UOp *const *to);

#endif
