internal import CFuse
import FSCore
import Foundation
import Logging

// The low-level ops table. Built in a plain non-isolated function, never in
// main.swift: closures written there would be @MainActor and trap when
// libfuse calls them on a worker thread. Each op is a capture-free closure
// (so Swift can make it @convention(c)) that recovers the BridgeContext
// from the request's userdata, copies the C arguments into Swift values and
// forwards at once: async core calls answer from a Task (`respond`), the
// few synchronous ones (forget, releasedir, statfs) answer inline.

/// The ops table for fuse_session_new (which copies it).
func makeLowLevelOps() -> fuse_lowlevel_ops {
    var ops = fuse_lowlevel_ops()
    installUnsupportedOperations(&ops)
    installWriteOperations(&ops)
    installExtendedAttributeOperations(&ops)

    ops.`init` = { userdata, conn in
        guard let conn else { return }
        negotiateConnection(conn, BridgeContext.from(userdata))
    }
    ops.destroy = { userdata in
        BridgeContext.from(userdata).logger.debug("FUSE destroy: the connection is closing")
    }

    ops.lookup = { req, parent, name in
        let name = String(cString: name!)
        respond(req, "lookup", interruptible: true, { fs throws(FSError) in try await fs.lookup(parent: parent, name: name) }) {
            $0.entry($1)
        }
    }
    ops.forget = { req, inode, lookups in
        let reply = Reply(req, "forget")
        reply.context.filesystem.forget(inode, lookups: lookups)
        reply.none()
    }
    ops.forget_multi = { req, count, forgets in
        let reply = Reply(req, "forget_multi")
        let filesystem = reply.context.filesystem
        for forget in UnsafeBufferPointer(start: forgets, count: count) {
            filesystem.forget(forget.ino, lookups: forget.nlookup)
        }
        reply.none()
    }
    ops.getattr = { req, inode, _ in
        respond(req, "getattr", interruptible: true, { fs throws(FSError) in try await fs.getattr(inode) }) {
            $0.attributes($1)
        }
    }

    ops.opendir = { req, inode, _ in
        respond(req, "opendir", interruptible: true, { fs throws(FSError) in try await fs.openDirectory(inode) }) { reply, open in
            let filesystem = reply.context.filesystem
            if !reply.open(open) {
                // The kernel never got the handle, so no releasedir will come.
                filesystem.releasedir(inode, handle: open.handle)
            }
        }
    }
    ops.readdirplus = { req, inode, size, offset, fi in
        let handle = fi?.pointee.fh ?? 0
        respond(req, "readdirplus", interruptible: true, { fs throws(FSError) in
            try await fs.readdir(inode, handle: handle, offset: Int64(offset))
        }) { reply, entries in
            let page = reply.packDirectory(entries, size: size, plus: true)
            // Count before replying: once the kernel has the entries it may
            // forget them, and a forget must never overtake its lookup.
            if !page.packedInodes.isEmpty {
                reply.context.filesystem.countLookups(page.packedInodes)
            }
            reply.directory(page)
        }
    }
    ops.readdir = { req, inode, size, offset, fi in
        let handle = fi?.pointee.fh ?? 0
        respond(req, "readdir", interruptible: true, { fs throws(FSError) in
            try await fs.readdir(inode, handle: handle, offset: Int64(offset))
        }) { reply, entries in
            let page = reply.packDirectory(entries, size: size, plus: false)
            reply.directory(page)
        }
    }
    ops.releasedir = { req, inode, fi in
        let reply = Reply(req, "releasedir")
        reply.context.filesystem.releasedir(inode, handle: fi?.pointee.fh ?? 0)
        reply.success()
    }

    ops.open = { req, inode, fi in
        // O_ACCMODE and O_TRUNC are the core's to judge (ATOMIC_O_TRUNC is
        // on, so truncation arrives here and never as a setattr).
        let flags = fi?.pointee.flags ?? O_RDONLY
        respond(req, "open", { fs throws(FSError) in try await fs.open(inode, flags: flags) }) { reply, open in
            let filesystem = reply.context.filesystem
            if !reply.open(open) {
                // The kernel never got the handle, so no release will come.
                try? await filesystem.release(inode, handle: open.handle)
            }
        }
    }
    ops.read = { req, inode, size, offset, fi in
        let handle = fi?.pointee.fh ?? 0
        respond(req, "read", interruptible: true, { fs throws(FSError) in
            try await fs.read(inode, handle: handle, offset: Int64(offset), size: size)
        }) { reply, data in
            reply.data(data.count > size ? data.prefix(size) : data)
        }
    }
    ops.release = { req, inode, fi in
        let handle = fi?.pointee.fh ?? 0
        respond(req, "release", { fs throws(FSError) in try await fs.release(inode, handle: handle) }) { reply, _ in
            reply.success()
        }
    }

    ops.statfs = { req, _ in
        let reply = Reply(req, "statfs")
        let statistics = reply.context.filesystem.statfs()
        reply.statfs(statistics)
    }
    return ops
}

/// FUSE_INIT: keep ASYNC_READ, add PARALLEL_DIROPS and READDIRPLUS when the
/// kernel offers them, never WRITEBACK_CACHE; log what was negotiated.
///
/// Request sizes: libfuse already asks for 1 MiB writes (max_write) and
/// sets max_pages to match (256 pages on this 6.x kernel), so one read or
/// write request can carry 1 MiB; what keeps buffered reads at 128 KiB is
/// the kernel's read-ahead window, raised after INIT (`BridgeContext`).
/// `max_background` lets that many read-ahead requests be in flight at
/// once (the kernel's default is 12).
private func negotiateConnection(_ conn: UnsafeMutablePointer<fuse_conn_info>, _ context: BridgeContext) {
    let capable = conn.pointee.capable
    var want = conn.pointee.want
    for capability in [FUSE_CAP_ASYNC_READ, FUSE_CAP_PARALLEL_DIROPS, FUSE_CAP_READDIRPLUS]
    where capable & UInt32(capability) != 0 {
        want |= UInt32(capability)
    }
    want &= ~UInt32(FUSE_CAP_WRITEBACK_CACHE)
    conn.pointee.want = want
    conn.pointee.max_background = BridgeContext.maxBackground
    conn.pointee.congestion_threshold = BridgeContext.maxBackground * 3 / 4
    context.kernelSpeaks(minor: conn.pointee.proto_minor)
    if let maxRead = context.maxRead {
        // Must match the max_read= mount option, or libfuse fails the init.
        conn.pointee.max_read = maxRead
    }
    context.logger.debug(
        "FUSE connection negotiated",
        metadata: [
            "proto": "\(conn.pointee.proto_major).\(conn.pointee.proto_minor)",
            "direct_io_for_write_only_handles": "\(context.allowsDirectIO)",
            "max_read": "\(conn.pointee.max_read)",
            "max_write": "\(conn.pointee.max_write)",
            "max_readahead": "\(conn.pointee.max_readahead)",
            "max_background": "\(conn.pointee.max_background)",
            "congestion_threshold": "\(conn.pointee.congestion_threshold)",
            "capable": "0x\(String(capable, radix: 16))",
            "want": "0x\(String(want, radix: 16))",
        ])
}
