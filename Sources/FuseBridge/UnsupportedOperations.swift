internal import CFuse
import FSCore
import Foundation
import Logging

// What the kernel is told for every operation the filesystem does not
// offer. One table, one comment per choice (the errno of each `Refusal` is
// chosen in FSCore's ErrnoMapping.swift); Operations.swift,
// WriteOperations.swift and ExtendedAttributeOperations.swift install their
// ops after this table, so an op defined there wins.
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
    // Hard links: EPERM, what link(2) answers when the filesystem does not
    // support hard links; an object store has no way to give one object two
    // names.
    ops.link = { req, _, _, _ in unsupported(req, "link", .notPermitted) }
    // fsyncdir: success; directory entries are objects, durable as soon
    // as the operation that made them has answered.
    ops.fsyncdir = { req, _, _, _ in unsupported(req, "fsyncdir", nil) }

    // fallocate: EOPNOTSUPP, the answer glibc's posix_fallocate expects
    // before it falls back to writing zeros through `write`.
    ops.fallocate = { req, _, _, _, _, _ in unsupported(req, "fallocate", .notSupported) }
    // copy_file_range: EOPNOTSUPP makes the kernel fall back to a splice
    // copy through read and write, which is all an object store could do.
    ops.copy_file_range = { req, _, _, _, _, _, _, _, _ in
        unsupported(req, "copy_file_range", .notSupported)
    }
    // ioctl: ENOTTY, "inappropriate ioctl for device" (lsattr, FIEMAP, ...).
    ops.ioctl = { req, _, _, _, _, _, _, _, _ in unsupported(req, "ioctl", .inappropriateIoctl) }
}

/// Answers `refusal` (nil: success) at once, and says so at trace level.
private func unsupported(_ req: fuse_req_t?, _ operation: StaticString, _ refusal: Refusal?) {
    let reply = Reply(req, operation)
    reply.context.logger.trace("FUSE unsupported operation", metadata: ["op": "\(operation)", "errno": "\(refusal?.code.name ?? "0")"])
    if let refusal { reply.refuse(refusal) } else { reply.success() }
}
