#!/usr/bin/env bash
# The main job (README): installs what is needed, builds bucketfs (release)
# and mounts a bucket.
#
#   bash scripts/run.sh
#       starts a local emulator, seeds a bucket with a few objects, mounts
#       it on .build/mnt, shows it, and waits: press Enter (or end standard
#       input) to unmount and stop the emulator.
#   bash scripts/run.sh gs://BUCKET[/PREFIX] MOUNTPOINT [bucketfs mount options]
#       mounts a real bucket (the Application Default Credentials, as
#       Google's client libraries find them, or --key-file / --token-file /
#       --impersonate-service-account; docs/mounting.md) and leaves it mounted;
#       `bucketfs unmount MOUNTPOINT` ends it.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$(pwd)"

bash scripts/setup.sh
echo "==> building bucketfs (release)"
swift build -c release --product bucketfs
BIN="$(swift build -c release --show-bin-path)/bucketfs"

if [[ $# -ge 1 ]]; then
    [[ $# -ge 2 ]] || { echo "usage: $0 [gs://BUCKET[/PREFIX] MOUNTPOINT [options]]" >&2; exit 64; }
    exec "$BIN" mount "$@"
fi

MNT="$REPO/.build/mnt"
mkdir -p "$MNT"
fusermount3 -uz "$MNT" 2>/dev/null || true
bash scripts/emulator.sh start --name main
cleanup() {
    fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null || true
    bash "$REPO/scripts/emulator.sh" stop --name main
}
trap cleanup EXIT
eval "export $(bash scripts/emulator.sh env --name main)"
"$REPO/.build/venv/bin/python" - "$STORAGE_EMULATOR_HOST" <<'PYEOF'
import sys, urllib.parse, urllib.request
base = sys.argv[1]
for name, body in [("hello.txt", b"hello, bucketfs\n"), ("docs/readme.md", b"# docs\n"),
                   ("photos/2026/yosemite.jpg", b"\xff\xd8\xff" + b"\0" * 100000)]:
    url = f"{base}/upload/storage/v1/b/bucketfs-test/o?uploadType=media&name={urllib.parse.quote(name, safe='')}"
    urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST",
                           headers={"Content-Type": "application/octet-stream"})).read()
PYEOF
echo "==> bucketfs mount gs://bucketfs-test $MNT  (emulator at $STORAGE_EMULATOR_HOST)"
"$BIN" mount --anonymous --cache-dir "$REPO/.build/cache-main" gs://bucketfs-test "$MNT"
echo "==> ls -la $MNT"; ls -la "$MNT"
echo "==> find $MNT"; find "$MNT"
echo "==> cat $MNT/hello.txt"; cat "$MNT/hello.txt"
echo "==> df -h $MNT"; df -h "$MNT"
echo
echo "Mounted on $MNT. Browse it from another shell; press Enter here to unmount and stop the emulator."
read -r _ || true
