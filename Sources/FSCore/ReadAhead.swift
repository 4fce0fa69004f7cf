/// Read-ahead for one open file, as a value-type state machine: the owner
/// (`FileReader`) feeds it each read and performs the actions it returns.
/// No I/O here, so tests drive it directly.
///
/// Design, after mountpoint-s3's prefetcher:
/// - Phases: `starting` (no read yet), `streaming`, `random`. A reader that
///   starts at 0, or continues where its previous read ended, is
///   streaming; any other read makes it random.
/// - While streaming, the machine keeps a `frontier` (the end of what it
///   has asked the owner to fetch) at least `window / 2` ahead of the
///   reader; each refill reaches `window` past the reader, then doubles the
///   window (`initialWindow` … `maxWindow`; once a request shows the link
///   fast, four round trips' worth of it, at least `fastLinkWindow`). A
///   refill is one request (or
///   parts, below): the
///   stream is a chain of growing GETs (1, 2, 4, … MiB), each issued while
///   the previous one still has half a window to deliver, whose bodies the
///   owner hands to the reader block by block as they arrive. With the
///   defaults, 64 MiB read in order cost 7 requests, 256 MiB about a dozen.
/// - The kernel sends its own read-ahead requests concurrently (up to its
///   read-ahead window, 16 MiB on our mounts, in 1 MiB requests), and the
///   FUSE threads hand them over in any order, so reads of one stream
///   arrive out of order by up to that window (two, when the kernel issues
///   the next window while the current one is pending), behind the
///   furthest read as well as past the frontier. A read within
///   `seekTolerance` (the mount passes two kernel windows) of the furthest
///   read, or inside the prefetched
///   range, still counts as streaming; a read past the frontier extends
///   the stream from the frontier, so it never leaves a gap for direct
///   reads. (With a 2 MiB tolerance a loaded machine once saw a late read
///   end the stream and 20 GETs instead of 7.)
/// - One connection to a cloud store carries tens of MiB/s, so a refill
///   from a slow link is cut into *parts*, ranged GETs side by side on
///   their own connections (after mountpoint-s3's and gcsfuse's parallel
///   downloads). The owner reports how fast each request's first block
///   came (`linkMeasured`): a link whose one connection brings at least
///   `singleStreamRate` (in any request of the file: a slower block later
///   may be the host's load, not the link) keeps the single growing
///   stream, which costs the
///   fewest requests (loopback, a fast network); a slower one goes
///   `parallel`, in parts of `minPartSize` … `maxPartSize` (four round
///   trips' worth of bytes, so a part's own round trip costs little). On
///   a store whose round trip (measured by the requests before the file's)
///   is at least `farRoundTrip`, a stream that reads past its first block
///   goes parallel at once, in parts of `minPartSize`, without waiting a
///   round trip for its first request to show the link; so does one
///   that starts after a direct read showed the link slow. The
///   window opens at once to `partsAtOnce` parts, and then grows four
///   times per refill instead of twice, up to
///   `maxParallelWindow` (as large as the default
///   read-ahead budget: the budget, shared by every open file, is the
///   bound on memory), so that many parts are in flight. At 50 ms and
///   64 MiB/s per connection a 128 MiB window read at 223 MiB/s, a
///   256 MiB one at 320 (curl's 8 ranged GETs: 394). Parts are
///   block-aligned and delivered to the reader in order: a read waits
///   for its own blocks only.
/// - Buffers are dropped once every read before them has come
///   (`ReadCoverage`: the kernel's reads arrive out of order, so the
///   furthest read does not say which were served), plus `keepBehind`
///   bytes for a reader that looks back; a read further than
///   `seekTolerance` behind the furthest is not waited for.
/// - A random read drops the stream (buffers and the request in flight);
///   nothing is prefetched, and the owner fetches just the blocks the read
///   touches (ranged requests, several readers' in parallel).
/// - Everything is aligned to `blockSize`, the block cache's unit, so each
///   downloaded block can be written to the cache as it completes.
/// - The owner may refuse a prefetch (the global budget is spent) or see
///   it fail; `prefetchAbandoned(from:)` pulls the frontier back, so later
///   reads are served directly and prefetch resumes when budget returns.
struct ReadAhead: Sendable, Equatable {
    struct Configuration: Sendable, Equatable {
        var initialWindow: Int64
        var maxWindow: Int64
        var blockSize: Int64
        var seekTolerance: Int64
        var keepBehind: Int64
        /// Bytes per second one connection must bring for the stream to
        /// stay one request per refill.
        var singleStreamRate: Double
        var minPartSize: Int64
        var maxPartSize: Int64
        var maxParallelWindow: Int64
        /// The smallest the window of a link shown fast is capped at: two
        /// of the kernel's read-ahead windows, as far as its requests run
        /// ahead of the reader (see `seekTolerance`).
        var fastLinkWindow: Int64
        /// How many parts the window holds from the moment a request shows
        /// the link slow (curl's 8 ranges, gcsfuse's workers): growing
        /// from the window of the stream so far would cost one round trip
        /// and more per refill before as many parts were in flight.
        var partsAtOnce: Int64
        /// Seconds: a store whose round trip is at least this is presumed
        /// a slow link before a request of the file shows it (as far as
        /// `parallel-upload-min-rtt`'s default: beyond this host and its
        /// LAN).
        var farRoundTrip: Double

        init(
            initialWindow: Int64 = 1 << 20, maxWindow: Int64 = 64 << 20, blockSize: Int64 = 1 << 20,
            seekTolerance: Int64 = 16 << 20, keepBehind: Int64 = 2 << 20,
            singleStreamRate: Double = 256 * 1_048_576, minPartSize: Int64 = 8 << 20, maxPartSize: Int64 = 16 << 20,
            maxParallelWindow: Int64 = 256 << 20, partsAtOnce: Int64 = 8, farRoundTrip: Double = 0.010,
            fastLinkWindow: Int64 = 32 << 20
        ) {
            self.blockSize = max(1, blockSize)
            self.keepBehind = keepBehind
            // Windows and parts in whole blocks.
            self.initialWindow = Self.roundUp(max(initialWindow, 1), to: self.blockSize)
            self.maxWindow = max(self.initialWindow, Self.roundUp(maxWindow, to: self.blockSize))
            self.seekTolerance = seekTolerance
            self.singleStreamRate = singleStreamRate
            self.minPartSize = Self.roundUp(max(minPartSize, 1), to: self.blockSize)
            self.maxPartSize = max(self.minPartSize, Self.roundUp(maxPartSize, to: self.blockSize))
            self.maxParallelWindow = max(self.maxWindow, Self.roundUp(maxParallelWindow, to: self.blockSize))
            self.fastLinkWindow = min(self.maxWindow, Self.roundUp(max(fastLinkWindow, 1), to: self.blockSize))
            self.partsAtOnce = max(1, partsAtOnce)
            self.farRoundTrip = farRoundTrip
        }

        static func roundUp(_ value: Int64, to block: Int64) -> Int64 {
            (value + block - 1) / block * block
        }
    }

    enum Phase: Sendable, Equatable {
        /// No read yet.
        case starting
        /// Reading in order: the stream's requests run ahead of the reader.
        case streaming
        /// Jumping about: no read-ahead.
        case random
    }

    /// How a refill goes out.
    enum Transfer: Sendable, Equatable {
        /// One request per refill (no request has finished yet, or one
        /// connection is fast enough).
        case single
        /// Requests of at most this many bytes, side by side.
        case parallel(partSize: Int64)
    }

    enum Action: Sendable, Equatable {
        /// Fetch this block-aligned range with one request, ahead of the
        /// reader (the stream's next GET, or one part of it).
        case prefetch(Range<Int64>)
        /// Drop buffers that end at or before this offset (already read).
        case discard(below: Int64)
        /// Drop every buffer and cancel every request in flight (the reader
        /// jumped: the stream ends).
        case discardAll
    }

    let configuration: Configuration
    let objectSize: Int64
    private(set) var phase: Phase = .starting
    /// Bytes to keep ahead of the reader; 0 while not streaming.
    private(set) var window: Int64 = 0
    /// End of the furthest read of the current stream (or of the last read).
    private(set) var expectedOffset: Int64?
    /// End of the range handed out for prefetching.
    private(set) var frontier: Int64 = 0
    /// A prefetch was abandoned since the last refill.
    private var resumingAfterAbandon = false
    /// How far this stream's reads reach without a gap: buffers are
    /// dropped `keepBehind` below it, never below a read still on its way.
    private var coverage = ReadCoverage(from: 0)
    /// Where the current stream began (block-aligned).
    private var streamStart: Int64 = 0
    /// The current stream has read past its first block, and its window
    /// opened to parts side by side if the link is (presumed) slow.
    private var openedWide = false
    /// What the finished requests showed of the link.
    private(set) var transfer: Transfer = .single
    /// The fastest a request of this file has brought its first block
    /// (bytes per second; 0 until one has), and the soonest its first byte
    /// came (seconds): the link's own rate and round trip, where a slower
    /// one may be the host's load.
    private var fastestRate: Double = 0
    private var soonestFirstByte: Double = .infinity
    /// Whether a request of this file has shown the link (`linkMeasured`).
    private var linkShown: Bool { fastestRate > 0 }
    /// The store is far (its round trip at least `farRoundTrip`): a stream
    /// goes parallel from its second block on, before its first request
    /// shows the link, which would cost a round trip and more.
    private let presumedSlow: Bool

    /// `storeRoundTrip`: the store's round trip as the requests before this
    /// file's measured it (seconds; nil: not known yet).
    init(configuration: Configuration, objectSize: Int64, storeRoundTrip: Double? = nil) {
        self.configuration = configuration
        self.objectSize = objectSize
        self.presumedSlow = (storeRoundTrip ?? 0) >= configuration.farRoundTrip
    }

    var isStreaming: Bool { phase == .streaming }

    /// A read of `size` bytes at `offset` arrived.
    mutating func read(offset: Int64, size: Int) -> [Action] {
        guard offset >= 0, offset < objectSize, size > 0 else { return [] }
        let end = offset + min(Int64(size), objectSize - offset)
        guard isSequential(offset) else {
            let wasStreaming = isStreaming
            phase = .random
            window = 0
            frontier = 0
            expectedOffset = end
            return wasStreaming ? [.discardAll] : []
        }
        var actions: [Action] = []
        let wasStreaming = isStreaming
        if !wasStreaming {
            phase = .streaming
            window = configuration.initialWindow
            frontier = alignDown(offset)
            streamStart = frontier
            openedWide = false
            coverage = ReadCoverage(from: offset)
        }
        let readerEnd = max(expectedOffset ?? 0, end)
        expectedOffset = readerEnd
        coverage.read(offset..<end, furthest: readerEnd, tolerance: configuration.seekTolerance)
        if wasStreaming {
            // Not past this read: its own arrival may close a gap far
            // behind the furthest read, and it is served from the buffers
            // after this.
            let keepFrom = alignDown(max(0, min(coverage.through, offset) - configuration.keepBehind))
            if keepFrom > 0 { actions.append(.discard(below: keepFrom)) }
        }
        if !openedWide, readerEnd - streamStart > configuration.blockSize {
            // Past the stream's first block: a reader that goes on, not one
            // that reads a file's header (`file`, `head`), which a window
            // of parts would cost tens of MiB of transfer.
            if presumedSlow, !linkShown, transfer == .single {
                goParallel(partSize: configuration.minPartSize)
            } else if case .parallel(let partSize) = transfer {
                // The link showed itself slow before this stream began (a
                // direct read's fetch: the kernel's first reads of a file
                // often arrive out of order): without this the stream
                // would grow from its first small window, a round trip
                // per refill (at 50 ms and 64 MiB/s, ~0.1 s of a 0.7 s
                // read went by before as many parts were in flight).
                goParallel(partSize: partSize)
            }
            openedWide = true
        }
        if frontier < objectSize, frontier - readerEnd < window / 2 {
            // From the frontier even when the read lies past it: the
            // kernel's requests for the bytes between are on their way.
            // Not after an abandoned prefetch: those bytes were read
            // directly meanwhile.
            let from = resumingAfterAbandon ? max(frontier, alignDown(offset)) : frontier
            resumingAfterAbandon = false
            let to = min(objectSize, Configuration.roundUp(readerEnd + window, to: requestUnit))
            actions += requests(for: from..<to)
            frontier = to
            window = min(window * growth, maxWindow)
        }
        return actions
    }

    /// The first `bytes` of a request's body came in: the first byte
    /// `firstByte` seconds after it was sent, the last `total` seconds
    /// after. Less than a block, or a body that took no measurable time,
    /// says nothing of the link.
    mutating func linkMeasured(bytes: Int64, firstByte: Double, total: Double) {
        let body = total - firstByte
        guard bytes >= configuration.blockSize, body > 0, firstByte >= 0 else { return }
        let rate = Double(bytes) / body
        let firstShown = !linkShown
        fastestRate = max(fastestRate, rate)
        soonestFirstByte = min(soonestFirstByte, firstByte)
        // The link is as fast as the fastest block it has brought: a
        // slower one may be this host's load, the reader's pace or the
        // stream's own overlapping requests, not the link (on loopback
        // with both cores busy, a later request's block came below the
        // rate in two of six cold reads of 256 MiB, and the rest of each
        // went out as two dozen 8 MiB parts side by side, more memory and
        // CPU for no speed).
        guard !linkShownFast else {
            transfer = .single
            window = min(window, maxWindow)
            return
        }
        // Four round trips' worth: a part's own round trip then costs
        // at most a fifth of its time.
        let wanted = Int64(rate * firstByte * 4)
        let size = min(configuration.maxPartSize, max(configuration.minPartSize, alignUp(wanted)))
        if transfer == .single || firstShown {
            goParallel(partSize: size)
        }
        transfer = .parallel(partSize: size)
    }

    /// The link is (or is presumed) slow: the next refill sends
    /// `partsAtOnce` parts side by side (a stream's later refills grow
    /// from there).
    private mutating func goParallel(partSize: Int64) {
        transfer = .parallel(partSize: partSize)
        if isStreaming {
            window = max(window, min(configuration.maxParallelWindow, partSize * configuration.partsAtOnce))
        }
    }

    /// Refills end on a multiple of this: a block, or a whole part, so
    /// that every part but the file's last is full-sized.
    private var requestUnit: Int64 {
        if case .parallel(let partSize) = transfer { return partSize }
        return configuration.blockSize
    }

    /// How much the window grows at each refill: twice for one stream;
    /// four times on a slow link, whose every refill waits a round trip
    /// and more before its bytes come, so that the window reaches the
    /// width that keeps many parts in flight in half as many refills (at
    /// 50 ms and 64 MiB/s per connection, a cold 256 MiB read went out in
    /// 7 waves of requests, each a round trip, when the window doubled).
    private var growth: Int64 { transfer == .single ? 2 : 4 }

    private var linkShownFast: Bool { fastestRate >= configuration.singleStreamRate }

    private var maxWindow: Int64 {
        guard transfer == .single else { return configuration.maxParallelWindow }
        guard linkShownFast else { return configuration.maxWindow }
        // Four round trips' worth of the link, from `fastLinkWindow` up to
        // `maxWindow`: more than that only holds buffers ahead of the
        // reader. On loopback a 64 MiB window kept the mount's peak at
        // 188-292 MiB over a cold 1 GiB cp against 113-169 with 32 MiB
        // (each of those bytes memory the kernel clears at first touch),
        // and the cp took longer (medians 1.24 and 1.04 s); with 16 MiB,
        // below the kernel's two windows, 1.09 s and half again as many
        // GETs. (`fastLinkWindow` is at most `maxWindow`, block-aligned.)
        let wanted = alignUp(Int64(min(fastestRate * soonestFirstByte * 4, Double(configuration.maxWindow))))
        return max(configuration.fastLinkWindow, wanted)
    }

    /// One request for `range`, or its parts: cut at multiples of the part
    /// size, so parts of later refills line up with these.
    private func requests(for range: Range<Int64>) -> [Action] {
        guard case .parallel(let partSize) = transfer else { return [.prefetch(range)] }
        var actions: [Action] = []
        var start = range.lowerBound
        while start < range.upperBound {
            let stop = min(range.upperBound, (start / partSize + 1) * partSize)
            actions.append(.prefetch(start..<stop))
            start = stop
        }
        return actions
    }

    /// The prefetch starting at `offset` (and everything after it) will
    /// not arrive: budget refused, or the download failed.
    mutating func prefetchAbandoned(from offset: Int64) {
        frontier = min(frontier, max(0, offset))
        resumingAfterAbandon = true
    }

    private func isStreaming(near offset: Int64) -> Bool {
        guard let expected = expectedOffset else { return false }
        if abs(offset - expected) <= configuration.seekTolerance { return true }
        return offset >= expected && offset < frontier
    }

    private func isSequential(_ offset: Int64) -> Bool {
        if isStreaming { return isStreaming(near: offset) }
        guard let expected = expectedOffset else { return offset == 0 }
        return offset == expected
    }

    private func alignDown(_ value: Int64) -> Int64 {
        value / configuration.blockSize * configuration.blockSize
    }

    private func alignUp(_ value: Int64) -> Int64 {
        Configuration.roundUp(value, to: configuration.blockSize)
    }
}
