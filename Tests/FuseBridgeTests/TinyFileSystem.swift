import FSCore
import Foundation
import Synchronization

/// A tiny read-only `FileSystemOperations` for mount tests:
///
///     /hello.txt     "Hello, bucketfs!\n"
///     /big.bin       300 000 patterned bytes (several reads)
///     /docs/         directory
///     /docs/readme.md
///     /many/         120 files with long names (several readdir pages)
///
/// Extended attributes live in a dictionary; /hello.txt starts with
/// `user.greeting` = "hi".
///
/// It records lookup counting (lookups, countLookups, forgets), opens, and
/// every xattr name and setxattr flag that reached it.
final class TinyFileSystem: FileSystemOperations {
    struct Node: Sendable {
        var name: String
        var parent: UInt64
        var attributes: FileAttributes
        var contents: Data
        var children: [UInt64]
    }

    struct Counters: Sendable {
        /// Inodes passed to each countLookups call.
        var countLookupsCalls: [[UInt64]] = []
        /// Per inode: lookups + counted readdirplus entries - forgets.
        var lookupCounts: [UInt64: Int64] = [:]
        var openFlags: [Int32] = []
        var releases = 0
        /// Names passed to any xattr op, in order.
        var xattrNames: [String] = []
        var setxattrFlags: [Int32] = []
    }

    static let modificationTime = Timestamp(seconds: 1_700_000_000, nanoseconds: 123_456_789)
    static let bigContents = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 / 251) })
    static let manyCount = 120

    let nodes: [UInt64: Node]
    let counters = Mutex(Counters())
    let xattrs = Mutex<[UInt64: [String: Data]]>([2: ["user.greeting": Data("hi".utf8)]])
    private let nextHandle = Atomic<UInt64>(1)

    init() {
        var nodes: [UInt64: Node] = [:]
        func add(_ inode: UInt64, _ name: String, parent: UInt64, directory: Bool, contents: Data = Data()) {
            let attributes = FileAttributes(
                inode: inode, size: Int64(directory ? 4096 : contents.count),
                mode: directory ? S_IFDIR | 0o755 : S_IFREG | 0o644, linkCount: directory ? 2 : 1,
                uid: 0, gid: 0, accessTime: Self.modificationTime, modificationTime: Self.modificationTime,
                changeTime: Self.modificationTime)
            nodes[inode] = Node(name: name, parent: parent, attributes: attributes, contents: contents, children: [])
            if inode != 1 { nodes[parent]!.children.append(inode) }
        }
        add(1, "", parent: 1, directory: true)
        add(2, "hello.txt", parent: 1, directory: false, contents: Data("Hello, bucketfs!\n".utf8))
        add(3, "docs", parent: 1, directory: true)
        add(4, "readme.md", parent: 3, directory: false, contents: Data("# docs\n".utf8))
        add(5, "big.bin", parent: 1, directory: false, contents: Self.bigContents)
        add(6, "many", parent: 1, directory: true)
        for i in 0..<Self.manyCount {
            let name = "a-rather-long-object-name-to-fill-the-readdir-buffer-quickly-\(i).txt"
            add(UInt64(100 + i), name, parent: 6, directory: false, contents: Data("\(i)\n".utf8))
        }
        self.nodes = nodes
    }

    func entry(_ inode: UInt64) -> EntryReply {
        EntryReply(attributes: nodes[inode]!.attributes, entryTimeout: 60, attributeTimeout: 60)
    }

    func lookup(parent: UInt64, name: String) async throws(FSError) -> EntryReply {
        guard let dir = nodes[parent], let child = dir.children.first(where: { nodes[$0]!.name == name }) else {
            throw FSError(.notFound, "no \(name) in \(parent)")
        }
        counters.withLock { $0.lookupCounts[child, default: 0] += 1 }
        return entry(child)
    }

    func forget(_ inode: UInt64, lookups: UInt64) {
        counters.withLock { $0.lookupCounts[inode, default: 0] -= Int64(lookups) }
    }

    func countLookups(_ inodes: [UInt64]) {
        counters.withLock {
            $0.countLookupsCalls.append(inodes)
            for inode in inodes { $0.lookupCounts[inode, default: 0] += 1 }
        }
    }

    func getattr(_ inode: UInt64) async throws(FSError) -> AttributesReply {
        guard let node = nodes[inode] else { throw FSError(.notFound) }
        return AttributesReply(attributes: node.attributes, timeout: 60)
    }

    func opendir(_ inode: UInt64) async throws(FSError) -> UInt64 {
        guard let node = nodes[inode] else { throw FSError(.notFound) }
        guard node.attributes.mode & S_IFMT == S_IFDIR else { throw FSError(.notDirectory) }
        return nextHandle.add(1, ordering: .relaxed).newValue
    }

    func readdir(_ inode: UInt64, handle: UInt64, offset: Int64) async throws(FSError) -> [DirectoryEntry] {
        guard let node = nodes[inode] else { throw FSError(.notFound) }
        let all = [(".", inode), ("..", node.parent)] + node.children.map { (nodes[$0]!.name, $0) }
        guard offset < all.count else { return [] }
        return all.enumerated().dropFirst(Int(offset)).map { index, item in
            DirectoryEntry(name: item.0, entry: entry(item.1), nextOffset: Int64(index + 1))
        }
    }

    func releasedir(_ inode: UInt64, handle: UInt64) {}

    func open(_ inode: UInt64, flags: Int32) async throws(FSError) -> OpenReply {
        counters.withLock { $0.openFlags.append(flags) }
        guard nodes[inode] != nil else { throw FSError(.notFound) }
        guard flags & O_ACCMODE == O_RDONLY, flags & O_TRUNC == 0 else { throw FSError(.readOnly, "read-only") }
        return OpenReply(handle: nextHandle.add(1, ordering: .relaxed).newValue, keepCache: true)
    }

    func read(_ inode: UInt64, handle: UInt64, offset: Int64, size: Int) async throws(FSError) -> Data {
        guard let node = nodes[inode] else { throw FSError(.notFound) }
        let start = min(Int(offset), node.contents.count)
        let end = min(start + size, node.contents.count)
        return node.contents.subdata(in: start..<end)
    }

    func release(_ inode: UInt64, handle: UInt64) async throws(FSError) {
        counters.withLock { $0.releases += 1 }
    }

    func getxattr(_ inode: UInt64, name: String) async throws(FSError) -> Data {
        counters.withLock { $0.xattrNames.append(name) }
        guard let value = xattrs.withLock({ $0[inode]?[name] }) else { throw FSError(.noAttribute) }
        return value
    }

    func listxattr(_ inode: UInt64) async throws(FSError) -> [String] {
        xattrs.withLock { ($0[inode] ?? [:]).keys.sorted() }
    }

    func setxattr(_ inode: UInt64, name: String, value: Data, flags: Int32) async throws(FSError) {
        counters.withLock {
            $0.xattrNames.append(name)
            $0.setxattrFlags.append(flags)
        }
        try xattrs.withLock { table throws(FSError) in
            let exists = table[inode]?[name] != nil
            if flags & 1 != 0, exists { throw FSError(.exists) }
            if flags & 2 != 0, !exists { throw FSError(.noAttribute) }
            table[inode, default: [:]][name] = value
        }
    }

    func removexattr(_ inode: UInt64, name: String) async throws(FSError) {
        counters.withLock { $0.xattrNames.append(name) }
        try xattrs.withLock { table throws(FSError) in
            guard table[inode]?.removeValue(forKey: name) != nil else { throw FSError(.noAttribute) }
        }
    }

    func statfs() -> FilesystemStatistics {
        FilesystemStatistics(
            blockSize: 4096, blocks: 1 << 20, freeBlocks: 1 << 19, availableBlocks: 1 << 19, files: 1000,
            freeFiles: 500, maximumNameLength: 1024)
    }
}

/// The tiny filesystem is read-only: every change answers EROFS, which is
/// what the bridge test checks arrives intact at the caller.
extension TinyFileSystem {
    func create(parent: UInt64, name: String, mode: UInt32, flags: Int32) async throws(FSError) -> (EntryReply, OpenReply) { throw FSError(.readOnly) }
    func mknod(parent: UInt64, name: String, mode: UInt32, rdev: UInt64) async throws(FSError) -> EntryReply { throw FSError(.readOnly) }
    func write(_ inode: UInt64, handle: UInt64, offset: Int64, data: Data) async throws(FSError) -> Int { throw FSError(.readOnly) }
    func flush(_ inode: UInt64, handle: UInt64, pid: Int32) async throws(FSError) {}
    func fsync(_ inode: UInt64, handle: UInt64) async throws(FSError) {}
    func setattr(_ inode: UInt64, handle: UInt64?, changes: AttributeChanges) async throws(FSError) -> AttributesReply { throw FSError(.readOnly) }
    func mkdir(parent: UInt64, name: String, mode: UInt32) async throws(FSError) -> EntryReply { throw FSError(.readOnly) }
    func unlink(parent: UInt64, name: String) async throws(FSError) { throw FSError(.readOnly) }
    func rmdir(parent: UInt64, name: String) async throws(FSError) { throw FSError(.readOnly) }
    func rename(parent: UInt64, name: String, newParent: UInt64, newName: String, flags: RenameFlags) async throws(FSError) { throw FSError(.readOnly) }
    func symlink(target: String, parent: UInt64, name: String) async throws(FSError) -> EntryReply { throw FSError(.readOnly) }
    func readlink(_ inode: UInt64) async throws(FSError) -> String { throw FSError(.invalid) }
    func flushAll() async -> Int { 0 }
}
