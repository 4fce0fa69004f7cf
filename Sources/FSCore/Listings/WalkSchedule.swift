/// Which pages of a tree walk to request, and when: one walk of a directory
/// listed as key ranges side by side.
///
/// Why: one flat listing of a large subtree is one page after another, so
/// the walk waits a round trip and the server's time per page for each
/// 1,000 objects (a million objects: 1,000 waits in a row). The listing of
/// the walk's root is cached when the walk starts (that is what starts
/// one), so its subdirectories are known; the names below each come one
/// after another, so each run of subdirectories is a key range that can be
/// listed on its own (`startOffset`/`endOffset`), and several at once.
///
/// How: the walk starts as one range, from the subdirectory whose opendir
/// started it to the end (the ones before were listed already). After the
/// first page of a range, the subdirectories that page passed whole say
/// how many one page holds (at least one); if the range goes on past the
/// subdirectory of its last name, it is cut there (and listed on from that
/// name up to the cut, a fresh listing), and the rest is split into ranges
/// of that many subdirectories, each split again after its own first page
/// when it proves larger. A tree that fits one page costs one request, as
/// before; a million objects in 1,000 directories become 1,000 ranges.
///
/// Ranges are requested in name order, from the one holding the furthest
/// directory opened (`opened`): at most `maxInFlight` requests at once,
/// and none for a range more than `lookahead` ranges ahead, so the walk
/// reads at most that far beyond the program walking it and its completed
/// listings (kept in the listing cache, whose entry budget bounds them)
/// are not evicted before they are read. Beyond its first page, a range
/// is read like a walk of old: a page when an opendir waits for it
/// (`demand`), and the one after it meanwhile; a demanded page does not
/// wait for a free slot.
///
/// A server that ignores the offsets returns names before a range's start:
/// `pageRead` says so, the walk goes on as one range over the whole root
/// (what the server listed), and the owner walks without ranges from then
/// on (as before ranges).
///
/// A pure value: its events return the requests to make, which the owner
/// (`Listings`, whose `ListingReader` reads the pages outside the lock)
/// makes and feeds back as `pageRead`.
struct WalkSchedule: Sendable {
    /// A page to request: of range `range`, names in [startOffset,
    /// endOffset) below the root, after `pageToken`.
    struct Request: Sendable, Equatable {
        let range: Int
        let startOffset: String?
        let endOffset: String?
        let pageToken: String?
    }

    /// What a page read brought.
    struct PageOutcome: Sendable {
        /// Listings completed, by listed prefix.
        var listings: [(String, ListingCache.Listing)] = []
        var requests: [Request] = []
        /// The server returned names outside the range it was asked for.
        var offsetsIgnored = false
        /// The walk cannot go on (offsets ignored after a split): the
        /// owner drops it.
        var ended = false
    }

    /// One key range: the subdirectories children[first..<end] (and the
    /// root's objects among them, which the root's own listing has).
    private struct Range: Sendable {
        let id: Int
        var walk: TreeWalk
        let first: Int
        var end: Int
        /// The offsets of the listing its pages continue.
        var startOffset: String?
        var endOffset: String?
        /// Narrowed since its last page: the next request starts a fresh
        /// listing from the last name instead of following the token.
        var restart = false
        var fetching = false
        /// Pages it may have read by now.
        var wanted = 0
    }

    /// The walk's root ("" or ends in "/").
    let root: String
    /// The root's subdirectories (listed prefixes), in name (UTF-8 byte) order.
    let children: [String]
    /// Whether requests carry offsets (false: one range, the whole root).
    private(set) var splits: Bool
    let maxInFlight: Int
    let lookahead: Int
    private let childIndex: [String: Int]
    /// Contiguous, in order of `first`.
    private var ranges: [Range]
    private var nextID = 1
    /// The range holding the furthest directory opened (an index in `ranges`).
    private var cursor = 0
    private(set) var inFlight = 0
    private(set) var requestsMade = 0

    /// A walk of `root`, whose subdirectories are `children` (any order),
    /// started by the opendir of `opened` (one of them, or below one).
    init(root: String, children: some Sequence<String>, opened: String, splits: Bool, maxInFlight: Int = 3, lookahead: Int = 6) {
        self.root = root
        self.children = children.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        self.splits = splits
        self.maxInFlight = max(1, maxInFlight)
        self.lookahead = max(0, lookahead)
        var index: [String: Int] = [:]
        index.reserveCapacity(self.children.count)
        for (i, child) in self.children.enumerated() { index[child] = i }
        childIndex = index
        if splits, let k = Self.child(of: opened, root: root).flatMap({ index[$0] }) {
            let start = self.children[k]
            ranges = [Range(id: 0, walk: TreeWalk(root: root, from: start), first: k, end: self.children.count, startOffset: start)]
        } else {
            ranges = [Range(id: 0, walk: TreeWalk(root: root), first: 0, end: self.children.count)]
        }
    }

    /// Whether every range has been read to its end.
    var finished: Bool { ranges.allSatisfy(\.walk.finished) }
    var rangeCount: Int { ranges.count }

    /// Whether `listed` is the root or below it.
    func contains(_ listed: String) -> Bool {
        listed.utf8.starts(with: root.utf8)
    }

    /// The subdirectory of `root` that `listed` lies in (or is).
    private static func child(of listed: String, root: String) -> String? {
        guard listed.utf8.starts(with: root.utf8) else { return nil }
        let rest = listed.utf8.dropFirst(root.utf8.count)
        guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        return String(Substring(listed.utf8[..<listed.utf8.index(after: slash)]))
    }

    /// The index in `ranges` of the range that lists `listed`.
    private func rangeIndex(of listed: String) -> Int? {
        guard splits else { return contains(listed) && listed != root ? 0 : nil }
        guard let child = Self.child(of: listed, root: root), let k = childIndex[child] else { return nil }
        // The last range whose first child is at or before k.
        var low = 0
        var high = ranges.count
        while low < high {
            let mid = (low + high) / 2
            if ranges[mid].first <= k { low = mid + 1 } else { high = mid }
        }
        guard low > 0, k < ranges[low - 1].end else { return nil }
        return low - 1
    }

    /// An opendir of `listed` (a directory below the root): the walk has
    /// got that far, and may read further ahead.
    mutating func opened(_ listed: String) -> [Request] {
        if let i = rangeIndex(of: listed), i > cursor { cursor = i }
        return refill()
    }

    /// What an opendir of `listed` should wait for.
    enum Demand: Sendable, Equatable {
        /// The page in flight of this range (a request may have just been
        /// made for it).
        case wait(range: Int)
        /// No range lists it, or its range has passed it (its listing was
        /// evicted): list it on its own.
        case notCovered
    }

    /// An opendir of `listed` whose listing is not cached: the page that
    /// will hold it, requested now (regardless of `maxInFlight`) unless in
    /// flight; the page after it is requested when it arrives.
    mutating func demand(_ listed: String) -> (Demand, [Request]) {
        guard let i = rangeIndex(of: listed), !ranges[i].walk.hasPassed(listed) else { return (.notCovered, []) }
        let id = ranges[i].id
        ranges[i].wanted = max(ranges[i].wanted, ranges[i].walk.pagesRead + 2)
        if ranges[i].fetching { return (.wait(range: id), []) }
        return (.wait(range: id), [request(i)])
    }

    /// The page of range `id` requested by `request` arrived.
    mutating func pageRead(_ id: Int, _ page: ObjectPage, readAt: Duration) -> PageOutcome {
        guard let i = ranges.firstIndex(where: { $0.id == id }) else { return PageOutcome() }
        precondition(ranges[i].fetching, "a page of range \(id) arrived that was not requested")
        ranges[i].fetching = false
        inFlight -= 1
        var outcome = PageOutcome()
        if splits, let start = ranges[i].startOffset,
            page.objects.contains(where: { $0.name.utf8.starts(with: root.utf8) && $0.name.utf8.lexicographicallyPrecedes(start.utf8) })
        {
            outcome.offsetsIgnored = true
            // The first request, without end or token: the server listed
            // the root from its first name, which is the first page of a
            // walk without ranges; go on as one.
            guard ranges.count == 1, ranges[i].walk.pagesRead == 0, ranges[i].endOffset == nil else {
                outcome.ended = true
                return outcome
            }
            splits = false
            ranges[i] = Range(id: ranges[i].id, walk: TreeWalk(root: root), first: 0, end: children.count, wanted: ranges[i].wanted)
        }
        outcome.listings = ranges[i].walk.consume(page, readAt: readAt)
        if splits && ranges[i].walk.pagesRead == 1 && !ranges[i].walk.finished { split(i) }
        outcome.requests = refill()
        return outcome
    }

    /// Cuts range `i` after the subdirectory of its last name and splits
    /// the rest into ranges as large as its first page showed one page is.
    private mutating func split(_ i: Int) {
        guard let last = ranges[i].walk.lastName else { return }
        // The last subdirectory at or before the last name (the one it is
        // in, or the one before a root object).
        var low = ranges[i].first
        var high = ranges[i].end
        while low < high {
            let mid = (low + high) / 2
            if children[mid].utf8.lexicographicallyPrecedes(last.utf8) || children[mid] == last { low = mid + 1 } else { high = mid }
        }
        let j = low - 1
        let oldEnd = ranges[i].end
        guard j >= ranges[i].first, j + 1 < oldEnd else { return }
        let perRange = max(1, j - ranges[i].first)
        ranges[i].end = j + 1
        ranges[i].walk.narrow(to: children[j + 1])
        ranges[i].restart = true
        // The rest of its last directory: the walk is in it (or next).
        ranges[i].wanted = max(ranges[i].wanted, ranges[i].walk.pagesRead + 1)
        var added: [Range] = []
        var first = j + 1
        while first < oldEnd {
            let end = min(oldEnd, first + perRange)
            let endOffset = end < children.count ? children[end] : nil
            added.append(Range(
                id: nextID, walk: TreeWalk(root: root, from: children[first], to: endOffset),
                first: first, end: end, startOffset: children[first], endOffset: endOffset))
            nextID += 1
            first = end
        }
        ranges.insert(contentsOf: added, at: i + 1)
    }

    /// The request for the next page of range `i` (marked in flight).
    private mutating func request(_ i: Int) -> Request {
        var token = ranges[i].walk.pagesRead == 0 ? nil : ranges[i].walk.nextPageToken
        if ranges[i].restart {
            // A fresh listing from the last name (skipped when it comes
            // again) up to the range's new end.
            ranges[i].restart = false
            ranges[i].startOffset = ranges[i].walk.lastName
            ranges[i].endOffset = ranges[i].walk.end
            token = nil
        }
        ranges[i].fetching = true
        inFlight += 1
        requestsMade += 1
        return Request(range: ranges[i].id, startOffset: ranges[i].startOffset, endOffset: ranges[i].endOffset, pageToken: token)
    }

    /// Requests for the ranges that may read now: those an opendir asked
    /// for, then each range's first page from the cursor on, in order,
    /// within `lookahead` and while fewer than `maxInFlight` are in flight.
    private mutating func refill() -> [Request] {
        var requests: [Request] = []
        let windowEnd = min(ranges.count, cursor + lookahead + 1)
        for i in cursor..<windowEnd where ranges[i].wanted < 1 { ranges[i].wanted = 1 }
        for i in ranges.indices where inFlight < maxInFlight {
            // From the cursor on first: the ranges behind it were read.
            let at = (cursor + i) % ranges.count
            let range = ranges[at]
            if !range.fetching && !range.walk.finished && range.walk.pagesRead < range.wanted {
                requests.append(request(at))
            }
        }
        return requests
    }
}
