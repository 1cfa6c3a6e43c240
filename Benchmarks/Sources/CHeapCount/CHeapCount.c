// Counting wrappers around malloc and libsodium's guarded allocator, and an anonymous-memory sampler, for
// `sealedpush-memory-bench` (see include/CHeapCount.h). Linked with `--wrap=SYMBOL` for each wrapped function
// (Benchmarks/Package.swift): the linker sends every call to SYMBOL to __wrap_SYMBOL, and __real_SYMBOL to the
// original.
#define _GNU_SOURCE
#include "CHeapCount.h"

#if defined(__linux__)

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

void *__real_malloc(size_t size);
void __real_free(void *pointer);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *pointer, size_t size);
void *__real_reallocarray(void *pointer, size_t count, size_t size);
int __real_posix_memalign(void **out, size_t alignment, size_t size);
void *__real_aligned_alloc(size_t alignment, size_t size);
void *__real_memalign(size_t alignment, size_t size);
void *__real_valloc(size_t size);
void *__real_pvalloc(size_t size);
void *__real_sodium_malloc(size_t size);
void *__real_sodium_allocarray(size_t count, size_t size);
void __real_sodium_free(void *pointer);

static _Atomic int64_t live_bytes;
static _Atomic int64_t peak_bytes;
static _Atomic int64_t allocation_count;
static _Atomic int64_t guarded_bytes;
// Inside sodium_malloc/sodium_free: whatever they allocate from malloc is part of the guarded count.
static __thread int inside_guarded __attribute__((tls_model("initial-exec")));

static inline void add(int64_t n) {
    int64_t now = atomic_fetch_add_explicit(&live_bytes, n, memory_order_relaxed) + n;
    int64_t peak = atomic_load_explicit(&peak_bytes, memory_order_relaxed);
    while (now > peak && !atomic_compare_exchange_weak_explicit(&peak_bytes, &peak, now, memory_order_relaxed, memory_order_relaxed)) {
    }
}

static inline void subtract(int64_t n) { atomic_fetch_sub_explicit(&live_bytes, n, memory_order_relaxed); }

// The measurement window: the blocks allocated since `spmem_window_begin`, by address, in an open-addressing table.
// Freeing a block allocated before the window (the unwinder's tables, a cache) does not lower the window's count,
// so what the operation allocates is never offset by memory it did not allocate.
#define WINDOW_SLOTS 8192
#define WINDOW_EMPTY ((uintptr_t)0)
#define WINDOW_REMOVED ((uintptr_t)1)
static struct { uintptr_t pointer; int64_t bytes; } window_table[WINDOW_SLOTS];
static atomic_flag window_lock = ATOMIC_FLAG_INIT;
static _Atomic int window_open;
static int64_t window_live, window_peak, window_untracked;

static inline void window_acquire(void) {
    while (atomic_flag_test_and_set_explicit(&window_lock, memory_order_acquire)) sched_yield();
}
static inline void window_release(void) { atomic_flag_clear_explicit(&window_lock, memory_order_release); }
static inline size_t window_hash(uintptr_t pointer) { return (size_t)(((pointer >> 4) * 0x9E3779B97F4A7C15ull) >> 51) & (WINDOW_SLOTS - 1); }

// Records a block allocated in the window (or resized in place: its size is replaced).
static void window_add(void *pointer, int64_t bytes) {
    if (pointer == NULL || !atomic_load_explicit(&window_open, memory_order_relaxed)) return;
    uintptr_t key = (uintptr_t)pointer;
    window_acquire();
    size_t i = window_hash(key), free_slot = WINDOW_SLOTS;
    int found = 0;
    for (size_t probes = 0; probes < WINDOW_SLOTS; probes++, i = (i + 1) & (WINDOW_SLOTS - 1)) {
        uintptr_t p = window_table[i].pointer;
        if (p == key) {
            window_live += bytes - window_table[i].bytes;
            window_table[i].bytes = bytes;
            found = 1;
            break;
        }
        if (p == WINDOW_REMOVED && free_slot == WINDOW_SLOTS) free_slot = i;
        if (p == WINDOW_EMPTY) {
            if (free_slot == WINDOW_SLOTS) free_slot = i;
            break;
        }
    }
    if (!found) {
        if (free_slot < WINDOW_SLOTS) {
            window_table[free_slot].pointer = key;
            window_table[free_slot].bytes = bytes;
        } else {
            window_untracked++;  // full: counted, never subtracted (the figure can only be too high)
        }
        window_live += bytes;
    }
    if (window_live > window_peak) window_peak = window_live;
    window_release();
}

// Forgets a block freed in the window, if the window allocated it.
static void window_remove(void *pointer) {
    if (pointer == NULL || !atomic_load_explicit(&window_open, memory_order_relaxed)) return;
    uintptr_t key = (uintptr_t)pointer;
    window_acquire();
    size_t i = window_hash(key);
    for (size_t probes = 0; probes < WINDOW_SLOTS; probes++, i = (i + 1) & (WINDOW_SLOTS - 1)) {
        uintptr_t p = window_table[i].pointer;
        if (p == WINDOW_EMPTY) break;
        if (p == key) {
            window_live -= window_table[i].bytes;
            window_table[i].pointer = WINDOW_REMOVED;
            break;
        }
    }
    window_release();
}

void spmem_window_begin(void) {
    window_acquire();
    // Every slot written here, before the window opens: the table's pages are resident before any baseline.
    for (size_t i = 0; i < WINDOW_SLOTS; i++) {
        window_table[i].pointer = WINDOW_EMPTY;
        window_table[i].bytes = 0;
    }
    window_live = 0;
    window_peak = 0;
    window_untracked = 0;
    window_release();
    atomic_store_explicit(&window_open, 1, memory_order_release);
}

int64_t spmem_window_end(void) {
    atomic_store_explicit(&window_open, 0, memory_order_release);
    window_acquire();
    int64_t peak = window_peak;
    window_release();
    return peak;
}

int64_t spmem_window_live_bytes(void) {
    window_acquire();
    int64_t live = window_live;
    window_release();
    return live;
}

int64_t spmem_window_untracked(void) {
    window_acquire();
    int64_t untracked = window_untracked;
    window_release();
    return untracked;
}

static inline void *counted(void *pointer) {
    if (pointer != NULL && !inside_guarded) {
        int64_t bytes = (int64_t)malloc_usable_size(pointer);
        add(bytes);
        window_add(pointer, bytes);
        atomic_fetch_add_explicit(&allocation_count, 1, memory_order_relaxed);
    }
    return pointer;
}

void *__wrap_malloc(size_t size) { return counted(__real_malloc(size)); }

void *__wrap_calloc(size_t count, size_t size) { return counted(__real_calloc(count, size)); }

void __wrap_free(void *pointer) {
    if (pointer != NULL && !inside_guarded) {
        subtract((int64_t)malloc_usable_size(pointer));
        window_remove(pointer);
    }
    __real_free(pointer);
}

// A block that moved is counted twice for the moment both exist; one resized in place only by its change.
static void *resized(void *old, int64_t before, void *result, size_t size) {
    if (inside_guarded) return result;
    if (result == NULL) {
        if (size == 0 && old != NULL) {  // glibc's realloc(p, 0) frees p
            subtract(before);
            window_remove(old);
        }
        return NULL;
    }
    int64_t after = (int64_t)malloc_usable_size(result);
    if (result == old) {
        if (after >= before) add(after - before); else subtract(before - after);
        window_add(result, after);  // a block from before the window counts whole from here on
    } else {
        add(after);
        window_add(result, after);
        subtract(before);
        window_remove(old);
        atomic_fetch_add_explicit(&allocation_count, 1, memory_order_relaxed);
    }
    return result;
}

void *__wrap_realloc(void *pointer, size_t size) {
    int64_t before = pointer != NULL && !inside_guarded ? (int64_t)malloc_usable_size(pointer) : 0;
    return resized(pointer, before, __real_realloc(pointer, size), size);
}

void *__wrap_reallocarray(void *pointer, size_t count, size_t size) {
    int64_t before = pointer != NULL && !inside_guarded ? (int64_t)malloc_usable_size(pointer) : 0;
    return resized(pointer, before, __real_reallocarray(pointer, count, size), count * size);
}

int __wrap_posix_memalign(void **out, size_t alignment, size_t size) {
    int result = __real_posix_memalign(out, alignment, size);
    if (result == 0) counted(*out);
    return result;
}

void *__wrap_aligned_alloc(size_t alignment, size_t size) { return counted(__real_aligned_alloc(alignment, size)); }
void *__wrap_memalign(size_t alignment, size_t size) { return counted(__real_memalign(alignment, size)); }
void *__wrap_valloc(size_t size) { return counted(__real_valloc(size)); }
void *__wrap_pvalloc(size_t size) { return counted(__real_pvalloc(size)); }

// libsodium's guarded allocations: mapped pages of their own, not malloc. Kept in a small table (they are few:
// secret keys), each counted as the pages it dirties: the read-only page holding its size, and the pages
// holding the bytes and the canary.
#define GUARDED_SLOTS 4096
static struct { void *pointer; int64_t bytes; } guarded_table[GUARDED_SLOTS];
static atomic_flag guarded_lock = ATOMIC_FLAG_INIT;

static int64_t page_bytes(void) {
    static int64_t page;
    if (page == 0) page = (int64_t)sysconf(_SC_PAGESIZE);
    return page;
}

static void guarded_record(void *pointer, size_t size) {
    if (pointer == NULL) return;
    int64_t page = page_bytes();
    int64_t bytes = page + ((int64_t)size + 16 + page - 1) / page * page;
    while (atomic_flag_test_and_set_explicit(&guarded_lock, memory_order_acquire)) {
    }
    for (int i = 0; i < GUARDED_SLOTS; i++) {
        if (guarded_table[i].pointer == NULL) {
            guarded_table[i].pointer = pointer;
            guarded_table[i].bytes = bytes;
            break;
        }
    }
    atomic_flag_clear_explicit(&guarded_lock, memory_order_release);
    atomic_fetch_add_explicit(&guarded_bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&allocation_count, 1, memory_order_relaxed);
    add(bytes);
    window_add(pointer, bytes);
}

void *__wrap_sodium_malloc(size_t size) {
    inside_guarded++;
    void *pointer = __real_sodium_malloc(size);
    inside_guarded--;
    guarded_record(pointer, size);
    return pointer;
}

void *__wrap_sodium_allocarray(size_t count, size_t size) {
    inside_guarded++;
    void *pointer = __real_sodium_allocarray(count, size);
    inside_guarded--;
    guarded_record(pointer, count * size);
    return pointer;
}

void __wrap_sodium_free(void *pointer) {
    if (pointer != NULL) {
        int64_t bytes = 0;
        while (atomic_flag_test_and_set_explicit(&guarded_lock, memory_order_acquire)) {
        }
        for (int i = 0; i < GUARDED_SLOTS; i++) {
            if (guarded_table[i].pointer == pointer) {
                bytes = guarded_table[i].bytes;
                guarded_table[i].pointer = NULL;
                break;
            }
        }
        atomic_flag_clear_explicit(&guarded_lock, memory_order_release);
        atomic_fetch_sub_explicit(&guarded_bytes, bytes, memory_order_relaxed);
        subtract(bytes);
        window_remove(pointer);
    }
    inside_guarded++;
    __real_sodium_free(pointer);
    inside_guarded--;
}

int64_t spmem_live_bytes(void) { return atomic_load_explicit(&live_bytes, memory_order_relaxed); }
int64_t spmem_peak_bytes(void) { return atomic_load_explicit(&peak_bytes, memory_order_relaxed); }
void spmem_reset_peak(void) { atomic_store_explicit(&peak_bytes, atomic_load_explicit(&live_bytes, memory_order_relaxed), memory_order_relaxed); }
int64_t spmem_allocations(void) { return atomic_load_explicit(&allocation_count, memory_order_relaxed); }
int64_t spmem_guarded_bytes(void) { return atomic_load_explicit(&guarded_bytes, memory_order_relaxed); }

int64_t spmem_glibc_in_use_bytes(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 info = mallinfo2();
    return (int64_t)info.uordblks + (int64_t)info.hblkhd;
#else
    struct mallinfo info = mallinfo();
    return (int64_t)(unsigned)info.uordblks + (int64_t)(unsigned)info.hblkhd;
#endif
}

// The sampler: /proc/self/statm's resident minus shared pages (file-backed and shmem) is the process's
// anonymous resident memory (the kernel's MM_ANONPAGES counter, as RssAnon in /proc/self/status).
static int statm_descriptor = -1;
static unsigned sampler_interval_us = 100;
static _Atomic int64_t anonymous_peak;
static _Atomic int64_t anonymous_samples;

int64_t spmem_anonymous_bytes_now(void) {
    if (statm_descriptor < 0) {
        statm_descriptor = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
        if (statm_descriptor < 0) return -1;
    }
    char text[200];
    ssize_t n = pread(statm_descriptor, text, sizeof text - 1, 0);
    if (n <= 0) return -1;
    text[n] = 0;
    int64_t fields[3] = {0, 0, 0};
    int field = 0;
    for (const char *c = text; *c != 0 && field < 3; c++) {
        if (*c == ' ') field++;
        else if (*c >= '0' && *c <= '9') fields[field] = fields[field] * 10 + (*c - '0');
    }
    return (fields[1] - fields[2]) * page_bytes();
}

static void note_anonymous(void) {
    int64_t now = spmem_anonymous_bytes_now();
    int64_t peak = atomic_load_explicit(&anonymous_peak, memory_order_relaxed);
    while (now > peak && !atomic_compare_exchange_weak_explicit(&anonymous_peak, &peak, now, memory_order_relaxed, memory_order_relaxed)) {
    }
    atomic_fetch_add_explicit(&anonymous_samples, 1, memory_order_relaxed);
}

static void *sampler(void *unused) {
    (void)unused;
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    struct timespec pause = {0, (long)sampler_interval_us * 1000L};
    for (;;) {
        note_anonymous();
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int spmem_start_sampler(unsigned interval_us) {
    if (spmem_anonymous_bytes_now() < 0) return -1;
    sampler_interval_us = interval_us == 0 ? 1 : interval_us;
    spmem_reset_anonymous_peak();
    pthread_t thread;
    if (pthread_create(&thread, NULL, sampler, NULL) != 0) return -1;
    pthread_detach(thread);
    return 0;
}

int64_t spmem_anonymous_peak_bytes(void) {
    note_anonymous();
    return atomic_load_explicit(&anonymous_peak, memory_order_relaxed);
}

void spmem_reset_anonymous_peak(void) {
    atomic_store_explicit(&anonymous_peak, spmem_anonymous_bytes_now(), memory_order_relaxed);
    atomic_store_explicit(&anonymous_samples, 0, memory_order_relaxed);
}

int64_t spmem_anonymous_samples(void) { return atomic_load_explicit(&anonymous_samples, memory_order_relaxed); }

#else
// Elsewhere (no --wrap, no /proc): nothing is counted; the benchmark reports the heap as unmeasured.
int64_t spmem_live_bytes(void) { return 0; }
int64_t spmem_peak_bytes(void) { return 0; }
void spmem_reset_peak(void) {}
int64_t spmem_allocations(void) { return 0; }
int64_t spmem_guarded_bytes(void) { return 0; }
void spmem_window_begin(void) {}
int64_t spmem_window_end(void) { return 0; }
int64_t spmem_window_live_bytes(void) { return 0; }
int64_t spmem_window_untracked(void) { return 0; }
int64_t spmem_glibc_in_use_bytes(void) { return 0; }
int spmem_start_sampler(unsigned interval_us) { (void)interval_us; return -1; }
int64_t spmem_anonymous_bytes_now(void) { return -1; }
int64_t spmem_anonymous_peak_bytes(void) { return -1; }
void spmem_reset_anonymous_peak(void) {}
int64_t spmem_anonymous_samples(void) { return 0; }
#endif
