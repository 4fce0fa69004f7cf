# shellcheck shell=bash
# Listings and attributes: ls -l of one directory of 2,000 objects (cold,
# then warm), find and du over trees of 1,000 files in 110 directories (each
# cold: two trees of the same shape), and stat() of one file in a loop.

DIR_COUNT=2000
TREE_FILES=1000
TREE_FIND_LINES=1111 # the tree itself + 10 + 100 directories + 1,000 files
STAT_COUNT=10000

bench_group metadata
bench_row ls_cold "ls -l of 2,000 objects, cold (s)" s
bench_row ls_warm "ls -l of 2,000 objects, warm (s)" s
bench_row find "find over 1,000 files in 110 dirs, cold (s)" s
bench_row du "du -s over 1,000 files in 110 dirs, cold (s)" s
bench_row stat "10,000 stat() of one file (stat/s)"

metadata_seed() {
    local ok
    "$PY" "$HELPER" upload-config "$BASE" "$BUCKET" dir2000 tree treedu stat >"$WORK/upload.cfg"
    curl -K "$WORK/upload.cfg" >"$WORK/upload.codes"
    ok="$(grep -c '^200$' "$WORK/upload.codes" || true)"
    if [[ "$ok" != $((DIR_COUNT + 2 * TREE_FILES + 1)) ]]; then
        echo "bench: only $ok of $((DIR_COUNT + 2 * TREE_FILES + 1)) small uploads succeeded" >&2
        return 1
    fi
}

# The fields bucketfs asks a listing for (StorageMetadata.resourceFields;
# GCS and fake_gcs.py honour them, the emulator sends everything), so curl
# fetches what bucketfs fetches.
LIST_FIELDS="prefixes,nextPageToken,items(bucket,name,generation,metageneration,size,timeCreated,updated,crc32c,md5Hash,cacheControl,contentDisposition,contentEncoding,contentLanguage,contentType,metadata)"

# curl_list PREFIX DELIMITER(yes|no) TAG EXPECTED_ITEMS: every page of a
# listing, as a client fetches it (each request waits for the page before
# it, whose token it carries), with bucketfs's fields; prints the seconds
# spent fetching (the counting between pages is not timed)
curl_list() {
    local prefix="$1" delim="$2" tag="$3" expected="$4" token="" pages=0 url t0 t1 items=0 spent=0 file
    file="$WORK/$tag.page.json"
    while :; do
        url="$BASE/storage/v1/b/$BUCKET/o?prefix=${prefix//\//%2F}"
        [[ "$delim" == yes ]] && url+="&delimiter=%2F"
        [[ -n "$token" ]] && url+="&pageToken=$token"
        url+="&fields=$(sed -e 's/,/%2C/g' -e 's/(/%28/g' -e 's/)/%29/g' <<<"$LIST_FIELDS")"
        pages=$((pages + 1))
        t0=$(now)
        limited curl -sS --fail -o "$file" "$url"
        t1=$(now)
        spent="$(awk -v a="$spent" -v d="$(diff_s "$t0" "$t1")" 'BEGIN { printf "%.3f", a + d }')"
        # every item has a name, and nothing else in a page does
        items=$((items + $(grep -o '"name": *"' "$file" | wc -l)))
        token="$(grep -o '"nextPageToken": *"[^"]*"' "$file" |
            sed -e 's/.*: *"//' -e 's/"$//' -e 's/+/%2B/g' -e 's/\//%2F/g' -e 's/=/%3D/g' || true)"
        [[ -n "$token" ]] || break
    done
    rm -f "$file"
    [[ "$items" == "$expected" ]] || { echo "curl_list $prefix: $items items, want $expected" >&2; return 1; }
    echo "curl_list $prefix: $pages page(s), $items items" >&2
    echo "$spent"
}

metadata_curl() {
    measure ls_cold curl curl_list dir2000/ yes dir "$DIR_COUNT"
    measure find curl curl_list tree/ no tree "$TREE_FILES"
    measure du curl curl_list treedu/ no treedu "$TREE_FILES"
}

fs_ls() { # MP: ls -l of dir2000; prints seconds
    local mp="$1" t0 t1 lines
    t0=$(now)
    limited ls -l "$mp/dir2000" >"$WORK/ls.out"
    t1=$(now)
    lines="$(grep -c '^-' "$WORK/ls.out" || true)"
    [[ "$lines" == "$DIR_COUNT" ]] || { echo "fs_ls: $lines files listed, want $DIR_COUNT" >&2; return 1; }
    diff_s "$t0" "$t1"
}

fs_find() { # MP: find over the tree; prints seconds
    local mp="$1" t0 t1 lines
    t0=$(now)
    limited find "$mp/tree" >"$WORK/find.out"
    t1=$(now)
    lines="$(wc -l <"$WORK/find.out")"
    [[ "$lines" == "$TREE_FIND_LINES" ]] || { echo "fs_find: $lines entries, want $TREE_FIND_LINES" >&2; return 1; }
    diff_s "$t0" "$t1"
}

fs_du() { # MP: du -s over the second tree (apparent sizes checked); prints seconds
    local mp="$1" t0 t1 bytes want
    t0=$(now)
    bytes="$(limited du -s --apparent-size --block-size=1 "$mp/treedu" | awk '{ print $1 }')"
    t1=$(now)
    # every object is "bucketfs bench object NAME\n" + 200 x "x" + "\n"
    want="$("$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import bench_helper as h; print(sum(len(f"bucketfs bench object {n}\n") + 201 for n in h.small_object_names("treedu")))' "$REPO/scripts/bench")"
    # du also counts the 111 directories (their apparent size)
    ((bytes >= want)) || { echo "fs_du: $bytes bytes, want at least $want" >&2; return 1; }
    diff_s "$t0" "$t1"
}

fs_stat() { # MP: prints stat() per second
    limited "$PY" "$HELPER" statloop "$1/stat/one.txt" "$STAT_COUNT"
}

metadata_fs() {
    run_group "$1" metadata ls_cold:fs_ls ls_warm:fs_ls find:fs_find du:fs_du stat:fs_stat
}

metadata_notes() {
    echo "Listings: curl fetches every page of the listing a client needs (prefix + delimiter for ls; the whole subtree"
    echo "without delimiter for find and du); 1,000 entries a page. find and du run on two trees of the same shape, both"
    echo "cold; du -s --apparent-size (total checked). At 20 ms a time is also given in round trips."
}
