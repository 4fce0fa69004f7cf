// The floor of the FUSE read path for the read rows: a low-level libfuse3
// filesystem in C that holds one file in memory (loaded from SOURCE at
// start) and answers each READ with a pointer into it (fuse_reply_buf: the
// one copy into the kernel that any FUSE filesystem pays). No store, no
// cache, no locks. A `dd` of MOUNTPOINT/file on it is what a FUSE mount can
// reach on this machine before it does any work of its own. scripts/bench
// builds it with cc and mounts it with the multi-threaded loop bucketfs
// uses, and the same FUSE_INIT choices that matter for reads: ASYNC_READ
// (libfuse's default), max_background 64.
//
//   read_floor MOUNTPOINT SOURCE [MAX_READ]
//
// The kernel's read-ahead window is the mount's
// /sys/class/bdi/MAJOR:MINOR/read_ahead_kb, which the bench sets (as bucketfs
// does for itself). MAX_READ (bytes; default: libfuse's, 1 MiB = max_pages 256 here) caps one
// READ request (mount option max_read, and max_read in FUSE_INIT).
// Foreground; fusermount3 -u MOUNTPOINT ends it.
#include "floor_fs.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

static struct floor_file file;
static char *data;

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)ino;
    fi->keep_cache = 0; // every open reads through FUSE, as a cold bucketfs open does
    fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)ino;
    (void)fi;
    off_t end = floor_read_end(req, &file, size, off);
    if (end >= 0) fuse_reply_buf(req, data + off, end - off);
}

static const struct fuse_lowlevel_ops ops = {
    .init = floor_init,
    .lookup = floor_lookup,
    .getattr = floor_getattr,
    .open = op_open,
    .read = op_read,
};

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s MOUNTPOINT SOURCE [MAX_READ]\n", argv[0]);
        return 2;
    }
    int fd = open(argv[2], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) { perror(argv[2]); return 1; }
    file.size = st.st_size;
    data = malloc(file.size ? file.size : 1);
    for (off_t done = 0; done < file.size;) {
        ssize_t n = read(fd, data + done, file.size - done);
        if (n <= 0) { perror(argv[2]); return 1; }
        done += n;
    }
    close(fd);
    if (argc == 4) file.max_read = (unsigned)strtoul(argv[3], NULL, 10);

    char options[128];
    if (file.max_read) snprintf(options, sizeof options, "fsname=read_floor,subtype=read_floor,max_read=%u", file.max_read);
    else snprintf(options, sizeof options, "fsname=read_floor,subtype=read_floor");
    return floor_serve(argv[0], argv[1], options, &ops, sizeof ops, &file);
}
