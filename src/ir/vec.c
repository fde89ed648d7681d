/* Growable arrays: see vec.h. */
#include "ir/vec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool vec_reserve_(void *pptr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t c = *cap ? *cap : 16;
  while (c < need) {
    if (c > SIZE_MAX / 2) return false;
    c *= 2;
  }
  if (c > SIZE_MAX / elem) return false;
  /* The pointer is read and written as bytes: pptr is the address of a T *,
   * which may not be accessed through a void ** lvalue. */
  void *p;
  memcpy(&p, pptr, sizeof p);
  void *np = realloc(p, c * elem);
  if (!np) return false;
  memcpy(pptr, &np, sizeof np);
  *cap = c;
  return true;
}
