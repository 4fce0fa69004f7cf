/// Inode numbers ↔ paths, and the kernel's lookup counts.
///
/// Invariants (checked by `checkInvariants` in debug builds):
/// - the root is inode 1, path "", a directory, and is never dropped;
/// - numbers are never reused (a counter only grows), so a number the
///   kernel still holds can never come to mean another file;
/// - `byPath[p] == i` implies `records[i].path == p`; a record may be
///   unbound (its name now means something else, e.g. a file replaced by a
///   directory) and then lives on only until the kernel forgets it;
/// - a record with zero lookups and zero pins is dropped at once (except the
///   root). Pins are held by open file handles and by directory handles for
///   the entries they handed out (until the bridge counts them or the
///   handle is released).
///
/// A plain value: `FileSystem` keeps it inside its state lock.
struct InodeTable: Sendable {
    enum Kind: Sendable, Equatable {
        case file
        case directory
        case symlink
    }

    struct Record: Sendable, Equatable {
        var path: String
        var kind: Kind
        var lookups: UInt64 = 0
        var pins: Int = 0
        /// Whether `path` still resolves to this inode.
        var bound = true
        /// Generation seen by the last open (for the kernel's keep_cache).
        var lastOpenedGeneration: Int64?
        /// When the listing the last opendir used was read (the same:
        /// the kernel may keep the directory entries it cached).
        var lastListing: Duration?
        /// When this mount last added, removed or renamed an entry of this
        /// directory: shown as its mtime and ctime. Kept with the record,
        /// so it goes when the kernel forgets the inode (memory stays
        /// bounded by the inodes the kernel holds).
        var entriesChanged: Timestamp?
    }

    static let root: UInt64 = 1

    private var records: [UInt64: Record] = [Self.root: Record(path: "", kind: .directory)]
    private var byPath: [String: UInt64] = ["": Self.root]
    private var nextInode: UInt64 = 2

    init() {}

    var count: Int { records.count }

    /// Every bound inode but the root, with its path.
    var boundPaths: [(inode: UInt64, path: String)] {
        records.compactMap { inode, record in inode != Self.root && record.bound ? (inode, record.path) : nil }
    }

    subscript(inode: UInt64) -> Record? { records[inode] }

    func inode(forPath path: String) -> UInt64? { byPath[path] }

    /// Room for `more` inodes at once (opendir resolves a whole listing).
    mutating func reserveCapacity(forMore more: Int) {
        records.reserveCapacity(records.count + more)
        byPath.reserveCapacity(byPath.count + more)
    }

    /// The inode for `path` as a `kind`, created if needed. A path whose
    /// kind changed gets a new number; the old record is unbound. The
    /// caller must count a lookup or pin the result at once, or it is left
    /// as a record nobody holds.
    mutating func resolve(_ path: String, kind: Kind) -> UInt64 {
        if let existing = byPath[path] {
            if records[existing]?.kind == kind { return existing }
            if existing == Self.root { return existing }
            records[existing]?.bound = false
            byPath[path] = nil
            dropIfUnused(existing)
        }
        let inode = nextInode
        nextInode += 1
        records[inode] = Record(path: path, kind: kind)
        byPath[path] = inode
        return inode
    }

    /// `resolve` and `pin` in one step (opendir does it for every entry).
    mutating func resolveAndPin(_ path: String, kind: Kind) -> UInt64 {
        let inode = resolve(path, kind: kind)
        records[inode]?.pins += 1
        return inode
    }

    /// A kernel lookup of `path`: resolve and count one.
    mutating func lookup(_ path: String, kind: Kind) -> UInt64 {
        let inode = resolve(path, kind: kind)
        records[inode]?.lookups += 1
        return inode
    }

    /// Lookups the bridge reports for readdirplus entries it sent. Returns
    /// false for an inode no longer known (a bridge bug; logged by caller).
    @discardableResult
    mutating func addLookups(_ inode: UInt64, _ n: UInt64 = 1) -> Bool {
        records[inode]?.lookups += n
        return records[inode] != nil
    }

    /// The kernel forgot `n` lookups. Returns whether the inode was dropped.
    /// More forgets than lookups (a bug somewhere) clamp at zero.
    @discardableResult
    mutating func forget(_ inode: UInt64, _ n: UInt64) -> Bool {
        guard var record = records[inode] else { return false }
        record.lookups -= min(n, record.lookups)
        records[inode] = record
        return dropIfUnused(inode)
    }

    mutating func pin(_ inode: UInt64) {
        records[inode]?.pins += 1
    }

    @discardableResult
    mutating func unpin(_ inode: UInt64) -> Bool {
        guard records[inode] != nil else { return false }
        records[inode]!.pins = max(0, records[inode]!.pins - 1)
        return dropIfUnused(inode)
    }

    /// `path` no longer names its inode (unlink, rmdir): the record lives
    /// on, unbound, until the kernel forgets it.
    mutating func unbind(_ path: String) {
        guard let inode = byPath[path], inode != Self.root else { return }
        records[inode]?.bound = false
        byPath[path] = nil
        dropIfUnused(inode)
    }

    /// A rename: `from` and every path below it (`from/...`) move to `to`,
    /// keeping their inode numbers (open files follow their name). Whatever
    /// `to` and the paths below it named before is unbound.
    mutating func rename(from: String, to: String) {
        guard from != to else { return }
        let below = from + "/"
        let moving = byPath.filter { $0.key == from || $0.key.hasPrefix(below) }
        let targetBelow = to + "/"
        for (path, _) in byPath where path == to || path.hasPrefix(targetBelow) {
            if moving[path] == nil { unbind(path) }
        }
        for (path, _) in moving { byPath[path] = nil }
        for (path, inode) in moving {
            let renamed = to + path.dropFirst(from.count)
            records[inode]?.path = renamed
            if let displaced = byPath[renamed], displaced != inode {
                records[displaced]?.bound = false
                dropIfUnused(displaced)
            }
            byPath[renamed] = inode
        }
    }

    /// Records which listing an opendir used; returns whether it is the
    /// one the previous opendir used.
    mutating func noteListing(_ inode: UInt64, readAt: Duration) -> Bool {
        let previous = records[inode]?.lastListing
        records[inode]?.lastListing = readAt
        return previous == readAt
    }

    /// An entry of directory `inode` was added, removed or renamed at `now`.
    mutating func noteEntriesChanged(_ inode: UInt64, at now: Timestamp) {
        records[inode]?.entriesChanged = now
    }

    /// Records the generation of an open; returns whether it equals the
    /// generation of the previous open (the kernel may keep its pages).
    mutating func noteOpen(_ inode: UInt64, generation: Int64) -> Bool {
        let previous = records[inode]?.lastOpenedGeneration
        records[inode]?.lastOpenedGeneration = generation
        return previous == generation
    }

    @discardableResult
    private mutating func dropIfUnused(_ inode: UInt64) -> Bool {
        guard inode != Self.root, let record = records[inode], record.lookups == 0, record.pins == 0 else { return false }
        records[inode] = nil
        if record.bound, byPath[record.path] == inode { byPath[record.path] = nil }
        return true
    }

    func checkInvariants() {
        #if DEBUG
        precondition(records[Self.root]?.path == "" && records[Self.root]?.kind == .directory, "root record damaged")
        for (path, inode) in byPath {
            precondition(records[inode]?.path == path && records[inode]?.bound == true, "byPath[\(path)] dangling")
        }
        for (inode, record) in records where inode != Self.root {
            precondition(record.lookups > 0 || record.pins > 0, "inode \(inode) kept with no holder")
            precondition(inode < nextInode, "inode \(inode) above the counter")
        }
        #endif
    }
}
