/* The C-family renderer: one walker over a linear program (codegen.h), driven
 * by a language table. A backend adds a language by filling a Lang; the walker
 * never asks which language it renders, so anything a language does
 * differently is a field here.
 *
 * ---- Templates ----
 * Most fields are templates: text with placeholders, expanded by the walker.
 *   $0 $1 $2 $3   the operands (rendered expressions of the UOp's sources)
 *   $T            the type of the value (for ALU ops: of the operands, so that
 *                 CMPLT on int32 sees int32; for casts: the result)
 *   $S            the type of source 0 (casts)
 *   $U            the wrap type of $T (unsigned, at least 32 bits: integer math
 *                 that may overflow is done in it)
 *   $N $M         short names of $T's and $S's dtype ("i32"): helper names
 *   $F            the math-function suffix of $T ("f" for float in C: sqrtf)
 *   $W            the bit width of $T
 *   $V            a variable name (declarations, loops, buffers, vars)
 *   $I            an index (buffer number, position in vals)
 *   $B            a buffer's element type
 *   $R            the read-only qualifier, for buffers the kernel only reads
 *   $K            the kernel name
 *   $$            a dollar sign
 * An operand a template uses twice is always a named variable, never an inline
 * expression, so nothing is evaluated twice and text does not grow
 * exponentially.
 *
 * ---- Helpers ----
 * A Spell may name a helper: a template of a function definition, expanded with
 * the same placeholders as the op. Each distinct expansion is put once before
 * the kernel, only when some op uses it; a helper that calls another names it
 * in `needs`, which goes first.
 */
#ifndef TVK_CODEGEN_RENDER_H
#define TVK_CODEGEN_RENDER_H

#include <stdbool.h>
#include <stdint.h>

#include "codegen/codegen.h"
#include "ir/dtype.h"
#include "ir/ops.h"

typedef struct {
  const char *expr;   /* template of the expression; NULL: the language cannot do it */
  const char *helper; /* template of a function the expression calls, or NULL */
  const char *needs;  /* template of a helper that `helper` calls (put before it), or NULL */
  const char *needs2; /* another such helper, or NULL */
} Spell;

/* Which ALU table an op uses, by the dtype of its operands. */
typedef enum { CL_BOOL, CL_SINT, CL_UINT, CL_FLOAT, CL_COUNT } TypeClass;

/* A cast spelling for sources in `from` and results in `to` (DT_BIT sets). */
typedef struct {
  uint32_t from, to;
  Spell spell;
} CastSpell;

/* How a SPECIAL (by name) is written, and what to write (in the function's
 * prologue) when the kernel does not use it ("" or NULL: nothing). */
typedef struct {
  const char *name, *text, *unused;
} SpecialSpell;

struct Lang {
  const char *name;

  /* ---- types ---- */
  const char *type[DT_COUNT];     /* $T: a value of the dtype (storage-only ones hold their bits) */
  const char *buf_type[DT_COUNT]; /* $B: an element of a buffer */
  const char *wrap_type[DT_COUNT];   /* $U */
  const char *short_name[DT_COUNT];  /* $N, $M */
  const char *math_suffix[DT_COUNT]; /* $F */
  uint32_t storage_only;             /* DT_BITs that are only loaded, stored and cast ... */
  uint8_t compute_type;              /* ... and computed in this ScalarType (legalize.c) */
  uint8_t compute_of[DT_COUNT]; /* per storage-only dtype, its own compute type (0: compute_type) */
  /* Why the language lacks a dtype whose type[] is NULL (the TVK_ERR_DTYPE message). */
  const char *no_type[DT_COUNT];

  /* ---- literals ---- */
  const char *lit_suffix[DT_COUNT]; /* after an integer or float literal: "u", "LL", "f" */
  int float_digits[DT_COUNT];       /* significant digits that round-trip (9 for float32) */
  const char *true_lit, *false_lit;
  const char *inf, *ninf, *nan; /* templates ($T: the float type) */
  /* +0.0 ($T: the float type); NULL: the literal. GLSL names a zero the shader
   * compiler cannot see, as lavapipe folds x * 0.0 to 0 and 0.0 - x to -x. */
  const char *pos_zero;
  const char *storage_lit; /* a storage-only constant: $0 is its bits in hex */

  /* ---- the kernel ---- */
  const char *file_header; /* once, before the helpers */
  const char *tile_header; /* after it, in a kernel with a register tile (RenderInfo); NULL: none */
  /* after the file header, in a kernel with open loops and no register tile
   * (RenderInfo); NULL: none */
  const char *open_loops_header;
  /* after those, in a kernel whose lanes are its parallelism (a register
   * tile or an unrolled reduce: RenderInfo); NULL: none */
  const char *lanes_header;
  /* after those, in a kernel for a target that fuses multiply-adds at full
   * speed (RenderInfo.fma): helpers may then use them; NULL: none */
  const char *fma_header;
  const char *buf_decl_file; /* per buffer, at file scope ($I $V $B $R); "" for none */
  /* At file scope after the buffers: a block holding the vars (GLSL's push
   * constants): push_open, push_member per DEFINE_VAR ($V $I), push_close.
   * NULL push_open: none. */
  const char *push_open, *push_member, *push_close;
  const char *launch_decl; /* before func_open: the work-group size $0 x $1 x $2 ($K); or NULL */
  /* Work-group memory (DEFINE_LOCAL), at file scope: $V of $I elements of $T;
   * NULL: the language has none (a kernel using it is refused). */
  const char *local_decl;
  const char *barrier;      /* the statement of a BARRIER */
  const char *func_open;    /* $K */
  const char *buf_decl;     /* per buffer, inside the function ($I $V $B $R) */
  const char *ro_qualifier; /* $R of a buffer that is only read */
  const char *var_decl;     /* per DEFINE_VAR ($V, $I: its position in vals) */
  const char *var_decl_f32; /* per float32 DEFINE_VAR: vals[$I] holds its bits */
  const char *no_vars;      /* when the kernel has no DEFINE_VAR */
  const char *var_unused;   /* after var_decl, for a var the program does not use ($V) */
  const char *func_close;
  const SpecialSpell *specials;
  int nspecials;
  const char *indent; /* one level of indentation */

  /* ---- statements ---- */
  const char *decl;       /* define a variable $V of type $T from $0 */
  const char *assign;     /* $V = $0 */
  const char *range_open; /* a loop $V of type $T over [0, $0) */
  const char *range_close;
  const char *index; /* the place of element $1 of buffer $0 */
  /* Per buffer element dtype: its own place, store and gated store (NULL: the
   * ones above); e.g. elements packed in wider words, stored by a macro. */
  const char *index_elem[DT_COUNT];
  const char *store_elem[DT_COUNT];
  const char *store_gated_elem[DT_COUNT];
  const char *load_gated; /* $2 ? (the value at place $0) : $1 */
  /* conversions between buffer elements and values (each uses $0 once; NULL: "$0") */
  const char *load_conv[DT_COUNT];  /* a loaded buffer element $0 as a value */
  const char *store_conv[DT_COUNT]; /* a value $0 as a buffer element */
  const char *store;                /* place $0 = $1 */
  const char *store_gated;          /* if ($2) place $0 = $1 */

  /* ---- ops ---- */
  int max_vector; /* widest vector type (0: none; vector dtypes are refused) */
  /* 4-wide memory access (vectorize.c), where max_vector >= 4: */
  const char *vec_type[DT_COUNT]; /* $T of a 4-vector of the dtype; NULL: no quads of it */
  const char *vec_buf_decl_file;  /* a buffer declared again as 4-vectors ($I $V $B $R) */
  const char *vec_index;          /* the place of 4-vector $1 of buffer $0 */
  const char *gep;                /* lane $I of vector $0 */
  const char *vectorize;          /* the 4-vector ($T) of $0 $1 $2 $3 */
  /* 8-wide memory access (vectorize.c), where max_vector >= 8: one 32-byte
   * access where each access costs per instruction rather than per byte (a
   * CPU-type Vulkan device runs every access as a loop over its SIMD lanes) */
  const char *wide_type[DT_COUNT];      /* $T of an 8-vector of the dtype; NULL: none */
  const char *wide_buf_decl_file;       /* a buffer declared again as 8-vectors ($I $V $B $R) */
  const char *wide_index;               /* the place of 8-vector $1 of buffer $0 */
  const char *wide_gep[DT_COUNT];       /* lane $I of 8-vector $0 */
  const char *wide_vectorize[DT_COUNT]; /* the 8-vector of $0 .. $7 */
  const char *wide_header;              /* after file_header, in a kernel with 8-wide access */
  /* SUBGROUP_REDUCE by its reduce op (ADD, MUL, MAX) of $0 ($T); NULL: none */
  const char *subgroup_reduce[OP_COUNT];
  const char *subgroup_header; /* after file_header, in a kernel that uses them */
  Spell alu[CL_COUNT][OP_COUNT];
  /* Per operand dtype: OP_COUNT spellings that override alu[class] where set
   * (e.g. float64 math done by other helpers than float32's); NULL: none. */
  const Spell *alu_dt[DT_COUNT];
  /* Integer ops (ADD SUB MUL NEG IDIV MOD SHL SHR) whose operands' bounds
   * (symbolic.h) prove that the result fits the dtype, the divisor is neither
   * 0 nor -1, and a shifted value is non-negative with an amount below the
   * width: no wrap-around or guard is needed. Empty: always use `alu`. */
  Spell alu_fits[OP_COUNT];
  bool fits_nonneg_divmod; /* alu_fits IDIV and MOD also need a dividend >= 0 (GLSL's % and /) */
  const CastSpell *casts;  /* first match wins */
  int ncasts;
  const CastSpell *bitcasts; /* BITCAST between dtypes of one size; first match wins */
  int nbitcasts;
};

/* The C language table (render_c.c): the CPU device's kernel ABI. */
extern const Lang lang_c;

/* Info about the kernel that the source needs besides the program. */
typedef struct {
  const char *name;
  int nbufs;
  const KernelBuf *bufs;
  int nvars;
  UOp *const *vars; /* DEFINE_VARs in vals[] order */
  int64_t local[3]; /* work-group size (launch_decl) */
  /* Output axes upcast into lanes around a reduce loop (a matmul's register
   * tile, opt.h): the lanes are the code's parallelism, not the loops. */
  bool register_tile;
  /* Loops whose trip count is a launch value (symbolic sizes): the C
   * compiler cannot know that the vector width divides it. */
  bool open_loops;
  /* A reduce unrolled into lanes (OPT_UNROLL): as in a register tile, the
   * lanes are what a vectoriser widens. */
  bool unrolled;
  /* The target fuses multiply-adds at full speed (CodegenOpts.fma): the
   * language's fma_header goes in, and math helpers may fuse. */
  bool fma;
} RenderInfo;

/* Renders the program; *src is malloc'd (caller frees). TVK_ERR_DTYPE when the
 * language has no spelling for an op on a dtype. */
tvk_status render_program(const LinearProgram *lp, const Lang *lang, const RenderInfo *info,
                          char **src, Error *err);

#endif
