/* The Metal dispatch layer (metal/dispatch.h) on a Mac's GPU: one device and
 * queue, the shaders compiled once from their embedded source with fast math
 * off (so they round as the CPU oracle and the emulator do), shared-storage
 * buffers, wrapped memory through newBufferWithBytesNoCopy (page-aligned:
 * the model's weight copy and the KV cache are), one command buffer with one
 * serial compute encoder per engine step, committed and waited on before the
 * CPU reads anything back. macOS only; built only there. */
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>
#include "metal/dispatch.h"
#include "metal/plan_metal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char hearth_metal_source[];   /* metal_source.c, generated */

#define MAX_PIPELINES 32

struct md_pipeline {
    char name[64];
    void *pso;                  /* id<MTLComputePipelineState>, retained */
    int max_threads;
};

struct md_device {
    void *dev, *queue, *lib;    /* id<MTLDevice>, id<MTLCommandQueue>, id<MTLLibrary>, retained */
    struct md_pipeline pipes[MAX_PIPELINES];
    int n_pipes;
};

struct md_buffer {
    void *buf;                  /* id<MTLBuffer>, retained */
};

struct md_cmd {
    void *cb, *enc;             /* id<MTLCommandBuffer>, id<MTLComputeCommandEncoder>, retained */
    char err[128];
};

bool md_host_available(void) {
    @autoreleasepool {
        return MTLCreateSystemDefaultDevice() != nil;
    }
}

md_device *md_device_create(struct hpool *pool, char *err, size_t errlen) {
    (void)pool;   /* the GPU runs the threadgroups */
    @autoreleasepool {
        id<MTLDevice> dev = MTLCreateSystemDefaultDevice();
        if (!dev) { snprintf(err, errlen, "metal: no device"); return NULL; }
        MTLCompileOptions *o = [MTLCompileOptions new];
        o.fastMathEnabled = NO;
        NSError *e = nil;
        id<MTLLibrary> lib = [dev newLibraryWithSource:[NSString stringWithUTF8String:hearth_metal_source] options:o error:&e];
        if (!lib) {
            snprintf(err, errlen, "metal: shaders: %s", e ? [[e localizedDescription] UTF8String] : "compile failed");
            return NULL;
        }
        md_device *d = calloc(1, sizeof *d);
        if (!d) { snprintf(err, errlen, "out of memory"); return NULL; }
        d->dev = (void *)CFBridgingRetain(dev);
        d->queue = (void *)CFBridgingRetain([dev newCommandQueue]);
        d->lib = (void *)CFBridgingRetain(lib);
        return d;
    }
}

void md_device_destroy(md_device *d) {
    if (!d) return;
    for (int i = 0; i < d->n_pipes; i++) CFBridgingRelease(d->pipes[i].pso);
    CFBridgingRelease(d->lib);
    CFBridgingRelease(d->queue);
    CFBridgingRelease(d->dev);
    free(d);
}

const char *md_device_name(const md_device *d) {
    return [[(__bridge id<MTLDevice>)d->dev name] UTF8String];
}

md_buffer *md_buffer_new(md_device *d, size_t bytes) {
    id<MTLBuffer> b = [(__bridge id<MTLDevice>)d->dev newBufferWithLength:(bytes ? bytes : 16)
                                                                 options:MTLResourceStorageModeShared];
    if (!b) return NULL;
    memset([b contents], 0, [b length]);
    md_buffer *m = malloc(sizeof *m);
    if (!m) return NULL;
    m->buf = (void *)CFBridgingRetain(b);
    return m;
}

md_buffer *md_buffer_wrap(md_device *d, void *ptr, size_t bytes) {
    id<MTLBuffer> b = [(__bridge id<MTLDevice>)d->dev newBufferWithBytesNoCopy:ptr length:bytes
                                                                       options:MTLResourceStorageModeShared
                                                                   deallocator:nil];
    if (!b) return NULL;   /* not page-aligned */
    md_buffer *m = malloc(sizeof *m);
    if (!m) return NULL;
    m->buf = (void *)CFBridgingRetain(b);
    return m;
}

void *md_buffer_contents(md_buffer *b) { return [(__bridge id<MTLBuffer>)b->buf contents]; }
size_t md_buffer_length(const md_buffer *b) { return [(__bridge id<MTLBuffer>)b->buf length]; }

void md_buffer_free(md_buffer *b) {
    if (!b) return;
    CFBridgingRelease(b->buf);
    free(b);
}

md_pipeline *md_pipeline_get(md_device *d, const char *name) {
    for (int i = 0; i < d->n_pipes; i++)
        if (!strcmp(d->pipes[i].name, name)) return &d->pipes[i];
    if (d->n_pipes == MAX_PIPELINES || strlen(name) >= sizeof d->pipes[0].name) return NULL;
    @autoreleasepool {
        id<MTLFunction> f = [(__bridge id<MTLLibrary>)d->lib newFunctionWithName:[NSString stringWithUTF8String:name]];
        if (!f) return NULL;
        NSError *e = nil;
        id<MTLComputePipelineState> p = [(__bridge id<MTLDevice>)d->dev newComputePipelineStateWithFunction:f error:&e];
        if (!p) return NULL;
        md_pipeline *m = &d->pipes[d->n_pipes++];
        snprintf(m->name, sizeof m->name, "%s", name);
        m->pso = (void *)CFBridgingRetain(p);
        m->max_threads = (int)[p maxTotalThreadsPerThreadgroup];
        return m;
    }
}

int md_pipeline_max_threads(const md_pipeline *p) { return p->max_threads; }

md_cmd *md_cmd_begin(md_device *d) {
    md_cmd *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    id<MTLCommandBuffer> cb = [(__bridge id<MTLCommandQueue>)d->queue commandBuffer];
    c->cb = (void *)CFBridgingRetain(cb);
    c->enc = (void *)CFBridgingRetain([cb computeCommandEncoder]);   /* serial: each dispatch sees the last */
    return c;
}

void md_set_buffer(md_cmd *c, int index, md_buffer *b, size_t offset) {
    [(__bridge id<MTLComputeCommandEncoder>)c->enc setBuffer:(b ? (__bridge id<MTLBuffer>)b->buf : nil)
                                                      offset:offset atIndex:(NSUInteger)index];
}

void md_set_bytes(md_cmd *c, int index, const void *data, size_t bytes) {
    [(__bridge id<MTLComputeCommandEncoder>)c->enc setBytes:data length:bytes atIndex:(NSUInteger)index];
}

void md_set_threadgroup_memory(md_cmd *c, int index, size_t bytes) {
    [(__bridge id<MTLComputeCommandEncoder>)c->enc setThreadgroupMemoryLength:(bytes + 15) & ~(size_t)15
                                                                       atIndex:(NSUInteger)index];
}

void md_dispatch(md_cmd *c, const md_pipeline *p, const uint32_t groups[3], const uint32_t threads[3]) {
    if ((int)(threads[0] * threads[1] * threads[2]) > p->max_threads) {
        snprintf(c->err, sizeof c->err, "%s: %u threads per threadgroup, at most %d", p->name,
                 threads[0] * threads[1] * threads[2], p->max_threads);
        return;
    }
    id<MTLComputeCommandEncoder> enc = (__bridge id<MTLComputeCommandEncoder>)c->enc;
    [enc setComputePipelineState:(__bridge id<MTLComputePipelineState>)p->pso];
    [enc dispatchThreadgroups:MTLSizeMake(groups[0], groups[1], groups[2])
        threadsPerThreadgroup:MTLSizeMake(threads[0], threads[1], threads[2])];
}

int md_cmd_commit_wait(md_cmd *c, char *err, size_t errlen) {
    id<MTLComputeCommandEncoder> enc = CFBridgingRelease(c->enc);
    id<MTLCommandBuffer> cb = CFBridgingRelease(c->cb);
    [enc endEncoding];
    int rc = 0;
    if (c->err[0]) {
        if (err) snprintf(err, errlen, "metal: %s", c->err);
        rc = -1;   /* committed anyway so the queue moves on; its results are not used */
    }
    [cb commit];
    [cb waitUntilCompleted];   /* this command buffer: the one whose results are read next */
    if (!rc && [cb status] == MTLCommandBufferStatusError) {
        if (err) snprintf(err, errlen, "metal: %s", [[[cb error] localizedDescription] UTF8String]);
        rc = -1;
    }
    free(c);
    return rc;
}
