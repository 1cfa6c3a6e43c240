#!/usr/bin/env python3
"""Binary sizes of the two release executables, next to the single CLI they replaced (issue #18).

Before the split, `sealedpush` (fully static, release) carried every server and client: 184 MB, and
`device push` peaked at 16.5 MiB. Now `sealedpush` is the light CLI (no HTTP server) and the servers
are in `sealedpush-server`. Peak RSS of `device push` is measured by `sealedpush-bench` (its
`device_push_peak_rss_mib` against the 12 MiB target); this script states the sizes.

Usage: bench_sizes.py --bin Apps/.build/release/sealedpush --server-bin Apps/.build/release/sealedpush-server
"""
import argparse
import os

BEFORE_MB = 184.0  # the single `sealedpush` static binary before the split (issue #18's measurement)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--server-bin", required=True)
    a = ap.parse_args()
    light = os.path.getsize(a.bin) / 1e6
    server = os.path.getsize(a.server_bin) / 1e6
    print("\nBinary sizes (release, fully static)")
    print(f"  sealedpush (light CLI)     {light:7.1f} MB   (before the split: {BEFORE_MB:.0f} MB, everything in one binary)")
    print(f"  sealedpush-server          {server:7.1f} MB")


if __name__ == "__main__":
    main()
