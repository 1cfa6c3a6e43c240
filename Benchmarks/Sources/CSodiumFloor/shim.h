#ifndef SEALEDPUSH_CSODIUM_FLOOR_SHIM_H
#define SEALEDPUSH_CSODIUM_FLOOR_SHIM_H
/* The raw libsodium loops the benchmarks compare against: the floor holds no SealedPush code. */
#include <sodium.h>
#endif
