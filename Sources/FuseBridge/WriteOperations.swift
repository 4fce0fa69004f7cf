internal import CFuse
import FSCore
import Foundation
import Logging

// The ops that change things: data writes, flush/fsync, and the namespace.
// Same rules as Operations.swift: capture-free closures that copy the C
// arguments into Swift values and answer from a Task.

func installWriteOperations(_ ops: inout fuse_lowlevel_ops) {
    ops.create = { req, parent, name, mode, fi in
        let name = String(cString: name!)
        let flags = fi?.pointee.flags ?? O_WRONLY
        respond(req, "create", { fs throws(FSError) in
            try await fs.create(parent: parent, name: name, mode: UInt32(mode), flags: flags)
        }) { reply, created in
            let filesystem = reply.context.filesystem
            if !reply.create(created.0, created.1) {
                // The kernel has neither the entry nor the handle.
                try? await filesystem.release(created.0.attributes.inode, handle: created.1.handle)
                filesystem.forget(created.0.attributes.inode, lookups: 1)
            }
        }
    }
    ops.mknod = { req, parent, name, mode, rdev in
        let name = String(cString: name!)
        respond(req, "mknod", { fs throws(FSError) in
            try await fs.mknod(parent: parent, name: name, mode: UInt32(mode), rdev: UInt64(rdev))
        }) {
            $0.entry($1)
        }
    }
    ops.write = { req, inode, buf, size, offset, fi in
        let handle = fi?.pointee.fh ?? 0
        // Copied before the callback returns: libfuse reuses `buf` for the
        // next request once we return. `buf` holds `size` readable bytes.
        // Into a page-aligned buffer, for the staging file's pwrite.
        let data = pageAlignedCopy(of: UnsafeRawBufferPointer(start: buf, count: size))
        respond(req, "write", { fs throws(FSError) in
            try await fs.write(inode, handle: handle, offset: Int64(offset), data: data)
        }) { $0.written($1) }
    }
    ops.flush = { req, inode, fi in
        let handle = fi?.pointee.fh ?? 0
        // The closing process (a thread ID; /proc answers for those too).
        let pid = fuse_req_ctx(req)?.pointee.pid ?? 0
        respond(req, "flush", interruptible: true, { fs throws(FSError) in try await fs.flush(inode, handle: handle, pid: pid) }) { reply, _ in
            reply.success()
        }
    }
    ops.fsync = { req, inode, _, fi in
        let handle = fi?.pointee.fh ?? 0
        respond(req, "fsync", interruptible: true, { fs throws(FSError) in try await fs.fsync(inode, handle: handle) }) { reply, _ in reply.success() }
    }
    ops.setattr = { req, inode, attr, toSet, fi in
        let changes = attributeChanges(attr!.pointee, Int32(toSet))
        let handle = fi?.pointee.fh
        respond(req, "setattr", { fs throws(FSError) in try await fs.setattr(inode, handle: handle, changes: changes) }) {
            $0.attributes($1)
        }
    }
    ops.mkdir = { req, parent, name, mode in
        let name = String(cString: name!)
        respond(req, "mkdir", { fs throws(FSError) in try await fs.mkdir(parent: parent, name: name, mode: UInt32(mode)) }) {
            $0.entry($1)
        }
    }
    ops.unlink = { req, parent, name in
        let name = String(cString: name!)
        respond(req, "unlink", { fs throws(FSError) in try await fs.unlink(parent: parent, name: name) }) { reply, _ in reply.success() }
    }
    ops.rmdir = { req, parent, name in
        let name = String(cString: name!)
        respond(req, "rmdir", { fs throws(FSError) in try await fs.rmdir(parent: parent, name: name) }) { reply, _ in reply.success() }
    }
    ops.rename = { req, parent, name, newParent, newName, flags in
        let name = String(cString: name!), newName = String(cString: newName!)
        // RenameFlags uses Linux's values (RENAME_NOREPLACE 1, RENAME_EXCHANGE
        // 2; <linux/fs.h> is not visible to Swift here).
        let renameFlags = RenameFlags(rawValue: flags)
        respond(req, "rename", { fs throws(FSError) in
            try await fs.rename(parent: parent, name: name, newParent: newParent, newName: newName, flags: renameFlags)
        }) { reply, _ in reply.success() }
    }
    ops.symlink = { req, target, parent, name in
        let target = String(cString: target!), name = String(cString: name!)
        respond(req, "symlink", { fs throws(FSError) in try await fs.symlink(target: target, parent: parent, name: name) }) {
            $0.entry($1)
        }
    }
    ops.readlink = { req, inode in
        respond(req, "readlink", interruptible: true, { fs throws(FSError) in try await fs.readlink(inode) }) { $0.link($1) }
    }
}

/// The kernel's setattr as a Swift value: only the fields `toSet` names.
private func attributeChanges(_ attr: stat, _ toSet: Int32) -> AttributeChanges {
    func has(_ flag: Int32) -> Bool { toSet & flag != 0 }
    var changes = AttributeChanges()
    if has(FUSE_SET_ATTR_SIZE) { changes.size = Int64(attr.st_size) }
    if has(FUSE_SET_ATTR_MODE) { changes.mode = UInt32(attr.st_mode) & 0o7777 }
    if has(FUSE_SET_ATTR_UID) { changes.uid = attr.st_uid }
    if has(FUSE_SET_ATTR_GID) { changes.gid = attr.st_gid }
    if has(FUSE_SET_ATTR_ATIME_NOW) {
        changes.accessTime = .now
    } else if has(FUSE_SET_ATTR_ATIME) {
        changes.accessTime = .at(Timestamp(seconds: Int64(attr.st_atim.tv_sec), nanoseconds: Int64(attr.st_atim.tv_nsec)))
    }
    if has(FUSE_SET_ATTR_MTIME_NOW) {
        changes.modificationTime = .now
    } else if has(FUSE_SET_ATTR_MTIME) {
        changes.modificationTime = .at(Timestamp(seconds: Int64(attr.st_mtim.tv_sec), nanoseconds: Int64(attr.st_mtim.tv_nsec)))
    }
    return changes
}
