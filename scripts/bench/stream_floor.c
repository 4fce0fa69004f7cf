// The floor of a FUSE mount fed by the benchmark's server, for the read
// rows: scripts/bench/read_floor.c (one file, the same loop and FUSE_INIT
// choices: floor_fs.h), except that the file's bytes are not in memory at
// the start.
// The first open starts one GET of the whole object (libcurl, in a thread
// of its own) into one malloc'd buffer of the object's size, and each READ
// waits until its bytes have arrived, then answers with a pointer into the
// buffer (fuse_reply_buf). No cache, no checksum, no retries: the least
// work any filesystem that streams an object to a reader must do. A cold
// read through any such mount needs the server, the HTTP receive and the
// FUSE path on the same cores at once; this is what they reach together,
// which neither curl alone nor read_floor alone shows.
//
//   stream_floor MOUNTPOINT URL SIZE
//
// URL is the object's media URL (JSON API, alt=media: the one curl reads in
// the bench), SIZE its length in bytes (the bench knows it; a metadata GET
// at mount would be untimed anyway). The kernel's read-ahead window is the
// mount's /sys/class/bdi/MAJOR:MINOR/read_ahead_kb, which the bench sets as
// for read_floor. Foreground; fusermount3 -u MOUNTPOINT ends it.
#include "floor_fs.h"
#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const char *url;
static struct floor_file file; // the object's size
static char *data;             // the object, filled in order by the download thread

// Guarded by lock: how many bytes of data have arrived, whether the
// download has ended (all bytes, or a failure: then the rest never come),
// and the smallest end offset a waiting READ needs (see op_read).
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;
static off_t arrived;
static int ended;
static int started;
static off_t next_wake = INT64_MAX;

// curl's write callback, on the download thread (the only writer of data
// and arrived): the bytes go straight to their place in the object's buffer
// (the one copy out of curl's receive buffer that any client pays), then
// waiting READs are woken, but only once the first of them can go: waking
// every waiter for every chunk would cost context switches a real
// filesystem would not pay either.
static size_t on_data(char *bytes, size_t size, size_t count, void *unused) {
    (void)unused;
    static off_t received;
    size_t n = size * count;
    if ((off_t)n > file.size - received) return 0; // longer than SIZE: curl fails the transfer
    memcpy(data + received, bytes, n);
    received += n;
    pthread_mutex_lock(&lock);
    arrived = received;
    if (arrived >= next_wake) {
        next_wake = INT64_MAX; // the waiters woken set it again if they still wait
        pthread_cond_broadcast(&more);
    }
    pthread_mutex_unlock(&lock);
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
    pthread_mutex_lock(&lock);
    if (rc != CURLE_OK) fprintf(stderr, "stream_floor: GET %s: %s\n", url, curl_easy_strerror(rc));
    else if (arrived != file.size) fprintf(stderr, "stream_floor: GET %s: %lld of %lld bytes\n", url, (long long)arrived, (long long)file.size);
    ended = 1;
    pthread_cond_broadcast(&more);
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
    pthread_t thread;
    if (start && pthread_create(&thread, NULL, download, NULL) != 0) {
        fuse_reply_err(req, EIO);
        return;
    }
    if (start) pthread_detach(thread);
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
    if (off >= file.size) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    off_t end = (off_t)size > file.size - off ? file.size : off + (off_t)size;
    pthread_mutex_lock(&lock);
    while (arrived < end && !ended) {
        if (end < next_wake) next_wake = end;
        pthread_cond_wait(&more, &lock);
    }
    int ok = arrived >= end;
    pthread_mutex_unlock(&lock);
    if (ok) fuse_reply_buf(req, data + off, end - off); // bytes below arrived never change again
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
    if (argc != 4) {
        fprintf(stderr, "usage: %s MOUNTPOINT URL SIZE\n", argv[0]);
        return 2;
    }
    url = argv[2];
    file.size = (off_t)strtoll(argv[3], NULL, 10);
    // Fresh pages, touched first by the download's memcpy, as bucketfs's
    // download buffers are: no prefaulting, so the page faults are paid
    // during the timed read as they are there.
    data = malloc(file.size ? file.size : 1);
    if (!data || curl_global_init(CURL_GLOBAL_DEFAULT) != 0) return 1;

    return floor_serve(argv[0], argv[1], "fsname=stream_floor,subtype=stream_floor", &ops, sizeof ops, &file);
}
