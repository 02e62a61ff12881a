// The Metal dispatch layer (metal/dispatch.h) on the CPU: the shaders are
// compiled as C++ (gen_kernels.py, <metal_stdlib> here), a command buffer
// records its dispatches and runs them in order at commit, each dispatch's
// threadgroups are jobs on hearth's pool, and each threadgroup's threads are
// fibers on the worker that runs it. A fiber runs until it reaches a
// simdgroup collective or a threadgroup barrier; the scheduler resumes the
// fibers of each round in an order that changes from round to round and
// dispatch to dispatch (so a missing barrier shows as a wrong result), and
// threadgroup memory starts each threadgroup poisoned (0xff bytes: NaN).
// Device buffers are exact-size heap blocks, so ASan sees a read past one.
#include "metal/dispatch.h"
#include "metal/emu/emu_rt.h"
extern "C" {
#include "runtime/pool.h"
}
#include <sys/mman.h>
#include <unistd.h>
#include <atomic>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#endif
#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

extern "C" const emu::KernelEntry emu_kernels[];

namespace {

constexpr int kMaxThreads = 1024;                 // per threadgroup, as on Apple GPUs
#ifdef EMU_ASAN
constexpr size_t kStackBytes = 256 * 1024;
#else
constexpr size_t kStackBytes = 64 * 1024;
#endif

// ---- context switch --------------------------------------------------------
#if defined(__x86_64__)
// Saves the callee-saved registers, MXCSR and the x87 control word on the
// current stack, stores the stack pointer in *from and continues on to.
extern "C" void emu_ctx_switch(void **from, void *to);
extern "C" void emu_ctx_start();
asm(R"(
.text
.globl emu_ctx_switch
.type emu_ctx_switch,@function
emu_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size emu_ctx_switch, .-emu_ctx_switch
.globl emu_ctx_start
.type emu_ctx_start,@function
emu_ctx_start:
    movq %r12, %rdi
    call emu_fiber_main@PLT
    ud2
.size emu_ctx_start, .-emu_ctx_start
.section .note.GNU-stack,"",@progbits
.text
)");
#endif

struct Worker;

enum FiberState : uint8_t { F_RUN, F_SIMD, F_BARRIER, F_DONE };

struct Fiber {
#if defined(__x86_64__)
    void *sp;
#else
    ucontext_t uc;
#endif
    uint8_t *stack;          // lowest address of its stack (a guard page below)
    FiberState state;
    uint8_t parity;          // which exchange buffer its next collective uses
    uint32_t lid;
    Worker *w;
#ifdef EMU_ASAN
    void *fake;
#endif
};

struct Dispatch;

// One pool worker's fibers and its exchange buffers.
struct Worker {
    std::vector<Fiber> fibers;
    uint8_t *stacks = nullptr;
    size_t stacks_bytes = 0;
    int n_stacks = 0;
#if defined(__x86_64__)
    void *sched_sp = nullptr;
#else
    ucontext_t sched_uc;
#endif
    int cur = -1;
    const Dispatch *d = nullptr;
    emu::Thread *threads = nullptr;
    alignas(64) uint8_t xchg[kMaxThreads / emu::kSimdWidth][2][emu::kSimdWidth][emu::kXchgBytes];
    uint32_t xmask[kMaxThreads / emu::kSimdWidth][2];
    std::vector<void *> tgmem;       // this dispatch's threadgroup buffers, exact sizes
    std::vector<emu::Thread> th;
#ifdef EMU_ASAN
    void *sched_fake = nullptr;
    const void *sched_bottom = nullptr;
    size_t sched_size = 0;
#endif
    ~Worker() { if (stacks) munmap(stacks, stacks_bytes); }
};

thread_local Worker *tl_worker = nullptr;

struct Binding {
    void *ptr = nullptr;
};

}  // namespace

struct md_buffer {
    md_device *dev;
    void *ptr;
    size_t len;
    bool owned;
};

struct md_pipeline {
    const char *name;
    emu::KernelFn fn;
};

namespace {
struct Dispatch {
    const md_pipeline *p = nullptr;
    emu::Args a{};
    size_t tg_len[emu::kMaxBind] = {};
    uint32_t n_threads = 0;
    uint64_t seed = 0;
    std::atomic<int> error{0};
    Dispatch() = default;
    Dispatch(const Dispatch &o) : p(o.p), a(o.a), n_threads(o.n_threads), seed(o.seed) {
        std::memcpy(tg_len, o.tg_len, sizeof tg_len);
    }
};
}  // namespace

struct md_device {
    hpool *pool;
    std::vector<std::unique_ptr<Worker>> workers;
    std::vector<std::unique_ptr<md_pipeline>> pipelines;
    std::vector<const emu::KernelEntry *> tables;
    std::mutex mu;
    uint64_t n_dispatches = 0;
};

struct md_cmd {
    md_device *dev;
    emu::Args cur{};
    size_t tg_len[emu::kMaxBind] = {};
    std::vector<Dispatch> list;
    std::vector<std::unique_ptr<uint8_t[]>> bytes;   // md_set_bytes copies
    std::string err;
};

// ---- fibers -----------------------------------------------------------------

static void switch_to_fiber(Worker *w, Fiber *f) {
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(&w->sched_fake, f->stack, kStackBytes);
#endif
#if defined(__x86_64__)
    emu_ctx_switch(&w->sched_sp, f->sp);
#else
    swapcontext(&w->sched_uc, &f->uc);
#endif
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(w->sched_fake, nullptr, nullptr);
#endif
}

// From the running fiber back to its scheduler (for good when it is done).
static void yield_fiber(Fiber *f) {
    Worker *w = f->w;
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(f->state == F_DONE ? nullptr : &f->fake, w->sched_bottom, w->sched_size);
#endif
#if defined(__x86_64__)
    emu_ctx_switch(&f->sp, w->sched_sp);
#else
    swapcontext(&f->uc, &w->sched_uc);
#endif
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(f->fake, nullptr, nullptr);
#endif
}

extern "C" void emu_fiber_main(void *arg);
extern "C" void emu_fiber_main(void *arg) {
    Fiber *f = (Fiber *)arg;
    Worker *w = f->w;
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &w->sched_bottom, &w->sched_size);
#endif
    const Dispatch *d = w->d;
    d->p->fn(d->a, w->th[f->lid]);
    f->state = F_DONE;
    yield_fiber(f);
    abort();   // a finished fiber is never resumed
}

#if !defined(__x86_64__)
static void uc_entry(unsigned lo, unsigned hi) {
    emu_fiber_main((Fiber *)(((uintptr_t)hi << 32) | lo));
}
#endif

static bool worker_stacks(Worker *w, int n) {
    if (w->n_stacks >= n) return true;
    if (w->stacks) munmap(w->stacks, w->stacks_bytes);
    size_t page = (size_t)sysconf(_SC_PAGESIZE), each = kStackBytes + page;
    w->stacks_bytes = each * (size_t)n;
    void *p = mmap(nullptr, w->stacks_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) { w->stacks = nullptr; w->n_stacks = 0; return false; }
    w->stacks = (uint8_t *)p;
    w->fibers.assign((size_t)n, Fiber{});
    for (int i = 0; i < n; i++) {
        mprotect(w->stacks + each * (size_t)i, page, PROT_NONE);   // a guard page below each stack
        w->fibers[(size_t)i].stack = w->stacks + each * (size_t)i + page;
    }
    w->n_stacks = n;
    return true;
}

static void fiber_init(Worker *w, Fiber *f, uint32_t lid) {
    f->state = F_RUN;
    f->parity = 0;
    f->lid = lid;
    f->w = w;
#ifdef EMU_ASAN
    f->fake = nullptr;
    __asan_unpoison_memory_region(f->stack, kStackBytes);   // frames a failed group left behind
#endif
#if defined(__x86_64__)
    uintptr_t top = ((uintptr_t)(f->stack + kStackBytes) & ~(uintptr_t)15) - 16;
    void **sp = (void **)(top - 64);
    uint32_t mxcsr; uint16_t fpcw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpcw));
    std::memset(sp, 0, 64);
    std::memcpy(&sp[0], &mxcsr, 4);
    std::memcpy((uint8_t *)&sp[0] + 4, &fpcw, 2);
    sp[4] = f;                                // r12: the fiber, for emu_ctx_start
    sp[7] = (void *)emu_ctx_start;            // where the first switch returns to
    f->sp = sp;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = kStackBytes;
    f->uc.uc_link = nullptr;
    uintptr_t a = (uintptr_t)f;
    makecontext(&f->uc, (void (*)())uc_entry, 2, (unsigned)(a & 0xffffffffu), (unsigned)(a >> 32));
#endif
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

// Runs one threadgroup to the end; false when its threads cannot all finish
// (a barrier some thread never reaches, a collective beside a barrier).
static bool run_group(Worker *w, const Dispatch *d, uint32_t gx, uint32_t gy, uint32_t gz) {
    const uint32_t T = d->n_threads, tx = d->a.threads[0], ty = d->a.threads[1];
    for (uint32_t i = 0; i < T; i++) {
        emu::Thread &t = w->th[i];
        t.tg[0] = gx; t.tg[1] = gy; t.tg[2] = gz;
        t.tid[0] = i % tx; t.tid[1] = i / tx % ty; t.tid[2] = i / (tx * ty);
        t.lid = i;
        fiber_init(w, &w->fibers[i], i);
    }
    for (int b = 0; b < emu::kMaxBind; b++)
        if (w->tgmem[(size_t)b]) std::memset(w->tgmem[(size_t)b], 0xff, d->tg_len[b]);
    uint32_t order[kMaxThreads];
    uint64_t rng = mix64(d->seed ^ ((uint64_t)gx << 20) ^ ((uint64_t)gy << 40) ^ gz);
    const uint32_t n_sg = (T + emu::kSimdWidth - 1) / emu::kSimdWidth;
    for (;;) {
        for (uint32_t i = 0; i < T; i++) order[i] = i;
        for (uint32_t i = T; i > 1; i--) {   // a new order each round
            rng = mix64(rng + 0x9e3779b97f4a7c15ull);
            uint32_t j = (uint32_t)(rng % i), t = order[i - 1];
            order[i - 1] = order[j]; order[j] = t;
        }
        for (uint32_t k = 0; k < T; k++) {
            Fiber *f = &w->fibers[order[k]];
            if (f->state != F_RUN) continue;
            w->cur = (int)order[k];
            switch_to_fiber(w, f);
        }
        w->cur = -1;
        // every fiber now waits or is done: release what can go on
        bool released = false;
        uint32_t live = 0, at_barrier = 0;
        for (uint32_t s = 0; s < n_sg; s++) {
            uint32_t lo = s * emu::kSimdWidth, hi = lo + emu::kSimdWidth < T ? lo + emu::kSimdWidth : T;
            uint32_t n_live = 0, n_simd = 0, mask = 0;
            for (uint32_t i = lo; i < hi; i++) {
                FiberState st = w->fibers[i].state;
                if (st == F_DONE) continue;
                n_live++;
                if (st == F_SIMD) { n_simd++; mask |= 1u << (i - lo); }
            }
            if (n_live && n_simd == n_live) {
                uint8_t par = w->fibers[lo + (uint32_t)__builtin_ctz(mask)].parity;
                w->xmask[s][par] = mask;
                for (uint32_t i = lo; i < hi; i++)
                    if (w->fibers[i].state == F_SIMD) w->fibers[i].state = F_RUN;
                released = true;
            }
        }
        if (released) continue;
        for (uint32_t i = 0; i < T; i++) {
            FiberState st = w->fibers[i].state;
            live += st != F_DONE;
            at_barrier += st == F_BARRIER;
        }
        if (!live) return true;
        if (at_barrier != live) return false;
        for (uint32_t i = 0; i < T; i++)
            if (w->fibers[i].state == F_BARRIER) w->fibers[i].state = F_RUN;
    }
}

const uint8_t *emu::simd_exchange(const void *v, size_t n, uint32_t *mask, unsigned *lane) {
    Worker *w = tl_worker;
    assert(w && w->cur >= 0 && n <= (size_t)kXchgBytes);
    Fiber *f = &w->fibers[(size_t)w->cur];
    uint32_t sg = f->lid / kSimdWidth, l = f->lid % kSimdWidth, par = f->parity;
    std::memcpy(w->xchg[sg][par][l], v, n);
    f->state = F_SIMD;
    yield_fiber(f);
    f->parity ^= 1;
    *mask = w->xmask[sg][par];
    *lane = l;
    return &w->xchg[sg][par][0][0];
}

void emu::barrier() {
    Worker *w = tl_worker;
    assert(w && w->cur >= 0);
    Fiber *f = &w->fibers[(size_t)w->cur];
    f->state = F_BARRIER;
    yield_fiber(f);
}

// ---- dispatches on the pool -------------------------------------------------

namespace {
struct Job {
    md_device *dev;
    Dispatch *d;
};
}  // namespace

static void group_items(void *ctx, int64_t begin, int64_t end, int worker) {
    Job *J = (Job *)ctx;
    Dispatch *d = J->d;
    Worker *w = J->dev->workers[(size_t)worker].get();
    if (!worker_stacks(w, (int)d->n_threads)) { d->error = 2; return; }
    w->d = d;
    w->th.resize(d->n_threads);
    w->tgmem.assign(emu::kMaxBind, nullptr);
    for (int b = 0; b < emu::kMaxBind; b++)
        if (d->tg_len[b]) w->tgmem[(size_t)b] = std::malloc(d->tg_len[b]);
    Dispatch local(*d);   // this worker's view: its own threadgroup memory
    for (int b = 0; b < emu::kMaxBind; b++) local.a.tg[b] = w->tgmem[(size_t)b];
    w->d = &local;
    Worker *saved = tl_worker;
    tl_worker = w;
    const uint32_t gx = d->a.groups[0], gy = d->a.groups[1];
    for (int64_t g = begin; g < end && !d->error; g++) {
        uint32_t x = (uint32_t)(g % gx), y = (uint32_t)(g / gx % gy), z = (uint32_t)(g / ((int64_t)gx * gy));
        if (!run_group(w, &local, x, y, z)) d->error = 1;
    }
    tl_worker = saved;
    for (void *p : w->tgmem) std::free(p);
    w->tgmem.assign(emu::kMaxBind, nullptr);
    w->d = nullptr;
}

// ---- the C interface -----------------------------------------------------------

extern "C" {

md_device *md_device_create(hpool *pool, char *err, size_t errlen) {
    md_device *d = new (std::nothrow) md_device();
    if (!d) { snprintf(err, errlen, "out of memory"); return nullptr; }
    d->pool = pool;
    int n = pool ? pool_threads(pool) : 1;
    for (int i = 0; i < n; i++) d->workers.emplace_back(new Worker());
    d->tables.push_back(emu_kernels);
    return d;
}

void md_device_destroy(md_device *d) { delete d; }

const char *md_device_name(const md_device *d) { (void)d; return "metal-emu (CPU emulator)"; }

md_buffer *md_buffer_new(md_device *d, size_t bytes) {
    void *p = std::calloc(1, bytes ? bytes : 1);
    if (!p) return nullptr;
    return new md_buffer{ d, p, bytes, true };
}

md_buffer *md_buffer_wrap(md_device *d, void *ptr, size_t bytes) {
    return new md_buffer{ d, ptr, bytes, false };
}

void *md_buffer_contents(md_buffer *b) { return b->ptr; }
size_t md_buffer_length(const md_buffer *b) { return b->len; }

void md_buffer_free(md_buffer *b) {
    if (!b) return;
    if (b->owned) std::free(b->ptr);
    delete b;
}

/* Tests add kernels of their own (planted controls) through this. */
void md_emu_add_kernels(md_device *d, const void *table);
void md_emu_add_kernels(md_device *d, const void *table) {
    d->tables.push_back((const emu::KernelEntry *)table);
}

md_pipeline *md_pipeline_get(md_device *d, const char *name) {
    std::lock_guard<std::mutex> g(d->mu);
    for (auto &p : d->pipelines)
        if (!std::strcmp(p->name, name)) return p.get();
    for (auto t : d->tables)
        for (const emu::KernelEntry *e = t; e->name; e++)
            if (!std::strcmp(e->name, name)) {
                d->pipelines.emplace_back(new md_pipeline{ e->name, e->fn });
                return d->pipelines.back().get();
            }
    return nullptr;
}

int md_pipeline_max_threads(const md_pipeline *p) { (void)p; return kMaxThreads; }

md_cmd *md_cmd_begin(md_device *d) {
    md_cmd *c = new (std::nothrow) md_cmd();
    if (c) c->dev = d;
    return c;
}

void md_set_buffer(md_cmd *c, int index, md_buffer *b, size_t offset) {
    if (index < 0 || index >= emu::kMaxBind) { c->err = "buffer index out of range"; return; }
    if (b && offset > b->len) { c->err = "buffer offset past its end"; return; }
    c->cur.buf[index] = b ? (uint8_t *)b->ptr + offset : nullptr;
}

void md_set_bytes(md_cmd *c, int index, const void *data, size_t bytes) {
    if (index < 0 || index >= emu::kMaxBind || bytes > 4096) { c->err = "bad md_set_bytes"; return; }
    std::unique_ptr<uint8_t[]> p(new uint8_t[bytes ? bytes : 1]);
    std::memcpy(p.get(), data, bytes);
    c->cur.buf[index] = p.get();
    c->bytes.push_back(std::move(p));
}

void md_set_threadgroup_memory(md_cmd *c, int index, size_t bytes) {
    if (index < 0 || index >= emu::kMaxBind || bytes > 32768) { c->err = "bad threadgroup memory"; return; }
    c->tg_len[index] = bytes;
}

void md_dispatch(md_cmd *c, const md_pipeline *p, const uint32_t groups[3], const uint32_t threads[3]) {
    uint64_t T = (uint64_t)threads[0] * threads[1] * threads[2];
    if (!p || !T || T > (uint64_t)kMaxThreads) { c->err = "bad pipeline or threadgroup size"; return; }
    if (!groups[0] || !groups[1] || !groups[2]) return;   // an empty grid runs nothing
    Dispatch d;
    d.p = p;
    d.a = c->cur;
    for (int i = 0; i < 3; i++) { d.a.groups[i] = groups[i]; d.a.threads[i] = threads[i]; }
    std::memcpy(d.tg_len, c->tg_len, sizeof d.tg_len);
    d.n_threads = (uint32_t)T;
    c->list.push_back(d);
}

int md_cmd_commit_wait(md_cmd *c, char *err, size_t errlen) {
    int rc = 0;
    if (!c->err.empty()) {
        snprintf(err, errlen, "metal-emu: %s", c->err.c_str());
        rc = -1;
    }
    for (size_t i = 0; !rc && i < c->list.size(); i++) {
        Dispatch &d = c->list[i];
        d.seed = mix64(++c->dev->n_dispatches);
        Job J{ c->dev, &d };
        int64_t n = (int64_t)d.a.groups[0] * d.a.groups[1] * d.a.groups[2];
        pool_run(c->dev->pool, group_items, &J, n, n / 64 > 1 ? n / 64 : 1);
        if (d.error) {
            snprintf(err, errlen, "metal-emu: %s in %s", d.error == 2 ? "out of memory for fiber stacks"
                     : "a threadgroup's threads cannot all finish (a barrier not reached by all)", d.p->name);
            rc = -1;
        }
    }
    delete c;
    return rc;
}

}  // extern "C"
