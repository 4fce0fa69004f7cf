#!/usr/bin/env bash
# resumable_put.sh BASE BUCKET NAME FILE CHUNK_DIR: uploads FILE as NAME with
# a resumable session (JSON API, uploadType=resumable) whose chunks are the
# files of CHUNK_DIR in name order (split beforehand, so the timed work is
# the HTTP), each PUT with its Content-Range, the last one declaring the
# total. The protocol bucketfs streams a file written in order with; this
# is the server's limit for it, as a media POST is for a one-shot upload.
set -euo pipefail
base="$1" bucket="$2" name="$3" file="$4" chunks="$5"
enc="$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$name")"
location="$(curl -sS --fail -i -X POST -H 'Content-Type: application/json' -d '{}' \
    "$base/upload/storage/v1/b/$bucket/o?uploadType=resumable&name=$enc" |
    tr -d '\r' | awk -F': ' 'tolower($1) == "location" { print $2 }')"
[[ -n "$location" ]] || { echo "resumable_put: no session" >&2; exit 1; }
total="$(stat -c %s "$file")"
offset=0
for chunk in "$chunks"/*; do
    n="$(stat -c %s "$chunk")"
    end=$((offset + n - 1))
    declared='*'
    ((offset + n == total)) && declared="$total"
    code="$(curl -sS -o /dev/null -w '%{http_code}' -X PUT -H 'Expect:' -H "Content-Range: bytes $offset-$end/$declared" \
        -T "$chunk" "$location")"
    if ((offset + n == total)); then
        [[ "$code" == 200 || "$code" == 201 ]] || { echo "resumable_put: final chunk answered $code" >&2; exit 1; }
    else
        [[ "$code" == 308 ]] || { echo "resumable_put: chunk at $offset answered $code" >&2; exit 1; }
    fi
    offset=$((offset + n))
done
