// The libfuse3 low-level API for Swift. FUSE_USE_VERSION is pinned here and
// nowhere else, so every importer sees the same API level (312 selects the
// fuse_loop_config API of libfuse >= 3.12). Only FuseBridge imports CFuse.
#ifndef BUCKETFS_CFUSE_SHIM_H
#define BUCKETFS_CFUSE_SHIM_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <sys/xattr.h>
#include <sys/statvfs.h>
#include <errno.h>

#endif
