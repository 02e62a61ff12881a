/* The Metal dispatch layer: the small C interface the plan encoder calls
 * (buffers, pipelines by name, one command buffer per engine step with its
 * dispatches, commit and wait). Two implementations: host_metal.m (the GPU,
 * macOS only) and emu/ (the same shaders compiled as C++ and run on the CPU
 * pool, any OS). Dispatches of one command buffer run in the order they were
 * encoded, each seeing every write of the ones before (a serial compute
 * encoder); nothing runs before md_cmd_commit_wait, so a CPU read of a
 * result before the wait sees the old contents on both implementations. */
#ifndef HEARTH_METAL_DISPATCH_H
#define HEARTH_METAL_DISPATCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hpool;
typedef struct md_device md_device;
typedef struct md_buffer md_buffer;
typedef struct md_pipeline md_pipeline;
typedef struct md_cmd md_cmd;

#define MD_MAX_BINDINGS 16      /* buffer(0..15) and threadgroup(0..15) */

/* A device and its shader library. The emulator runs threadgroups as jobs of
 * pool (NULL: the caller alone). NULL with a one-line error. */
md_device *md_device_create(struct hpool *pool, char *err, size_t errlen);
void md_device_destroy(md_device *d);
const char *md_device_name(const md_device *d);

/* A buffer in memory the CPU and the device share, zero-filled. */
md_buffer *md_buffer_new(md_device *d, size_t bytes);
/* A buffer over memory the caller owns and keeps alive (no copy). On Metal
 * ptr and bytes must be page-aligned. */
md_buffer *md_buffer_wrap(md_device *d, void *ptr, size_t bytes);
void *md_buffer_contents(md_buffer *b);
size_t md_buffer_length(const md_buffer *b);
void md_buffer_free(md_buffer *b);

/* The kernel function `name` of the library; NULL when there is none. */
md_pipeline *md_pipeline_get(md_device *d, const char *name);
/* The most threads one of its threadgroups may have. */
int md_pipeline_max_threads(const md_pipeline *p);

/* One command buffer. Bindings persist across dispatches until rebound. */
md_cmd *md_cmd_begin(md_device *d);
void md_set_buffer(md_cmd *c, int index, md_buffer *b, size_t offset);
/* Small constant data copied at encode time (at most 4 KiB). */
void md_set_bytes(md_cmd *c, int index, const void *data, size_t bytes);
void md_set_threadgroup_memory(md_cmd *c, int index, size_t bytes);
/* groups[3] threadgroups of threads[3] threads each. */
void md_dispatch(md_cmd *c, const md_pipeline *p, const uint32_t groups[3], const uint32_t threads[3]);
/* Runs everything encoded and waits for it; frees c. 0, or -1 with err
 * filled (an encoding error: a bad binding, too many threads). */
int md_cmd_commit_wait(md_cmd *c, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
