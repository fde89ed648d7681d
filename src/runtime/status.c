/* Names of status codes. */
#include "tvk.h"

const char *tvk_status_name(tvk_status s) {
  switch (s) {
  case TVK_OK: return "TVK_OK";
  case TVK_ERR_INVALID_ARG: return "TVK_ERR_INVALID_ARG";
  case TVK_ERR_SHAPE: return "TVK_ERR_SHAPE";
  case TVK_ERR_DTYPE: return "TVK_ERR_DTYPE";
  case TVK_ERR_DEVICE: return "TVK_ERR_DEVICE";
  case TVK_ERR_OUT_OF_MEMORY: return "TVK_ERR_OUT_OF_MEMORY";
  case TVK_ERR_COMPILE: return "TVK_ERR_COMPILE";
  case TVK_ERR_INTERNAL: return "TVK_ERR_INTERNAL";
  }
  return "TVK_ERR_UNKNOWN";
}
