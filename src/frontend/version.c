/* The library's version: the header's, as it was when libtvk was built. */
#include "tvk.h"

#define TVK_STR_(x) #x
#define TVK_STR(x) TVK_STR_(x)

int tvk_version(void) { return TVK_VERSION; }

const char *tvk_version_string(void) {
  return TVK_STR(TVK_VERSION_MAJOR) "." TVK_STR(TVK_VERSION_MINOR) "." TVK_STR(TVK_VERSION_PATCH);
}
