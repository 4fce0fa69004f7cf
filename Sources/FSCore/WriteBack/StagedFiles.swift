/// The staged-file registry: every staged file with its write-back state,
/// in one dictionary by the file's id, each entry saying which inode it is
/// the staged file of (nil: made for an open or a create and not attached
/// yet, a temporary copy for a truncate by path, or retired).
///
/// It lives in `FileSystem.State`, under the file system's one lock, so an
/// unlink or rename changes the inode table and the write-back state in one
/// critical section; only `WriteBackStore` and `StagedFile` change it, the
/// rest of the file system reads which file an inode has (`self[inode]`)
/// and its state (`StagedFile.state(in:)`).
struct StagedFiles: Sendable, Sequence {
    struct Entry: Sendable {
        let file: StagedFile
        var state: StagedFile.State
        var inode: UInt64?
    }

    private var entries: [UInt64: Entry] = [:]
    private var lastID: UInt64 = 0

    /// An id for a new staged file (also its local file's name).
    mutating func newID() -> UInt64 {
        lastID += 1
        return lastID
    }

    /// A new file, attached to no inode yet.
    mutating func register(_ file: StagedFile, _ state: StagedFile.State) {
        entries[file.id] = Entry(file: file, state: state, inode: nil)
    }

    /// The staged file of `inode` (one at most); setting attaches a
    /// registered file to it, nil detaches the one it has. A scan: there
    /// are as many entries as files open for writing or uploading.
    subscript(inode: UInt64) -> StagedFile? {
        get { entries.values.first { $0.inode == inode }?.file }
        set {
            for (id, entry) in entries where entry.inode == inode { entries[id]?.inode = nil }
            guard let file = newValue else { return }
            precondition(entries[file.id] != nil, "staged file \(file.id) attached before it is registered")
            entries[file.id]?.inode = inode
        }
    }

    /// The inode file `id` is the staged file of (nil: none).
    func inode(of id: UInt64) -> UInt64? { entries[id]?.inode }

    /// The inodes that have a staged file.
    var keys: [UInt64] { entries.values.compactMap(\.inode) }

    /// Runs `body` on the state of file `id`; nil if it was removed.
    mutating func withState<R>(_ id: UInt64, _ body: (inout StagedFile.State) -> R) -> R? {
        guard entries[id] != nil else { return nil }
        return body(&entries[id]!.state)
    }

    func state(_ id: UInt64) -> StagedFile.State? { entries[id]?.state }

    /// Takes file `id` out (it is discarded): its state is the caller's.
    mutating func remove(_ id: UInt64) -> StagedFile.State? {
        entries.removeValue(forKey: id)?.state
    }

    /// Every attached file with its inode.
    func makeIterator() -> some IteratorProtocol<(inode: UInt64, file: StagedFile)> {
        entries.values.lazy.compactMap { entry in entry.inode.map { (inode: $0, file: entry.file) } }.makeIterator()
    }
}
