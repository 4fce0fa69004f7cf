// The floor of a FUSE mount fed by the benchmark's server, for the read
// rows: scripts/bench/read_floor.c (one file, the same loop and FUSE_INIT
// choices: floor_fs.h), except that the file's bytes are not in memory at
// the start.
// The first open starts one GET of the whole object (libcurl, in a thread
// of its own) into one malloc'd buffer of the object's size (its pages
// touched before the mount), and each READ
// waits until its bytes have arrived, then answers with a pointer into the
// buffer (fuse_reply_buf). No cache, no checksum, no retries: the least
// work any filesystem that streams an object to a reader must do. A cold
// read through any such mount needs the server, the HTTP receive and the
// FUSE path on the same cores at once; this is what they reach together,
// which neither curl alone nor read_floor alone shows.
//
// With CACHE_FILE it is also the floor of a mount that keeps every block it
// downloads on local disk, as bucketfs's block cache must: a thread of its
// own writes each 1 MiB block of the buffer to CACHE_FILE (pwrite, at the
// block's offset) once the block has arrived, and a READ whose bytes are
// there still waits while that writer is more than 96 MiB behind its end
// (bucketfs's CacheWriteBacklog holds its reads at the same mark). The file
// is allocated whole before the mount (posix_fallocate), and nothing is
// checksummed, indexed or synced: the least work of caching every block,
// which bucketfs's slots, headers and CRC-32C only add to.
//
//   stream_floor MOUNTPOINT URL SIZE [CACHE_FILE]
//
// URL is the object's media URL (JSON API, alt=media: the one curl reads in
// the bench), SIZE its length in bytes (the bench knows it; a metadata GET
// at mount would be untimed anyway). The kernel's read-ahead window is the
// mount's /sys/class/bdi/MAJOR:MINOR/read_ahead_kb, which the bench sets as
// for read_floor. Foreground; fusermount3 -u MOUNTPOINT ends it.
#include "floor_fs.h"
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *url;
static struct floor_file file; // the object's size
static char *data;             // the object, filled in order by the download thread

// How many bytes of data have arrived (stored by the download thread
// alone), and the smallest end offset a waiting READ needs (INT64_MAX: no
// READ waits; changed under lock). Atomic, so that neither side takes the
// lock on its fast path: a READ whose bytes are there answers at once, and
// the download (a callback per 16 KiB here) takes the lock only when a
// waiting READ can go on. A READ that must wait publishes its end and
// then loads arrived again; the download stores arrived and then loads
// next_wake; sequentially consistent, so one of the two sees the other and
// no wake-up is lost.
static _Atomic off_t arrived;
static _Atomic off_t next_wake = INT64_MAX;

// Guarded by lock: whether the download has started, whether it has ended
// (all bytes, or a failure: then the rest never come), and the READs that
// wait, each on a condition variable of its own: the download wakes just
// those whose bytes are there (one broadcast to all would wake the whole
// read-ahead window for each READ, about ten futile wake-ups per MiB).
struct waiter {
    off_t end;
    pthread_cond_t go;
    struct waiter *next;
};
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int started;
static int ended;
static struct waiter *waiting;

// Wakes the READs that can go on (all of them once the download has ended)
// and sets next_wake to the first end still waited for. Under lock.
static void wake_ready(void) {
    off_t ready = atomic_load(&arrived), next = INT64_MAX;
    for (struct waiter *w = waiting; w; w = w->next) {
        if (ended || w->end <= ready) pthread_cond_signal(&w->go);
        else if (w->end < next) next = w->end;
    }
    atomic_store(&next_wake, next);
}

// The cache writer (CACHE_FILE only). written: how far the file holds the
// object (stored by the writer alone). The writer sleeps on cache_more
// until a block has arrived; READs held by the 96 MiB mark sleep on
// cache_wrote until the writer moves on. A writer that fails gives up
// holding anyone (written jumps to the end) and says so.
#define BLOCK ((off_t)1 << 20)
#define MAX_BEHIND ((off_t)96 << 20)
static int cache_fd = -1;
static _Atomic off_t written;
static _Atomic int download_over;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cache_more = PTHREAD_COND_INITIALIZER;
static pthread_cond_t cache_wrote = PTHREAD_COND_INITIALIZER;

static void cache_wake(pthread_cond_t *cond) {
    pthread_mutex_lock(&cache_lock);
    pthread_cond_broadcast(cond);
    pthread_mutex_unlock(&cache_lock);
}

static void *cache_writer(void *unused) {
    (void)unused;
    off_t at = 0;
    while (at < file.size) {
        off_t want = at + BLOCK < file.size ? at + BLOCK : file.size, have;
        pthread_mutex_lock(&cache_lock);
        while ((have = atomic_load(&arrived)) < want && !atomic_load(&download_over)) pthread_cond_wait(&cache_more, &cache_lock);
        pthread_mutex_unlock(&cache_lock);
        if (have < want) break; // the download failed: its READs answer EIO
        off_t end = have == file.size ? have : have - have % BLOCK;
        while (at < end) {
            ssize_t n = pwrite(cache_fd, data + at, (size_t)(end - at < BLOCK ? end - at : BLOCK), at);
            if (n <= 0) {
                perror("stream_floor: cache write");
                at = file.size;
                break;
            }
            at += n;
        }
        atomic_store(&written, at);
        cache_wake(&cache_wrote);
    }
    atomic_store(&written, file.size);
    cache_wake(&cache_wrote);
    return NULL;
}

// A READ waits while the writer is more than MAX_BEHIND behind its end.
static void cache_wait_until_near(off_t end) {
    if (end - atomic_load(&written) <= MAX_BEHIND) return;
    pthread_mutex_lock(&cache_lock);
    while (end - atomic_load(&written) > MAX_BEHIND) pthread_cond_wait(&cache_wrote, &cache_lock);
    pthread_mutex_unlock(&cache_lock);
}

// curl's write callback, on the download thread: the bytes go straight to
// their place in the object's buffer (the one copy out of curl's receive
// buffer that any client pays), then the READs that can go on are woken.
static size_t on_data(char *bytes, size_t size, size_t count, void *unused) {
    (void)unused;
    static off_t received;
    size_t n = size * count;
    if ((off_t)n > file.size - received) return 0; // longer than SIZE: curl fails the transfer
    memcpy(data + received, bytes, n);
    off_t before = received;
    received += n;
    atomic_store(&arrived, received);
    if (cache_fd >= 0 && (received / BLOCK != before / BLOCK || received == file.size)) cache_wake(&cache_more);
    if (received >= atomic_load(&next_wake)) {
        pthread_mutex_lock(&lock);
        wake_ready();
        pthread_mutex_unlock(&lock);
    }
    return n;
}

// One GET of the whole object, as `curl URL` does, with the receive buffer
// bucketfs's transport uses (512 KiB: fewer, larger callbacks than curl's
// default 16 KiB). A failure (an HTTP error, a short or long body) ends the
// download early: READs past what arrived answer EIO and the bench's cmp or
// dd reports it.
static void *download(void *unused) {
    (void)unused;
    CURL *curl = curl_easy_init();
    CURLcode rc = CURLE_FAILED_INIT;
    if (curl) {
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
        curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
        rc = curl_easy_perform(curl);
        curl_easy_cleanup(curl);
    }
    atomic_store(&download_over, 1);
    if (cache_fd >= 0) cache_wake(&cache_more);
    pthread_mutex_lock(&lock);
    if (rc != CURLE_OK) fprintf(stderr, "stream_floor: GET %s: %s\n", url, curl_easy_strerror(rc));
    else if (atomic_load(&arrived) != file.size)
        fprintf(stderr, "stream_floor: GET %s: %lld of %lld bytes\n", url, (long long)atomic_load(&arrived), (long long)file.size);
    ended = 1;
    wake_ready();
    pthread_mutex_unlock(&lock);
    return NULL;
}

// The first open starts the download, so that the timed read includes it
// (as a cold bucketfs read includes its GETs); later opens (the bench's
// untimed cmp) read the buffer the first one filled.
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)ino;
    pthread_mutex_lock(&lock);
    int start = !started;
    started = 1;
    pthread_mutex_unlock(&lock);
    pthread_t thread, writer;
    if (start && (pthread_create(&thread, NULL, download, NULL) != 0 ||
                  (cache_fd >= 0 && pthread_create(&writer, NULL, cache_writer, NULL) != 0))) {
        fuse_reply_err(req, EIO);
        return;
    }
    if (start) pthread_detach(thread);
    if (start && cache_fd >= 0) pthread_detach(writer);
    fi->keep_cache = 0; // every open reads through FUSE, as a cold bucketfs open does
    fuse_reply_open(req, fi);
}

// Waits on the loop's worker thread until the bytes have arrived. The
// kernel's read-ahead sends READs in ascending order, so the waiting ones
// are the next the download fills; at most the loop's worker threads wait
// at once, the later READs queue in the kernel meanwhile.
static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)ino;
    (void)fi;
    off_t end = floor_read_end(req, &file, size, off);
    if (end < 0) return;
    if (atomic_load(&arrived) < end) {
        struct waiter w = {.end = end, .go = PTHREAD_COND_INITIALIZER};
        pthread_mutex_lock(&lock);
        w.next = waiting;
        waiting = &w;
        if (end < atomic_load(&next_wake)) atomic_store(&next_wake, end);
        while (atomic_load(&arrived) < end && !ended) pthread_cond_wait(&w.go, &lock);
        struct waiter **link = &waiting;
        while (*link != &w) link = &(*link)->next;
        *link = w.next;
        pthread_mutex_unlock(&lock);
        pthread_cond_destroy(&w.go);
    }
    if (cache_fd >= 0) cache_wait_until_near(end);
    // bytes below arrived never change again
    if (atomic_load(&arrived) >= end) fuse_reply_buf(req, data + off, end - off);
    else fuse_reply_err(req, EIO);
}

static const struct fuse_lowlevel_ops ops = {
    .init = floor_init,
    .lookup = floor_lookup,
    .getattr = floor_getattr,
    .open = op_open,
    .read = op_read,
};

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s MOUNTPOINT URL SIZE [CACHE_FILE]\n", argv[0]);
        return 2;
    }
    url = argv[2];
    file.size = (off_t)strtoll(argv[3], NULL, 10);
    if (argc == 5) {
        cache_fd = open(argv[4], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int failed = cache_fd < 0 ? errno : file.size > 0 ? posix_fallocate(cache_fd, 0, file.size) : 0;
        if (failed) {
            fprintf(stderr, "stream_floor: %s: %s\n", argv[4], strerror(failed));
            return 1;
        }
    }
    // Touched here, before the mount and so before the timed read: a floor
    // must not pay what bucketfs need not. bucketfs reuses its download
    // buffers (about 1,000 page faults over a cold 256 MiB read, its peak
    // about 80 MiB), where this buffer's first touch by the download was
    // 65,700 faults and held this floor at ~1,050 MiB/s against ~1,600
    // touched first (this VM clears each fresh page on first touch).
    data = malloc(file.size ? file.size : 1);
    if (!data || curl_global_init(CURL_GLOBAL_DEFAULT) != 0) return 1;
    memset(data, 0, file.size ? file.size : 1);

    return floor_serve(argv[0], argv[1], "fsname=stream_floor,subtype=stream_floor", &ops, sizeof ops, &file);
}
