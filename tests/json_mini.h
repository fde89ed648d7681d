/* A strict JSON parser for tests (RFC 8259: no trailing commas, no comments,
 * no bare words, strings with valid escapes and no raw control characters),
 * into a small tree. Enough to check that a file tvk writes is JSON a viewer
 * will load, and to read its values back. */
#ifndef TVK_TESTS_JSON_MINI_H
#define TVK_TESTS_JSON_MINI_H

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef enum { JS_NULL, JS_BOOL, JS_NUM, JS_STR, JS_ARR, JS_OBJ } JsKind;

typedef struct JsVal JsVal;
struct JsVal {
  JsKind kind;
  bool b;
  double num;
  char *str;    /* JS_STR: the decoded text (\u escapes of ASCII only; others kept as '?') */
  int n;        /* JS_ARR, JS_OBJ: how many */
  JsVal *items; /* their values */
  char **keys;  /* JS_OBJ: their keys */
};

typedef struct {
  const char *p, *end;
  int depth;
} JsIn;

static void js_ws(JsIn *in) {
  while (in->p < in->end && (*in->p == ' ' || *in->p == '\n' || *in->p == '\r' || *in->p == '\t'))
    in->p++;
}

static bool js_lit(JsIn *in, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(in->end - in->p) < n || memcmp(in->p, w, n) != 0) return false;
  in->p += n;
  return true;
}

static char *js_string(JsIn *in) {
  if (in->p >= in->end || *in->p != '"') return NULL;
  in->p++;
  size_t cap = 16, len = 0;
  char *s = malloc(cap);
  while (s && in->p < in->end && *in->p != '"') {
    unsigned char c = (unsigned char)*in->p++;
    if (c < 0x20) break; /* raw control character: not JSON */
    if (c == '\\') {
      if (in->p >= in->end) break;
      char e = *in->p++;
      const char *map = strchr("\"\"\\\\//b\bf\fn\nr\rt\t", e);
      if (e == 'u') {
        unsigned v = 0;
        int k = 0;
        for (; k < 4 && in->p < in->end && isxdigit((unsigned char)*in->p); k++, in->p++)
          v = v * 16 + (unsigned)(isdigit((unsigned char)*in->p) ? *in->p - '0'
                                                                 : (tolower(*in->p) - 'a' + 10));
        if (k < 4) break;
        c = v < 0x80 ? (unsigned char)v : '?';
      } else if (e && map && ((map - "\"\"\\\\//b\bf\fn\nr\rt\t") % 2) == 0) {
        c = (unsigned char)map[1];
      } else {
        break;
      }
    }
    if (len + 2 > cap) {
      char *g = realloc(s, cap *= 2);
      if (!g) break;
      s = g;
    }
    s[len++] = (char)c;
  }
  if (!s || in->p >= in->end || *in->p != '"') {
    free(s);
    return NULL;
  }
  in->p++;
  s[len] = 0;
  return s;
}

static void js_free(JsVal *v);

static bool js_value(JsIn *in, JsVal *v) {
  memset(v, 0, sizeof *v);
  js_ws(in);
  if (in->p >= in->end || ++in->depth > 64) return false;
  bool ok = true;
  char c = *in->p;
  if (c == '{' || c == '[') {
    bool obj = c == '{';
    v->kind = obj ? JS_OBJ : JS_ARR;
    in->p++;
    js_ws(in);
    if (in->p < in->end && *in->p == (obj ? '}' : ']')) {
      in->p++;
    } else {
      for (;;) {
        JsVal *items = realloc(v->items, (size_t)(v->n + 1) * sizeof *items);
        char **keys = obj ? realloc(v->keys, (size_t)(v->n + 1) * sizeof *keys) : NULL;
        if (items) v->items = items;
        if (keys) v->keys = keys;
        if (!items || (obj && !keys)) return false;
        if (obj) {
          js_ws(in);
          if (!(v->keys[v->n] = js_string(in))) return false;
          js_ws(in);
          if (in->p >= in->end || *in->p++ != ':') {
            free(v->keys[v->n]);
            return false;
          }
        }
        ok = js_value(in, &v->items[v->n]);
        v->n++;
        if (!ok) return false;
        js_ws(in);
        if (in->p < in->end && *in->p == ',') {
          in->p++;
          continue;
        }
        if (in->p < in->end && *in->p == (obj ? '}' : ']')) {
          in->p++;
          break;
        }
        return false;
      }
    }
  } else if (c == '"') {
    v->kind = JS_STR;
    ok = (v->str = js_string(in)) != NULL;
  } else if (js_lit(in, "true") || js_lit(in, "false")) {
    v->kind = JS_BOOL;
    v->b = in->p[-1] == 'e' && in->p[-2] == 'u';
  } else if (js_lit(in, "null")) {
    v->kind = JS_NULL;
  } else {
    /* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
    const char *s = in->p;
    if (in->p < in->end && *in->p == '-') in->p++;
    if (in->p < in->end && *in->p == '0')
      in->p++;
    else if (in->p < in->end && isdigit((unsigned char)*in->p))
      while (in->p < in->end && isdigit((unsigned char)*in->p)) in->p++;
    else
      return false;
    if (in->p < in->end && *in->p == '.') {
      if (++in->p >= in->end || !isdigit((unsigned char)*in->p)) return false;
      while (in->p < in->end && isdigit((unsigned char)*in->p)) in->p++;
    }
    if (in->p < in->end && (*in->p == 'e' || *in->p == 'E')) {
      in->p++;
      if (in->p < in->end && (*in->p == '+' || *in->p == '-')) in->p++;
      if (in->p >= in->end || !isdigit((unsigned char)*in->p)) return false;
      while (in->p < in->end && isdigit((unsigned char)*in->p)) in->p++;
    }
    char buf[64];
    size_t n = (size_t)(in->p - s);
    if (n >= sizeof buf) return false;
    memcpy(buf, s, n);
    buf[n] = 0;
    v->kind = JS_NUM;
    v->num = strtod(buf, NULL);
  }
  in->depth--;
  return ok;
}

static void js_free(JsVal *v) {
  if (!v) return;
  free(v->str);
  for (int i = 0; i < v->n; i++) {
    js_free(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  memset(v, 0, sizeof *v);
}

/* Parses the whole text: true and *out when it is one JSON value and nothing
 * but white space after; false otherwise (*out then holds nothing). */
static bool js_parse(const char *text, size_t n, JsVal *out) {
  JsIn in = {text, text + n, 0};
  bool ok = js_value(&in, out);
  js_ws(&in);
  if (!ok || in.p != in.end) {
    js_free(out);
    return false;
  }
  return true;
}

/* The member called key of an object; NULL when absent or v is no object. */
static const JsVal *js_get(const JsVal *v, const char *key) {
  for (int i = 0; v && v->kind == JS_OBJ && i < v->n; i++)
    if (!strcmp(v->keys[i], key)) return &v->items[i];
  return NULL;
}

#endif
