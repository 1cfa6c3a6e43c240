#ifndef SEALEDPUSH_CSODIUM_SHIM_H
#define SEALEDPUSH_CSODIUM_SHIM_H
#include <sodium.h>
#endif
