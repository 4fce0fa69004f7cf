// The floor of the FUSE path for the small-file row: a low-level libfuse3
// filesystem in C that keeps names and sizes in memory and does nothing
// else (no store, no staging file, no upload). bash's `printf > f` on it
// costs the same kernel requests as on bucketfs (LOOKUP, CREATE, FLUSH of the
// duplicate, GETXATTR security.capability, WRITE, FLUSH, RELEASE), so its
// files/s is what any FUSE mount can reach on this machine before it does
// any work of its own. scripts/bench builds it with cc and mounts it with
// the same multi-threaded loop bucketfs uses.
//
// With STAGE_DIR it also writes each file's bytes to a file of its own in
// that directory (pwrite of each WRITE's buffer; the file is unlinked at
// release), as bucketfs stages what is written on local disk before and
// while it uploads: the floor of a mount that never holds written bytes
// in memory only. Each staged file is created once and written through
// one open (the bench's cp).
//
// With UPLOAD_URL as well (the JSON API's media upload URL up to `name=`),
// each staged file also goes up as one chunked media POST to UPLOAD_URL
// followed by the file's name, started at create: a thread sends the
// staged bytes with libcurl as they land, read back from the staged file
// (pread into libcurl's 2 MiB upload buffer), and the close (FLUSH) waits
// until the server has answered, EIO unless it answered 200. That is
// SPEC's design for a file written in order near the store, as bucketfs's
// one request does it, with nothing else of bucketfs: no cache, no
// checksum, no state machine.
//
//   null_fuse MOUNTPOINT [STAGE_DIR [UPLOAD_URL]]  (foreground; fusermount3 -u MOUNTPOINT ends it)
#include "floor_fs.h"
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NODES 1000000
struct node {
    fuse_ino_t parent;
    char *name;
    int is_dir;
    off_t size;
    int stage_fd; // -1: not staged
    // UPLOAD_URL: bytes [0, staged) are on disk, [0, sent) went to libcurl;
    // `closed` once the file is flushed; the sender thread and its answer.
    off_t staged, sent;
    int closed, sending;
    long status;
    pthread_t sender;
};
static const char *stage_dir; // NULL: keep nothing
static const char *upload_url; // NULL: send nothing
static pthread_cond_t grew = PTHREAD_COND_INITIALIZER;
static struct node *nodes;
static fuse_ino_t node_count = 2; // 1 is the root
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void fill(fuse_ino_t ino, struct stat *st) {
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_mode = nodes[ino].is_dir ? S_IFDIR | 0755 : S_IFREG | 0644;
    st->st_nlink = nodes[ino].is_dir ? 2 : 1;
    st->st_size = nodes[ino].size;
    st->st_uid = getuid();
    st->st_gid = getgid();
}

static fuse_ino_t find(fuse_ino_t parent, const char *name) {
    for (fuse_ino_t i = node_count - 1; i >= 2; i--)
        if (nodes[i].parent == parent && strcmp(nodes[i].name, name) == 0) return i;
    return 0;
}

static void reply_entry(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    e.ino = ino;
    e.attr_timeout = 60;
    e.entry_timeout = 60;
    fill(ino, &e.attr);
    if (fi) fuse_reply_create(req, &e, fi);
    else fuse_reply_entry(req, &e);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    pthread_mutex_lock(&lock);
    fuse_ino_t ino = find(parent, name);
    pthread_mutex_unlock(&lock);
    if (!ino) {
        // A negative entry with a timeout, as bucketfs gives (--negative-ttl).
        struct fuse_entry_param e;
        memset(&e, 0, sizeof e);
        e.entry_timeout = 5;
        fuse_reply_entry(req, &e);
        return;
    }
    reply_entry(req, ino, NULL);
}

static fuse_ino_t make(fuse_ino_t parent, const char *name, int is_dir) {
    pthread_mutex_lock(&lock);
    fuse_ino_t ino = node_count < MAX_NODES ? node_count++ : 0;
    if (ino) nodes[ino] = (struct node){.parent = parent, .name = strdup(name), .is_dir = is_dir, .stage_fd = -1};
    pthread_mutex_unlock(&lock);
    return ino;
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
    (void)mode;
    fuse_ino_t ino = make(parent, name, 1);
    if (!ino) fuse_reply_err(req, ENOSPC);
    else reply_entry(req, ino, NULL);
}

// libcurl's read callback, on the sender thread: the next staged bytes,
// waiting for the writer while there are none; 0 (the end) once the file
// is closed and all of it went.
static size_t read_staged(char *buf, size_t size, size_t count, void *arg) {
    struct node *n = arg;
    pthread_mutex_lock(&lock);
    while (n->sent >= n->staged && !n->closed) pthread_cond_wait(&grew, &lock);
    off_t available = n->staged - n->sent;
    pthread_mutex_unlock(&lock);
    if (available <= 0) return 0;
    size_t want = size * count < (size_t)available ? size * count : (size_t)available;
    ssize_t got = pread(n->stage_fd, buf, want, n->sent);
    if (got <= 0) return CURL_READFUNC_ABORT;
    n->sent += got; // this thread's alone
    return (size_t)got;
}

static size_t discard(char *buf, size_t size, size_t count, void *arg) {
    (void)buf;
    (void)arg;
    return size * count;
}

static void *send_staged(void *arg) {
    struct node *n = arg;
    char url[8192];
    snprintf(url, sizeof url, "%s%s", upload_url, n->name);
    CURL *easy = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, "Expect:");
    headers = curl_slist_append(headers, "Transfer-Encoding: chunked");
    headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)-1);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_READFUNCTION, read_staged);
    curl_easy_setopt(easy, CURLOPT_READDATA, n);
    curl_easy_setopt(easy, CURLOPT_UPLOAD_BUFFERSIZE, 2L << 20);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
    long status = 0;
    if (curl_easy_perform(easy) == CURLE_OK) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    n->status = status; // read after the join
    return NULL;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
    (void)mode;
    fuse_ino_t ino = make(parent, name, 0);
    if (!ino) {
        fuse_reply_err(req, ENOSPC);
        return;
    }
    // A write-only file bypasses the kernel's page cache, as in bucketfs
    // (docs/semantics.md#write-only-direct): the floors measure the same
    // kernel path as the mount they bound.
    if ((fi->flags & O_ACCMODE) == O_WRONLY) fi->direct_io = 1;
    if (stage_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%lu", stage_dir, (unsigned long)ino);
        nodes[ino].stage_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (nodes[ino].stage_fd < 0) {
            fuse_reply_err(req, errno);
            return;
        }
        if (upload_url) {
            if (pthread_create(&nodes[ino].sender, NULL, send_staged, &nodes[ino]) != 0) {
                fuse_reply_err(req, EIO);
                return;
            }
            nodes[ino].sending = 1;
        }
    }
    reply_entry(req, ino, fi);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)fi;
    struct stat st;
    fill(ino, &st);
    fuse_reply_attr(req, &st, 60);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
    (void)fi;
    if (to_set & FUSE_SET_ATTR_SIZE) nodes[ino].size = attr->st_size;
    op_getattr(req, ino, NULL);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)fi;
    if (stage_dir && pwrite(nodes[ino].stage_fd, buf, size, off) != (ssize_t)size) {
        fuse_reply_err(req, EIO);
        return;
    }
    pthread_mutex_lock(&lock);
    if (off + (off_t)size > nodes[ino].size) nodes[ino].size = off + size;
    // The bench's cp writes in order: what is staged ends at the furthest write.
    if (off + (off_t)size > nodes[ino].staged) nodes[ino].staged = off + size;
    pthread_cond_broadcast(&grew);
    pthread_mutex_unlock(&lock);
    fuse_reply_write(req, size);
}

// UPLOAD_URL: the first close ends the POST and waits for its answer.
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)fi;
    if (!nodes[ino].sending) {
        fuse_reply_err(req, 0);
        return;
    }
    pthread_mutex_lock(&lock);
    nodes[ino].closed = 1;
    pthread_cond_broadcast(&grew);
    pthread_mutex_unlock(&lock);
    pthread_join(nodes[ino].sender, NULL);
    nodes[ino].sending = 0;
    fuse_reply_err(req, nodes[ino].status == 200 ? 0 : EIO);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)fi;
    if (stage_dir && nodes[ino].stage_fd >= 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%lu", stage_dir, (unsigned long)ino);
        close(nodes[ino].stage_fd);
        unlink(path);
        nodes[ino].stage_fd = -1;
    }
    fuse_reply_err(req, 0);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
    (void)ino;
    (void)name;
    (void)size;
    fuse_reply_err(req, ENODATA);
}

static const struct fuse_lowlevel_ops ops = {
    .lookup = op_lookup,
    .mkdir = op_mkdir,
    .create = op_create,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .write = op_write,
    .flush = op_flush,
    .release = op_release,
    .fsync = NULL,
    .getxattr = op_getxattr,
};

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s MOUNTPOINT [STAGE_DIR [UPLOAD_URL]]\n", argv[0]);
        return 2;
    }
    if (argc >= 3) stage_dir = argv[2];
    if (argc == 4) {
        upload_url = argv[3];
        curl_global_init(CURL_GLOBAL_DEFAULT);
    }
    nodes = calloc(MAX_NODES, sizeof *nodes);
    nodes[1] = (struct node){.parent = 1, .name = "", .is_dir = 1, .stage_fd = -1};
    return floor_serve(argv[0], argv[1], "fsname=null_fuse,subtype=null_fuse", &ops, sizeof ops, NULL);
}
