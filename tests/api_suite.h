/* Shared by the suites that are outside users' tests (tvk.h only: test_ops,
 * test_nn, test_grad, test_train): whether their device exists, and the end
 * of a test's context. */
#ifndef TVK_TESTS_API_SUITE_H
#define TVK_TESTS_API_SUITE_H

#include <stdio.h>

#include "tvk.h"

/* 77 (ctest's SKIP_RETURN_CODE), with a message, when `device` does not
 * exist; else 0. Any other error creating it fails each test's setup. */
static inline int api_device_missing(const char *suite, const char *device) {
  tvk_ctx *probe = NULL;
  if (tvk_ctx_create(device, &probe) == TVK_ERR_DEVICE) {
    fprintf(stderr, "%s: device %s not available: %s\n", suite, device, tvk_last_create_error());
    return 77;
  }
  tvk_ctx_destroy(probe);
  return 0;
}

/* Destroys *ctx (and sets it NULL); -1 when the Vulkan validation layer
 * reported anything while it lived (TVK_VALIDATE=1; each message was printed),
 * which fails the test, else 0. */
static inline int api_ctx_close_checked(tvk_ctx **ctx, const char *device) {
  tvk_stats st;
  tvk_stats_get(*ctx, &st);
  tvk_ctx_destroy(*ctx);
  *ctx = NULL;
  if (st.validation_messages)
    fprintf(stderr, "%llu Vulkan validation message(s) on %s\n",
            (unsigned long long)st.validation_messages, device);
  return st.validation_messages ? -1 : 0;
}

#endif
