/* Resident memory of this process (Linux: /proc/self/statm; macOS: task info). */
#ifndef HEARTH_RSS_H
#define HEARTH_RSS_H
#include <stdint.h>
/* Bytes resident now, or 0 when the platform does not say. */
uint64_t rss_bytes(void);
#endif
