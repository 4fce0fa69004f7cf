/// A whole subtree listed in one flat, paged listing (no delimiter), cut
/// into the listing of every directory in it.
///
/// Why: `find`, `du`, `ls -R` and `rsync` open every directory of a tree,
/// and a listing per directory costs a round trip per directory (110 of
/// them for a tree of 1,000 files in 110 directories: 2.2 s at 20 ms). One
/// listing without delimiter returns the same objects 1,000 a page, so the
/// whole tree costs a round trip per 1,000 objects instead.
///
/// How: the store returns names in byte order, so the names below any
/// prefix come one after another. The walk keeps the chain of directories
/// the last name lies in (`open`); a name outside one of them means that
/// directory (and everything below it) has been seen whole, and its
/// listing is complete. `consume` returns those listings; they are exactly
/// what a delimited listing of each directory would have said: direct
/// objects as items, direct subdirectories (with or without a `dir/`
/// placeholder) as prefixes, and each placeholder (which holds its
/// directory's mode and owner) with its prefix. A name with an empty or `.`/`..` segment ends
/// the chain there, as the delimited listings skip what is below those.
///
/// A walk may cover only the names in [start, end) below the root (one
/// key range of a walk split by `WalkSchedule`, the range starting and
/// ending at subdirectories of the root): names outside are skipped, a
/// name at or past `end` finishes it, and it never returns the root's own
/// listing (it sees only part of the root). Names at or before the last
/// one consumed are skipped too, so a listing started again from the last
/// name (after `narrow`) or one repeated by the server costs nothing.
///
/// A pure value, driven by `Listings` (whose `ListingReader` fetches the
/// pages, and which keeps the listings in its `ListingCache`), so tests
/// feed it pages directly.
struct TreeWalk: Sendable {
    /// The listed prefix of the walk's root directory ("" or ends in "/").
    let root: String
    /// The first name of the walk's range (nil: the root's first).
    let start: String?
    /// The name after the walk's range (nil: past the root's last).
    private(set) var end: String?
    /// The token of the next page; nil before the first page and at the end.
    private(set) var nextPageToken: String?
    private(set) var pagesRead = 0
    private(set) var finished = false
    /// The last object name consumed.
    private(set) var lastName: String?
    /// The directories the last name lies in, outermost (the root) first,
    /// with what has been listed in each so far.
    private var open: [(prefix: String, listing: ListingCache.Listing)] = []

    init(root: String, from start: String? = nil, to end: String? = nil) {
        self.root = root
        self.start = start
        self.end = end
    }

    /// Whether the walk covers the whole root (and so returns its listing).
    var isWhole: Bool { start == nil && end == nil }

    /// Ends the walk's range at `end` (past the last name consumed): the
    /// names from there on are another walk's.
    mutating func narrow(to end: String) {
        precondition(lastName.map { $0.utf8.lexicographicallyPrecedes(end.utf8) } ?? true, "narrowed before the last name")
        if let old = self.end, !end.utf8.lexicographicallyPrecedes(old.utf8) { return }
        self.end = end
    }

    /// Whether `listed` (a listed prefix) is the root or below it.
    func contains(_ listed: String) -> Bool {
        listed.utf8.starts(with: root.utf8)
    }

    /// Whether every name below `listed` has been consumed (the walk is
    /// past it in name order, or finished). False for a directory whose
    /// names are still arriving.
    func hasPassed(_ listed: String) -> Bool {
        guard contains(listed) else { return false }
        if finished { return true }
        guard let lastName else { return false }
        return !lastName.utf8.starts(with: listed.utf8) && listed.utf8.lexicographicallyPrecedes(lastName.utf8)
    }

    /// Consumes one page (read at `readAt`); returns the listings that it
    /// completed, by listed prefix. The last page completes everything.
    mutating func consume(_ page: ObjectPage, readAt: Duration) -> [(String, ListingCache.Listing)] {
        precondition(!finished, "a finished walk consumed another page")
        pagesRead += 1
        if open.isEmpty { open = [(root, ListingCache.Listing(readAt: readAt))] }
        var completed: [(String, ListingCache.Listing)] = []
        var pastEnd = false
        for object in page.objects where object.name.utf8.starts(with: root.utf8) {
            let name = object.name.utf8
            if let lastName, !lastName.utf8.lexicographicallyPrecedes(name) { continue }
            if let start, name.lexicographicallyPrecedes(start.utf8) { continue }
            if let end, !name.lexicographicallyPrecedes(end.utf8) {
                pastEnd = true
                break
            }
            add(object, readAt: readAt, completed: &completed)
            lastName = object.name
        }
        nextPageToken = pastEnd ? nil : page.nextPageToken
        if nextPageToken == nil {
            finished = true
            // The root's listing is whole only if the walk is.
            while let last = open.popLast() {
                if isWhole || !open.isEmpty { completed.append((last.prefix, last.listing)) }
            }
        }
        return completed
    }

    /// Puts `object` into the listings of its directories, closing the open
    /// directories it does not lie in.
    private mutating func add(_ object: ObjectInfo, readAt: Duration, completed: inout [(String, ListingCache.Listing)]) {
        let name = object.name
        // The directories the name lies in, below the root: each segment
        // followed by a "/" (a placeholder `a/b/` lies in `a/b/` itself).
        var chain: [String] = []
        var broken = false
        var segmentStart = name.utf8.index(name.utf8.startIndex, offsetBy: root.utf8.count)
        var index = segmentStart
        while index < name.utf8.endIndex {
            if name.utf8[index] == UInt8(ascii: "/") {
                let segment = Substring(name.utf8[segmentStart..<index])
                // An empty segment (`a//b`) is no prefix at all in a
                // delimited listing (StorageKit drops it); `.` and `..` are
                // prefixes the file system skips as entries. Either way,
                // nothing below is listed.
                if segment.isEmpty {
                    broken = true
                    break
                }
                chain.append(String(Substring(name.utf8[..<name.utf8.index(after: index)])))
                if !PathRules.isValidEntryName(segment) {
                    broken = true
                    break
                }
                segmentStart = name.utf8.index(after: index)
            }
            index = name.utf8.index(after: index)
        }
        // Close the open directories this name is not in.
        var keep = 1  // the root is open until the end
        while keep < open.count, keep - 1 < chain.count, open[keep].prefix == chain[keep - 1] { keep += 1 }
        while open.count > keep {
            let closed = open.removeLast()
            completed.append((closed.prefix, closed.listing))
        }
        // Open the new ones, each a prefix of its parent's listing.
        for directory in chain.dropFirst(open.count - 1) {
            open[open.count - 1].listing.prefixes.insert(directory)
            open.append((directory, ListingCache.Listing(readAt: readAt)))
        }
        // A placeholder is its directory, kept with its prefix in its
        // parent's listing (the root's own belongs to a listing outside
        // the walk); anything else is an item of the innermost directory
        // (unless the chain stopped at a bad segment).
        if name.hasSuffix("/") {
            if open.count >= 2, open[open.count - 1].prefix == name {
                open[open.count - 2].listing.placeholders[name] = object
            }
        } else if !broken && name.utf8.count > root.utf8.count {
            open[open.count - 1].listing.items[name] = object
        }
    }
}
