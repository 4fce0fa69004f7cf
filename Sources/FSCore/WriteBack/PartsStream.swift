import Foundation

/// A parallel composite upload (`ParallelUploads`) sent while the file is
/// written in order: each `partSize` bytes the writer adds go up as a
/// temporary part at once, up to `width` side by side, and the close only
/// sends the rest and composes. So a large file far from the store costs
/// the close its last part and a compose, not all its parts; and near the
/// store no single session has to carry the whole file.
///
/// A `StreamingPut` for the `WriteBack` machine like the resumable
/// session, with two differences: a send returns once its parts are under
/// way (it waits only while `width` are in flight), so the writer is not
/// held to one part at a time; and the finish takes the options at close
/// (`finish(size:options:)`), so the object gets the metadata and
/// precondition of that moment, with no patch after. The precondition is
/// also checked when the stream starts (`start`), as a resumable session
/// does. Which parts go when is `StreamedParts`' call; this runs it.
final class PartsStream: StreamingPut {
    let uploads: ParallelUploads
    let name: String
    let path: String
    let names = ParallelUploads.PartNames()
    /// Every send ends on a part boundary.
    let granularity: Int64
    /// The metadata and precondition given at the start.
    let startOptions: PutOptions

    private struct State: Sendable {
        var parts: StreamedParts
        var tasks: [Int: Task<Void, Never>] = [:]
    }

    // Leaf lock; tasks are created under it (that does not wait), never
    // awaited under it.
    private let state: OrderedLock<State>

    private init(uploads: ParallelUploads, name: String, path: String, options: PutOptions, partSize: Int64, width: Int) {
        self.uploads = uploads
        self.name = name
        self.path = path
        self.startOptions = options
        let parts = StreamedParts(partSize: partSize, width: width)
        self.granularity = parts.partSize
        self.state = OrderedLock("parts stream", State(parts: parts))
    }

    /// A stream of `name`'s parts from the staged file at `path`, once the
    /// upload's precondition holds.
    static func start(
        _ name: String, from path: String, options: PutOptions, uploads: ParallelUploads, partSize: Int64
    ) async throws(StoreError) -> PartsStream {
        await uploads.deleteLeftovers()
        try await uploads.checkPrecondition(name, options)
        return PartsStream(uploads: uploads, name: name, path: path, options: options, partSize: partSize, width: uploads.maxParts)
    }

    var acknowledged: Int64 { state.withLock { $0.parts.stored } }

    func send(upTo end: Int64) async throws(StoreError) {
        let launches = try state.withLock { $0.parts.send(upTo: end) }.get()
        try await launch(launches)
    }

    /// The compose carries the options of the close, so no patch follows.
    var storesOptionsAtFinish: Bool { true }

    /// Composes with the options the stream started with.
    func finish(size: Int64) async throws(StoreError) -> ObjectInfo {
        try await finish(size: size, options: startOptions)
    }

    /// Sends the rest of the `size` bytes, waits for every part, and
    /// composes them into the object with `options` (its precondition
    /// included). Whatever the outcome, the parts are deleted before the
    /// answer.
    func finish(size: Int64, options: PutOptions) async throws(StoreError) -> ObjectInfo {
        let result: Result<ObjectInfo, StoreError>
        do throws(StoreError) {
            try await launch(try state.withLock { $0.parts.finish(size: size) }.get())
            await waitForParts()
            switch state.withLock({ $0.parts.outcome() }) {
            case .failed(let error): result = .failure(error)
            case .compose(let stored):
                let pieces = stored.map { ParallelUploads.Piece(name: names.part($0.index), crc32c: $0.crc32c, length: $0.length) }
                var made: [String] = []
                do throws(StoreError) {
                    result = .success(try await uploads.compose(pieces, into: name, size: size, options: options, names, made: &made))
                } catch {
                    result = .failure(error)
                }
                await uploads.delete(made)
            }
        } catch {
            result = .failure(error)
        }
        await deleteParts()
        return try result.get()
    }

    /// Stops the parts in flight and deletes every part started.
    func abandon() async {
        let tasks = state.withLock { s in
            _ = s.parts.abandon()
            return Array(s.tasks.values)
        }
        for task in tasks { task.cancel() }
        await deleteParts()
    }

    // MARK: - Running the machine

    /// Starts each part once the one `width` before it has ended.
    private func launch(_ launches: [StreamedParts.Launch]) async throws(StoreError) {
        for launch in launches {
            if let after = launch.after, let earlier = state.withLock({ $0.tasks[after] }) { await earlier.value }
            let started = state.withLock { s -> Bool in
                guard !s.parts.isOver else { return false }
                s.tasks[launch.index] = Task { [self] in
                    let result: Result<UInt32, StoreError>
                    do throws(StoreError) {
                        result = .success(try await uploads.uploadPart(names.part(launch.index), from: path, range: launch.range).crc32c)
                    } catch {
                        result = .failure(error)
                    }
                    state.withLock { $0.parts.ended(launch.index, result) }
                }
                return true
            }
            guard started else { throw .cancelled }
        }
    }

    private func waitForParts() async {
        let tasks = state.withLock { Array($0.tasks.values) }
        for task in tasks { await task.value }
    }

    /// Once every part started has ended, deletes them all (one that
    /// failed may exist all the same: its answer may be what was lost);
    /// done once.
    private func deleteParts() async {
        await waitForParts()
        let started = state.withLock { s in
            defer { s.tasks = [:] }
            return s.tasks.keys.sorted()
        }
        await uploads.delete(started.map(names.part))
    }
}
