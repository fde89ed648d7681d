/* tvk: a lazy tensor library in C11.
 *
 * This header is the whole public API. The tensor functions arrive with the
 * frontend; today it holds the status codes and dtypes every layer shares.
 */
#ifndef TVK_H
#define TVK_H

#ifdef __cplusplus
extern "C" {
#endif

/* Every fallible call returns one of these; the message of the last error is
 * kept by the context it happened in. */
typedef enum {
  TVK_OK = 0,
  TVK_ERR_INVALID_ARG,   /* a NULL where a value is needed, an out-of-range argument */
  TVK_ERR_SHAPE,         /* shapes that do not broadcast, a reshape that changes the size ... */
  TVK_ERR_DTYPE,         /* a dtype an op or a device does not take */
  TVK_ERR_DEVICE,        /* no such device, a compiler or driver that is missing or failed */
  TVK_ERR_OUT_OF_MEMORY, /* host or device memory ran out */
  TVK_ERR_COMPILE,       /* a generated kernel failed to compile */
  TVK_ERR_INTERNAL,      /* a bug in tvk: please report it with the message */
} tvk_status;

/* Element types of tensors. */
typedef enum {
  TVK_BOOL,
  TVK_INT8,
  TVK_UINT8,
  TVK_INT16,
  TVK_UINT16,
  TVK_INT32,
  TVK_UINT32,
  TVK_INT64,
  TVK_UINT64,
  TVK_FLOAT16,
  TVK_BFLOAT16,
  TVK_FLOAT32,
  TVK_FLOAT64,
} tvk_dtype;

/* A short constant name of a status ("TVK_ERR_SHAPE"); never NULL. */
const char *tvk_status_name(tvk_status s);

#ifdef __cplusplus
}
#endif

#endif
