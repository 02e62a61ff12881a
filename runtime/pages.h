/* Page-aligned memory of its own mapping (anonymous, zeroed): what a device
 * on unified memory can wrap without a copy (the KV cache, the activation
 * arena, the weights no kernel repacked). */
#ifndef HEARTH_PAGES_H
#define HEARTH_PAGES_H

#include <stddef.h>

/* n > 0 bytes, zeroed, page-aligned; NULL when out of memory. */
void *pages_alloc(size_t n);
/* n rounded up to a whole number of pages. */
size_t pages_round(size_t n);
/* p from pages_alloc(n) with the same n, or NULL. */
void pages_free(void *p, size_t n);

#endif
