#!/usr/bin/env bash
# The main job (README): installs what is needed, builds bucketfs (release)
# and lists a bucket.
#
#   bash scripts/run.sh                 a bucket on a local emulator this
#                                       script starts (and stops on exit),
#                                       seeded with a few sample objects
#   bash scripts/run.sh gs://BUCKET     a real bucket (credentials from
#                                       GOOGLE_APPLICATION_CREDENTIALS)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$(pwd)"

bash scripts/setup.sh
echo "==> building bucketfs (release)"
swift build -c release --product bucketfs
BIN="$(swift build -c release --show-bin-path)/bucketfs"

if [[ $# -ge 1 ]]; then
    exec "$BIN" ls "$@"
fi

bash scripts/emulator.sh start --name main
trap 'bash "$REPO/scripts/emulator.sh" stop --name main' EXIT
eval "export $(bash scripts/emulator.sh env --name main)"
PY="$REPO/.build/venv/bin/python"
"$PY" - "$STORAGE_EMULATOR_HOST" <<'PYEOF'
import sys, urllib.request
base = sys.argv[1]
for name, body in [("hello.txt", b"hello, bucketfs\n"), ("docs/readme.md", b"# docs\n"),
                   ("photos/2026/yosemite.jpg", b"\xff\xd8\xff" + b"\0" * 1000)]:
    url = f"{base}/upload/storage/v1/b/bucketfs-test/o?uploadType=media&name={urllib.parse.quote(name, safe='')}"
    urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST",
                           headers={"Content-Type": "application/octet-stream"})).read()
PYEOF
echo "==> bucketfs ls gs://bucketfs-test/ (emulator at $STORAGE_EMULATOR_HOST)"
"$BIN" ls gs://bucketfs-test/
echo "==> bucketfs ls gs://bucketfs-test/photos/2026"
"$BIN" ls gs://bucketfs-test/photos/2026
