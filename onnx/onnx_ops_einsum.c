/* Einsum: every operand viewed over all the equation's labels (a permute and
 * size-1 dims where it lacks one), multiplied with broadcasting, summed over
 * the labels the output drops, permuted to the output's order. The product
 * and the sum are one reduce kernel, as any contraction tvk builds. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "onnx_internal.h"
#include "onnx_ops.h"

#define IN(i) onnx_in(c, i)

enum { ELL = 52, NLABELS = ELL + TVK_MAX_DIMS }; /* a-z A-Z, then ellipsis dims */

typedef struct {
  int n; /* labels in the term, ellipsis expanded */
  int label[TVK_MAX_DIMS];
} term;

static int letter(char ch) { return islower((unsigned char)ch) ? ch - 'a' : ch - 'A' + 26; }

/* Parses one term of len chars for an operand of ndim dims (ndim < 0: the
 * output, whose ellipsis has nell dims). false on a malformed term. */
static bool parse_term(const char *s, size_t len, int ndim, int *nell, term *t) {
  int explicit = 0;
  bool ell = false;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '.') {
      if (ell || i + 2 >= len || strncmp(s + i, "...", 3)) return false;
      ell = true;
      i += 2;
    } else if (isalpha((unsigned char)s[i])) {
      explicit ++;
    } else if (s[i] != ' ') {
      return false;
    }
  }
  int ne = ndim < 0 ? (ell ? *nell : 0) : ndim - explicit;
  if (ne < 0 || (!ell && ne != 0) || explicit + ne > TVK_MAX_DIMS) return false;
  if (ndim >= 0 && ell && ne > *nell) *nell = ne;
  t->n = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '.') {
      /* right-aligned: an operand with fewer ellipsis dims takes the last ones */
      for (int k = 0; k < ne; k++) t->label[t->n++] = ELL + TVK_MAX_DIMS - ne + k;
      i += 2;
    } else if (isalpha((unsigned char)s[i])) {
      t->label[t->n++] = letter(s[i]);
    }
  }
  return true;
}

/* The diagonal of dims j < k (equal size n) of t, as its last dim: the two
 * moved last and flattened, every (n+1)-th element (pad to n(n+1), view
 * (n, n+1), column 0). NULL when the sizes differ. */
static tvk_tensor *diagonal(tvk_tensor *t, int j, int k) {
  int nd = tvk_ndim(t), perm[TVK_MAX_DIMS], np = 0;
  int64_t n = tvk_shape(t)[j], shape[TVK_MAX_DIMS + 1];
  if (tvk_shape(t)[k] != n) return NULL;
  for (int q = 0; q < nd; q++)
    if (q != j && q != k) shape[np] = tvk_shape(t)[q], perm[np++] = q;
  perm[np] = j, perm[np + 1] = k;
  t = tvk_permute(t, perm);
  shape[np] = n * n;
  t = tvk_reshape(t, np + 1, shape);
  int64_t pads[TVK_MAX_DIMS][2] = {{0}};
  pads[np][1] = n;
  t = tvk_pad(t, pads, 0);
  shape[np] = n, shape[np + 1] = n + 1;
  t = tvk_reshape(t, np + 2, shape);
  int64_t r[TVK_MAX_DIMS + 1][2];
  for (int q = 0; q < np + 2; q++) r[q][0] = 0, r[q][1] = shape[q];
  r[np + 1][1] = 1;
  return tvk_reshape(tvk_shrink(t, r), np + 1, shape);
}

static tvk_status op_einsum(onnx_run_ctx *c) {
  char eq[256];
  const char *e = onnx_attr_string(c, "equation", "", eq, sizeof eq);
  int n = c->node->nin, nell = 0;
  if (n > 16) return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "%d operands (at most 16)", n);
  term in[16], out;
  const char *arrow = strstr(e, "->"), *p = e;
  size_t lhs = arrow ? (size_t)(arrow - e) : strlen(e);
  for (int i = 0; i < n; i++) {
    const char *comma = memchr(p, ',', lhs - (size_t)(p - e));
    size_t len = comma ? (size_t)(comma - p) : lhs - (size_t)(p - e);
    if ((i < n - 1) != (comma != NULL) || !parse_term(p, len, onnx_in_ndim(c, i), &nell, &in[i]))
      return onnx_node_fail(c, TVK_ERR_INVALID_ARG,
                            "equation '%s' does not fit %d operands of %d, ... dims", e, n,
                            onnx_in_ndim(c, 0));
    p = comma ? comma + 1 : p + len;
  }
  /* A label twice in one operand takes its diagonal first. */
  tvk_tensor *ops[16];
  for (int i = 0; i < n; i++) {
    ops[i] = IN(i);
    for (int k = 1; k < in[i].n; k++)
      for (int j = 0; j < k; j++) {
        if (in[i].label[j] != in[i].label[k]) continue;
        ops[i] = diagonal(ops[i], j, k);
        if (!ops[i])
          return onnx_node_fail(c, TVK_ERR_SHAPE, "equation '%s': a diagonal of unequal dims", e);
        int l = in[i].label[j], m = 0; /* the labels now: the others in order, then l */
        for (int q = 0; q < in[i].n; q++)
          if (q != j && q != k) in[i].label[m++] = in[i].label[q];
        in[i].label[m++] = l;
        in[i].n = m;
        k = 0; /* look again from the start */
        break;
      }
  }
  int count[NLABELS] = {0};
  int64_t size[NLABELS];
  for (int i = 0; i < n; i++) {
    const int64_t *sh = tvk_shape(ops[i]);
    for (int k = 0; k < in[i].n; k++) {
      int l = in[i].label[k];
      if (count[l] && size[l] != sh[k] && size[l] != 1 && sh[k] != 1)
        return onnx_node_fail(c, TVK_ERR_SHAPE, "equation '%s': label sizes %lld and %lld differ",
                              e, (long long)size[l], (long long)sh[k]);
      if (!count[l] || size[l] == 1) size[l] = sh[k];
      count[l]++;
    }
  }
  if (arrow) {
    if (!parse_term(arrow + 2, strlen(arrow + 2), -1, &nell, &out))
      return onnx_node_fail(c, TVK_ERR_INVALID_ARG, "equation '%s': a bad output term", e);
    for (int k = 0; k < out.n; k++)
      if (!count[out.label[k]])
        return onnx_node_fail(c, TVK_ERR_INVALID_ARG,
                              "equation '%s': an output label no operand has", e);
  } else { /* implicit: the ellipsis, then the labels seen once, in alphabetical order */
    out.n = 0;
    for (int k = 0; k < nell; k++) out.label[out.n++] = ELL + TVK_MAX_DIMS - nell + k;
    for (int l = 0; l < ELL; l++)
      if (count[l] == 1) out.label[out.n++] = l;
  }
  /* the full label order: the output's labels first, then the summed ones */
  int order[NLABELS], nl = 0, pos[NLABELS];
  bool used[NLABELS] = {false};
  for (int k = 0; k < out.n; k++) order[nl++] = out.label[k], used[out.label[k]] = true;
  for (int l = 0; l < NLABELS; l++)
    if (count[l] && !used[l]) order[nl++] = l;
  if (nl > TVK_MAX_DIMS)
    return onnx_node_fail(c, TVK_ERR_SHAPE, "equation '%s' has %d labels (at most %d)", e, nl,
                          TVK_MAX_DIMS);
  for (int k = 0; k < nl; k++) pos[order[k]] = k;
  tvk_tensor *prod = NULL;
  for (int i = 0; i < n; i++) {
    /* permute the operand's dims into the full order, then 1s where it lacks a label */
    int perm[TVK_MAX_DIMS], np = 0;
    for (int k = 0; k < nl; k++)
      for (int j = 0; j < in[i].n; j++)
        if (in[i].label[j] == order[k]) perm[np++] = j;
    tvk_tensor *t = tvk_permute(ops[i], perm);
    int64_t shape[TVK_MAX_DIMS];
    for (int k = 0; k < nl; k++) shape[k] = 1;
    for (int j = 0; j < in[i].n; j++) shape[pos[in[i].label[j]]] = tvk_shape(ops[i])[j];
    t = tvk_reshape(t, nl, shape);
    prod = prod ? tvk_mul(prod, t) : t;
  }
  if (nl > out.n) {
    int axes[TVK_MAX_DIMS];
    for (int k = out.n; k < nl; k++) axes[k - out.n] = k;
    prod = tvk_sum(prod, nl - out.n, axes, false);
  }
  return onnx_set_out(c, 0, tvk_cast(prod, onnx_in_dtype(c, 0)));
}

const onnx_op onnx_ops_einsum[] = {
    {"Einsum", "equation", 1, 16, 1, 1, op_einsum},
    {NULL, NULL, 0, 0, 0, 0, NULL},
};
