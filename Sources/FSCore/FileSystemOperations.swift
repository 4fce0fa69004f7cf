import Foundation

/// What the FUSE bridge asks of the filesystem: Swift values in, small
/// Swift replies out, no libfuse types. Each method answers one kernel
/// request; the bridge turns the reply into exactly one fuse_reply_*.
///
/// Inode numbers: 1 is the root. Lookup counting follows the kernel:
/// `lookup` counts one lookup of the returned inode; `readdir` counts
/// nothing, and the bridge calls `countLookups` for the readdirplus entries
/// it actually packed (never "." and ".."); `forget` subtracts.
public protocol FileSystemOperations: Sendable {
    func lookup(parent: UInt64, name: String) async throws(FSError) -> EntryReply
    func forget(_ inode: UInt64, lookups: UInt64)
    func countLookups(_ inodes: [UInt64])
    func getattr(_ inode: UInt64) async throws(FSError) -> AttributesReply

    func opendir(_ inode: UInt64) async throws(FSError) -> UInt64
    /// opendir with the caching the kernel may do (see `OpenReply`).
    func openDirectory(_ inode: UInt64) async throws(FSError) -> OpenReply
    /// The entries after `offset` ("." and ".." first, at offsets 1 and 2);
    /// each entry's `nextOffset` resumes after it.
    func readdir(_ inode: UInt64, handle: UInt64, offset: Int64) async throws(FSError) -> [DirectoryEntry]
    func releasedir(_ inode: UInt64, handle: UInt64)

    func open(_ inode: UInt64, flags: Int32) async throws(FSError) -> OpenReply
    func read(_ inode: UInt64, handle: UInt64, offset: Int64, size: Int) async throws(FSError) -> Data
    func release(_ inode: UInt64, handle: UInt64) async throws(FSError)

    /// Extended attributes (object metadata; see `ExtendedAttributeName`).
    /// The bridge answers size queries and ERANGE from the full value or
    /// name list returned here.
    func getxattr(_ inode: UInt64, name: String) async throws(FSError) -> Data
    func listxattr(_ inode: UInt64) async throws(FSError) -> [String]
    /// `flags`: setxattr(2)'s XATTR_CREATE / XATTR_REPLACE.
    func setxattr(_ inode: UInt64, name: String, value: Data, flags: Int32) async throws(FSError)
    func removexattr(_ inode: UInt64, name: String) async throws(FSError)

    func statfs() -> FilesystemStatistics

    // Changes. Every one answers EROFS on a read-only mount.

    /// Creates and opens a regular file (O_CREAT): it exists in the mount at
    /// once and in the bucket from its first flush. One lookup is counted.
    func create(parent: UInt64, name: String, mode: UInt32, flags: Int32) async throws(FSError) -> (EntryReply, OpenReply)
    /// mknod: an empty object (a FIFO, socket or device file with its type
    /// and `rdev` in its metadata).
    func mknod(parent: UInt64, name: String, mode: UInt32, rdev: UInt64) async throws(FSError) -> EntryReply
    /// Writes into the file's staged copy; returns the bytes taken.
    func write(_ inode: UInt64, handle: UInt64, offset: Int64, data: Data) async throws(FSError) -> Int
    /// Every close(2) of a descriptor: uploads if the file is dirty. `pid`
    /// is the closing process (0: unknown), see `DescriptorProbe`.
    func flush(_ inode: UInt64, handle: UInt64, pid: Int32) async throws(FSError)
    func fsync(_ inode: UInt64, handle: UInt64) async throws(FSError)
    /// chmod, chown, truncate, utimes; `handle` when done through an open file.
    func setattr(_ inode: UInt64, handle: UInt64?, changes: AttributeChanges) async throws(FSError) -> AttributesReply
    func mkdir(parent: UInt64, name: String, mode: UInt32) async throws(FSError) -> EntryReply
    func unlink(parent: UInt64, name: String) async throws(FSError)
    func rmdir(parent: UInt64, name: String) async throws(FSError)
    func rename(parent: UInt64, name: String, newParent: UInt64, newName: String, flags: RenameFlags) async throws(FSError)
    func symlink(target: String, parent: UInt64, name: String) async throws(FSError) -> EntryReply
    func readlink(_ inode: UInt64) async throws(FSError) -> String

    /// Uploads every dirty file (unmount, SIGTERM). Failures go to the
    /// recovery folder and are logged; returns how many failed.
    func flushAll() async -> Int
}

extension FileSystemOperations {
    /// Without directory caching: opendir's handle.
    public func openDirectory(_ inode: UInt64) async throws(FSError) -> OpenReply {
        OpenReply(handle: try await opendir(inode))
    }
}
