// What the bench's C floor filesystems share (scripts/bench/*.c include it):
// the session and loop bucketfs uses, and, for the read floors
// (read_floor.c, stream_floor.c), the one read-only file "file" in the root
// and the FUSE_INIT choices that matter for reads. Static inline, so that a
// filesystem that uses only part of it compiles without warnings.
#ifndef FLOOR_FS_H
#define FLOOR_FS_H
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fuse_lowlevel.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// Mounts ops (with userdata) on mountpoint with the -o options and serves
// it until fusermount3 -u: the multi-threaded loop with bucketfs's
// settings (10 idle threads). Returns main's exit code.
static inline int floor_serve(const char *argv0, const char *mountpoint, const char *options,
                              const struct fuse_lowlevel_ops *ops, size_t ops_size, void *userdata) {
    char *args[] = {(char *)argv0, "-o", (char *)options};
    struct fuse_args fargs = FUSE_ARGS_INIT(3, args);
    struct fuse_session *se = fuse_session_new(&fargs, ops, ops_size, userdata);
    if (!se || fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, mountpoint) != 0) return 1;
    struct fuse_loop_config *config = fuse_loop_cfg_create();
    fuse_loop_cfg_set_idle_threads(config, 10);
    int rc = fuse_session_loop_mt(se, config);
    fuse_loop_cfg_destroy(config);
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return rc ? 1 : 0;
}

// The read floors' one file (inode 2, "file" in the root), passed to
// floor_serve as userdata.
struct floor_file {
    off_t size;
    unsigned max_read; // 0: libfuse's (1 MiB here)
};

static inline void floor_fill(const struct floor_file *file, fuse_ino_t ino, struct stat *st) {
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_mode = ino == 1 ? S_IFDIR | 0755 : S_IFREG | 0444;
    st->st_nlink = ino == 1 ? 2 : 1;
    st->st_size = ino == 1 ? 0 : file->size;
    st->st_uid = getuid();
    st->st_gid = getgid();
}

// FUSE_INIT as bucketfs negotiates it for reads: ASYNC_READ (libfuse's
// default) and 64 read-ahead requests in flight; max_read must match the
// mount option, or libfuse fails the init.
static inline void floor_init(void *userdata, struct fuse_conn_info *conn) {
    const struct floor_file *file = userdata;
    conn->max_background = 64;
    conn->congestion_threshold = 48;
    if (file->max_read) conn->max_read = file->max_read;
}

// Where a READ of size bytes at off ends within the file; at or past its
// end, replies with no bytes and returns -1.
static inline off_t floor_read_end(fuse_req_t req, const struct floor_file *file, size_t size, off_t off) {
    if (off >= file->size) {
        fuse_reply_buf(req, NULL, 0);
        return -1;
    }
    return (off_t)size > file->size - off ? file->size : off + (off_t)size;
}

static inline void floor_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    if (parent != 1 || strcmp(name, "file") != 0) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    e.ino = 2;
    e.attr_timeout = 60;
    e.entry_timeout = 60;
    floor_fill(fuse_req_userdata(req), 2, &e.attr);
    fuse_reply_entry(req, &e);
}

static inline void floor_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)fi;
    struct stat st;
    floor_fill(fuse_req_userdata(req), ino, &st);
    fuse_reply_attr(req, &st, 60);
}
#endif
