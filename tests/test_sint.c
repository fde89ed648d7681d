/* Tests of sint (src/ir/sint.c): variables, the arithmetic helpers, interning,
 * bounds, proofs, evaluation and text.
 *
 * References are written here: values are checked by evaluating every
 * expression at each value of its variables against plain C arithmetic on
 * that value (floor division written out), never against the helpers'
 * own results. */
/* cmocka.h needs these first */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */
#include <stdio.h>
#include <string.h>

#include "ir/sint.h"

static int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static void test_plain_integers(void **state) {
  (void)state;
  /* the fast path is C arithmetic, with floor semantics for / and % */
  assert_int_equal(sint_add(3, 4), 7);
  assert_int_equal(sint_sub(3, 4), -1);
  assert_int_equal(sint_mul(-3, 4), -12);
  assert_int_equal(sint_fdiv(-7, 2), -4);
  assert_int_equal(sint_fmod(-7, 2), 1);
  assert_int_equal(sint_fdiv(7, -2), -4);
  assert_int_equal(sint_cdiv(7, 2), 4);
  assert_int_equal(sint_cdiv(-7, 2), -3);
  assert_int_equal(sint_min(-5, 3), -5);
  assert_int_equal(sint_max(-5, 3), 3);
  assert_true(sint_proven_lt(-5, 3));
  assert_false(sint_proven_lt(3, 3));
  assert_true(sint_proven_le(3, 3));
  assert_true(sint_proven_eq(0, 0));
  assert_true(sint_may_differ(1, 2));
  assert_int_equal(sint_vmin(-9), -9);
  assert_int_equal(sint_vmax(-9), -9);
  assert_false(sint_is_sym(-9));
  assert_true(sint_is_int(INT64_MIN + ((int64_t)1 << 40)));
}

static void test_variables(void **state) {
  (void)state;
  sint n = sint_var("n", 1, 64), n2 = sint_var("n", 1, 64), m = sint_var("n", 1, 65);
  assert_true(sint_is_sym(n));
  assert_int_equal(n, n2); /* same name and range: the same variable */
  assert_true(n != m);     /* another range: another variable */
  const char *name = NULL;
  int64_t lo = 0, hi = 0;
  assert_true(sint_var_info(n, &name, &lo, &hi));
  assert_string_equal(name, "n");
  assert_int_equal(lo, 1);
  assert_int_equal(hi, 64);
  assert_false(sint_var_info(sint_add(n, 1), NULL, NULL, NULL)); /* not a variable */
  assert_false(sint_var_info(5, NULL, NULL, NULL));
  /* bad variables */
  assert_int_equal(sint_var(NULL, 1, 2), SINT_NONE);
  assert_int_equal(sint_var("", 1, 2), SINT_NONE);
  assert_int_equal(sint_var("n", 3, 2), SINT_NONE);
  assert_int_equal(sint_var("n", -1, 2), SINT_NONE);
  assert_int_equal(sint_var("n", 0, (int64_t)INT32_MAX + 1), SINT_NONE);
  assert_int_equal(sint_var("a_name_of_thirty_two_characters_", 1, 2), SINT_NONE);
  assert_true(sint_is_sym(sint_var("a_name_of_thirty_one_characters", 1, 2)));
}

/* Equal expressions get equal handles, and constants fold back to integers. */
static void test_interning(void **state) {
  (void)state;
  sint n = sint_var("n", 1, 64);
  sint a = sint_mul(n, 4), b = sint_mul(4, n), c = sint_add(sint_add(n, n), sint_add(n, n));
  assert_int_equal(a, b);
  assert_int_equal(a, c);
  assert_int_equal(sint_sub(sint_add(n, 1), 1), n);
  assert_int_equal(sint_sub(a, a), 0);
  assert_int_equal(sint_fdiv(sint_mul(n, 6), 3), sint_mul(n, 2));
  assert_int_equal(sint_fmod(sint_mul(n, 4), 4), 0);
  assert_int_equal(sint_mul(n, 0), 0);
  assert_int_equal(sint_mul(n, 1), n);
  /* bounds decide min and max */
  assert_int_equal(sint_max(n, 1), n);
  assert_int_equal(sint_min(n, 64), n);
  assert_int_equal(sint_max(n, 100), 100);
  assert_int_equal(sint_min(n, 0), 0);
  /* floor division of what may be negative is not built */
  assert_int_equal(sint_fdiv(sint_sub(n, 5), 2), SINT_NONE);
  assert_int_equal(sint_fmod(n, sint_sub(n, 1)), SINT_NONE);
  /* SINT_NONE spreads */
  assert_int_equal(sint_add(SINT_NONE, 1), SINT_NONE);
  assert_int_equal(sint_mul(n, SINT_NONE), SINT_NONE);
  assert_false(sint_proven_eq(SINT_NONE, SINT_NONE));
  assert_false(sint_proven_le(SINT_NONE, 0));
}

static void test_bounds_and_proofs(void **state) {
  (void)state;
  sint n = sint_var("n", 1, 64), m = sint_var("m", 2, 8);
  sint e = sint_add(sint_mul(n, m), 3); /* [5, 515] */
  assert_int_equal(sint_vmin(e), 5);
  assert_int_equal(sint_vmax(e), 515);
  assert_true(sint_proven_lt(n, sint_add(n, 1)));
  assert_true(sint_proven_le(n, 64));
  assert_false(sint_proven_le(n, 63));
  assert_false(sint_proven_lt(n, m)); /* true for some values only */
  assert_false(sint_proven_lt(m, n));
  assert_true(sint_proven_eq(sint_mul(sint_add(n, 1), 2), sint_add(sint_mul(n, 2), 2)));
  assert_true(sint_may_differ(n, m));
  assert_true(sint_proven_le(0, sint_sub(n, 1)));
}

/* Every expression, evaluated at every value of its variable, against C. */
static void test_eval_against_c(void **state) {
  (void)state;
  sint n = sint_var("len", 1, 40);
  for (int64_t v = 1; v <= 40; v++) {
    struct {
      sint s;
      int64_t want;
    } cases[] = {
        {sint_add(sint_mul(n, 3), 7), v * 3 + 7},
        {sint_sub(100, sint_mul(n, 2)), 100 - v * 2},
        {sint_fdiv(sint_add(n, 5), 4), floordiv(v + 5, 4)},
        {sint_fmod(sint_add(sint_mul(n, 3), 1), 5), (v * 3 + 1) % 5},
        {sint_max(n, 17), v > 17 ? v : 17},
        {sint_min(sint_mul(n, 2), 31), v * 2 < 31 ? v * 2 : 31},
        {sint_mul(n, n), v * v},
        {sint_fdiv(sint_mul(n, n), n), v},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      int64_t got = sint_eval(cases[i].s, 1, &n, &v);
      if (got != cases[i].want) {
        char txt[128];
        sint_str(cases[i].s, txt, sizeof txt);
        fail_msg("case %zu (%s) at len=%lld: %lld, want %lld", i, txt, (long long)v, (long long)got,
                 (long long)cases[i].want);
      }
      assert_true(sint_vmin(cases[i].s) <= got && got <= sint_vmax(cases[i].s));
    }
  }
  assert_int_equal(sint_eval(12, 0, NULL, NULL), 12);
  assert_int_equal(sint_eval(sint_add(n, 2), 0, NULL, NULL), 3); /* unbound: its lo */
  sint k = 5;
  assert_int_equal(sint_eval(n, 1, &k, (int64_t[]){3}), SINT_NONE); /* 5 is no variable */
}

static void test_text(void **state) {
  (void)state;
  char buf[64];
  sint n = sint_var("seq", 1, 512);
  sint_str(sint_add(sint_mul(n, 4), 1), buf, sizeof buf);
  assert_non_null(strstr(buf, "seq"));
  assert_non_null(strstr(buf, "4"));
  sint_str(-12, buf, sizeof buf);
  assert_string_equal(buf, "-12");
  sint_str(SINT_NONE, buf, sizeof buf);
  assert_string_equal(buf, "<none>");
  assert_true(sint_str(n, NULL, 0) == 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain_integers), cmocka_unit_test(test_variables),
      cmocka_unit_test(test_interning),      cmocka_unit_test(test_bounds_and_proofs),
      cmocka_unit_test(test_eval_against_c), cmocka_unit_test(test_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
