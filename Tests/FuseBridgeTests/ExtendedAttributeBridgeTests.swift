import CXattr
import FSCore
import Foundation
import FuseBridge
import Logging
import Testing

/// The xattr ops of the bridge, in-process over `TinyFileSystem`: the size
/// protocol (size-0 queries, ERANGE), the name list format, flags passed
/// through, and names outside user./gcs. answered without the core.
@Suite(.serialized) struct ExtendedAttributeBridgeTests {
    @Test func sizeQueriesRangeErrorsFlagsAndForeignNamespaces() async throws {
        let mountpoint = try makeTemporaryDirectory()
        defer { rmdir(mountpoint) }
        let filesystem = TinyFileSystem()
        let session = try FuseSession(
            filesystem: filesystem, mountpoint: mountpoint, options: ["fsname=bucketfs-test"], debug: false,
            logger: Logger(label: "ExtendedAttributeBridgeTests"))
        defer { session.close() }
        let loop = LoopThread(session)
        let hello = mountpoint + "/hello.txt"

        // The FUSE loop runs in this process: syscalls go on a thread of their own.
        let seen = try await onThread { () -> XattrObservations in
            var o = XattrObservations()
            o.sizeQuery = getxattr(hello, "user.greeting", nil, 0)
            var small = [UInt8](repeating: 0, count: 1)
            o.smallBuffer = Self.errnoOf(getxattr(hello, "user.greeting", &small, 1))
            var buffer = [UInt8](repeating: 0, count: 64)
            let n = getxattr(hello, "user.greeting", &buffer, 64)
            o.value = n >= 0 ? String(decoding: buffer[..<n], as: UTF8.self) : "errno \(errno)"
            o.missing = Self.errnoOf(getxattr(hello, "user.nothing", &buffer, 64))

            o.setPlain = Self.errnoOf(setxattr(hello, "user.colour", "blue", 4, 0))
            o.setCreateExisting = Self.errnoOf(setxattr(hello, "user.colour", "red", 3, Int32(XATTR_CREATE)))
            o.setReplaceMissing = Self.errnoOf(setxattr(hello, "user.size", "big", 3, Int32(XATTR_REPLACE)))
            o.setEmpty = Self.errnoOf(setxattr(hello, "user.empty", nil, 0, 0))
            let emptyLength = getxattr(hello, "user.empty", &buffer, 64)
            o.emptyLength = emptyLength

            o.listSize = listxattr(hello, nil, 0)
            var names = [CChar](repeating: 0, count: 256)
            o.listSmall = Self.errnoOf(listxattr(hello, &names, 5))
            let listed = listxattr(hello, &names, 256)
            o.list = listed > 0
                ? names[..<listed].split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
                : []
            o.remove = Self.errnoOf(Int(removexattr(hello, "user.colour")))
            o.removeMissing = Self.errnoOf(Int(removexattr(hello, "user.colour")))

            o.selinux = Self.errnoOf(getxattr(hello, "security.selinux", &buffer, 64))
            o.trusted = Self.errnoOf(setxattr(hello, "trusted.x", "1", 1, 0))
            o.foreign = Self.errnoOf(getxattr(hello, "other.x", &buffer, 64))
            o.notUTF8Set = Self.errnoOf(setxattr(hello, "user.\u{FF}".isoLatin1, "v", 1, 0))
            o.notUTF8Get = Self.errnoOf(getxattr(hello, "user.\u{FF}".isoLatin1, &buffer, 64))
            return o
        }

        #expect(seen.sizeQuery == 2)
        #expect(seen.smallBuffer == ERANGE)
        #expect(seen.value == "hi")
        #expect(seen.missing == ENODATA)
        #expect(seen.setPlain == 0)
        #expect(seen.setCreateExisting == EEXIST)
        #expect(seen.setReplaceMissing == ENODATA)
        #expect(seen.setEmpty == 0)
        #expect(seen.emptyLength == 0)
        let expectedNames = ["user.colour", "user.empty", "user.greeting"]
        #expect(seen.listSize == expectedNames.reduce(0) { $0 + $1.utf8.count + 1 })
        #expect(seen.listSmall == ERANGE)
        #expect(seen.list == expectedNames)
        #expect(seen.remove == 0)
        #expect(seen.removeMissing == ENODATA)
        #expect(seen.selinux == EOPNOTSUPP)
        #expect(seen.trusted == EOPNOTSUPP)
        #expect(seen.foreign == EOPNOTSUPP)
        #expect(seen.notUTF8Set == EINVAL)
        #expect(seen.notUTF8Get == ENODATA)

        let counters = filesystem.counters.withLock { $0 }
        // The flags reach the core as setxattr(2) got them.
        #expect(counters.setxattrFlags == [0, XATTR_CREATE, XATTR_REPLACE, 0].map { Int32($0) })
        // Foreign namespaces and non-UTF-8 names never reach the core.
        #expect(counters.xattrNames.allSatisfy { $0.hasPrefix("user.") }, "\(counters.xattrNames)")
        #expect(!counters.xattrNames.contains { $0.contains("\u{FFFD}") })

        session.stop()
        #expect(loop.finished.wait(timeout: .now() + 10) == .success)
    }

    /// errno of a failed call, 0 for success.
    static func errnoOf(_ result: Int) -> Int32 { result < 0 ? errno : 0 }
    static func errnoOf(_ result: Int32) -> Int32 { result < 0 ? errno : 0 }
}

private struct XattrObservations: Sendable {
    var sizeQuery = -1
    var smallBuffer: Int32 = 0
    var value = ""
    var missing: Int32 = 0
    var setPlain: Int32 = -1
    var setCreateExisting: Int32 = 0
    var setReplaceMissing: Int32 = 0
    var setEmpty: Int32 = -1
    var emptyLength = -1
    var listSize = -1
    var listSmall: Int32 = 0
    var list: [String] = []
    var remove: Int32 = -1
    var removeMissing: Int32 = 0
    var selinux: Int32 = 0
    var trusted: Int32 = 0
    var foreign: Int32 = 0
    var notUTF8Set: Int32 = 0
    var notUTF8Get: Int32 = 0
}

extension String {
    /// The string's scalars as single bytes (U+00FF becomes the byte 0xFF,
    /// which is not UTF-8), NUL-terminated, for names the kernel passes
    /// through as they are.
    var isoLatin1: [CChar] {
        unicodeScalars.map { CChar(bitPattern: UInt8(truncatingIfNeeded: $0.value)) } + [0]
    }
}
