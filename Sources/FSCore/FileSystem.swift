import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The filesystem core: POSIX semantics over an `ObjectStore`, with no
/// knowledge of libfuse. The bridge calls `FileSystemOperations`.
///
/// The semantics it implements are written once, for users, in
/// docs/semantics.md (what the mount shows, writing, failures, errnos).
///
/// The operations are split by family: `FileSystem+Lookup`,
/// `FileSystem+Directories`, `FileSystem+Files`. Directories' listings
/// are a component of their own (`Listings/`: `Listings`, `ListingReader`).
public final class FileSystem: FileSystemOperations {
    let store: any ObjectStore
    let options: MountOptions
    let clock: any MonotonicClock
    let logger: Logger
    let mapper: AttributeMapper
    /// `options.objectPrefix`, computed once.
    let objectPrefix: String
    let blockCache: BlockCache?
    let budget: ReadAheadBudget
    let readAhead: ReadAhead.Configuration
    /// The write-back executor: staged files, their uploads, the
    /// recovery store (see `FileSystem+WriteBack.swift` for the forwards).
    let writeBack: WriteBackStore
    /// See `setKernelCacheInvalidator` (nil: no kernel to tell, as in
    /// tests). A leaf lock: held only to read or set the closure.
    let kernelCacheInvalidator = OrderedLock<(@Sendable (KernelCacheEntries) -> Void)?>("kernel cache invalidator", nil)

    struct State: Sendable {
        var inodes = InodeTable()
        /// Every name's metadata and the directories' listings (see
        /// `MetadataCache`; its listings read by `listingReader`).
        var metadata: MetadataCache
        var directories: [UInt64: DirectoryHandle] = [:]
        var files: [UInt64: OpenFile] = [:]
        /// Files being written and their write-back states (see
        /// `StagedFiles`): under this lock, so nothing nests in it.
        var staged = StagedFiles()
        /// Shared by directory and file handles, never reused.
        var nextHandle: UInt64 = 1
    }

    // A leaf of the lock order (docs/architecture.md#lock-order): no lock
    // is taken while it is held (the staged files' write-back states and
    // the directory times live in it; clock readings are taken before,
    // `FileReader.close` after), and it is never held across an await:
    // every operation reads what it needs, releases, awaits the store,
    // then re-locks and re-checks. Debug builds check both.
    let state: OrderedLock<State>
    /// Reads the listings `State.metadata` lacks (opendir, walks, lookups'
    /// relistings), with the store, the clock and the metadata cache in
    /// this state lock.
    let listingReader: ListingReader

    /// - Parameters:
    ///   - clock: monotonic time for TTLs (tests pass FSCoreTesting's `ManualClock`).
    ///   - mountTime: shown as the mtime of directories without a known
    ///     placeholder.
    ///
    /// If the cache directory cannot be used, the mount still works without
    /// a block cache (an error is logged); callers that want to refuse to
    /// mount should create and check the directory first.
    ///   - descriptors: see `DescriptorProbe` (the CLI passes a
    ///     `ProcDescriptorProbe` of its mountpoint).
    ///   - recovery: the mount's recovery store, if the caller made it
    ///     already (the CLI does, for `--retry-pending`); otherwise one is
    ///     made here when there is a cache directory. Either way the
    ///     leftover scan runs once, when the store is made.
    public init(
        store: any ObjectStore, options: MountOptions, clock: any MonotonicClock = SystemClock(),
        logger: Logger = Logger(label: "bucketfs.core"), mountTime: Date = Date(),
        descriptors: (any DescriptorProbe)? = nil, recovery: RecoveryStore? = nil
    ) {
        self.store = store
        self.options = options
        self.clock = clock
        self.logger = logger
        self.mapper = AttributeMapper(options: options, mountTime: mountTime)
        self.objectPrefix = options.objectPrefix
        var blockCache: BlockCache?
        if let directory = options.cacheDirectory {
            do {
                blockCache = try BlockCache(directory: directory, capacity: options.cacheSize, logger: logger)
            } catch {
                logger.error("block cache disabled: cannot use the cache directory", metadata: ["directory": "\(directory)", "cause": "\(error)"])
            }
        }
        self.blockCache = blockCache
        self.budget = ReadAheadBudget(limit: options.readAheadBudget)
        self.readAhead = ReadAhead.Configuration(
            initialWindow: options.readAheadInitial, maxWindow: options.readAheadMax,
            // Two of the kernel's read-ahead windows: it issues the next
            // window when the reader reaches the current one, so requests
            // of both can be pending at once (a fresh clone's CI saw a late
            // request 17 MiB behind the furthest with 16 MiB windows).
            blockSize: Int64(blockCache?.blockSize ?? 1 << 20), seekTolerance: max(2 << 20, 2 * options.kernelReadAhead),
            fastLinkWindow: max(16 << 20, 2 * options.kernelReadAhead))
        let listings = Listings.Configuration(options, store)
        let state = OrderedLock("file system state", State(metadata: MetadataCache(listings, capacity: options.statCacheCapacity)))
        self.state = state
        self.listingReader = ListingReader(
            store: store, clock: clock, logger: logger, cache: LockedMetadataCache(state), configuration: listings, statWidth: options.listingStatWidth)
        self.writeBack = WriteBackStore(
            store: store, options: options, logger: logger, state: state, recovery: recovery, descriptors: descriptors,
            blockSize: readAhead.blockSize)
        writeBack.connect(self)
    }

    /// Fills the shared pool of download buffers (`ReadBuffers.prefill`)
    /// with a quarter of the read-ahead budget, at most the pool's idle
    /// limit, so a small budget keeps a small pool; the mount calls it
    /// once, before it answers. Returns the bytes mapped.
    @discardableResult
    public func prefillReadBuffers() -> Int {
        ReadBuffers.shared.prefill(Self.readBufferPrefill(budget: options.readAheadBudget))
    }

    /// The bytes `prefillReadBuffers` puts in the pool for `budget`.
    static func readBufferPrefill(budget: Int64) -> Int {
        min(Int(max(budget, 0) / 4), ReadBuffers.shared.idleLimit)
    }

    // MARK: - Shared helpers

    /// The object name of mount path `path`.
    func objectName(_ path: String) -> String { objectPrefix + path }

    /// Path and kind of a known, still bound inode.
    func record(_ inode: UInt64, _ s: borrowing State) throws(FSError) -> InodeTable.Record {
        guard let record = s.inodes[inode] else { throw FSError(.notFound, "unknown inode \(inode)") }
        guard record.bound else { throw FSError(.notFound, "\(record.path) now names something else") }
        return record
    }

    func record(_ inode: UInt64) throws(FSError) -> InodeTable.Record {
        try state.withLock { s throws(FSError) in try record(inode, s) }
    }

    /// The path of entry `name` in directory `parent`, checked: ENOTDIR
    /// when the parent is a file, `invalidName` for a name no object can
    /// have, ENAMETOOLONG when the object name (plus `reserve` bytes) would
    /// pass the service's limit or, for a new name (`isNew`), when the name
    /// passes NAME_MAX.
    func childPath(
        parent: UInt64, name: String, _ operation: String, invalidName: Refusal = .notFound, reserve: Int = 0, isNew: Bool = false
    ) throws(FSError) -> String {
        let parentRecord = try record(parent)
        guard parentRecord.kind == .directory else { throw FSError(.notDirectory, "\(operation) in file \(parentRecord.path)") }
        guard PathRules.isValidEntryName(name) else { throw FSError(invalidName, "no object can be named \(name)") }
        // NAME_MAX for new names; an existing object with a longer segment
        // (written by another tool) can still be looked up.
        guard !isNew || name.utf8.count <= PathRules.maximumNameLength else {
            throw FSError(.nameTooLong, "\(name.utf8.count) bytes, more than \(PathRules.maximumNameLength)")
        }
        let path = PathRules.join(parentRecord.path, name)
        guard !PathRules.isReserved(objectName: objectName(path)) else {
            throw FSError(invalidName, "\(objectName(path)) is reserved for the temporary parts of parallel uploads")
        }
        guard objectName(path).utf8.count + reserve < PathRules.maximumObjectNameLength else {
            throw FSError(.nameTooLong, objectName(path))
        }
        return path
    }

    /// What `stat` shows for `node` (`s`: the state, locked by the caller).
    func attributes(_ node: MetadataCache.Node, inode: UInt64, _ s: borrowing State) -> FileAttributes? {
        mapper.attributes(node, inode: inode, changed: s.inodes[inode]?.entriesChanged)
    }

    func entryReply(_ attributes: FileAttributes) -> EntryReply {
        EntryReply(attributes, timeout: options.kernelTimeout)
    }

    /// The errno for a store failure, logged with its cause (see
    /// `FSError.logged`).
    func failure(_ error: StoreError, during storeOperation: StoreOperation, _ operation: String, _ path: String) -> FSError {
        .logged(error, during: storeOperation, operation, path: path, object: objectName(path), logger: logger)
    }

    // MARK: - statfs

    /// Buckets have no capacity to speak of; `df` wants numbers, so report
    /// 1 PiB, all free, and plenty of inodes.
    public func statfs() -> FilesystemStatistics {
        let blockSize: UInt64 = 4096
        let blocks: UInt64 = (1 << 50) / blockSize
        return FilesystemStatistics(
            blockSize: blockSize, blocks: blocks, freeBlocks: blocks, availableBlocks: blocks,
            files: 1 << 32, freeFiles: 1 << 32, maximumNameLength: UInt64(PathRules.maximumNameLength))
    }

    // MARK: - Introspection (tests only: diagnostics go through `status()`)

    /// Inodes currently known, the root included.
    var knownInodeCount: Int { state.withLock { $0.inodes.count } }

    /// The lookup count the core holds for `inode` (nil if unknown).
    func lookupCount(_ inode: UInt64) -> UInt64? { state.withLock { $0.inodes[inode]?.lookups } }

    /// Bytes reserved by read-ahead buffers of all open files.
    var readAheadBytesInUse: Int64 { budget.inUse }
}
