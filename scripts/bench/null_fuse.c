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
//   null_fuse MOUNTPOINT [STAGE_DIR]  (foreground; fusermount3 -u MOUNTPOINT ends it)
#include "floor_fs.h"
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
};
static const char *stage_dir; // NULL: keep nothing
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
    if (ino) nodes[ino] = (struct node){parent, strdup(name), is_dir, 0, -1};
    pthread_mutex_unlock(&lock);
    return ino;
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
    (void)mode;
    fuse_ino_t ino = make(parent, name, 1);
    if (!ino) fuse_reply_err(req, ENOSPC);
    else reply_entry(req, ino, NULL);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
    (void)mode;
    fuse_ino_t ino = make(parent, name, 0);
    if (!ino) {
        fuse_reply_err(req, ENOSPC);
        return;
    }
    if (stage_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%lu", stage_dir, (unsigned long)ino);
        nodes[ino].stage_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (nodes[ino].stage_fd < 0) {
            fuse_reply_err(req, errno);
            return;
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
    pthread_mutex_unlock(&lock);
    fuse_reply_write(req, size);
}

static void op_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)ino;
    (void)fi;
    fuse_reply_err(req, 0);
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
    .flush = op_ok,
    .release = op_release,
    .fsync = NULL,
    .getxattr = op_getxattr,
};

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s MOUNTPOINT [STAGE_DIR]\n", argv[0]);
        return 2;
    }
    if (argc == 3) stage_dir = argv[2];
    nodes = calloc(MAX_NODES, sizeof *nodes);
    nodes[1] = (struct node){1, "", 1, 0, -1};
    return floor_serve(argv[0], argv[1], "fsname=null_fuse,subtype=null_fuse", &ops, sizeof ops, NULL);
}
