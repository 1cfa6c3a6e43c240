#include "CFuzzDriver.h"
#include <stddef.h>
#include <stdint.h>

// Provided by libclang_rt.fuzzer (linked by -sanitize=fuzzer).
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
// Provided by the Swift harness through @_cdecl.
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int sealedpush_fuzz_main(int argc, void *argv) {
    char **args = (char **)argv;
    return LLVMFuzzerRunDriver(&argc, &args, LLVMFuzzerTestOneInput);
}
