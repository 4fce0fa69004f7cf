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
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *data;
static off_t data_size;
static unsigned max_read;

static void fill(fuse_ino_t ino, struct stat *st) {
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_mode = ino == 1 ? S_IFDIR | 0755 : S_IFREG | 0444;
    st->st_nlink = ino == 1 ? 2 : 1;
    st->st_size = ino == 1 ? 0 : data_size;
    st->st_uid = getuid();
    st->st_gid = getgid();
}

static void op_init(void *userdata, struct fuse_conn_info *conn) {
    (void)userdata;
    conn->max_background = 64;
    conn->congestion_threshold = 48;
    if (max_read) conn->max_read = max_read;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    if (parent != 1 || strcmp(name, "file") != 0) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    e.ino = 2;
    e.attr_timeout = 60;
    e.entry_timeout = 60;
    fill(2, &e.attr);
    fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)fi;
    struct stat st;
    fill(ino, &st);
    fuse_reply_attr(req, &st, 60);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)ino;
    fi->keep_cache = 0; // every open reads through FUSE, as a cold bucketfs open does
    fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)ino;
    (void)fi;
    if (off >= data_size) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    if ((off_t)size > data_size - off) size = data_size - off;
    fuse_reply_buf(req, data + off, size);
}

static const struct fuse_lowlevel_ops ops = {
    .init = op_init,
    .lookup = op_lookup,
    .getattr = op_getattr,
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
    data_size = st.st_size;
    data = malloc(data_size ? data_size : 1);
    for (off_t done = 0; done < data_size;) {
        ssize_t n = read(fd, data + done, data_size - done);
        if (n <= 0) { perror(argv[2]); return 1; }
        done += n;
    }
    close(fd);
    if (argc == 4) max_read = (unsigned)strtoul(argv[3], NULL, 10);

    char options[128];
    if (max_read) snprintf(options, sizeof options, "fsname=read_floor,subtype=read_floor,max_read=%u", max_read);
    else snprintf(options, sizeof options, "fsname=read_floor,subtype=read_floor");
    char *args[] = {argv[0], "-o", options};
    struct fuse_args fargs = FUSE_ARGS_INIT(3, args);
    struct fuse_session *se = fuse_session_new(&fargs, &ops, sizeof ops, NULL);
    if (!se || fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, argv[1]) != 0) return 1;
    struct fuse_loop_config *config = fuse_loop_cfg_create();
    fuse_loop_cfg_set_idle_threads(config, 10);
    int rc = fuse_session_loop_mt(se, config);
    fuse_loop_cfg_destroy(config);
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return rc ? 1 : 0;
}
