internal import CFuse
import FSCore
import Foundation
import Logging

// getxattr, listxattr, setxattr, removexattr: object metadata as extended
// attributes (FSCore's ExtendedAttributeMapping.swift has the names).
//
// Names outside the namespaces the core serves (user., gcs.) are answered
// EOPNOTSUPP right here on the libfuse thread, with no Task and no call
// into the core: `ls -l` asks for security.selinux and
// system.posix_acl_access on every file it lists, and `cp -a` for
// security.*, so these answers must cost one kernel round trip and nothing
// else. (Before xattrs existed these ops answered ENOSYS, which the kernel
// remembers and then answers EOPNOTSUPP itself; that cannot be kept, as it
// switches every xattr off for the mount.)
//
// The size protocol of getxattr(2)/listxattr(2): a request of size 0
// asks for the length and is answered with fuse_reply_xattr; otherwise the
// bytes are sent with fuse_reply_buf if they fit, else ERANGE.

func installExtendedAttributeOperations(_ ops: inout fuse_lowlevel_ops) {
    ops.getxattr = { req, inode, name, size in
        guard let name = servedName(req, name, "getxattr", invalid: .noAttribute) else { return }
        respond(req, "getxattr", { fs throws(FSError) in try await fs.getxattr(inode, name: name) }) { reply, value in
            reply.xattr(value, size: size)
        }
    }
    ops.listxattr = { req, inode, size in
        respond(req, "listxattr", { fs throws(FSError) in try await fs.listxattr(inode) }) { reply, names in
            reply.xattr(nameList(names), size: size)
        }
    }
    ops.setxattr = { req, inode, name, value, size, flags in
        guard let name = servedName(req, name, "setxattr", invalid: .invalid) else { return }
        // Copied now: libfuse's buffer is only valid during this callback.
        let bytes = size == 0 ? Data() : Data(bytes: value!, count: size)
        respond(req, "setxattr", { fs throws(FSError) in
            try await fs.setxattr(inode, name: name, value: bytes, flags: flags)
        }) { reply, _ in
            reply.success()
        }
    }
    ops.removexattr = { req, inode, name in
        guard let name = servedName(req, name, "removexattr", invalid: .noAttribute) else { return }
        respond(req, "removexattr", { fs throws(FSError) in try await fs.removexattr(inode, name: name) }) { reply, _ in
            reply.success()
        }
    }
}

/// The attribute name as Swift text if the core serves it. Otherwise the
/// request is answered here and nil returned: `.notSupported` (EOPNOTSUPP)
/// for another namespace, `invalid` for a name that is not UTF-8 (no
/// attribute can have it: `.noAttribute` on reads and removals, `.invalid`
/// on a set).
private func servedName(_ req: fuse_req_t?, _ name: UnsafePointer<CChar>?, _ operation: StaticString, invalid: Refusal) -> String? {
    guard let name else {
        Reply(req, operation).refuse(.invalid)
        return nil
    }
    guard let text = String(validatingCString: name) else {
        let reply = Reply(req, operation)
        reply.context.logger.debug("FUSE xattr name is not UTF-8", metadata: ["op": "\(operation)", "errno": "\(invalid.code.name)"])
        reply.refuse(invalid)
        return nil
    }
    guard ExtendedAttributeName.isServed(text) else {
        Reply(req, operation).refuse(.notSupported)
        return nil
    }
    return text
}

/// listxattr(2)'s format: each name followed by a NUL.
private func nameList(_ names: [String]) -> Data {
    var list = Data()
    for name in names {
        list.append(contentsOf: name.utf8)
        list.append(0)
    }
    return list
}
