import Foundation
import Testing
@testable import FSCore
import FSCoreTesting
#if canImport(Glibc)
import Glibc
#endif

/// A metadata change the store accepted shows at once in the mount that
/// made it, whatever versions the store's answer carries. fake-gcs-server
/// answers a PATCH without a metageneration and never counts it, so its
/// answer looks older than what mkdir or a lookup learnt of the `dir/`
/// placeholder; the answer's metadata must still win over the old.
@Suite("metadata changes on a store that does not report metagenerations")
struct AcceptedMetadataTests {
    static func harness() throws -> Harness {
        try Harness(store: InMemoryObjectStore(metagenerations: .notReported))
    }

    /// chmod 700, chown 1234:2345 and setxattr user.a=1 on `d`, each
    /// checked through getattr, getxattr and listxattr right after, and
    /// in what the store holds for `d/`.
    static func changeAndCheck(_ h: Harness, _ d: UInt64, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let chmod = try await h.fs.setattr(d, handle: nil, changes: AttributeChanges(mode: 0o700))
        #expect(chmod.attributes.mode == UInt32(S_IFDIR) | 0o700, "setattr's reply", sourceLocation: sourceLocation)
        #expect(try await h.fs.getattr(d).attributes.mode == UInt32(S_IFDIR) | 0o700, "stat after chmod", sourceLocation: sourceLocation)

        _ = try await h.fs.setattr(d, handle: nil, changes: AttributeChanges(uid: 1234, gid: 2345))
        let owned = try await h.fs.getattr(d).attributes
        #expect(owned.uid == 1234 && owned.gid == 2345, "stat after chown: \(owned)", sourceLocation: sourceLocation)
        #expect(owned.mode == UInt32(S_IFDIR) | 0o700, "chown keeps the mode", sourceLocation: sourceLocation)

        try await h.fs.setxattr(d, name: "user.a", value: Data("1".utf8), flags: 0)
        #expect(try await h.fs.getxattr(d, name: "user.a") == Data("1".utf8), sourceLocation: sourceLocation)
        #expect(try await h.fs.listxattr(d).contains("user.a"), sourceLocation: sourceLocation)
        try await h.fs.setxattr(d, name: "user.a", value: Data("2".utf8), flags: ExtendedAttributeRules.replaceFlag)
        #expect(try await h.fs.getxattr(d, name: "user.a") == Data("2".utf8), "a second change on the first's answer", sourceLocation: sourceLocation)

        let stored = try await h.store.stat("d/").customMetadata
        #expect(stored[AttributeMapper.modeKey] == "700", "\(stored)", sourceLocation: sourceLocation)
        #expect(stored[AttributeMapper.uidKey] == "1234" && stored[AttributeMapper.gidKey] == "2345", "\(stored)", sourceLocation: sourceLocation)
        #expect(stored["a"] == "2", "\(stored)", sourceLocation: sourceLocation)
    }

    @Test("a directory made here: chmod, chown and setxattr show at once")
    func madeHere() async throws {
        let h = try Self.harness()
        let d = try await h.fs.mkdir(parent: InodeTable.root, name: "d", mode: 0o755).attributes.inode
        try await Self.changeAndCheck(h, d)
    }

    @Test("a directory looked up and listed: chmod, chown and setxattr show at once, in the listing too")
    func lookedUp() async throws {
        let h = try Self.harness()
        h.store.seed("d/")
        h.store.seed("d/f", bytes(3))
        let d = try await h.lookup("d").attributes.inode
        _ = try await h.list(InodeTable.root)
        try await Self.changeAndCheck(h, d)
        let listed = try await h.list(InodeTable.root).first { $0.name == "d" }
        #expect(listed?.entry.attributes.mode == UInt32(S_IFDIR) | 0o700, "\(String(describing: listed))")
    }

    @Test("a file: chmod and setxattr show at once")
    func file() async throws {
        let h = try Self.harness()
        h.store.seed("f", bytes(3))
        let f = try await h.lookup("f").attributes.inode
        _ = try await h.fs.setattr(f, handle: nil, changes: AttributeChanges(mode: 0o600))
        #expect(try await h.fs.getattr(f).attributes.mode == UInt32(S_IFREG) | 0o600)
        try await h.fs.setxattr(f, name: "user.a", value: Data("1".utf8), flags: 0)
        #expect(try await h.fs.getxattr(f, name: "user.a") == Data("1".utf8))
    }
}
