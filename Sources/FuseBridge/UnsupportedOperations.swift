internal import CFuse
import Foundation
import Logging

// What the kernel is told for every operation the filesystem does not
// offer yet. One table, one comment per choice; when writes land, replace
// the entries here with trampolines in Operations.swift (which installs
// its own ops after this table, so an op defined there wins). Extended
// attributes are real ops (ExtendedAttributeOperations.swift), and so is
// their fast EOPNOTSUPP for namespaces other than user. and gcs.
//
// Some ops stay NULL on purpose, because libfuse/the kernel then do the
// right thing by themselves:
//   access          default_permissions: the kernel checks the mode bits; a
//                   NULL access answers ENOSYS once and then counts as success.
//   lseek           the kernel falls back to generic_file_llseek.
//   getlk/setlk/flock  POSIX and BSD locks are then kept locally by the kernel.
//   poll            the kernel treats regular files as always ready.
//   bmap            only for fuseblk mounts (FIBMAP gets 0).
//   write_buf       libfuse falls back to `write`.
//   retrieve_reply  only used with fuse_lowlevel_notify_retrieve.

func installUnsupportedOperations(_ ops: inout fuse_lowlevel_ops) {
    // Namespace changes and data writes: EROFS, because this mount is
    // read-only until writes land. (With `-o ro` the kernel already refuses
    // most of them before they reach us; without it, this is the answer.)
    ops.write = { req, _, _, _, _, _ in unsupported(req, "write", EROFS) }
    ops.create = { req, _, _, _, _ in unsupported(req, "create", EROFS) }
    ops.mknod = { req, _, _, _, _ in unsupported(req, "mknod", EROFS) }
    ops.mkdir = { req, _, _, _ in unsupported(req, "mkdir", EROFS) }
    ops.unlink = { req, _, _ in unsupported(req, "unlink", EROFS) }
    ops.rmdir = { req, _, _ in unsupported(req, "rmdir", EROFS) }
    ops.symlink = { req, _, _, _ in unsupported(req, "symlink", EROFS) }
    ops.rename = { req, _, _, _, _, _ in unsupported(req, "rename", EROFS) }
    // chmod, chown, truncate, utimes (touch): EROFS, the attributes come from
    // the bucket and cannot be changed here.
    ops.setattr = { req, _, _, _, _ in unsupported(req, "setattr", EROFS) }

    // Hard links: EPERM, what link(2) answers when the filesystem does not
    // support hard links; an object store has no way to give one object two
    // names. This stays when writes land.
    ops.link = { req, _, _, _ in unsupported(req, "link", EPERM) }
    // There are no symlinks, and the kernel only asks for S_IFLNK inodes:
    // EINVAL is readlink(2)'s "not a symbolic link". (NULL would give
    // ENOSYS, "Function not implemented".)
    ops.readlink = { req, _ in unsupported(req, "readlink", EINVAL) }

    // flush (every close), fsync and fsyncdir: success, there is nothing
    // to upload on a read-only mount. When writes land, flush/fsync upload.
    ops.flush = { req, _, _ in unsupported(req, "flush", 0) }
    ops.fsync = { req, _, _, _ in unsupported(req, "fsync", 0) }
    ops.fsyncdir = { req, _, _, _ in unsupported(req, "fsyncdir", 0) }

    // fallocate: EOPNOTSUPP, the answer glibc's posix_fallocate expects
    // before it falls back to writing (which then answers EROFS).
    ops.fallocate = { req, _, _, _, _, _ in unsupported(req, "fallocate", EOPNOTSUPP) }
    // copy_file_range: EOPNOTSUPP makes the kernel fall back to a splice
    // copy through read and write, which is all an object store could do.
    ops.copy_file_range = { req, _, _, _, _, _, _, _, _ in
        unsupported(req, "copy_file_range", EOPNOTSUPP)
    }
    // ioctl: ENOTTY, "inappropriate ioctl for device" (lsattr, FIEMAP, ...).
    ops.ioctl = { req, _, _, _, _, _, _, _, _ in unsupported(req, "ioctl", ENOTTY) }
}

/// Answers `errno` (0: success) at once, and says so at trace level.
private func unsupported(_ req: fuse_req_t?, _ operation: StaticString, _ errno: Int32) {
    let reply = Reply(req, operation)
    reply.context.logger.trace("FUSE unsupported operation", metadata: ["op": "\(operation)", "errno": "\(errno)"])
    reply.error(errno)
}
