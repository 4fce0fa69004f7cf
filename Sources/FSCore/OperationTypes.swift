import Foundation

// The values the operations of `FileSystemOperations` take and answer:
// plain Swift values, no libfuse types (the bridge converts them).

/// What a setattr asks to change; nil leaves a field alone.
public struct AttributeChanges: Sendable, Equatable {
    public enum Time: Sendable, Equatable {
        case now
        case at(Timestamp)
    }

    public var size: Int64?
    public var mode: UInt32?
    public var uid: UInt32?
    public var gid: UInt32?
    public var accessTime: Time?
    public var modificationTime: Time?

    public init(size: Int64? = nil, mode: UInt32? = nil, uid: UInt32? = nil, gid: UInt32? = nil, accessTime: Time? = nil, modificationTime: Time? = nil) {
        self.size = size
        self.mode = mode
        self.uid = uid
        self.gid = gid
        self.accessTime = accessTime
        self.modificationTime = modificationTime
    }

    /// Whether anything besides the size changes (a metadata change).
    var changesMetadata: Bool { mode != nil || uid != nil || gid != nil || accessTime != nil || modificationTime != nil }
}

/// renameat2 flags.
public struct RenameFlags: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// RENAME_NOREPLACE: fail with EEXIST instead of replacing.
    public static let noReplace = RenameFlags(rawValue: 1 << 0)
    /// RENAME_EXCHANGE: swap two names (not possible on an object store).
    public static let exchange = RenameFlags(rawValue: 1 << 1)
}

public struct Timestamp: Sendable, Equatable {
    public var seconds: Int64
    public var nanoseconds: Int64

    public init(seconds: Int64, nanoseconds: Int64 = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    public init(_ date: Date) {
        let t = date.timeIntervalSince1970
        let s = t.rounded(.down)
        self.init(seconds: Int64(s), nanoseconds: Int64(((t - s) * 1e9).rounded()))
    }
}

public struct FileAttributes: Sendable, Equatable {
    public var inode: UInt64
    public var size: Int64
    /// File type and permission bits (S_IFDIR | 0o755, S_IFREG | 0o644, ...).
    public var mode: UInt32
    public var linkCount: UInt32
    public var uid: UInt32
    public var gid: UInt32
    public var accessTime: Timestamp
    public var modificationTime: Timestamp
    public var changeTime: Timestamp
    public var blockSize: Int32
    /// The device a character or block device file stands for (st_rdev).
    public var rdev: UInt64

    public init(
        inode: UInt64, size: Int64, mode: UInt32, linkCount: UInt32, uid: UInt32, gid: UInt32,
        accessTime: Timestamp, modificationTime: Timestamp, changeTime: Timestamp, blockSize: Int32 = 4096,
        rdev: UInt64 = 0
    ) {
        self.inode = inode
        self.size = size
        self.mode = mode
        self.linkCount = linkCount
        self.uid = uid
        self.gid = gid
        self.accessTime = accessTime
        self.modificationTime = modificationTime
        self.changeTime = changeTime
        self.blockSize = blockSize
        self.rdev = rdev
    }

    /// 512-byte blocks, as st_blocks counts them.
    public var blocks: Int64 { (size + 511) / 512 }
}

public struct EntryReply: Sendable, Equatable {
    public var attributes: FileAttributes
    /// Seconds the kernel may cache the name → inode binding.
    public var entryTimeout: Double
    /// Seconds the kernel may cache the attributes.
    public var attributeTimeout: Double

    public init(attributes: FileAttributes, entryTimeout: Double, attributeTimeout: Double) {
        self.attributes = attributes
        self.entryTimeout = entryTimeout
        self.attributeTimeout = attributeTimeout
    }

    /// A reply the kernel may cache, binding and attributes, for `timeout`.
    init(_ attributes: FileAttributes, timeout: Double) {
        self.init(attributes: attributes, entryTimeout: timeout, attributeTimeout: timeout)
    }
}

public struct AttributesReply: Sendable, Equatable {
    public var attributes: FileAttributes
    public var timeout: Double

    public init(attributes: FileAttributes, timeout: Double) {
        self.attributes = attributes
        self.timeout = timeout
    }
}

public struct DirectoryEntry: Sendable, Equatable {
    public var name: String
    /// Full entry for readdirplus (inode, attributes, timeouts).
    public var entry: EntryReply
    public var nextOffset: Int64

    public init(name: String, entry: EntryReply, nextOffset: Int64) {
        self.name = name
        self.entry = entry
        self.nextOffset = nextOffset
    }
}

public struct OpenReply: Sendable, Equatable {
    public var handle: UInt64
    /// Bypass the page cache for this open file.
    public var directIO: Bool
    /// Keep the kernel's cached pages (or, for a directory, its cached
    /// entries) from an earlier open.
    public var keepCache: Bool
    /// A directory: the kernel may cache its readdir results.
    public var cacheDirectory: Bool

    public init(handle: UInt64, directIO: Bool = false, keepCache: Bool = false, cacheDirectory: Bool = false) {
        self.handle = handle
        self.directIO = directIO
        self.keepCache = keepCache
        self.cacheDirectory = cacheDirectory
    }
}

public struct FilesystemStatistics: Sendable, Equatable {
    public var blockSize: UInt64
    public var blocks: UInt64
    public var freeBlocks: UInt64
    public var availableBlocks: UInt64
    public var files: UInt64
    public var freeFiles: UInt64
    public var maximumNameLength: UInt64

    public init(blockSize: UInt64, blocks: UInt64, freeBlocks: UInt64, availableBlocks: UInt64, files: UInt64, freeFiles: UInt64, maximumNameLength: UInt64) {
        self.blockSize = blockSize
        self.blocks = blocks
        self.freeBlocks = freeBlocks
        self.availableBlocks = availableBlocks
        self.files = files
        self.freeFiles = freeFiles
        self.maximumNameLength = maximumNameLength
    }
}
