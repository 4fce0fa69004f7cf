import Foundation
import Logging
import StorageKit
import Transport
import Synchronization

/// Parallel composite uploads, as gcloud makes them
/// (https://cloud.google.com/storage/docs/parallel-composite-uploads): a
/// staged file of at least `MountOptions.parallelUploadThreshold` bytes
/// goes up as up to `parallelUploadParts` parts, 32 at a time, each a
/// temporary object under `PathRules.partsPrefix` at the bucket's root
/// sent with its CRC-32C, then `compose` (at most 32 sources a call, so
/// more parts are composed into intermediate objects first) makes the
/// object, and the temporary objects are deleted.
///
/// What a single upload promises holds: the final compose carries the
/// upload's precondition (checked once before the parts go up as well, as
/// a resumable session checks it when it starts), so a conflict is the
/// same 412 and the same ESTALE; the object carries the same properties
/// and metadata; nothing appears under the object's name unless all of it
/// is there. The composite's CRC-32C (it has no MD5) is checked against
/// the one combined from the parts' checksums. Temporary objects that
/// cannot be deleted are kept in `leftovers` (shown by `bucketfs status`)
/// and tried again before the next parallel upload.
///
/// Parts pay where one connection cannot fill the link: far from the
/// store, where each connection's rate is bounded by its round trip. There
/// a file written in order sends its parts while it is written
/// (`PartsStream`, `streamsParts`), so the close only adds the last part
/// and the compose; a file written otherwise goes up in parts at close. A
/// store measured nearer than `MountOptions.parallelUploadMinRoundTrip`
/// (`isNear`: this host, the LAN) gets a file of up to
/// `MountOptions.singleRequestMax` in one request: there one connection
/// is as fast as the machine, and parts and a compose only add requests
/// and a second read. A file written in order sends that request while it
/// is written (`streamStart`, `streamsOneRequest`: a body that follows the
/// file, `ObjectStore.startOneRequestStream`), so the close waits only for
/// its end; any other goes at close (`route`).
///
/// The mount turns it off by itself where it cannot work: a store without
/// compose (Firebase's v0 API), a bucket with a retention policy (its
/// temporary objects could not be deleted), which is asked once, at the
/// first upload that would use it, and credentials refused the temporary
/// objects (an IAM condition on the mounted prefix): then that upload, and
/// every later one, is a single upload.
final class ParallelUploads: Sendable {
    let store: any ObjectStore
    let threshold: Int64
    let maxParts: Int
    let minPartSize: Int64
    /// Round trips shorter than this mean a near store (`isNear`).
    let minRoundTrip: Duration
    /// A near store gets files up to this size in one request (`route`).
    let singleRequestMax: Int64
    let logger: Logger

    /// Sources one compose request takes at most (Cloud Storage's limit).
    static let composeLimit = 32

    /// Whether parallel uploads work in this bucket, as far as known.
    private enum Availability: Sendable {
        case unknown
        case available
        case retentionPolicy(seconds: Int64)
        case partsRefused
    }

    private struct State: Sendable {
        var availability = Availability.unknown
        /// Temporary objects whose delete failed.
        var leftovers: Set<String> = []
        /// The log said the store is near (once a mount).
        var toldNear = false
        /// One-request streams open (`reserveOneRequestStream`).
        var oneRequestStreams = 0
    }

    // Leaf lock; nothing is awaited while it is held.
    private let state = OrderedLock("parallel upload availability", State())

    init(store: any ObjectStore, options: MountOptions, logger: Logger) {
        self.store = store
        self.threshold = store.capabilities.compose ? options.parallelUploadThreshold : 0
        self.maxParts = options.parallelUploadParts
        self.minPartSize = options.parallelUploadMinPartSize
        self.minRoundTrip = .seconds(options.parallelUploadMinRoundTrip)
        self.singleRequestMax = options.singleRequestMax
        self.logger = logger
    }

    /// How a staged file that no stream carries goes up at close.
    enum Route: Sendable, Equatable {
        /// One request whatever the size (`ObjectStore.putInOneRequest`).
        case oneRequest
        /// Parts side by side, then a compose (`upload`).
        case parts
        /// The store's usual upload (`ObjectStore.put`: one request up to
        /// its multipart limit, a resumable session above).
        case usual
    }

    /// The route of a file of `size` bytes: near the store, up to
    /// `singleRequestMax`, one request (on this host or the LAN one
    /// connection is as fast as the machine, so parts and a compose only
    /// add requests and a second pass over the bytes, and a request cut
    /// short is sent again whole in less time than a far upload takes);
    /// else parts where `takes` says so, else the usual upload.
    func route(size: Int64) async -> Route {
        if size <= singleRequestMax, storeIsNear() { return .oneRequest }
        return await takes(size: size) ? .parts : .usual
    }

    /// Bytes a file written in order holds before its upload streams
    /// (`WriteBack.streamStart`): the chunk; near the store, where a file
    /// of up to `singleRequestMax` goes up in one request, that request
    /// starts at `oneRequestStreamStart` and follows the file as it is
    /// written (`streamsOneRequest`), or, with a store that cannot take a
    /// body of unknown length, nothing streams below `singleRequestMax`.
    func streamStart(chunk: Int64) -> Int64 {
        guard singleRequestMax > 0, Self.isNear(roundTrip: store.roundTrip, minRoundTrip: minRoundTrip) else { return chunk }
        guard store.capabilities.oneRequestStreams else { return max(chunk, singleRequestMax + 1) }
        return min(chunk, Self.oneRequestStreamStart)
    }

    /// Bytes a file written in order holds before a near store's one
    /// request starts while it is written: a smaller file is written in
    /// milliseconds, and goes up at close with its length known.
    static let oneRequestStreamStart: Int64 = 8 << 20
    /// Bytes between the sends of that request, which only let it read
    /// further: the request never idles long while bytes are on disk, and
    /// a writer of 1 MiB per 10 s (the request's wait for the file's next
    /// bytes, `OneRequestStream`) keeps it going.
    static let oneRequestStreamStep: Int64 = 1 << 20

    /// Whether a file written in order, `written` bytes long when its
    /// stream starts, streams as one request (`ObjectStore.startOneRequestStream`):
    /// the store is near and can, and the file is not past `singleRequestMax`.
    func streamsOneRequest(written: Int64) -> Bool {
        guard singleRequestMax > 0, written <= singleRequestMax, store.capabilities.oneRequestStreams else { return false }
        return Self.isNear(roundTrip: store.roundTrip, minRoundTrip: minRoundTrip)
    }

    /// One-request streams open at once, at most: each holds a connection
    /// for as long as its file is written, and the transport opens at most
    /// 16 to a host (over HTTP/1.1, as to a store on this host, one request
    /// a connection), so more would leave reads and listings waiting
    /// behind writers. A file that finds them all taken goes up at close.
    static let maxOneRequestStreams = 4

    /// Takes one of the `maxOneRequestStreams` places, or returns nil
    /// when all are taken; the place is given back when the stream ends.
    func reserveOneRequestStream() -> OneRequestStreamPlace? {
        let taken = state.withLock { s -> Bool in
            guard s.oneRequestStreams < Self.maxOneRequestStreams else { return false }
            s.oneRequestStreams += 1
            return true
        }
        return taken ? OneRequestStreamPlace { [weak self] in self?.state.withLock { $0.oneRequestStreams -= 1 } } : nil
    }

    /// One-request streams open now.
    var openOneRequestStreams: Int { state.withLock { $0.oneRequestStreams } }

    /// Whether a store whose round trip measured `roundTrip` (nil: not
    /// measured yet) is near enough for the single upload: shorter than
    /// `minRoundTrip`. Not measured is not near: on a near store parts
    /// cost a part of the rate, on a far one a single stream costs most of
    /// it. A measurement only ever gets shorter, so a file that streams
    /// because the store was near is still near at close.
    static func isNear(roundTrip: Duration?, minRoundTrip: Duration) -> Bool {
        guard let roundTrip else { return false }
        return roundTrip < minRoundTrip
    }

    /// Whether a file of `size` bytes would go up in parts (before the
    /// bucket's retention policy is known: yes, if large enough and the
    /// store is not near).
    func wouldTake(size: Int64) -> Bool {
        guard threshold > 0, size >= threshold, partCount(size) > 1, !storeIsNear() else { return false }
        return state.withLock { s in
            switch s.availability {
            case .unknown, .available: return true
            case .retentionPolicy, .partsRefused: return false
            }
        }
    }

    /// `isNear` for the store's round trip now; says so in the log once.
    private func storeIsNear() -> Bool {
        let roundTrip = store.roundTrip
        guard Self.isNear(roundTrip: roundTrip, minRoundTrip: minRoundTrip), let roundTrip else { return false }
        let firstTime = state.withLock { s in
            defer { s.toldNear = true }
            return !s.toldNear
        }
        if firstTime {
            logger.info("the store is near: files up to single-request-max go up in one request (sent while they are written, if written in order), none in parts", metadata: [
                "round trip": "\(Self.milliseconds(roundTrip))", "parallel-upload-min-rtt": "\(Self.milliseconds(minRoundTrip))",
                "single-request-max": "\(singleRequestMax)",
            ])
        }
        return true
    }

    static func milliseconds(_ duration: Duration) -> String {
        String(format: "%.2f ms", duration.seconds * 1000)
    }

    /// The temporary objects a failed delete left, by name.
    var leftovers: [String] { state.withLock { $0.leftovers.sorted() } }

    /// Whether a file of `size` bytes goes up in parts: `wouldTake`, and
    /// the bucket has no retention policy (asked once).
    func takes(size: Int64) async -> Bool {
        guard wouldTake(size: size) else { return false }
        return await isAvailable()
    }

    /// Whether a file written in order sends its parts while it is written
    /// (`PartsStream`) once it streams (far from the store, or near it past
    /// `singleRequestMax`: `streamStart`): parallel uploads are on, every
    /// file that streams (one of `chunk` bytes at least) is above the
    /// threshold, and the bucket has no retention policy
    /// (docs/performance.md, Parallel uploads, has the figures).
    func streamsParts(chunk: Int64) async -> Bool {
        guard threshold > 0, chunk >= threshold else { return false }
        return await isAvailable()
    }

    /// Whether parts work in this bucket: asks for its retention policy
    /// the first time.
    private func isAvailable() async -> Bool {
        switch state.withLock({ $0.availability }) {
        case .available: return true
        case .retentionPolicy, .partsRefused: return false
        case .unknown: break
        }
        let availability: Availability
        do {
            availability = try await store.retentionPeriod().map { .retentionPolicy(seconds: $0) } ?? .available
        } catch where error.isTransient {
            return true  // asked again next time
        } catch {
            // Credentials that may write objects need not read the bucket's
            // metadata; a policy would then show as leftovers in status.
            logger.info("bucket metadata unreadable; parallel uploads stay on", metadata: ["cause": "\(error)"])
            availability = .available
        }
        state.withLock { $0.availability = availability }
        if case .retentionPolicy(let seconds) = availability {
            logger.notice("parallel uploads off: the bucket has a retention policy, so temporary parts could not be deleted", metadata: [
                "retention": "\(seconds) s",
            ])
            return false
        }
        return true
    }

    /// A parallel upload failed with `error`: whether the file should go up
    /// as a single upload instead. Permission refused is taken for the
    /// temporary objects' (credentials limited to the mounted prefix), and
    /// turns parallel uploads off for this mount; if it was the object's,
    /// the single upload fails the same way.
    func fallsBack(after error: StoreError) -> Bool {
        guard case .permissionDenied = error else { return false }
        state.withLock { $0.availability = .partsRefused }
        logger.warning("parallel uploads off: temporary parts refused; uploading whole files", metadata: [
            "prefix": "\(PathRules.partsPrefix)", "cause": "\(error)",
        ])
        return true
    }

    /// Parts of a file of `size` bytes: as many as `maxParts`, none smaller
    /// than `minPartSize` (one part, of any size, is no parallel upload).
    func partCount(_ size: Int64) -> Int {
        let bySize = size / minPartSize
        return Int(max(1, min(Int64(maxParts), bySize)))
    }

    /// The byte ranges of the parts of a file of `size` bytes.
    func partRanges(_ size: Int64) -> [Range<Int64>] {
        let count = Int64(partCount(size))
        let partSize = (size + count - 1) / count
        return stride(from: Int64(0), to: size, by: Int(partSize)).map { $0..<min(size, $0 + partSize) }
    }

    /// Uploads the file at `path` (`size` bytes) as `name` in parts.
    func upload(_ name: String, from path: String, size: Int64, options: PutOptions) async throws(StoreError) -> ObjectInfo {
        await deleteLeftovers()
        try await checkPrecondition(name, options)
        let run = PartNames()
        var made: [String] = []
        let result: Result<ObjectInfo, StoreError>
        do throws(StoreError) {
            let pieces = try await uploadParts(path, size: size, run, made: &made)
            result = .success(try await compose(pieces, into: name, size: size, options: options, run, made: &made))
        } catch {
            result = .failure(error)
        }
        // Before answering, so a close that returns leaves no part behind
        // (one round trip: the deletes go side by side).
        await delete(made)
        return try result.get()
    }

    /// Fails before any byte is sent if the upload's precondition fails
    /// already (as a resumable session checks it when it starts).
    func checkPrecondition(_ name: String, _ options: PutOptions) async throws(StoreError) {
        guard let expected = options.ifGenerationMatch else { return }
        let live: Int64
        switch await store.statResult(name) {
        case .success(let info): live = info.generation
        case .failure(.notFound): live = 0
        case .failure(let error): throw error
        }
        guard live == expected else {
            throw .preconditionFailed("\(name): generation \(live), expected \(expected) (checked before the parallel upload)")
        }
    }

    /// Composes the uploaded `pieces` (in order, `size` bytes in all) into
    /// `name` with the upload's options, and checks that the object holds
    /// exactly their bytes; intermediate objects made are noted in `made`.
    func compose(
        _ pieces: [Piece], into name: String, size: Int64, options: PutOptions, _ run: PartNames, made: inout [String]
    ) async throws(StoreError) -> ObjectInfo {
        let expected = Piece.concatenation(pieces, name: name)
        let sources = try await composeDown(pieces, run, made: &made)
        let crc32c = CRC32C.base64(expected.crc32c)
        let composed = try await store.compose(sources.map(\.name), into: name, options: options, expectedCRC32C: crc32c)
        guard composed.crc32c == crc32c, composed.size == size, expected.length == size else {
            // Not the bytes staged: take it away again, as if never made.
            try? await store.delete(name, ifGenerationMatch: composed.generation)
            throw .other("\(name): the composed object (\(composed.size) bytes, CRC32C \(composed.crc32c ?? "none")) is not the \(size) bytes uploaded (CRC32C \(crc32c))")
        }
        logger.debug("uploaded in parts", metadata: ["object": "\(name)", "parts": "\(pieces.count)", "size": "\(size)"])
        return composed
    }

    // MARK: - Steps

    /// A part or intermediate object and what it holds.
    struct Piece: Sendable {
        var name: String
        var crc32c: UInt32
        var length: Int64

        static func concatenation(_ pieces: [Piece], name: String) -> Piece {
            var whole = Piece(name: name, crc32c: CRC32C().value, length: 0)
            for piece in pieces {
                whole.crc32c = CRC32C.combine(whole.crc32c, piece.crc32c, lengthOfSecond: piece.length)
                whole.length += piece.length
            }
            return whole
        }
    }

    /// The names of one upload's temporary objects: a random directory
    /// under the reserved prefix, so uploads never meet.
    struct PartNames: Sendable {
        let directory = PathRules.partsPrefix + UUID().uuidString.lowercased() + "/"

        func part(_ index: Int) -> String { directory + String(format: "%05d", index) }
        func intermediate(level: Int, _ index: Int) -> String { directory + "c\(level)-" + String(format: "%05d", index) }
    }

    /// Sends the parts side by side (all of them run to their end).
    private func uploadParts(_ path: String, size: Int64, _ run: PartNames, made: inout [String]) async throws(StoreError) -> [Piece] {
        let ranges = partRanges(size)
        let results = await boundedConcurrently(Array(ranges.enumerated()), width: min(ranges.count, Self.composeLimit)) { [self] (index, range) throws(StoreError) -> Piece in
            try await uploadPart(run.part(index), from: path, range: range)
        }
        return try Self.collect(results, made: &made)
    }

    /// Sends bytes `range` of the file at `path` as the temporary object
    /// `name`, with their CRC-32C (so the store checks them), only if no
    /// such object exists.
    func uploadPart(_ name: String, from path: String, range: Range<Int64>) async throws(StoreError) -> Piece {
        if Task.isCancelled { throw .cancelled }
        let crc: UInt32
        do {
            crc = try CRC32C.of(file: path, range: range)
        } catch {
            throw .other("cannot read the staged file: \(error)")
        }
        _ = try await store.putRegion(name, from: path, range: range, crc32c: crc, options: PutOptions(ifGenerationMatch: 0))
        return Piece(name: name, crc32c: crc, length: Int64(range.count))
    }

    /// Composes groups of at most 32 into intermediate objects until at
    /// most 32 remain (the sources of the final compose).
    private func composeDown(_ pieces: [Piece], _ run: PartNames, made: inout [String]) async throws(StoreError) -> [Piece] {
        var level = 0
        var sources = pieces
        let store = self.store
        while sources.count > Self.composeLimit {
            level += 1
            let groups = stride(from: 0, to: sources.count, by: Self.composeLimit).map {
                Array(sources[$0..<min(sources.count, $0 + Self.composeLimit)])
            }
            let thisLevel = level
            let results = await boundedConcurrently(Array(groups.enumerated()), width: min(groups.count, Self.composeLimit)) { (index, group) throws(StoreError) -> Piece in
                let whole = Piece.concatenation(group, name: run.intermediate(level: thisLevel, index))
                _ = try await store.compose(
                    group.map(\.name), into: whole.name, options: PutOptions(ifGenerationMatch: 0),
                    expectedCRC32C: CRC32C.base64(whole.crc32c))
                return whole
            }
            sources = try Self.collect(results, made: &made)
        }
        return sources
    }

    /// The pieces made, noted in `made` (those that failed are not
    /// there), or the first failure.
    private static func collect(_ results: [Result<Piece, StoreError>], made: inout [String]) throws(StoreError) -> [Piece] {
        var pieces: [Piece] = []
        var failure: StoreError?
        for result in results {
            switch result {
            case .success(let piece):
                made.append(piece.name)
                pieces.append(piece)
            case .failure(let error):
                failure = failure ?? error
            }
        }
        if let failure { throw failure }
        return pieces
    }

    // MARK: - Clean-up

    /// Deletes temporary objects (best effort); those that stay are
    /// remembered, logged by name, and shown by `bucketfs status`.
    func delete(_ names: [String]) async {
        guard !names.isEmpty else { return }
        let store = self.store
        let results = await boundedConcurrently(names, width: min(names.count, 16)) { (name: String) throws(StoreError) in
            do throws(StoreError) {
                try await store.delete(name, ifGenerationMatch: nil)
            } catch {
                if case .notFound = error { return }  // gone already
                throw error
            }
        }
        var kept: [String] = []
        for (name, result) in zip(names, results) {
            if case .failure(let error) = result {
                kept.append(name)
                logger.warning("temporary part of a parallel upload not deleted", metadata: ["object": "\(name)", "cause": "\(error)"])
            }
        }
        state.withLock { s in
            s.leftovers.subtract(names)
            s.leftovers.formUnion(kept)
        }
    }

    /// Tries the deletes that failed before once more.
    func deleteLeftovers() async {
        let names = leftovers
        if !names.isEmpty { await delete(names) }
    }
}

/// A place among the one-request streams open at once
/// (`ParallelUploads.reserveOneRequestStream`), given back exactly once.
final class OneRequestStreamPlace: Sendable {
    private let giveBack: @Sendable () -> Void
    private let given = Atomic<Bool>(false)

    init(giveBack: @escaping @Sendable () -> Void) { self.giveBack = giveBack }

    func release() {
        if !given.exchange(true, ordering: .acquiringAndReleasing) { giveBack() }
    }

    deinit { release() }
}

/// A one-request stream holding its place until it finishes or is
/// abandoned.
struct PlacedStreamingPut: StreamingPut {
    let inner: any StreamingPut
    let place: OneRequestStreamPlace

    var granularity: Int64 { inner.granularity }
    var acknowledged: Int64 { inner.acknowledged }

    func send(upTo end: Int64) async throws(StoreError) {
        try await inner.send(upTo: end)
    }

    func finish(size: Int64) async throws(StoreError) -> ObjectInfo {
        defer { place.release() }
        return try await inner.finish(size: size)
    }

    var storesOptionsAtFinish: Bool { inner.storesOptionsAtFinish }

    func finish(size: Int64, options: PutOptions) async throws(StoreError) -> ObjectInfo {
        defer { place.release() }
        return try await inner.finish(size: size, options: options)
    }

    func abandon() async {
        await inner.abandon()
        place.release()
    }
}
