/* Data types of the IR: scalars, vectors of scalars, and pointers to them. */
#ifndef TVK_IR_DTYPE_H
#define TVK_IR_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Scalar types in promotion priority order (the seed's DType.priority). */
typedef enum {
  DT_VOID = 0,
  DT_BOOL,
  DT_INT8,
  DT_UINT8,
  DT_INT16,
  DT_UINT16,
  DT_INT32,
  DT_UINT32,
  DT_INT64,
  DT_UINT64,
  DT_FLOAT16,
  DT_BFLOAT16,
  DT_FLOAT32,
  DT_FLOAT64,
  DT_COUNT
} ScalarType;

#define DT_BIT(s) (1u << (s))
#define DT_BITS_INT                                                                                \
  (DT_BIT(DT_INT8) | DT_BIT(DT_UINT8) | DT_BIT(DT_INT16) | DT_BIT(DT_UINT16) | DT_BIT(DT_INT32) |  \
   DT_BIT(DT_UINT32) | DT_BIT(DT_INT64) | DT_BIT(DT_UINT64))
#define DT_BITS_FLOAT                                                                              \
  (DT_BIT(DT_FLOAT16) | DT_BIT(DT_BFLOAT16) | DT_BIT(DT_FLOAT32) | DT_BIT(DT_FLOAT64))

enum { ADDR_NONE = 0, ADDR_GLOBAL = 1, ADDR_LOCAL = 2 };

/* A dtype is a value: compare with dt_eq. `count` > 1 is a vector of `scalar`;
 * `addr` != ADDR_NONE makes it a pointer to (a vector of) `scalar`. */
typedef struct {
  uint8_t scalar; /* ScalarType */
  uint8_t count;  /* vector width, 1 for scalars */
  uint8_t addr;   /* ADDR_* */
  uint8_t pad_;   /* always 0, so the struct hashes by its bytes */
} DType;

static inline DType dt_make(ScalarType s) { return (DType){(uint8_t)s, 1, ADDR_NONE, 0}; }
#define DT(s) ((DType){DT_##s, 1, ADDR_NONE, 0})
static inline DType dt_vec(DType d, int count) {
  return (DType){d.scalar, (uint8_t)count, d.addr, 0};
}
static inline DType dt_ptr(DType d, int addr) {
  return (DType){d.scalar, d.count, (uint8_t)addr, 0};
}
static inline DType dt_base(DType d) {
  return (DType){d.scalar, d.count, ADDR_NONE, 0};
} /* pointee */
static inline DType dt_scalar(DType d) { return (DType){d.scalar, 1, ADDR_NONE, 0}; } /* element */
static inline bool dt_eq(DType a, DType b) {
  return a.scalar == b.scalar && a.count == b.count && a.addr == b.addr;
}
static inline uint32_t dt_key(DType d) {
  return (uint32_t)d.scalar | (uint32_t)d.count << 8 | (uint32_t)d.addr << 16;
}

static inline bool dt_is_ptr(DType d) { return d.addr != ADDR_NONE; }
static inline bool dt_is_float(DType d) { return (DT_BITS_FLOAT >> d.scalar) & 1u; }
static inline bool dt_is_int(DType d) { return (DT_BITS_INT >> d.scalar) & 1u; } /* bool excluded */
static inline bool dt_is_bool(DType d) { return d.scalar == DT_BOOL; }
bool dt_is_unsigned(DType d);

/* Bytes of one scalar, of the whole (vector) value. Pointers report the pointee. */
size_t dt_scalar_size(ScalarType s);
static inline size_t dt_itemsize(DType d) { return dt_scalar_size((ScalarType)d.scalar) * d.count; }
int dt_bits(DType d); /* bits of one scalar */

/* Name of a scalar type ("float32"), and of any dtype into buf ("float32.vec(4).ptr"). */
const char *dt_scalar_name(ScalarType s);
const char *dt_str(DType d, char buf[48]);

/* Representable range of the scalar type. Integer bounds are exact except
 * uint64's max, which is clamped to INT64_MAX; float bounds are +-inf, bool is 0..1. */
int64_t dt_min_i(DType d);
int64_t dt_max_i(DType d);
double dt_min_f(DType d);
double dt_max_f(DType d);

/* The smallest type both promote to, following the seed's lattice
 * (bool < int8 < int16 ... ; int64/uint64 -> float16 ...). Scalars only. */
ScalarType dt_promote(ScalarType a, ScalarType b);

/* The dtype rules of reductions and float ops, one place for every op:
 * dt_sum_result  a sum or product of s: bool and integers narrower than 32 bits
 *                widen to 32 (signed or unsigned as they are); others stay
 * dt_float_result a float result computed from s (mean, softmax, norms): s when
 *                it is a float, else float32
 * dt_acc         what values of s are accumulated in: float32 for float16 and
 *                bfloat16 (a long sum of half values would keep 11 bits), else s */
ScalarType dt_sum_result(ScalarType s);
ScalarType dt_float_result(ScalarType s);
ScalarType dt_acc(ScalarType s);

/* A constant of a scalar type, as the IR stores it: `i` for bool and integer
 * types (uint64 as its bit pattern), `f` for float types. */
typedef union {
  int64_t i;
  double f;
} CVal;

/* Truncate a value to what the scalar type can hold: integers wrap, bool is !=0,
 * floats round to the type's precision. */
int64_t dt_truncate_i(ScalarType s, int64_t v);
double dt_truncate_f(ScalarType s, double v);
/* Convert a constant between scalar types with C cast semantics: float -> int
 * truncates toward zero (out of range: wraps through int64 as the CPU backend does),
 * -> bool tests != 0. */
CVal cval_cast(CVal v, ScalarType from, ScalarType to);
/* The value whose bits in dtype `to` are v's in `from` (same size; float16
 * and bfloat16 excepted: the IR stores them as doubles of their value). */
CVal cval_bitcast(CVal v, ScalarType from, ScalarType to);
/* The value as a double (ints exactly where they fit), and from a double. */
double cval_to_double(CVal v, ScalarType s);
CVal cval_from_double(double x, ScalarType s);
/* Value equality by representation (NaN equals NaN of the same bits). */
bool cval_eq(CVal a, CVal b, ScalarType s);

/* IEEE half and bfloat16 conversions (round to nearest even, NaN kept). */
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t b);

#endif
