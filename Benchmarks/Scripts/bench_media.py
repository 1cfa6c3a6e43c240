#!/usr/bin/env python3
"""`make bench-media`: encrypted media attachments, each number stated met or NOT met.

- Peak RSS of `sealedpush device push` delivering a message with a 10 MB image, and one with a 50 MB
  movie, fetched from `sealedpush-server media serve` on loopback: target <= 24 MB (the extension's limit),
  read from the kernel (wait4 ru_maxrss) for the device push process alone.
- Media encrypt and decrypt throughput against raw libsodium secretstream loops: run by
  `sealedpush-media-bench`, whose lines are printed as they are.
"""
import argparse, json, os, random, subprocess, sys, tempfile, shutil

LIMIT = 24_000_000  # bytes (24 MB, read as decimal: the stricter reading)


def run(args, stdin=b""):
    r = subprocess.run(args, input=stdin, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args[:3])} failed: {r.stderr.decode(errors='replace')}")
    return r.stdout


def write_file(path, magic, size):
    rng = random.Random(7)
    with open(path, "wb") as f:
        f.write(magic)
        left = size - len(magic)
        while left > 0:
            n = min(1 << 20, left)
            f.write(rng.randbytes(n))
            left -= n


def peak_rss(args, stdin):
    """Runs args to completion, returns (stdout, peak RSS in bytes) from wait4."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as inp:
        inp.write(stdin)
        inp.seek(0)
        p = subprocess.Popen(args, stdin=inp, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return out.read(), usage.ru_maxrss * 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="the sealedpush binary")
    ap.add_argument("--server-bin", required=True, help="the sealedpush-server binary (media serve)")
    ap.add_argument("--media-bench", required=True, help="the sealedpush-media-bench binary")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="sealedpush-bench-media-")
    server = None
    try:
        keychain, media, attachments = (os.path.join(root, d) for d in ("device", "media", "attachments"))
        os.makedirs(media)
        os.makedirs(attachments, mode=0o700)  # device push refuses a directory open to others
        os.chmod(attachments, 0o700)
        record = run([a.bin, "keys", "generate", "--keychain", keychain])
        record_path = os.path.join(root, "device.json")
        open(record_path, "wb").write(record)
        server = subprocess.Popen([a.server_bin, "media", "serve", media, "--listen", "127.0.0.1:0"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = server.stdout.readline().decode()
        address = line.strip().split("listening on ", 1)[1]
        print("device push peak RSS (fetch from media serve on loopback, decrypt, write):")
        for label, name, magic, size in [("10 MB image", "photo.png", b"\x89PNG\r\n\x1a\n", 10_000_000),
                                         ("50 MB movie", "movie.mp4", b"\x00\x00\x00\x18ftyp", 50_000_000)]:
            path = os.path.join(root, name)
            write_file(path, magic, size)
            payload = run([a.bin, "seal", "--to", record_path, "--title", "Bench", "--body", label,
                           "--attach", path, "--media-dir", media, "--media-url", address])
            # --allow-local-media: the media server is on loopback http.
            out, rss = peak_rss([a.bin, "device", "push", "--keychain", keychain, "--json", "--allow-local-media",
                                 "--attachments-dir", attachments, "-"], payload)
            result = json.loads(out)
            ok = result.get("outcome") == "decrypted" and result.get("attachmentFailures") == []
            verdict = "met" if ok and rss <= LIMIT else "NOT met"
            note = "" if ok else f" (delivery failed: {result.get('attachmentFailures')})"
            print(f"  {label}: {rss / 1e6:.1f} MB (target <= {LIMIT / 1e6:.0f} MB): {verdict}{note}")
            for f in os.listdir(attachments):
                os.remove(os.path.join(attachments, f))
            os.remove(path)
        sys.stdout.flush()
        subprocess.run([a.media_bench], check=True)
    finally:
        if server:
            server.terminate()
            server.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
