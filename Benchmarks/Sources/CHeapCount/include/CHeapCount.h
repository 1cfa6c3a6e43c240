#ifndef SEALEDPUSH_CHEAPCOUNT_H
#define SEALEDPUSH_CHEAPCOUNT_H

#include <stddef.h>
#include <stdint.h>

// Counts the bytes live in malloc, for `sealedpush-memory-bench` (docs/benchmarks.md, "The receiver's heap").
//
// The executable is linked with `--wrap=malloc` and the rest of the family: every call to malloc, calloc, realloc,
// reallocarray, posix_memalign, aligned_alloc, memalign, valloc, pvalloc and free made by any object of the link
// goes through the wrappers in CHeapCount.c, which add or subtract `malloc_usable_size` of the block. In a fully
// static executable (`make bench`'s release build) that is every allocation of the process: the Swift runtime,
// Foundation, libdispatch, libsodium and glibc itself. In a dynamic build the shared libraries' calls are not
// wrapped (the benchmark checks that a Swift array is counted, and reports the heap as unmeasured otherwise).
//
// An operation is measured in a window (`spmem_window_begin`/`spmem_window_end`): the peak of the bytes held by
// the blocks allocated since the window opened.
//
// libsodium's guarded allocations (`sodium_malloc`, which maps pages of its own) are counted apart, as the pages
// they dirty: the page holding the size and the pages holding the bytes.

/// Bytes live now in malloc (usable sizes), plus guarded pages, whenever they were allocated.
int64_t spmem_live_bytes(void);
/// The most bytes live since the last `spmem_reset_peak`.
int64_t spmem_peak_bytes(void);
/// Starts a new peak at the bytes live now.
void spmem_reset_peak(void);
/// Allocation calls counted since the process started.
int64_t spmem_allocations(void);
/// Bytes of libsodium's guarded allocations live now (included in `spmem_live_bytes`).
int64_t spmem_guarded_bytes(void);

/// Opens a measurement window: from now on the blocks allocated are recorded by address, and only their frees
/// lower the window's count (freeing a block allocated before the window does not). Ends any window before.
void spmem_window_begin(void);
/// Closes the window and returns the most bytes its blocks held at once.
int64_t spmem_window_end(void);
/// Bytes the window's blocks hold now (read before `spmem_window_end`: what the operation left allocated).
int64_t spmem_window_live_bytes(void);
/// Blocks the window could not record (its table was full): counted, never subtracted, so the peak is an upper
/// bound; 0 in every run so far.
int64_t spmem_window_untracked(void);

/// What glibc's own statistics say is in use now (`mallinfo2`: bytes in chunks in use in every arena, and in
/// mapped chunks): a cross-check of `spmem_live_bytes`, which it exceeds by chunk headers and the blocks held in
/// glibc's per-thread caches.
int64_t spmem_glibc_in_use_bytes(void);

/// Starts a thread that reads `/proc/self/statm` every `interval_us` microseconds and keeps the highest anonymous
/// resident size (resident minus file-backed and shared pages) since the last `spmem_reset_anonymous_peak`. The
/// thread allocates nothing. Returns 0, or -1 when `/proc/self/statm` cannot be read.
int spmem_start_sampler(unsigned interval_us);
/// Anonymous resident bytes now (one read of `/proc/self/statm`), or -1.
int64_t spmem_anonymous_bytes_now(void);
/// The highest anonymous resident bytes the sampler saw since the last reset.
int64_t spmem_anonymous_peak_bytes(void);
/// Starts a new anonymous peak at the value now.
void spmem_reset_anonymous_peak(void);
/// Samples taken since the last reset.
int64_t spmem_anonymous_samples(void);

#endif
