#ifndef SEALEDPUSH_CFUZZDRIVER_H
#define SEALEDPUSH_CFUZZDRIVER_H

/// Runs libFuzzer's driver over the harness's LLVMFuzzerTestOneInput.
///
/// SwiftPM links every executable target with `--defsym main=<Target>_main`, which replaces
/// libFuzzer's own `main`; each harness defines `<Target>_main` in Swift and forwards here.
/// `argv` is passed through untouched (it is libFuzzer's `char **`).
int sealedpush_fuzz_main(int argc, void *argv);

#endif
