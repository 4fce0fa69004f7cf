/// The lifecycle of a directory handle whose listing is still arriving.
///
/// Why: opendir of a directory of 100,000 objects used to read all 100
/// pages before the first readdir could answer, and only then did `ls -l`
/// start its own work (the kernel's 100,000 readdirplus entries, a stat of
/// each), one after the other. Now opendir answers after the first page,
/// and readdir hands out the entries of the pages read so far while the
/// later ones are still on their way; a readdir past them waits for the
/// next page.
///
/// What it decides: which names of a page become entries now, and which
/// readdir waits. The store lists in name order (UTF-8 bytes), a page a
/// contiguous range of names, and a directory (`x/`) hides an object of
/// the same name (`x`), as `ListingCache.Listing.children` decides for a
/// whole listing. The key `x/` sorts after `x`, so the directory may come
/// on a later page than the object: an object whose `x/` would sort after
/// its page's last name is held back until the next page (or the end)
/// settles it. A name already handed out is never handed out again (a
/// server that repeats or disorders names across pages). Files being
/// written in the directory (`StagedEntry`) are shown as their staged
/// state says, after the listing's names, and their listed namesakes are
/// skipped.
///
/// A value driven by the file system under its state lock: its events
/// return what the owner does outside the lock (the entries to make, the
/// waiters to resume). `Waiter` is a continuation there and a number in
/// the tests.
struct ListingArrival<Waiter: Sendable>: Sendable {
    enum Phase: Sendable, Equatable {
        case arriving
        case complete
        /// The listing failed after the entries made so far: readdir past
        /// them answers this error.
        case failed(FSError)
    }

    /// What readdir at an offset gets.
    enum Answer: Sendable, Equatable {
        /// The entries from there on (none: the end of the directory).
        case entries
        /// Nothing there yet: wait for the next page.
        case wait
        case fail(FSError)
    }

    /// What the owner does after a page or the end.
    struct Arrived {
        /// The names the page settled, as the store lists them (what a
        /// kept listing holds: `Listings.arrivedPage`).
        var listed: [(String, MetadataCache.Node)] = []
        /// New entries, in the order they are handed out.
        var children: [(String, MetadataCache.Node)] = []
        /// Waiters to resume (each looks again).
        var resume: [Waiter] = []
    }

    /// The listed prefix ("dir/"): names are what follows it.
    let listed: String
    private(set) var phase: Phase = .arriving
    /// Objects whose directory namesake may still come on a later page.
    private var held: [ObjectInfo] = []
    /// The greatest name the pages so far covered.
    private var lastName: String?
    /// Names handed out so far, in order; and as a set once a page came
    /// out of order (a name at or before an earlier page's last), from
    /// then on. A server that pages in order never needs the set.
    private var shownNames: [String] = []
    private var shown: Set<String>?
    /// The files being written in the directory when it was opened, by
    /// name: shown after the listing, as their staged state says (nil:
    /// unlinked, not shown).
    private let staged: [String: ObjectInfo?]
    private var waiting: [UInt64: Waiter] = [:]
    private var nextWaiter: UInt64 = 0

    init(listed: String, staged: [DirectoryHandle.StagedEntry]) {
        self.listed = listed
        self.staged = Dictionary(staged.map { ($0.name, $0.file) }, uniquingKeysWith: { _, later in later })
    }

    // MARK: - Events

    /// A page arrived (`page.nextPageToken` nil: the listing's last).
    mutating func pageArrived(_ page: ListPage) -> Arrived {
        guard phase == .arriving else { return Arrived() }
        let last = page.nextPageToken == nil
        var items = held + page.items
        held = []
        let (first, bound) = Self.range(of: page)
        if shown == nil, let first, let lastName, !lastName.utf8.lexicographicallyPrecedes(first.utf8) {
            shown = Set(shownNames)
        }
        if let bound, lastName.map({ $0.utf8.lexicographicallyPrecedes(bound.utf8) }) ?? true { lastName = bound }
        if !last, let bound {
            // `x` waits when `x/` would sort after everything this page
            // covered: a later page may still hold that directory.
            var settled: [ObjectInfo] = []
            settled.reserveCapacity(items.count)
            for item in items {
                if bound.utf8.lexicographicallyPrecedes((item.name + "/").utf8) { held.append(item) } else { settled.append(item) }
            }
            items = settled
        }
        var arrived = Arrived()
        arrived.listed = ListingCache.Listing.children(
            items: items, prefixes: Set(page.prefixes), placeholders: page.placeholders, under: listed, logger: nil, sorted: true)
        arrived.children.reserveCapacity(arrived.listed.count)
        for (name, node) in arrived.listed where staged.isEmpty || staged[name] == nil {
            if shown?.insert(name).inserted ?? true {
                arrived.children.append((name, node))
                shownNames.append(name)
            }
        }
        if last {
            for (name, file) in staged.sorted(by: { $0.key < $1.key }) {
                if let file { arrived.children.append((name, .file(file))) }
            }
            phase = .complete
            // No page comes after: nothing to check against any more.
            shownNames = []
            shown = nil
        }
        arrived.resume = takeWaiters()
        return arrived
    }

    /// The listing failed: readdir past the entries made gets `error`.
    mutating func failed(_ error: FSError) -> [Waiter] {
        guard phase == .arriving else { return [] }
        phase = .failed(error)
        return takeWaiters()
    }

    /// The handle was released: its waiters (if any) look again and find
    /// no handle.
    mutating func released() -> [Waiter] {
        takeWaiters()
    }

    // MARK: - readdir

    /// What readdir at `offset` gets when `available` entries are made.
    func answer(offset: Int64, available: Int) -> Answer {
        if offset < Int64(available) { return .entries }
        switch phase {
        case .arriving: return .wait
        case .complete: return .entries
        case .failed(let error): return .fail(error)
        }
    }

    /// A number for a readdir that is about to wait.
    mutating func newWaiter() -> UInt64 {
        nextWaiter += 1
        return nextWaiter
    }

    /// Registers waiter `id` unless readdir at `offset` need not wait any
    /// more (a page arrived since it looked): false, and the caller looks
    /// again at once.
    mutating func wait(_ id: UInt64, _ waiter: Waiter, offset: Int64, available: Int) -> Bool {
        guard answer(offset: offset, available: available) == .wait else { return false }
        waiting[id] = waiter
        return true
    }

    /// Takes waiter `id` back (its readdir was interrupted); nil when a
    /// page or the end took it first.
    mutating func stopWaiting(_ id: UInt64) -> Waiter? {
        waiting.removeValue(forKey: id)
    }

    var waiterCount: Int { waiting.count }

    private mutating func takeWaiters() -> [Waiter] {
        defer { waiting = [:] }
        return Array(waiting.values)
    }

    /// The least and the greatest name a page covers (items and
    /// prefixes), in the store's order.
    private static func range(of page: ListPage) -> (first: String?, last: String?) {
        var first: String?
        var last: String?
        for name in page.items.lazy.map(\.name) {
            if first.map({ name.utf8.lexicographicallyPrecedes($0.utf8) }) ?? true { first = name }
            if last.map({ $0.utf8.lexicographicallyPrecedes(name.utf8) }) ?? true { last = name }
        }
        for name in page.prefixes {
            if first.map({ name.utf8.lexicographicallyPrecedes($0.utf8) }) ?? true { first = name }
            if last.map({ $0.utf8.lexicographicallyPrecedes(name.utf8) }) ?? true { last = name }
        }
        return (first, last)
    }
}
